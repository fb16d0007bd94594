"""The functions made from the op table (loom/ops/op_schema.h, python/loom/ops/_table.py):
results against numpy, CNTK's documented examples, signatures and calls."""
import inspect
import zlib

import numpy as np
import pytest

import loom as C
from loom import _loom

SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717
U = (-1, 1)
INT = 'int'  # integers in [-2, 2]: ties for the comparisons, zeros for the logic ops


def _elu(x, alpha=1.0):
    return np.where(x >= 0, x, alpha * np.expm1(x))


# name: (numpy oracle, the domain of each input, attributes). The oracles compute in float64
# from the inputs, the domains keep away from where an op departs from IEEE (tested below).
def _hardmax(x):
    """1 at the first largest element of each sample [3, 4] (all its axes), 0 elsewhere."""
    flat = x.reshape(len(x), -1)
    out = np.zeros_like(flat)
    out[np.arange(len(flat)), flat.argmax(axis=1)] = 1
    return out.reshape(x.shape)


ORACLES = {
    'negate': (np.negative, [U]),
    'tanh': (np.tanh, [U]),
    'sigmoid': (lambda x: 1 / (1 + np.exp(-x)), [U]),
    'relu': (lambda x: np.maximum(x, 0), [U]),
    'exp': (np.exp, [U]),
    'log': (np.log, [(0.1, 2)]),
    'sqrt': (np.sqrt, [(0.1, 2)]),
    'square': (np.square, [U]),
    'abs': (np.abs, [U]),
    'floor': (np.floor, [(-3, 3)]),
    'ceil': (np.ceil, [(-3, 3)]),
    'round': (lambda x: np.floor(x + 0.5), [(-3, 3)]),
    'reciprocal': (np.reciprocal, [(0.5, 2)]),
    'sin': (np.sin, [U]),
    'cos': (np.cos, [U]),
    'tan': (np.tan, [U]),
    'asin': (np.arcsin, [(-0.9, 0.9)]),
    'acos': (np.arccos, [(-0.9, 0.9)]),
    'atan': (np.arctan, [U]),
    'sinh': (np.sinh, [U]),
    'cosh': (np.cosh, [U]),
    'asinh': (np.arcsinh, [U]),
    'atanh': (np.arctanh, [(-0.9, 0.9)]),
    'elu': (_elu, [U]),
    'selu': (lambda x: SELU_SCALE * _elu(x, SELU_ALPHA), [U]),
    'leaky_relu': (lambda x: np.where(x >= 0, x, 0.01 * x), [U]),
    'softplus': (lambda x: np.logaddexp(0, x), [U]),
    'softsign': (lambda x: x / (1 + np.abs(x)), [U]),
    'hard_sigmoid': (lambda x: np.clip(0.2 * x + 0.5, 0, 1), [(-4, 4)],
                     {'alpha': 0.2, 'beta': 0.5}),
    'straight_through_impl': (lambda x: np.where(x > 0, 1, -1), [U]),
    'stop_gradient': (lambda x: x, [U]),
    'alias': (lambda x: x, [U]),
    'zeros_like': (np.zeros_like, [U]),
    'ones_like': (np.ones_like, [U]),
    'hardmax': (_hardmax, [INT]),
    'element_not': (lambda x: x <= 0, [INT]),
    'plus': (np.add, [U, U]),
    'minus': (np.subtract, [U, U]),
    'element_times': (np.multiply, [U, U]),
    'element_divide': (np.divide, [U, (0.5, 2)]),
    'element_max': (np.maximum, [U, U]),
    'element_min': (np.minimum, [U, U]),
    'pow': (np.power, [(0.1, 2), (-2, 2)]),
    'log_add_exp': (np.logaddexp, [U, U]),
    'equal': (np.equal, [INT, INT]),
    'not_equal': (np.not_equal, [INT, INT]),
    'less': (np.less, [INT, INT]),
    'less_equal': (np.less_equal, [INT, INT]),
    'greater': (np.greater, [INT, INT]),
    'greater_equal': (np.greater_equal, [INT, INT]),
    'element_and': (lambda a, b: (a > 0) & (b > 0), [INT, INT]),
    'element_or': (lambda a, b: (a > 0) | (b > 0), [INT, INT]),
    'element_xor': (lambda a, b: (a > 0) ^ (b > 0), [INT, INT]),
    'param_relu': (lambda alpha, x: np.where(x >= 0, x, alpha * x), [U, U]),
    'element_select': (lambda flag, t, f: np.where(flag != 0, t, f), [INT, U, U]),
    'clip': (np.clip, [(-2, 2), (-1, -0.2), (0.2, 1)]),
}


