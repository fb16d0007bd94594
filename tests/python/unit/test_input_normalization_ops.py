"""per_dim_mean_variance_normalize and image_scaler (loom/ops/normalization.cpp): CNTK's test
values, dtypes, gradients, signatures and errors."""
import inspect

import numpy as np
import pytest

import loom as C


def test_signatures_are_cntks():
    assert str(inspect.signature(C.per_dim_mean_variance_normalize)) == \
        "(operand, mean, inv_stddev, name='')"
    assert str(inspect.signature(C.image_scaler)) == "(x, scalar, biases, name='')"
    assert str(inspect.signature(C.mean_variance_normalization)) == \
        "(operand, epsilon=1e-05, use_stats_across_channels=False, do_variance_scaling=True, " \
        "name='')"


def test_per_dim_mean_variance_normalize_cntk_test():
    # CNTK's linear_test.py test_per_dim_mean_var_norm.
    x = C.input_variable((1,))
    f = C.per_dim_mean_variance_normalize(x, np.asarray([2.], np.float32),
                                          np.asarray([0.5], np.float32))
    np.testing.assert_array_equal(f.eval({x: np.asarray([[3.], [1.]], np.float32)}),
                                  [[.5], [-.5]])


def test_per_dim_mean_variance_normalize_keeps_the_operands_dtype_and_gradient():
    x = C.input_variable((3,), dtype=np.float64, needs_gradient=True)
    f = C.per_dim_mean_variance_normalize(x, [1, 2, 3], [2, 4, 8], name='norm')
    assert f.name == 'norm'
    X = np.array([[1., 1., 1.]])
    out = f.eval({x: X})
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[0, -4, -16]])
    np.testing.assert_array_equal(f.grad({x: X}, wrt=[x]), [[2, 4, 8]])


def test_image_scaler_scales_and_adds_one_bias_per_channel():
    x = C.input_variable((2, 2, 3))
    X = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    out = C.image_scaler(x, 0.5, [10, -1]).eval({x: X})
    expected = X * 0.5 + np.array([10, -1], np.float32).reshape(2, 1, 1)
    np.testing.assert_allclose(out, expected)
    x64 = C.input_variable((1, 2, 2), dtype=np.float64)
    assert C.image_scaler(x64, 2, [1]).eval({x64: np.ones((1, 1, 2, 2))}).dtype == np.float64


def test_image_scaler_refuses_other_ranks_and_bias_counts():
    with pytest.raises(C.ArgumentError, match='channels'):
        C.image_scaler(C.input_variable((3, 4, 4)), 1.0, [0, 0])
    with pytest.raises(C.ArgumentError, match='image'):
        C.image_scaler(C.input_variable((4, 4)), 1.0, [0] * 4)


def test_mean_variance_normalization_cntk_example():
    data = np.array([[[0., 2], [4., 6.]], [[0., 4], [8., 12.]]], np.float32)
    expected = [[[-1.3416, -0.4472], [0.4472, 1.3416]], [[-1.3416, -0.4472], [0.4472, 1.3416]]]
    np.testing.assert_allclose(C.mean_variance_normalization(data).eval(), expected, atol=1e-4)


def _mvn(x, axes, epsilon, scaling):
    centred = x - x.mean(axis=axes, keepdims=True)
    if not scaling:
        return centred
    return centred / (np.sqrt((centred ** 2).mean(axis=axes, keepdims=True)) + epsilon)


@pytest.mark.parametrize('across', [False, True])
@pytest.mark.parametrize('scaling', [False, True])
def test_mean_variance_normalization_against_numpy(across, scaling):
    x = C.input_variable((3, 4, 5), dtype=np.float64, needs_gradient=True)
    X = np.random.default_rng(7).normal(size=(2, 3, 4, 5))
    f = C.mean_variance_normalization(x, 0.01, across, scaling, name='mvn')
    assert f.name == 'mvn'
    axes = (1, 2, 3) if across else (2, 3)
    np.testing.assert_allclose(f.eval({x: X}), _mvn(X, axes, 0.01, scaling), rtol=1e-12)
    # The gradient of a sum of the normalized values: 0 without scaling (a mean removed).
    if not scaling:
        np.testing.assert_allclose(f.grad({x: X}, wrt=[x]), 0, atol=1e-12)
    # A vector's statistics are over the vector.
    v = C.input_variable(4, dtype=np.float64)
    V = np.array([[1., 2., 3., 6.]])
    np.testing.assert_allclose(C.mean_variance_normalization(v, 0.0).eval({v: V}),
                               _mvn(V, (1,), 0.0, True), rtol=1e-12)


def test_mean_variance_normalization_refuses_bad_arguments():
    with pytest.raises(C.ArgumentError, match='epsilon'):
        C.mean_variance_normalization(C.input_variable(3), -1.0)
