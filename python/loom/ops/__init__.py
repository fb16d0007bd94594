"""Ops: functions that build graphs (CNTK's cntk.ops). Numbers and numpy arrays may stand for
any operand; they become constants of the other operand's dtype."""
from loom._loom import (assign, binary_cross_entropy, classification_error, combine, constant,
                        cross_entropy_with_softmax, dropout, input_variable, log_softmax,
                        parameter, placeholder, reduce_max, reduce_mean, reduce_sum, reshape,
                        slice, softmax, splice, squared_error, times, transpose)
from loom.ops import functions  # noqa: F401
from loom.ops._table import op_functions as _op_functions
from loom.ops.functions import Function, load_model  # noqa: F401

# The op table's functions (plus, elu, pow, ...), made from the C++ table at import. Some have
# the names of Python built-ins (abs, pow, round), as in CNTK's cntk.ops; they replace the
# built-ins only in loom.ops and loom (`from loom.ops import *`), which call none of them.
globals().update(_op_functions('ops'))
