"""Loom: CNTK v2's Python API over Loom's C++ core (``import loom as cntk``).

The module layout is CNTK's: loom.layers, loom.io, loom.learners, loom.train, loom.logging,
loom.ops, loom.sequence, loom.device, loom.distributed, loom.initializer, and the top-level names
CNTK scripts use (input_variable, sgd, Trainer, training_session, ...).
"""
from loom import _loom
from loom._loom import (ArgumentError, Axis, CloneMethod, Constant, DataError, Dictionary,
                        Error, Function, IOError, NDArrayView, Parameter, ShapeError, StateError,
                        Value, Variable, VariableKind, bf16_supported, get_compute_precision,
                        get_max_num_cpu_threads, set_compute_precision, set_max_num_cpu_threads)
from loom import (cntk_py, device, distributed, initializer, io, layers, learners, logging,
                  losses, metrics, ops, random, sequence, tests, train)
from loom.device import use_default_device
from loom.learners import (UnitType, UserLearner, adadelta, adagrad, adam, fsadagrad,
                           learning_parameter_schedule, learning_parameter_schedule_per_sample,
                           learning_rate_schedule, minibatch_size_schedule, momentum_as_time_constant_schedule,
                           momentum_schedule, momentum_schedule_per_sample, momentum_sgd,
                           nesterov, rmsprop, sgd, universal)
from loom.ops import *  # noqa: F401,F403 (CNTK re-exports every op at the top level)
from loom.losses import *  # noqa: F401,F403 (and every loss and metric)
from loom.metrics import *  # noqa: F401,F403
from loom.ops.functions import load_model
from loom.train import (CheckpointConfig, CrossValidationConfig, Evaluator, TestConfig, Trainer,
                        training_session)
