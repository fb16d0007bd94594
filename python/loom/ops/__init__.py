"""Ops: functions that build graphs (CNTK's cntk.ops). Numbers and numpy arrays may stand for
any operand; they become constants of the other operand's dtype."""
from loom._loom import (abs, assign, binary_cross_entropy, classification_error, combine,
                        constant, cross_entropy_with_softmax, dropout, element_divide,
                        element_max, element_min, element_times, exp, input_variable, log,
                        log_softmax, minus, negate, parameter, placeholder, plus, reduce_max,
                        reduce_mean, reduce_sum, relu, reshape, sigmoid, slice, softmax, splice,
                        sqrt, square, squared_error, tanh, times, transpose)
from loom.ops import functions  # noqa: F401
from loom.ops.functions import Function, load_model  # noqa: F401
