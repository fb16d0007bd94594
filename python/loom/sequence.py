"""Sequence inputs and ops along the sequence axis (CNTK's cntk.sequence)."""
from loom._loom.ops.sequence import (delay, future_value, gather, input_variable,  # noqa: F401
                                     past_value, scatter, softmax, unpack)
from loom.ops._table import op_functions as _op_functions

# The op table's functions of cntk.sequence (first, last, where, broadcast_as, ...).
globals().update(_op_functions('sequence'))
