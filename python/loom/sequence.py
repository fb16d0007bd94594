"""Sequence inputs and ops along the sequence axis (CNTK's cntk.sequence)."""
from loom._loom.ops.sequence import (broadcast_as, delay, first, future_value,  # noqa: F401
                                     gather, input_variable, is_first, is_last, last, past_value,
                                     reduce_max, reduce_sum, scatter, slice, softmax, unpack,
                                     where)