# Reductions (loom/ops/reduction.cpp): by default over all static axes of each sample, which stay
# as extent 1; the batch axis stays apart.
def _each_sample(reduce):
    """reduce(x, axis) over all static axes of each sample of a batch [N, ...], as [N, 1, ..]."""
    return lambda x: reduce(x.reshape(len(x), -1), axis=1).reshape((len(x),) + (1,) * (x.ndim - 1))


def _log_sum_exp(x, axis, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    return (m if keepdims else np.squeeze(m, axis)) + np.log(
        np.sum(np.exp(x - m), axis=axis, keepdims=keepdims))


def _l1(x, axis, keepdims=False):
    return np.sum(np.abs(x), axis=axis, keepdims=keepdims)


def _l2(x, axis, keepdims=False):
    return np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))


def _sum_square(x, axis, keepdims=False):
    return np.sum(np.square(x), axis=axis, keepdims=keepdims)


# Python name: its numpy counterpart, called as f(x, axis=..., keepdims=...).
REDUCTIONS = {
    'reduce_sum': np.sum,
    'reduce_mean': np.mean,
    'reduce_max': np.max,
    'reduce_min': np.min,
    'reduce_prod': np.prod,
    'reduce_log_sum_exp': _log_sum_exp,
    'reduce_l1': _l1,
    'reduce_l2': _l2,
    'reduce_sum_square': _sum_square,
}
ORACLES.update({name: (_each_sample(f), [U]) for name, f in REDUCTIONS.items()})
ORACLES.update({'argmax': (_each_sample(np.argmax), [INT]),  # ties: the first
                'argmin': (_each_sample(np.argmin), [INT])})

TOLERANCE = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}
SAMPLE = (3, 4)
BATCH = 5


def _draw(rng, domain, shape):
    if domain == INT:
        return rng.integers(-2, 3, shape).astype(np.float64)
    return rng.uniform(*domain, shape)


def _check(name, dtype, inputs, data, arrays):
    """The op on inputs (Variables and arrays) evaluated at {variable: data} against its oracle
    on arrays (the same values as float64)."""
    oracle, _, *attributes = ORACLES[name]
    attributes = attributes[0] if attributes else {}
    f = getattr(C, name)(*inputs, **attributes)
    result = f.eval(data)
    assert result.dtype == dtype, name
    expected = np.asarray(oracle(*arrays), np.float64)
    np.testing.assert_allclose(result, np.broadcast_to(expected, result.shape),
                               err_msg=name, **TOLERANCE[dtype])


def _table_names(module='ops'):
    return [e['python'] for e in _loom._op_table() if e['module'] == module]


def test_every_function_of_the_table_has_an_oracle():
    assert sorted(_table_names()) == sorted(ORACLES)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', sorted(ORACLES))
def test_function_matches_numpy_on_variables(name, dtype):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    domains = ORACLES[name][1]
    variables = [C.input_variable(SAMPLE, dtype=dtype) for _ in domains]
    values = [_draw(rng, d, (BATCH,) + SAMPLE).astype(dtype) for d in domains]
    _check(name, dtype, variables, dict(zip(variables, values)), values)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('variable_at', [0, 1])
@pytest.mark.parametrize('name', sorted(n for n, o in ORACLES.items() if len(o[1]) > 1))
def test_function_broadcasts_a_constant_of_the_variables_dtype(name, variable_at, dtype):
    # One input is a [3, 4] variable, the others float64 numpy arrays [4] shared by all samples:
    # they become constants of the variable's dtype, wherever the variable is among the inputs.
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    domains = ORACLES[name][1]
    x = C.input_variable(SAMPLE, dtype=dtype)
    values = [_draw(rng, d, (BATCH,) + SAMPLE if i == variable_at else (SAMPLE[-1],))
              for i, d in enumerate(domains)]
    values = [v.astype(dtype) if i == variable_at else v for i, v in enumerate(values)]
    inputs = [x if i == variable_at else v for i, v in enumerate(values)]
    arrays = [v.astype(dtype) for v in values]
    _check(name, dtype, inputs, {x: values[variable_at]}, arrays)


def _eval(f):
    return np.asarray(f.eval())


