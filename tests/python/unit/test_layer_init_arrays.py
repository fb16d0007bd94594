"""CNTK's layers take init (and init_bias) as a NumPy array: the parameter starts at those values
and has their shape, which the layer's inferred axes must allow."""
import numpy as np
import pytest

import loom as C


def test_dense_starts_at_the_arrays():
    W = np.arange(6, dtype=np.float64).reshape(3, 2) / 4
    b = np.array([0.5, -1.0])
    x = C.input_variable(3)
    z = C.layers.Dense(2, init=W, init_bias=b)(x)
    np.testing.assert_array_equal(z.W.value, W.astype(np.float32))
    np.testing.assert_array_equal(z.b.value, b.astype(np.float32))
    got = z.eval({x: np.array([[1, 2, 3]], np.float32)})
    np.testing.assert_allclose(got, np.array([[1, 2, 3]]) @ W + b, rtol=1e-6)


def test_convolution_kernel_from_an_array():
    k = np.ones((4, 1, 3, 3), np.float32)
    c = C.layers.Convolution((3, 3), 4, init=k, pad=True, bias=False)(C.input_variable((1, 5, 5)))
    np.testing.assert_array_equal(c.W.value, k)


def test_an_array_of_another_shape_is_a_shape_error():
    with pytest.raises(C.ShapeError, match='init array of shape'):
        C.layers.Dense(2, init=np.zeros((3, 5)))(C.input_variable(3))
