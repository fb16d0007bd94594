"""one_hot, gather and top_k (loom/ops/indexing.cpp): CNTK's documented examples (the docstrings of
cntk/ops/__init__.py and its tests in cntk/ops/tests/reshaping_test.py), numpy, gradients and
errors."""
import inspect

import numpy as np
import pytest

import loom as C

RNG = np.random.default_rng(20)


def test_signatures_are_cntks():
    assert str(inspect.signature(C.one_hot)) == \
        "(x, num_classes, sparse_output=False, axis=-1, name='')"
    assert str(inspect.signature(C.gather)) == "(reference, indices, axis=None, name='')"
    assert str(inspect.signature(C.top_k)) == "(x, k, axis=-1, name='')"
    for f in (C.one_hot, C.gather, C.top_k):
        assert getattr(C.ops, f.__name__).__name__ == f.__name__


# one_hot ---------------------------------------------------------------------------------------

def test_one_hot_docstring_example():
    data = np.asarray([[1, 2], [4, 5]], dtype=np.float32)
    x = C.input_variable((2,))
    np.testing.assert_array_equal(
        C.one_hot(x, 6, False).eval({x: data}),
        [[[0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0]],
         [[0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 1]]])


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('axis', [0, 1, 2, -1, -2, -3])
def test_one_hot_inserts_the_new_axis_at_axis(axis, dtype):
    x = C.input_variable((2, 3), dtype=dtype)
    X = RNG.integers(0, 4, (5, 2, 3)).astype(dtype)
    y = C.one_hot(x, 4, axis=axis)
    # numpy: the classes as a last axis, moved to axis (of the sample: 1 more in the batch).
    expected = np.moveaxis(np.eye(4)[X.astype(int)], -1, axis + 1 if axis >= 0 else axis)
    assert y.shape == expected.shape[1:]
    out = y.eval({x: X})
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected)


def test_one_hot_truncates_indices_as_cntk_casts_them():
    np.testing.assert_array_equal(C.one_hot([0.9, 1.7, 2.2], 3).eval(), np.eye(3))


def test_one_hot_errors():
    x = C.input_variable(2)
    with pytest.raises(C.ArgumentError, match='one_hot: sparse_output=True is not supported'):
        C.one_hot(x, 4, sparse_output=True)
    with pytest.raises(ValueError, match=r'one_hot: index 6 is out of range \[0, 6\)'):
        C.one_hot(x, 6).eval({x: np.array([[1, 6]], np.float32)})
    with pytest.raises(ValueError, match='one_hot: index -1'):
        C.one_hot(x, 6).eval({x: np.array([[-1, 0]], np.float32)})
    with pytest.raises(ValueError, match='one_hot: axis 2 is out of range'):
        C.one_hot(x, 4, axis=2)
    with pytest.raises(TypeError):
        C.one_hot(x)  # num_classes is required


def test_one_hot_has_no_gradient():
    # As for argmax: no gradient path leads from one_hot to its indices.
    x = C.input_variable(2, needs_gradient=True)
    with pytest.raises(C.ArgumentError, match='does not depend on any variable whose gradient'):
        C.one_hot(x, 3).grad({x: np.array([[0, 2]], np.float32)}, wrt=[x])
    # Beside a path that has one, its share is zero.
    np.testing.assert_array_equal(
        (x + C.reduce_sum(C.one_hot(x, 3), axis=1, keepdims=False)).grad({x: np.array([[0, 2]], np.float32)}, wrt=[x]),
        [[1, 1]])


# gather ----------------------------------------------------------------------------------------

def test_gather_docstring_example():
    c = np.asarray([[[0], [1]], [[4], [5]]]).astype('f')
    x = C.input_variable((2, 1))
    d = np.arange(12).reshape(6, 2).astype('f')
    y = C.constant(d)
    np.testing.assert_array_equal(
        C.gather(y, x).eval({x: c}),
        [[[[0., 1.]], [[2., 3.]]], [[[8., 9.]], [[10., 11.]]]])


