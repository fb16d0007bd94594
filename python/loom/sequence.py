"""Sequence inputs and ops along the sequence axis (CNTK's cntk.sequence)."""
from loom import _loom
from loom._loom.ops.sequence import (broadcast_as, delay, first, future_value,  # noqa: F401
                                     gather, is_first, is_last, last, past_value, reduce_max,
                                     reduce_sum, scatter, slice, softmax, unpack, where)

input_variable = _loom.sequence_input_variable