def test_cntk_examples():
    np.testing.assert_array_equal(_eval(C.round([-2.5, -1.5, 0.5, 2.5])), [-2, -1, 1, 3])
    assert _eval(C.log(0)) == np.float32(-85.1)
    assert _eval(C.log(np.float32(1e-38))) == np.float32(-85.1)
    assert _eval(C.sqrt(-1)) == 0
    assert _eval(C.reciprocal(0)) == 0
    np.testing.assert_array_equal(_eval(C.element_not([-1, 0, 2])), [1, 1, 0])
    x = [-1, -0.5, 0, 1, 2]
    np.testing.assert_allclose(_eval(C.softplus(x)),
                               [0.313262, 0.474077, 0.693147, 1.313262, 2.126928], atol=1e-6)
    np.testing.assert_allclose(_eval(C.softplus(x, steepness=4)),
                               [0.004537, 0.031732, 0.173287, 1.004537, 2.000084], atol=1e-6)
    np.testing.assert_allclose(_eval(C.hard_sigmoid([-3, -2, -1, 0, 1, 2, 3], 0.2, 0.5)),
                               [0, 0.1, 0.3, 0.5, 0.7, 0.9, 1], atol=1e-7)
    np.testing.assert_array_equal(
        _eval(C.element_select([-10, -1, 0, 0.3, 100], [1, 10, 100, 1000, 10000],
                               [2, 20, 200, 2000, 20000])),
        [1, 10, 200, 1000, 10000])
    np.testing.assert_allclose(_eval(C.clip([1., 2.1, 3.0, 4.1], 2., 4.)), [2., 2.1, 3., 4.],
                               rtol=1e-7)
    np.testing.assert_allclose(
        _eval(C.clip([[1., 2.1, 3.0, 4.1], [7., 8., 9., 10.]], [[2., 2., 2., 2.]],
                     [[4., 4., 4., 4.], [8., 8., 8., 8.]])),
        [[2., 2.1, 3., 4.], [7., 8., 8., 8.]], rtol=1e-7)
    np.testing.assert_allclose(_eval(C.pow([1, 2, -2], [3, -2, 3])), [1, 0.25, -8])
    np.testing.assert_allclose(_eval(C.pow([[0.5, 2], [4, 1]], -2)), [[4, 0.25], [0.0625, 1]])
    assert _eval(C.pow(-2, 3)) == -8
    assert np.isnan(_eval(C.pow(-2, 0.5)))
    assert _eval(C.pow(0, 0)) == 1


def test_selu_defaults_are_cntks():
    x = np.array([-1.0, 2.0])
    np.testing.assert_allclose(_eval(C.selu(C.constant(x, dtype=np.float64))),
                               SELU_SCALE * _elu(x, SELU_ALPHA), rtol=1e-15)


def test_signatures_are_cntks():
    assert str(inspect.signature(C.elu)) == "(x, alpha=1.0, name='')"
    assert str(inspect.signature(C.hard_sigmoid)) == "(x, alpha, beta, name='')"
    assert str(inspect.signature(C.plus)) == "(left, right, name='')"
    assert str(inspect.signature(C.pow)) == "(base, exponent, name='')"
    assert str(inspect.signature(C.param_relu)) == "(alpha, x, name='')"
    assert str(inspect.signature(C.element_select)) == \
        "(flag, value_if_true, value_if_false, name='')"
    params = inspect.signature(C.selu).parameters
    assert params['scale'].default == SELU_SCALE and params['alpha'].default == SELU_ALPHA
    for name in _table_names():
        f = getattr(C.ops, name)
        assert f is getattr(C, name)
        assert f.__name__ == f.__qualname__ == name
        assert f.__module__ == 'loom.ops'
        assert f.__doc__


def test_calls_bind_as_python_does():
    x = C.input_variable(3)
    X = np.array([[-1, 0.5, 2]], np.float32)
    np.testing.assert_allclose(C.elu(x, 0.5).eval({x: X}), _elu(X, 0.5), rtol=1e-6)
    np.testing.assert_allclose(C.elu(alpha=0.5, x=x).eval({x: X}), _elu(X, 0.5), rtol=1e-6)
    assert C.elu(x, name='e').name == 'e'
    assert C.leaky_relu(x, 0.3, 'l').name == 'l'
    with pytest.raises(TypeError, match='alpha'):
        C.hard_sigmoid(x)
    with pytest.raises(TypeError):
        C.elu(x, 1.0, 'e', 2)
    with pytest.raises(TypeError):
        C.elu(x, beta=1.0)
    with pytest.raises(TypeError):
        C.elu(x, alpha='large')
    with pytest.raises(TypeError):
        C.minus(x)


