"""cntk.sequence.softmax and cntk.sequence.delay (loom/ops/sequence_ops.cpp, recurrence_ops.cpp):
numpy references over ragged sequences, CNTK's delay cases."""
import numpy as np

import loom as C

SEQS = [np.array([[1, 2], [3, -1], [0.5, 4]], np.float32), np.array([[7, 8]], np.float32),
        np.array([[-2, 0], [1, 1]], np.float32)]


def _per_sequence(out):
    return [np.asarray(o) for o in out]


def test_softmax_normalizes_each_sequence_over_its_steps():
    x = C.sequence.input_variable(2)
    out = _per_sequence(C.sequence.softmax(x).eval({x: SEQS}))
    for got, s in zip(out, SEQS):
        e = np.exp(s - s.max(axis=0))
        np.testing.assert_allclose(got, e / e.sum(axis=0), rtol=1e-6)
    assert C.ops.sequence.softmax is C.sequence.softmax


def test_delay_is_past_value_future_value_or_x():
    x = C.sequence.input_variable(2)
    for time_step in (2, 1, -1, -2):
        want = (C.sequence.past_value(x, time_step=time_step) if time_step > 0
                else C.sequence.future_value(x, time_step=-time_step))
        got = C.sequence.delay(x, time_step=time_step)
        for g, w in zip(_per_sequence(got.eval({x: SEQS})), _per_sequence(want.eval({x: SEQS}))):
            np.testing.assert_array_equal(g, w)
    # An initial state, and CNTK's time_step 0: x, named as an alias when a name is given.
    got = _per_sequence(C.sequence.delay(x, initial_state=5, time_step=1).eval({x: SEQS}))
    np.testing.assert_array_equal(got[1], [[5, 5]])
    np.testing.assert_array_equal(got[0], [[5, 5], [1, 2], [3, -1]])
    named = C.sequence.delay(x, time_step=0, name='same')
    assert named.name == 'same'
    for g, s in zip(_per_sequence(named.eval({x: SEQS})), SEQS):
        np.testing.assert_array_equal(g, s)
