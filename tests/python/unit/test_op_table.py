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