def test_associative_functions_take_more_operands():
    a, b, c = (C.input_variable(2) for _ in range(3))
    A, B, Cv = (np.array([[v, -v]], np.float32) for v in (1, 2, 5))
    data = {a: A, b: B, c: Cv}
    f = C.plus(a, b, c, name='sum')
    assert f.name == 'sum'
    np.testing.assert_allclose(f.eval(data), A + B + Cv)
    np.testing.assert_allclose(C.element_times(a, b, c, 2).eval(data), A * B * Cv * 2)
    np.testing.assert_allclose(C.element_max(a, b, c).eval(data), np.maximum(np.maximum(A, B), Cv))
    np.testing.assert_allclose(C.log_add_exp(a, b, c).eval(data),
                               np.logaddexp(np.logaddexp(A, B), Cv), rtol=1e-6)
    with pytest.raises(TypeError):
        C.minus(a, b, c)  # not associative: c would be the name


def test_no_gradient_flows_through_stop_gradient():
    x = C.input_variable(3, needs_gradient=True)
    X = np.array([[1, 2, 3]], np.float32)
    # x * stop_gradient(x): the product rule's second term is gone (X, not 2X).
    np.testing.assert_allclose((x * C.stop_gradient(x)).grad({x: X}, wrt=[x]), X)
    np.testing.assert_array_equal(C.stop_gradient(C.square(x)).grad({x: X}, wrt=[x]),
                                  np.zeros_like(X))


def test_sum_mean_and_combine_take_varargs_or_a_list():
    x = C.input_variable(2)
    data = {x: np.array([[1, 2]], np.float32)}
    np.testing.assert_array_equal(C.sum(x, x, 1).eval(data), [[3, 5]])
    np.testing.assert_array_equal(C.sum([x, x, 1]).eval(data), [[3, 5]])
    np.testing.assert_allclose(C.mean(x, 3).eval(data), [[2, 2.5]])
    np.testing.assert_array_equal(C.ops.sum(x).eval(data), [[1, 2]])
    assert len(C.combine(x + 1, x * 2).outputs) == 2
    assert len(C.combine([x + 1, x * 2]).outputs) == 2
    assert C.mean(x, x, name='m').name == 'm'


def test_softmax_without_axis_normalizes_all_static_axes():
    x = C.input_variable((2, 2))
    data = np.array([[[1, 1], [3, 5]]], np.float32)
    out = C.softmax(x).eval({x: data})
    np.testing.assert_allclose(out, np.exp(data) / np.exp(data).sum(), rtol=1e-6)
    # CNTK's documented examples
    np.testing.assert_allclose(_eval(C.softmax(np.array([[1, 1, 2, 3]], np.float32))),
                               [[0.082595, 0.082595, 0.224515, 0.610296]], atol=1e-6)
    np.testing.assert_allclose(_eval(C.softmax(data, axis=-1)),
                               [[[0.5, 0.5], [0.119203, 0.880797]]], atol=1e-6)
    np.testing.assert_allclose(_eval(C.softmax(data, axis=1)),
                               [[[0.119203, 0.017986], [0.880797, 0.982014]]], atol=1e-6)


def test_hardmax_examples():
    np.testing.assert_array_equal(_eval(C.hardmax(np.array([1., 1., 2., 3.], np.float32))),
                                  [0, 0, 0, 1])
    np.testing.assert_array_equal(_eval(C.hardmax(np.array([1., 3., 2., 3.], np.float32))),
                                  [0, 1, 0, 0])


# Reductions: CNTK's axis and keepdims, argmax and argmin, CNTK's documented values.
def test_reductions_take_cntks_axis_and_keepdims():
    assert str(inspect.signature(C.reduce_sum)) == "(x, axis=None, keepdims=True, name='')"
    assert str(inspect.signature(C.reduce_l2)) == "(x, axis=None, keepdims=True, name='')"
    assert str(inspect.signature(C.argmax)) == "(x, axis=None, name='')"
    x = C.input_variable((2, 3, 4), dtype=np.float64)
    X = np.random.default_rng(7).uniform(-1, 1, (BATCH, 2, 3, 4))
    # Loom's axis (None and Axis.all_static_axes(): every static axis; an int counts the static
    # axes, negative from the end) and numpy's on the batch.
    axes = [(None, (1, 2, 3)), (C.Axis.all_static_axes(), (1, 2, 3)), (0, 1), (2, 3), (-1, 3),
            (-3, 1), (C.Axis(1), 2)]
    for name, reduce in REDUCTIONS.items():
        for axis, np_axis in axes:
            for keepdims in (True, False):
                out = getattr(C, name)(x, axis=axis, keepdims=keepdims).eval({x: X})
                want = reduce(X, axis=np_axis, keepdims=keepdims)
                assert out.shape == want.shape, (name, axis, keepdims)
                np.testing.assert_allclose(out, want, rtol=1e-12,
                                           err_msg=f'{name} axis={axis} keepdims={keepdims}')
        assert getattr(C, name)(x, None, False).eval({x: X}).shape == (BATCH,)


