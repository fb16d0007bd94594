"""Sequence inputs and ops along the sequence axis (CNTK's cntk.sequence)."""
from loom import _loom

input_variable = _loom.sequence_input_variable
first = _loom.sequence_first
last = _loom.sequence_last
reduce_sum = _loom.sequence_reduce_sum
reduce_max = _loom.sequence_reduce_max
softmax = _loom.sequence_softmax
slice = _loom.sequence_slice
is_first = _loom.sequence_is_first
is_last = _loom.sequence_is_last
broadcast_as = _loom.sequence_broadcast_as
where = _loom.sequence_where
gather = _loom.sequence_gather
scatter = _loom.sequence_scatter
unpack = _loom.sequence_unpack
past_value = _loom.past_value
future_value = _loom.future_value
delay = _loom.sequence_delay