def test_cntk_test_gather_op():
    a_data = [np.array([[0], [1]], np.float32), np.array([[3], [4]], np.float32)]
    a = C.input_variable((2, 1))
    r_data = np.arange(12).reshape(6, 2).astype('f')
    r = C.parameter(shape=r_data.shape, init=r_data)
    res = C.gather(r, a).eval({a: np.stack(a_data)})
    np.testing.assert_array_equal(res, [[[[0., 1.]], [[2., 3.]]], [[[6., 7.]], [[8., 9.]]]])
    expected_grad = np.asarray([[1, 1], [1, 1], [0, 0], [1, 1], [1, 1], [0, 0]], np.float32)
    np.testing.assert_array_equal(C.gather(r, a).grad({a: np.stack(a_data)}, wrt=[r]),
                                  expected_grad)
    # Indices computed from a parameter: no gradient passes through them (zeros).
    indices_params = C.parameter(shape=(1,), init=1.0)
    grads = C.gather(r, indices_params * a).grad({a: np.stack(a_data)}, wrt=[r, indices_params])
    np.testing.assert_array_equal(grads[r], expected_grad)
    np.testing.assert_array_equal(grads[indices_params], [0.0])

    b_data = np.array([[[0, 2], [1, 3]], [[2, 4], [3, 5]]], np.float32)
    b = C.input_variable((2, 2))
    np.testing.assert_array_equal(
        C.gather(r, b).eval({b: b_data}),
        [[[[0., 1.], [4., 5.]], [[2., 3.], [6., 7.]]],
         [[[4., 5.], [8., 9.]], [[6., 7.], [10., 11.]]]])


