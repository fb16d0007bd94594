"""Sequence inputs and ops along the sequence axis (CNTK's cntk.sequence)."""
from loom import _loom

input_variable = _loom.sequence_input_variable
first = _loom.ops.sequence_first
last = _loom.ops.sequence_last
reduce_sum = _loom.ops.sequence_reduce_sum
reduce_max = _loom.ops.sequence_reduce_max
softmax = _loom.ops.sequence_softmax
slice = _loom.ops.sequence_slice
is_first = _loom.ops.sequence_is_first
is_last = _loom.ops.sequence_is_last
broadcast_as = _loom.ops.sequence_broadcast_as
where = _loom.ops.sequence_where
gather = _loom.ops.sequence_gather
scatter = _loom.ops.sequence_scatter
unpack = _loom.ops.sequence_unpack
past_value = _loom.ops.past_value
future_value = _loom.ops.future_value
delay = _loom.ops.sequence_delay
