"""Sequence inputs and ops along the sequence axis (CNTK's cntk.sequence)."""
from loom._loom.ops.sequence import input_variable  # noqa: F401
from loom.ops._table import op_functions as _op_functions

# The op table's functions of cntk.sequence (first, last, where, past_value, softmax, ...).
globals().update(_op_functions('sequence'))
