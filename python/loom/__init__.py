"""Loom: CNTK v2's Python API over Loom's C++ core (``import loom as cntk``).

The module layout is CNTK's (loom.layers, loom.io, loom.learners, loom.train, loom.logging,
loom.ops, loom.core, loom.variables, ...), and the top level re-exports what CNTK's
``cntk/__init__.py`` does: every public name of core, ops, device, train, eval, learners, losses,
metrics, initializer and default_options, plus Parameter, Constant, and the submodules.
"""
import numpy as np

from loom import _loom
from loom._loom import (ArgumentError, DataError, Error, IOError, ShapeError,  # noqa: F401
                        StateError, bf16_supported, get_compute_precision, set_compute_precision)
from loom._loom.variables import VariableKind  # noqa: F401
from loom._loom.cntk_py import (Dictionary, get_max_num_cpu_threads,  # noqa: F401
                                set_max_num_cpu_threads)
from loom import (axis, cntk_py, core, debugging, default_options, device, distributed,  # noqa
                  eval, initializer, internal, io, layers, learners, logging, losses, metrics,
                  misc, ops, random, sequence, tests, train, variables)
from loom.core import *  # noqa: F401,F403
from loom.variables import Constant, Parameter  # noqa: F401
from loom.ops import *  # noqa: F401,F403
from loom.ops import functions  # noqa: F401
from loom.device import *  # noqa: F401,F403
from loom.train import *  # noqa: F401,F403
from loom.train import trainer  # noqa: F401
from loom.eval import *  # noqa: F401,F403
from loom.eval import evaluator  # noqa: F401
from loom.learners import *  # noqa: F401,F403
from loom.losses import *  # noqa: F401,F403
from loom.metrics import *  # noqa: F401,F403
from loom.initializer import *  # noqa: F401,F403
from loom.default_options import *  # noqa: F401,F403
from loom.axis import Axis  # noqa: F401
from loom.variables import Variable  # noqa: F401
from loom.ops.functions import CloneMethod, Function, load_model  # noqa: F401

# The CNTK version whose API Loom implements (CNTK scripts compare it).
__version__ = '2.7'
DATATYPE = np.float32
InferredDimension = cntk_py.InferredDimension
FreeDimension = cntk_py.FreeDimension