def test_argmax_and_argmin_give_the_first_position_along_an_axis():
    x = C.input_variable((3, 4))
    X = np.random.default_rng(8).integers(-2, 3, (BATCH, 3, 4)).astype(np.float32)  # ties
    for name, position in (('argmax', np.argmax), ('argmin', np.argmin)):
        for axis, np_axis in ((0, 1), (1, 2), (-1, 2), (-2, 1)):
            np.testing.assert_array_equal(getattr(C, name)(x, axis).eval({x: X}),
                                          np.expand_dims(position(X, axis=np_axis), np_axis))
        # None: the position in the flattened sample
        np.testing.assert_array_equal(getattr(C, name)(x).eval({x: X}),
                                      position(X.reshape(BATCH, -1), axis=1).reshape(BATCH, 1, 1))


def _expect(f, expected, decimals=None):
    """f's value has CNTK's documented shape and values (rounded as CNTK's docs print them)."""
    out = _eval(f)
    assert out.shape == np.shape(expected)
    np.testing.assert_array_equal(out if decimals is None else out.round(decimals),
                                  np.asarray(expected, out.dtype))


def test_reduction_cntk_examples():
    data = np.array([[[5, 1], [20, 2]], [[30, 1], [40, 2]], [[55, 1], [60, 2]]], np.float32)
    _expect(C.reduce_sum(data, 0), [[[90, 3], [120, 6]]])
    _expect(C.reduce_sum(data, 1), [[[25, 3]], [[70, 3]], [[115, 3]]])
    _expect(C.reduce_log_sum_exp(data, axis=0), [[[55, 2.0986], [60, 3.0986]]], 4)
    _expect(C.reduce_mean(data, 0), [[[30, 1], [40, 2]]])
    _expect(C.reduce_mean(data, 1), [[[12.5, 1.5]], [[35, 1.5]], [[57.5, 1.5]]])
    _expect(C.reduce_max(data, 0), [[[55, 1], [60, 2]]])
    _expect(C.reduce_max(data, 1), [[[20, 2]], [[40, 2]], [[60, 2]]])
    _expect(C.reduce_min(data, 0), [[[5, 1], [20, 2]]])
    _expect(C.reduce_min(data, 1), [[[5, 1]], [[30, 1]], [[55, 1]]])
    _expect(C.reduce_prod(data, 0), [[[8250, 1], [48000, 8]]])
    _expect(C.reduce_prod(data, 1), [[[100, 2]], [[1200, 2]], [[3300, 2]]])
    _expect(C.reduce_l1([[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]], 2, False),
            [[3, 7], [11, 15], [19, 23]])
    _expect(C.reduce_l2([[[1, 2], [3, 4]]], 2), [[[2.236068], [5]]], 6)
    _expect(C.reduce_sum_square([[[1, 2], [3, 4]]], 2), [[[5], [25]]])
    _expect(C.argmax([[10, 20], [30, 40], [50, 60]], 0), [[2, 2]])
    _expect(C.argmax([[10, 20], [30, 40], [50, 60]], 1), [[1], [1], [1]])
    _expect(C.argmin([[10, 30], [40, 20], [60, 50]], 0), [[0, 1]])
    _expect(C.argmin([[10, 30], [40, 20], [60, 50]], 1), [[0], [1], [1]])


def test_reductions_over_the_batch_axis_are_not_supported_yet():
    x = C.input_variable(3)
    for axis in (C.Axis.default_batch_axis(), C.Axis.all_axes()):
        with pytest.raises(ValueError, match='ReduceSum.*not supported yet'):
            C.reduce_sum(x, axis)
        with pytest.raises(ValueError, match='Argmax.*not supported yet'):
            C.argmax(x, axis)


def test_reductions_take_a_tuple_of_axes():
    x = C.input_variable((2, 3, 4))
    data = np.arange(48, dtype=np.float32).reshape(2, 2, 3, 4)
    np.testing.assert_array_equal(C.reduce_sum(x, (0, 2)).eval({x: data}),
                                  data.sum(axis=(1, 3), keepdims=True))
    np.testing.assert_array_equal(C.reduce_max(x, [0, -1], keepdims=False).eval({x: data}),
                                  data.max(axis=(1, 3)))
