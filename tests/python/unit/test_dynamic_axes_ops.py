"""to_sequence, to_sequence_like, unpack_batch, to_batch and reconcile_dynamic_axes, as CNTK's
docstrings and semantics give them."""
import numpy as np
import pytest

import loom as C


def test_unpack_batch_docstring():
    data = np.arange(12).reshape((3, 2, 2))
    x = C.input_variable((2, 2))  # the docstring's C.input, CNTK's deprecated alias
    np.testing.assert_array_equal(C.unpack_batch(x).eval({x: data}), data)
    assert C.unpack_batch(x).dynamic_axes == []


def test_to_batch_docstring():
    data = np.arange(12).reshape((3, 2, 2))
    x = C.constant(value=data)
    y = C.to_batch(x)
    assert y.shape == (2, 2)
    np.testing.assert_array_equal(y.eval(), data)


def test_to_sequence_makes_the_leading_axis_a_sequence():
    x = C.input_variable((3, 2))
    data = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    s = C.to_sequence(x)
    assert s.shape == (2,)
    assert len(s.dynamic_axes) == 2
    assert s.dynamic_axes[1].name == 'toSequence_' + x.uid
    out = C.sequence.last(s).eval({x: data})
    np.testing.assert_array_equal(out, data[:, -1])
    n = C.input_variable(())
    lengths = C.to_sequence(x, n, 'len_')
    assert lengths.dynamic_axes[1].name == 'len_' + x.uid
    got = C.sequence.reduce_sum(lengths).eval({x: data, n: np.array([1, 2], np.float32)})
    np.testing.assert_array_equal(got, [data[0, :1].sum(0), data[1, :2].sum(0)])
    with pytest.raises(ValueError, match='sequence_lengths of sample 0 is 5'):
        lengths.eval({x: data, n: np.array([5, 2], np.float32)})
    with pytest.raises(ValueError, match='ToSequence.*is a sequence'):
        C.to_sequence(C.sequence.input_variable((3, 2)))


def test_to_sequence_like_undoes_sequence_unpack():
    s = C.sequence.input_variable(2)
    seqs = [np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((1, 2), np.float32)]
    padded = C.sequence.unpack(s, padding_value=0, no_mask_output=True)
    back = C.to_sequence_like(padded, s)
    assert back.dynamic_axes == s.dynamic_axes
    out = back.eval({s: seqs})
    assert len(out) == 2
    np.testing.assert_array_equal(out[0], seqs[0])
    np.testing.assert_array_equal(out[1], seqs[1])


def test_reconcile_dynamic_axes_meets_inputs_declared_on_other_axes():
    a = C.sequence.input_variable(2, sequence_axis=C.Axis('a'))
    b = C.sequence.input_variable(2, sequence_axis=C.Axis('b'))
    with pytest.raises(ValueError):
        a + b
    total = C.reconcile_dynamic_axes(a, b) + b
    seqs = [np.ones((2, 2), np.float32), np.ones((3, 2), np.float32)]
    out = total.eval({a: seqs, b: seqs})
    np.testing.assert_array_equal(out[1], np.full((3, 2), 2))
    # A batch broadcast along each sequence.
    x = C.input_variable(2)
    along = C.reconcile_dynamic_axes(x, b).eval(
        {x: np.array([[1, 2], [3, 4]], np.float32), b: seqs})
    np.testing.assert_array_equal(along[1], [[3, 4]] * 3)


def test_custom_proxy_op_has_the_declared_type_and_no_computation():
    a, b = C.input_variable(3), C.input_variable(3)
    p = C.custom_proxy_op('MyOnnxOp', (2, 4), np.float64, a, b, name='p')
    assert p.shape == (2, 4) and p.dtype == np.float64 and p.name == 'p'
    assert len(C.custom_proxy_op('MyOnnxOp', 5, np.float32, [a, b]).inputs) == 2
    with pytest.raises(RuntimeError, match="custom_proxy_op 'MyOnnxOp'.*no computation"):
        p.eval({a: np.ones((1, 3), np.float32), b: np.ones((1, 3), np.float32)})