def test_cntk_test_gather_op_with_axis():
    data = np.array([[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], np.float32)
    indices = np.array([0, 2], np.float32)
    np.testing.assert_allclose(C.gather(C.constant(data), C.constant(indices), axis=1).eval(),
                               [[1.0, 1.9], [2.3, 3.9], [4.5, 5.9]])
    data3 = data.reshape(3, 1, 3)
    np.testing.assert_allclose(C.gather(C.constant(data3), C.constant(indices), axis=2).eval(),
                               [[[1.0, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]])


def test_cntk_test_gather_op_backward():
    data = np.array([[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], np.float32)
    x = C.parameter(shape=(3, 3), init=data)
    y = C.gather(x, C.constant(np.array([0, 2], np.float32)))
    np.testing.assert_allclose(y.grad({}, wrt=[x]), [[1, 1, 1], [0, 0, 0], [1, 1, 1]])


@pytest.mark.parametrize('axis', [None, 0, 1, 2, -1, -2])
@pytest.mark.parametrize('indices_shape', [(2,), (2, 3)])
def test_gather_is_numpys_take(axis, indices_shape):
    ref = RNG.uniform(-1, 1, (3, 4, 5))
    i = C.input_variable(indices_shape, dtype=np.float64)
    np_axis = 0 if axis is None else axis
    I = RNG.integers(0, ref.shape[np_axis], (2,) + indices_shape).astype(np.float64)
    y = C.gather(C.constant(ref, dtype=np.float64), i, axis=axis)
    expected = np.stack([np.take(ref, s.astype(int), axis=np_axis) for s in I])
    assert y.shape == expected.shape[1:]
    np.testing.assert_array_equal(y.eval({i: I}), expected)


def test_gather_gradient_adds_repeated_indices():
    r = C.parameter(shape=(4, 2), init=0.0, dtype=np.float64)
    i = C.input_variable(3, dtype=np.float64)
    I = np.array([[1, 1, 3], [0, 1, 1]], np.float64)
    expected = np.zeros((4, 2))
    np.add.at(expected, I.astype(int).ravel(), 1)
    np.testing.assert_array_equal(C.gather(r, i).grad({i: I}, wrt=[r]), expected)


def test_gather_errors():
    r = C.constant(np.arange(12, dtype=np.float32).reshape(6, 2))
    i = C.input_variable(2)
    with pytest.raises(C.ArgumentError, match=r'gather: index 6 is out of range \[0, 6\)'):
        C.gather(r, i).eval({i: np.array([[0, 6]], np.float32)})
    with pytest.raises(ValueError, match='gather: index -2'):
        C.gather(r, i).eval({i: np.array([[-2, 0]], np.float32)})
    with pytest.raises(ValueError, match='gather: axis 2 is out of range'):
        C.gather(r, i, axis=2)
    with pytest.raises(ValueError, match='gather: axis .* is not a static axis'):
        C.gather(r, i, axis=C.Axis.default_batch_axis())


# top_k -----------------------------------------------------------------------------------------

def test_top_k_docstring_example_values():
    x = C.input_variable(10)
    y = C.top_k(-x * C.log(x), 3)
    x0 = np.arange(10, dtype=np.float32) * 0.1
    f = -x0 * np.log(np.where(x0 > 0, x0, 1))
    # CNTK's outputs[0]: the values, at positions [4, 3, 5].
    np.testing.assert_allclose(y.eval({x: x0.reshape(1, 10)})[y.outputs[0]], [f[[4, 3, 5]]],
                               rtol=1e-6)


def test_top_k_is_one_primitive_of_two_outputs():
    # CNTK's top_k: the TopK primitive, its outputs the values and their positions.
    x = C.input_variable((3, 4))
    y = C.top_k(x, 2, axis=0, name='top')
    assert y.op_name == 'TopK' and y.name == 'top' and not y.is_composite
    assert len(y.outputs) == 2 and all(o.owner == y for o in y.outputs)
    assert [o.shape for o in y.outputs] == [(2, 4), (2, 4)]
    X = np.array([[[1, 5, 3, 2], [9, 8, 7, 6], [0, -1, 4, 4]]], np.float32)
    out = y.eval({x: X})
    np.testing.assert_array_equal(out[y.outputs[0]], [[[9, 8, 7, 6], [1, 5, 4, 4]]])
    np.testing.assert_array_equal(out[y.outputs[1]], [[[1, 1, 1, 1], [0, 0, 2, 2]]])


def test_top_k_docstring_example_indices():
    x = C.input_variable(10)
    y = C.top_k(-x * C.log(x), 3)
    x0 = np.arange(10, dtype=np.float32) * 0.1
    top = y.eval({x: x0.reshape(1, 10)}, outputs=y.outputs)
    np.testing.assert_array_equal(top[y.outputs[1]], [[4., 3., 5.]])


@pytest.mark.parametrize('axis', [0, 1, 2, -1, -2])
def test_top_k_values_are_the_sorted_largest(axis):
    x = C.input_variable((5, 6, 7), dtype=np.float64)
    X = RNG.standard_normal((2, 5, 6, 7))
    np_axis = axis + 1 if axis >= 0 else axis
    expected = np.take(-np.sort(-X, axis=np_axis), range(3), axis=np_axis)
    y = C.top_k(x, 3, axis=axis)
    np.testing.assert_array_equal(y.eval({x: X})[y.outputs[0]], expected)


def test_top_k_gradient_goes_to_the_selected_values():
    x = C.input_variable(5, needs_gradient=True, dtype=np.float64)
    X = np.array([[0.3, -1, 2, 0.5, 1.5], [4, 3, 2, 1, 0]], np.float64)
    g = C.combine(C.top_k(x, 2).outputs[0]).grad({x: X}, wrt=[x])
    np.testing.assert_array_equal(g, [[0, 0, 1, 0, 1], [1, 1, 0, 0, 0]])


def test_top_k_errors():
    x = C.input_variable((3, 4))
    with pytest.raises(C.ArgumentError, match='top_k: k 5 is larger than the extent 4'):
        C.top_k(x, 5)
    with pytest.raises(ValueError, match='top_k: k 4 is larger than the extent 3'):
        C.top_k(x, 4, axis=0)
    with pytest.raises(ValueError, match='top_k: axis 2 is out of range'):
        C.top_k(x, 1, axis=2)
