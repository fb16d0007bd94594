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

# Shape ops (loom/ops/shape_ops.cpp) on samples [3, 4]; test_shape_ops_* below test CNTK's
# examples, the other parameters and the errors.
ORACLES.update({
    'reshape': (lambda x: x.reshape(len(x), 4, 3), [U], {'shape': (4, 3)}),
    'squeeze': (lambda x: x, [U]),  # no axis of extent 1 here
    'expand_dims': (lambda x: np.expand_dims(x, 2), [U], {'axis': 0}),  # behind axis 0 (CNTK's)
    'swapaxes': (lambda x: np.swapaxes(x, 1, 2), [U]),
    'transpose': (lambda x: np.transpose(x, (0, 2, 1)), [U], {'perm': (1, 0)}),
    'flatten': (lambda x: x.reshape(len(x), 1, 12), [U]),
    'pad': (lambda x: np.pad(x, [(0, 0), (1, 2), (3, 0)], mode='reflect'), [U],
            {'pattern': [(1, 2), (3, 0)], 'mode': 1}),
})

# Indexing (loom/ops/indexing.cpp): indices drawn in [0, 3), truncated as CNTK casts them;
# gather's reference and indices are each a variable [3, 4] or a shared [4] (test_indexing_ops.py
# tests the rest, and top_k).
ORACLES.update({
    'one_hot': (lambda x: np.eye(3)[x.astype(int)], [(0, 2.99)], {'num_classes': 3}),
    'gather': (lambda r, i: r[i.astype(int)] if r.ndim == 1 else r[:, i.astype(int)]
               if i.ndim == 1 else np.stack([a[b] for a, b in zip(r, i.astype(int))]),
               [U, (0, 2.99)]),
})

# Composites (ops made of other ops: loom/ops/op_schema.h) and the ops whose parameters convert
# (softmax's axis, log_softmax's None, slice's keys), on samples [3, 4].
ORACLES.update({
    'softmax': (lambda x: np.exp(x) / np.exp(x).sum(axis=(1, 2), keepdims=True), [U]),
    'log_softmax': (lambda x: x - _log_sum_exp(x, -1, keepdims=True), [U]),  # None: the last
    'slice': (lambda x: x[:, :, 1:3], [U], {'axis': 1, 'begin_index': 1, 'end_index': 3}),
    'sum': (np.add, [U, U]),
    'mean': (lambda a, b: (a + b) / 2, [U, U]),
    'per_dim_mean_variance_normalize': (lambda x, m, s: (x - m) * s, [U, U, U]),
    'mean_variance_normalization': (
        lambda x: (x - x.mean(2, keepdims=True)) / (x.std(2, keepdims=True) + 1e-5), [U]),
})

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
    return [e['python'] for e in _loom.ops._op_table() if e['module'] == module]


# Functions whose result is not of their inputs' type, or whose inputs are not the samples [3,
# 4] and shared vectors the oracle tests draw: each has a test of its own (below, or in
# test_crop_ops.py, test_ctc_ops.py, test_conv_pool_ops.py).
OWN_TESTS = {'cast', 'crop_manual', 'labels_to_graph', 'forward_backward', 'roipooling',
             'local_response_normalization', 'convolution', 'convolution_transpose', 'pooling',
             'unpooling', 'batch_normalization', 'times', 'eye_like', 'assign',
             # test_dynamic_axes_ops.py: their outputs have other dynamic axes than their inputs
             'to_sequence', 'to_sequence_like', 'unpack_batch', 'to_batch',
             'reconcile_dynamic_axes',
             # test_random_ops.py: random
             'dropout', 'random_sample', 'random_sample_inclusion_frequency',
             # test_indexing_ops.py: two outputs
             'top_k',
             # varargs, no broadcasting: test_splice_* below
             'splice',
             # composites of their own tests: below, test_crop_ops.py and
             # test_input_normalization_ops.py
             'times_transpose', 'depth_to_space', 'space_to_depth', 'image_scaler',
             'crop_automatic', 'crop_automatic_with_ancestors'}


def test_every_function_of_the_table_has_an_oracle():
    assert sorted(set(_table_names()) - OWN_TESTS) == sorted(ORACLES)


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


def test_associative_multi_arg_is_cntks_decorator():
    # CNTK's docstring examples: a str after the operands is the name; a balanced tree.
    f = C.plus([-5, -4, -3, -2, -1], [10], [3, 2, 3, 2, 3], [-13], [+42], 'multi_arg_example')
    assert f.name == 'multi_arg_example'
    np.testing.assert_array_equal(f.eval(), [37, 37, 39, 39, 41])
    np.testing.assert_array_equal(
        C.element_times([5., 10., 15., 30.], [2.], [1., 2., 1., 2.]).eval(), [10, 40, 30, 120])
    a = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(np.exp(C.log_add_exp(np.log(1 + a), np.log(1 + a * a)).eval()),
                               [2, 4, 8], rtol=1e-6)
    # plus(a, b, c, d) is plus(plus(a, b), plus(c, d)), as CNTK's tree_reduce.
    s = C.ops.plus(1, 2, 3, 4)
    assert [i.owner.op_name for i in s.inputs if i.owner] == ['Plus', 'Plus']
    assert inspect.signature(C.plus) == inspect.signature(C.minus)
    with pytest.raises(TypeError):
        C.plus(1, 2, scale=3)

    @C.ops.associative_multi_arg
    def joined(left, right, name=''):
        return C.splice(left, right, name=name)
    assert joined([1], [2], [3], 'j').eval().tolist() == [1, 2, 3]


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


def test_reductions_over_the_batch_axis_and_all_axes():
    """CNTK's reduce_sum docstring: all_axes() sums the minibatch to one number, and
    default_batch_axis() reduces across the samples (the input must not be a sequence)."""
    x = C.input_variable(3)
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(C.reduce_sum(x, C.Axis.all_axes()).eval({x: data}), [66])
    assert C.reduce_sum(x, C.Axis.all_axes(), keepdims=False).eval({x: data}).shape == ()
    np.testing.assert_array_equal(C.reduce_mean(x, C.Axis.default_batch_axis()).eval({x: data}),
                                  data.mean(axis=0))
    np.testing.assert_array_equal(
        C.reduce_max(x, [0, C.Axis.default_batch_axis()], keepdims=False).eval({x: data}), 11)
    assert C.reduce_sum(x, C.Axis.default_batch_axis()).dynamic_axes == []
    s = C.sequence.input_variable(3)
    seqs = [np.full((2, 3), -1, np.float32), np.full((1, 3), -2, np.float32)]
    np.testing.assert_array_equal(C.reduce_min(s, C.Axis.all_axes()).eval({s: seqs}), [-2])
    np.testing.assert_array_equal(C.reduce_max(s, C.Axis.all_axes()).eval({s: seqs}), [-1])
    with pytest.raises(ValueError, match='ReduceSum.*batch axis.*a sequence'):
        C.reduce_sum(s, C.Axis.default_batch_axis())
    with pytest.raises(ValueError, match='Argmax: reducing over axis.*not supported'):
        C.argmax(x, C.Axis.default_batch_axis())


def test_reductions_take_a_tuple_of_axes():
    x = C.input_variable((2, 3, 4))
    data = np.arange(48, dtype=np.float32).reshape(2, 2, 3, 4)
    np.testing.assert_array_equal(C.reduce_sum(x, (0, 2)).eval({x: data}),
                                  data.sum(axis=(1, 3), keepdims=True))
    np.testing.assert_array_equal(C.reduce_max(x, [0, -1], keepdims=False).eval({x: data}),
                                  data.max(axis=(1, 3)))


# Shape ops: CNTK's signatures, documented examples, the parameters against numpy, and errors.
def test_shape_ops_signatures_are_cntks():
    assert str(inspect.signature(C.reshape)) == "(x, shape, begin_axis=None, end_axis=None, name='')"
    assert str(inspect.signature(C.squeeze)) == "(x, axes=None, name='')"
    assert str(inspect.signature(C.expand_dims)) == "(x, axis, name='')"
    assert str(inspect.signature(C.swapaxes)) == "(x, axis1=0, axis2=1, name='')"
    assert str(inspect.signature(C.transpose)) == "(x, perm, name='')"
    assert str(inspect.signature(C.flatten)) == "(x, axis=None, name='')"
    assert str(inspect.signature(C.pad)) == "(x, pattern, mode=0, constant_value=0.0, name='')"
    assert (C.CONSTANT_PAD, C.REFLECT_PAD, C.SYMMETRIC_PAD) == (0, 1, 2)
    assert (C.ops.CONSTANT_PAD, C.ops.REFLECT_PAD, C.ops.SYMMETRIC_PAD) == (0, 1, 2)


def test_transpose_cntk_example_and_bad_permutations():
    assert str(inspect.signature(C.transpose)) == "(x, perm, name='')"
    a = np.arange(24).reshape(2, 3, 4).astype('f')
    np.testing.assert_array_equal(_eval(C.transpose(a, perm=(2, 0, 1))), np.transpose(a, (2, 0, 1)))
    np.testing.assert_array_equal(_eval(C.transpose(a, [-1, 1, 0])), np.transpose(a, (2, 1, 0)))
    with pytest.raises(TypeError, match="transpose: 'perm' must be an int, or a list"):
        C.transpose(a, C.Axis(1))
    with pytest.raises(C.ShapeError, match='Transpose: permutation of 2 axes'):
        C.transpose(a, (1, 0))
    with pytest.raises(C.ShapeError, match='Transpose: axis 1 appears twice'):
        C.transpose(a, (1, 1, 0))


def test_reshape_cntk_example_and_axes():
    i1 = C.input_variable((3, 2))
    _expect_values(C.reshape(i1, (2, 3)).eval({i1: np.arange(6, dtype=np.float32).reshape(1, 3, 2)}),
                   [[[0, 1, 2], [3, 4, 5]]])
    x = C.input_variable((2, 3, 4), dtype=np.float64)
    X = np.random.default_rng(9).uniform(-1, 1, (BATCH, 2, 3, 4))
    for args, shape in [(((6, 4),), (6, 4)), (((6,), 0, 2), (6, 4)), (((6,), None, -1), (6, 4)),
                        (((12,), 1), (2, 12)), (((2, -1), 2), (2, 3, 2, 2)),
                        (((1,), 1, 1), (2, 1, 3, 4)), (((1,), 3, None), (2, 3, 4, 1)),
                        (((3, 1), -2, -1), (2, 3, 1, 4)), ((-1, 0, 2), (6, 4))]:
        out = C.reshape(x, *args).eval({x: X})
        np.testing.assert_array_equal(out, X.reshape((BATCH,) + shape), err_msg=str(args))
    out = C.reshape(x, (4, 3), begin_axis=C.Axis(1), end_axis=None).eval({x: X})
    np.testing.assert_array_equal(out, X.reshape(BATCH, 2, 4, 3))
    with pytest.raises(C.ArgumentError, match='reshape: begin_axis.*comes after end_axis'):
        C.reshape(x, (6,), 2, 1)
    with pytest.raises(C.ArgumentError, match='reshape: end_axis 4 is out of range'):
        C.reshape(x, (6,), 2, 4)
    with pytest.raises(C.ArgumentError, match="reshape: 'shape' has dimension -2"):
        C.reshape(x, (-2, 12))
    with pytest.raises(TypeError, match="reshape: 'shape' must be a shape"):
        C.reshape(x, 'ab')
    with pytest.raises(C.ShapeError, match='Reshape.*do not fit'):
        C.reshape(x, (5, 5))


def _expect_values(out, expected):
    assert out.shape == np.shape(expected)
    np.testing.assert_array_equal(out, np.asarray(expected, out.dtype))


def test_squeeze_expand_dims_swapaxes_flatten_cntk_examples():
    x0 = np.arange(12).reshape((2, 2, 1, 3)).astype('f')
    x = C.input_variable((2, 1, 3))
    _expect_values(C.squeeze(x).eval({x: x0}), x0.reshape(2, 2, 3))
    x0 = np.arange(12).reshape((2, 2, 3)).astype('f')
    x = C.input_variable((2, 3))
    _expect_values(C.expand_dims(x, 0).eval({x: x0}), x0.reshape(2, 2, 1, 3))
    _expect_values(_eval(C.swapaxes([[[0, 1], [2, 3], [4, 5]]], 1, 2)), [[[0, 2, 4], [1, 3, 5]]])
    data = np.reshape(np.arange(24, dtype=np.float32), (2, 3, 4))
    _expect_values(_eval(C.flatten(data, 1)), data.reshape(2, 12))


def test_squeeze_expand_dims_swapaxes_flatten_axes_against_numpy():
    x = C.input_variable((1, 3, 1, 4), dtype=np.float64)
    X = np.random.default_rng(10).uniform(-1, 1, (BATCH, 1, 3, 1, 4))
    for axes, np_axes in [(None, (1, 3)), (0, 1), (2, 3), (-2, 3), ([0, 2], (1, 3)),
                          ((-4,), 1), (C.Axis(2), 3)]:
        np.testing.assert_array_equal(C.squeeze(x, axes).eval({x: X}), np.squeeze(X, np_axes))
    # expand_dims places the axis behind static axis `axis`, as CNTK's Python does; -(rank + 1)
    # puts it first.
    for axis, position in [(0, 2), (3, 5), (-1, 5), (-4, 2), (-5, 1)]:
        np.testing.assert_array_equal(C.expand_dims(x, axis).eval({x: X}),
                                      np.expand_dims(X, position), err_msg=str(axis))
    for a1, a2 in [(0, 1), (1, 3), (-1, 0), (2, 2), (C.Axis(1), -2)]:
        n1, n2 = (a.static_axis_index() if isinstance(a, C.Axis) else a for a in (a1, a2))
        np.testing.assert_array_equal(C.swapaxes(x, a1, a2).eval({x: X}),
                                      np.swapaxes(X, n1 % 4 + 1, n2 % 4 + 1))
    for axis, shape in [(None, (1, 12)), (0, (1, 12)), (1, (1, 12)), (2, (3, 4)), (-1, (3, 4)),
                        (4, (12, 1)), (-4, (1, 12))]:
        np.testing.assert_array_equal(C.flatten(x, axis).eval({x: X}),
                                      X.reshape((BATCH,) + shape), err_msg=str(axis))


def test_pad_cntk_examples():
    x = C.constant(value=np.arange(6, dtype=np.float32).reshape((2, 3)))
    _expect_values(_eval(C.pad(x, pattern=[(1, 1), (2, 2)], mode=C.ops.CONSTANT_PAD,
                               constant_value=1)),
                   [[1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 1, 2, 1, 1], [1, 1, 3, 4, 5, 1, 1],
                    [1, 1, 1, 1, 1, 1, 1]])
    _expect_values(_eval(C.pad(x, pattern=[(1, 1), (2, 2)], mode=C.ops.REFLECT_PAD)),
                   [[5, 4, 3, 4, 5, 4, 3], [2, 1, 0, 1, 2, 1, 0], [5, 4, 3, 4, 5, 4, 3],
                    [2, 1, 0, 1, 2, 1, 0]])
    _expect_values(_eval(C.pad(x, pattern=[(1, 1), (2, 2)], mode=C.ops.SYMMETRIC_PAD)),
                   [[1, 0, 0, 1, 2, 2, 1], [1, 0, 0, 1, 2, 2, 1], [4, 3, 3, 4, 5, 5, 4],
                    [4, 3, 3, 4, 5, 5, 4]])


def test_pad_modes_and_gradient_against_numpy():
    x = C.input_variable((3, 4), dtype=np.float64, needs_gradient=True)
    X = np.random.default_rng(11).uniform(-1, 1, (BATCH, 3, 4))
    for mode, np_mode, pattern in [(C.CONSTANT_PAD, 'constant', [(0, 3), (2, 1)]),
                                   (C.REFLECT_PAD, 'reflect', [(2, 2), (3, 1)]),
                                   (C.SYMMETRIC_PAD, 'symmetric', [(3, 1), (4, 4)])]:
        f = C.pad(x, pattern, mode)
        np.testing.assert_array_equal(f.eval({x: X}), np.pad(X, [(0, 0)] + pattern, np_mode))
        # d sum(pad(x) * w) / dx: each element gets the weights of the places it was copied to
        w = np.random.default_rng(12).uniform(-1, 1, f.output.shape)
        extra = {'constant_values': -1} if np_mode == 'constant' else {}
        index = np.pad(np.arange(12).reshape(3, 4), pattern, np_mode, **extra)
        want = np.zeros(12)
        np.add.at(want, index[index >= 0], w[index >= 0])
        g = (f * w).grad({x: X}, wrt=[x])
        np.testing.assert_allclose(g, np.broadcast_to(want.reshape(3, 4), X.shape), rtol=1e-12)
    np.testing.assert_array_equal(C.pad(x, [1, 1, 0, 0], constant_value=-2).eval({x: X}),
                                  np.pad(X, [(0, 0), (1, 1), (0, 0)], constant_values=-2))


def test_depth_to_space_and_space_to_depth_cntk_examples():
    x = np.tile(np.arange(8, dtype=np.float32).reshape(8, 1, 1), (1, 2, 3))
    a = C.input_variable((8, 2, 3))
    _expect_values(C.depth_to_space(a, block_size=2).eval({a: x}),
                   [[[[0, 2, 0, 2, 0, 2], [4, 6, 4, 6, 4, 6], [0, 2, 0, 2, 0, 2],
                      [4, 6, 4, 6, 4, 6]],
                     [[1, 3, 1, 3, 1, 3], [5, 7, 5, 7, 5, 7], [1, 3, 1, 3, 1, 3],
                      [5, 7, 5, 7, 5, 7]]]])
    np.random.seed(3)
    x = np.random.randint(low=0, high=100, size=(1, 4, 6)).astype(np.float32)
    a = C.input_variable((1, 4, 6))
    _expect_values(C.space_to_depth(a, block_size=2).eval({a: x}),
                   [[[[24, 56, 0], [96, 44, 39]], [[3, 72, 21], [20, 93, 14]],
                     [[19, 41, 21], [26, 90, 66]], [[74, 10, 38], [81, 22, 2]]]])


def test_depth_to_space_inverts_space_to_depth():
    a = C.input_variable((2, 6, 9), dtype=np.float64)
    X = np.random.default_rng(13).uniform(-1, 1, (BATCH, 2, 6, 9))
    s2d = C.space_to_depth(a, 3)
    assert s2d.output.shape == (18, 2, 3)
    d2s = C.depth_to_space(s2d, 3.0, name='d2s')  # CNTK takes a float of an int's value
    assert d2s.name == 'd2s'
    np.testing.assert_array_equal(d2s.eval({a: X}), X)
    # numpy's form of it: channel (i * b + j) * C + c holds x[c, h * b + i, w * b + j]
    want = X.reshape(BATCH, 2, 2, 3, 3, 3).transpose(0, 3, 5, 1, 2, 4).reshape(BATCH, 18, 2, 3)
    np.testing.assert_array_equal(s2d.eval({a: X}), want)


def test_eye_like_cntk_example_and_parameters():
    x0 = np.arange(12).reshape((3, 4)).astype('f')
    x = C.input_variable(4)
    _expect_values(C.eye_like(x).eval({x: x0}), np.eye(3, 4))
    _expect_values(_eval(C.eye_like(np.ones((4, 2), np.float32))), np.eye(4, 2))
    with pytest.raises(C.ArgumentError, match='eye_like: sparse output is not supported'):
        C.eye_like(x, sparse_output=True)
    with pytest.raises(C.ArgumentError, match='eye_like: input.*has 3 axes'):
        C.eye_like(C.input_variable((3, 4)))
    with pytest.raises(C.ArgumentError, match='eye_like: input.*has a sequence axis'):
        C.eye_like(C.sequence.input_variable(4))


def test_times_transpose_cntk_examples():
    a = np.array([[1, 2], [3, 4]], dtype=np.float32)
    b = np.array([2, -1], dtype=np.float32)
    c = np.array([[2, -1]], dtype=np.float32)
    d = np.reshape(np.arange(24, dtype=np.float32), (4, 3, 2))
    _expect_values(_eval(C.times_transpose(a, a)), [[5, 11], [11, 25]])
    _expect_values(_eval(C.times_transpose(a, b)), [[0], [2]])
    _expect_values(_eval(C.times_transpose(a, c)), [[0], [2]])
    _expect_values(_eval(C.times_transpose(b, a)), [0, 2])
    _expect_values(_eval(C.times_transpose(b, b)), [5])
    _expect_values(_eval(C.times_transpose(b, c)), [5])
    _expect_values(_eval(C.times_transpose(c, a)), [[0, 2]])
    _expect_values(_eval(C.times_transpose(c, b)), [[5]])
    _expect_values(_eval(C.times_transpose(c, c)), [[5]])
    _expect_values(_eval(C.times_transpose(d, a)), np.dot(d, a.T))
    x = C.input_variable((3, 2))
    assert C.times_transpose(x, a, name='tt').name == 'tt'
    np.testing.assert_allclose(C.times_transpose(x, a).eval({x: d}), np.dot(d, a.T))
    with pytest.raises(C.ArgumentError, match='times_transpose: right.*has rank 3'):
        C.times_transpose(a, d)


@pytest.mark.parametrize('make, message', [
    (lambda x: C.squeeze(x, 0), r'squeeze: static axis 0 of input .* has extent 3, not 1'),
    (lambda x: C.squeeze(x, 2), r'squeeze: axis 2 is out of range .*give -2 to 1'),
    (lambda x: C.squeeze(C.expand_dims(x, 0), [1, -2]), 'squeeze: static axis -2 .* named twice'),
    (lambda x: C.expand_dims(x, 2), r'expand_dims: axis 2 is out of range .*give -3 to 1'),
    (lambda x: C.expand_dims(x, None), "expand_dims: 'axis' must be one static axis"),
    (lambda x: C.expand_dims(x, [0, 1]), "expand_dims: 'axis' must be one static axis"),
    (lambda x: C.swapaxes(x, 0, 5), 'swapaxes: axis2 5 is out of range'),
    (lambda x: C.swapaxes(x, C.Axis.default_batch_axis()),
     "swapaxes: 'axis1' must be one static axis"),
    (lambda x: C.flatten(x, 3), r'flatten: axis 3 is out of range .*give -2 to 2'),
    (lambda x: C.pad(x, [(1, 1)]), r'pad: the pattern has 2 numbers for input .* of rank 2; '
     r'give one \(before, after\) pair per static axis'),
    (lambda x: C.pad(x, [(1, 1), (1, 1)], mode=3), 'pad: mode 3 is none of CONSTANT_PAD'),
    (lambda x: C.pad(x, [(-1, 0), (0, 0)]), 'pad: the pattern .* is negative'),
    (lambda x: C.pad(x, [(3, 0), (0, 0)], C.REFLECT_PAD), 'pad: .* exceeds 2, the most REFLECT'),
    (lambda x: C.pad(x, [(0, 0), (0, 5)], C.SYMMETRIC_PAD),
     'pad: .* exceeds 4, the most SYMMETRIC'),
    (lambda x: C.depth_to_space(C.reshape(x, (3, 2, 2)), 2),
     r'depth_to_space: the 3 channels .* not divisible by block_size \* block_size = 4'),
    (lambda x: C.depth_to_space(x, 2), r'depth_to_space: input .* has rank 2; .*\[C, H, W\]'),
    (lambda x: C.space_to_depth(C.reshape(x, (1, 3, 4)), 2),
     'space_to_depth: the spatial extents 3 x 4 .* not divisible by block_size 2'),
    (lambda x: C.space_to_depth(C.reshape(x, (1, 3, 4)), 0),
     'space_to_depth: block_size must be an integer of at least 1, not 0'),
    (lambda x: C.depth_to_space(C.reshape(x, (12, 1, 1)), 1.5),
     'depth_to_space: block_size must be an integer of at least 1, not 1.5'),
])
def test_shape_ops_refuse_bad_arguments_naming_the_op(make, message):
    with pytest.raises(C.ArgumentError, match=message):
        make(C.input_variable((3, 4)))


def test_shape_op_parameters_refuse_other_types():
    x = C.input_variable((3, 4))
    with pytest.raises(TypeError, match="pad: 'pattern' must be an int, or a list of ints or "
                                        "of pairs of ints, not list"):
        C.pad(x, [(1, 2, 3), (0, 0, 0)])
    with pytest.raises(TypeError, match="pad: 'pattern' must be"):
        C.pad(x, 'ab')
    with pytest.raises(TypeError, match="pad: 'mode' must be an int"):
        C.pad(x, [(1, 1), (1, 1)], mode='reflect')
    with pytest.raises(TypeError, match="reshape: 'shape' must be a shape"):
        C.reshape(x, [1.5, 8])
    with pytest.raises(TypeError, match="depth_to_space: 'block_size' must be a number, not str"):
        C.depth_to_space(C.reshape(x, (12, 1, 1)), '2')


def test_cast_converts_and_casts_the_gradient_back():
    assert str(inspect.signature(C.cast)) == "(node_input, dtype, name='')"
    x = C.input_variable(3, needs_gradient=True)
    X = np.array([[0.1, -2.5, 3]], np.float32)
    for dtype in (np.float64, np.dtype('float64'), 'float64'):
        out = C.cast(x, dtype).eval({x: X})
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, X.astype(np.float64))
    y = C.cast(C.cast(x, np.float64) * 2, np.float32)
    assert y.output.dtype == np.float32
    np.testing.assert_array_equal(y.grad({x: X}, wrt=[x]), np.full((1, 3), 2, np.float32))
    with pytest.raises(TypeError, match=r"cast: 'dtype' must be a data type \(np.float32 or "
                                        r"np.float64\), not type"):
        C.cast(x, np.int32)
    with pytest.raises(TypeError, match="cast: 'dtype' must be a data type"):
        C.cast(x, None)


def test_as_composite_names_the_graph_of_a_functions_outputs():
    x = C.input_variable(2)
    f = C.plus(x, 1)
    g = C.as_composite(f, name='g')
    assert g.name == 'g' and g.outputs == f.outputs
    np.testing.assert_array_equal(g.eval({x: [[1, 2]]}), [[2, 3]])
    assert str(inspect.signature(C.as_composite)) == "(root_function, name='')"


def test_splice_takes_varargs_and_keyword_only_axis():
    # CNTK's splice(*inputs, **kw_axis_name): the table's Tensors parameter.
    assert str(inspect.signature(C.splice)) == "(*inputs, axis=-1, name='')"
    c = C.constant(np.ones((2, 1)), dtype=np.float64)
    s = C.splice(c, [[7], [8]], c, name='s')  # the list: a constant of c's type
    assert s.name == 's' and s.shape == (2, 3) and s.dtype == np.float64
    np.testing.assert_array_equal(s.eval(), [[1, 7, 1], [1, 8, 1]])
    x = C.input_variable((2, 3), dtype=np.float64)
    X = np.arange(6, dtype=np.float64).reshape(1, 2, 3)
    np.testing.assert_array_equal(C.splice(x, x, axis=0).eval({x: X})[0],
                                  np.concatenate([X[0], X[0]]))
    np.testing.assert_array_equal(C.splice(x).eval({x: X}), X)
    with pytest.raises(C.ArgumentError, match='Splice takes at least 1 input'):
        C.splice()
    with pytest.raises(TypeError, match='axes'):
        C.splice(x, x, axes=0)


def test_splice_along_a_new_leading_axis_stacks():
    a = C.input_variable((2, 3))
    s = C.splice(a, a * 2, axis=C.Axis.new_leading_axis())
    assert s.shape == (2, 2, 3)
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    assert np.array_equal(s.eval({a: x})[0], np.stack([x[0], 2 * x[0]]))


def test_times_signature_and_ranks_against_numpy():
    assert str(inspect.signature(C.times)) == \
        "(left, right, output_rank=1, infer_input_rank_to_map=-1, name='')"
    assert str(inspect.signature(C.eye_like)) == "(x, sparse_output=False, name='')"
    rng = np.random.default_rng(5)
    x = C.input_variable((2, 3))
    X = rng.uniform(-1, 1, (4, 2, 3)).astype(np.float32)
    W = rng.uniform(-1, 1, (3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(C.times(x, W[:, 0]).eval({x: X}), X @ W[:, 0], rtol=1e-5)
    np.testing.assert_allclose(C.times(x, W, output_rank=2, name='t').eval({x: X}),
                               np.einsum('nij,jkl->nikl', X, W), rtol=1e-5)
    # infer_input_rank_to_map=0: the parameter's input axes are all of x's.
    p = C.parameter((C.InferredDimension, 5), init=1)
    assert C.times(x, p, infer_input_rank_to_map=0).shape == (5,) and p.shape == (2, 3, 5)
    with pytest.raises(C.ArgumentError, match='times: output_rank must be at least 0'):
        C.times(x, W, output_rank=-1)
    with pytest.raises(TypeError, match="times: 'output_rank' must be"):
        C.times(x, W, output_rank=1.5)


SEQUENCE_OPS = {  # name: (CNTK's signature, numpy on one sequence [T, 2])
    'first': ('(seq, name=\'\')', lambda s: s[:1]),
    'last': ('(seq, name=\'\')', lambda s: s[-1:]),
    'reduce_sum': ('(seq, name=\'\')', lambda s: s.sum(0, keepdims=True)),
    'reduce_max': ('(seq, name=\'\')', lambda s: s.max(0, keepdims=True)),
    'is_first': ('(seq, name=\'\')', lambda s: (np.arange(len(s)) == 0)[:, None]),
    'is_last': ('(seq, name=\'\')', lambda s: (np.arange(len(s)) == len(s) - 1)[:, None]),
}


@pytest.mark.parametrize('name', sorted(SEQUENCE_OPS))
def test_sequence_table_functions_on_ragged_sequences(name):
    signature, oracle = SEQUENCE_OPS[name]
    f = getattr(C.sequence, name)
    assert f is getattr(C.ops.sequence, name) and f.__module__ == 'loom.sequence'
    assert str(inspect.signature(f)) == signature and f.__doc__
    s = C.sequence.input_variable(2)
    rng = np.random.default_rng(len(name))
    data = [rng.uniform(-1, 1, (n, 2)).astype(np.float32) for n in (3, 1, 4)]
    out = f(s).eval({s: data})
    for got, seq in zip(out, data):
        expected = oracle(seq)
        got = np.asarray(got).reshape(len(expected), -1)
        np.testing.assert_allclose(got, np.broadcast_to(expected, got.shape), rtol=1e-6)


def test_sequence_where_and_broadcast_as_from_the_table():
    assert str(inspect.signature(C.sequence.where)) == "(condition, name='')"
    assert str(inspect.signature(C.sequence.broadcast_as)) == \
        "(operand, broadcast_as_operand, name='')"
    c = C.sequence.input_variable(1)
    got = C.sequence.where(c).eval({c: [np.array([[1], [0], [2]], np.float32)]})
    np.testing.assert_array_equal(np.asarray(got[0]).ravel(), [0, 2, 2])
    x = C.input_variable(2)
    s = C.sequence.input_variable(1)
    got = C.sequence.broadcast_as(x, s).eval({x: np.array([[1, 2]], np.float32),
                                             s: [np.zeros((3, 1), np.float32)]})
    np.testing.assert_array_equal(got[0], [[1, 2]] * 3)
    # A number becomes a constant of the other operand's dtype, as before.
    got = C.sequence.broadcast_as(5, s).eval({s: [np.zeros((2, 1), np.float32)]})
    np.testing.assert_array_equal(np.asarray(got[0]).ravel(), [5, 5])


def test_assign_writes_its_input_into_the_parameter_when_evaluated():
    assert str(inspect.signature(C.assign)) == "(ref, input, name='')"
    p = C.parameter(init=np.array([1, 2], np.float32))
    a = C.assign(p, p * 3 + 1, name='a')
    assert a.name == 'a' and p.value.tolist() == [1, 2]
    np.testing.assert_array_equal(a.eval(), [4, 7])
    assert p.value.tolist() == [4, 7]


def test_sequence_slice_from_the_table():
    assert str(inspect.signature(C.sequence.slice)) == "(seq, begin_index, end_index, name='')"
    s = C.sequence.input_variable(1)
    data = [np.arange(n, dtype=np.float32).reshape(n, 1) for n in (4, 2)]
    for begin, end in [(1, 3), (-2, 0), (0, -1)]:
        got = C.sequence.slice(s, begin, end).eval({s: data})
        for g, seq in zip(got, data):
            stop = end if end != 0 else None
            np.testing.assert_array_equal(np.asarray(g).ravel(), seq[begin:stop].ravel())
    with pytest.raises(C.ArgumentError, match=r'sequence::slice of .*the range \[2, 1\) is empty'):
        C.sequence.slice(s, 2, 1)
    with pytest.raises(TypeError, match="slice: 'begin_index' must be"):
        C.sequence.slice(s, 0.5, 1)


# Composites: CNTK's functions made of other ops, from the table like the primitives.
COMPOSITE_SIGNATURES = {
    'ops.times_transpose': "(left, right, name='')",
    'ops.depth_to_space': "(operand, block_size, name='')",
    'ops.space_to_depth': "(operand, block_size, name='')",
    'ops.per_dim_mean_variance_normalize': "(operand, mean, inv_stddev, name='')",
    'ops.mean_variance_normalization':
        "(operand, epsilon=1e-05, use_stats_across_channels=False, do_variance_scaling=True, "
        "name='')",
    'ops.image_scaler': "(x, scalar, biases, name='')",
    'ops.crop_automatic': "(node_input, node_referent, name='')",
    'ops.crop_automatic_with_ancestors':
        "(node_input, node_referent, ancestor_input, ancestor_referent, name='')",
    'ops.sum': "(*operands, name='')",
    'ops.mean': "(*operands, name='')",
    'sequence.softmax': "(seq, name='')",
    'sequence.unpack': "(x, padding_value, no_mask_output=False, name='')",
    'sequence.delay': "(x, initial_state=None, time_step=1, name='')",
}


@pytest.mark.parametrize('path', sorted(COMPOSITE_SIGNATURES))
def test_composites_come_from_the_table_with_cntks_signatures(path):
    module, name = path.split('.')
    entries = [e for e in _loom.ops._op_table() if e['module'] == module and e['python'] == name]
    assert [e['op'] for e in entries] == [path]  # a composite's name is its Python path
    f = getattr(getattr(C, module), name)
    assert str(inspect.signature(f)) == COMPOSITE_SIGNATURES[path]
    assert f.__module__ == 'loom.' + module and f.__doc__


def test_a_composite_saves_as_the_ops_it_is_made_of(tmp_path):
    x = C.sequence.input_variable(2)
    f = C.sequence.softmax(x, name='s')
    assert f.name == 's' and f.root_function.op_name == 'ElementDivide'
    f.save(str(tmp_path / 'm.model'))
    g = C.load_model(str(tmp_path / 'm.model'))
    data = [np.array([[1, 2], [3, 5]], np.float32), np.array([[0, 1]], np.float32)]
    expected = [np.exp(d) / np.exp(d).sum(axis=0) for d in data]
    for out in (f.eval({x: data}), g.eval({g.arguments[0]: data})):
        for got, want in zip(out, expected):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_table_signatures_of_converted_parameters_are_cntks():
    assert str(inspect.signature(C.softmax)) == "(x, axis=None, name='')"
    assert str(inspect.signature(C.log_softmax)) == "(x, axis=None, name='')"
    assert str(inspect.signature(C.slice)) == "(x, axis, begin_index, end_index, name='')"
    # loom.losses' and loom.metrics' (CNTK's modules, not cntk.ops): along an axis too
    assert str(inspect.signature(C.metrics.classification_error)) == \
        "(output_vector, target_vector, axis=-1, topN=1, name='')"
    assert str(inspect.signature(C.losses.cross_entropy_with_softmax)) == \
        "(output_vector, target_vector, axis=-1, name='')"
    assert not hasattr(C.ops, 'classification_error')
    assert not hasattr(C.ops, 'cross_entropy_with_softmax')
    for f in (C.sequence.past_value, C.sequence.future_value):
        assert str(inspect.signature(f)) == "(x, initial_state=None, time_step=1, name='')"
    for f in (C.sequence.gather, C.sequence.scatter):
        assert str(inspect.signature(f)) == \
            "(seq, condition, new_sequence_axis_typeinfo=None, name='')"


def test_gather_and_scatter_take_new_sequence_axis_typeinfo():
    x, cond = C.sequence.input_variable(2), C.sequence.input_variable(1)
    data = {x: [np.array([[1, 2], [3, 4], [5, 6]], np.float32)],
            cond: [np.array([[1], [0], [1]], np.float32)]}
    for typeinfo in (None, (1, 0)):
        picked = C.sequence.gather(x, cond, typeinfo)
        np.testing.assert_array_equal(picked.eval(data)[0], [[1, 2], [5, 6]])
        back = C.sequence.scatter(C.sequence.gather(x, cond), cond, typeinfo)
        np.testing.assert_array_equal(back.eval(data)[0], [[1, 2], [0, 0], [5, 6]])
    with pytest.raises(C.ArgumentError, match=r'scatter: new_sequence_axis_typeinfo \(2, 0\)'):
        C.sequence.scatter(x, cond, (2, 0))
    with pytest.raises(C.ArgumentError, match='gather: new_sequence_axis_typeinfo must be'):
        C.sequence.gather(x, cond, (1, 0, 1))


def test_parameters_stored_under_other_keys_save_and_load(tmp_path):
    # slice's begin_index and end_index are stored as "begin" and "end", classification_error's
    # topN as "top_n": the keys model files have.
    x = C.input_variable((3, 4), name='x')
    z, t = C.input_variable(3, name='z'), C.input_variable(3, name='t')
    f = C.combine(C.slice(x, 1, begin_index=1, end_index=3),
                  C.classification_error(z, t, topN=2))
    f.save(str(tmp_path / 'm.model'))
    g = C.load_model(str(tmp_path / 'm.model'))
    data = {x: np.arange(24, dtype=np.float32).reshape(2, 3, 4),
            z: np.array([[1, 3, 2], [3, 2, 1]], np.float32),
            t: np.array([[0, 1, 0], [0, 0, 1]], np.float32)}
    for h in (f, g):
        args = {a: data[next(v for v in data if v.name == a.name)] for a in h.arguments}
        out = [np.asarray(o) for o in h.eval(args).values()]
        assert any(o.shape == (2, 3, 2) and (o == data[x][:, :, 1:3]).all() for o in out)
        assert any(o.shape == (2, 1) and (o.ravel() == [0, 1]).all() for o in out)
    with pytest.raises(C.ArgumentError, match='classification_error: topN must be at least 1'):
        C.classification_error(z, t, topN=0)


@pytest.mark.parametrize('op', ['past_value', 'future_value', 'delay'])
def test_initial_state_none_is_a_zero_constant(op):
    x = C.sequence.input_variable(2)
    f = getattr(C.sequence, op)(x)
    delayed = f.root_function
    assert len(delayed.inputs) == 2 and delayed.inputs[1].is_constant
    assert np.asarray(delayed.inputs[1].value).ravel().tolist() == [0]
    data = [np.array([[1, 2], [3, 4], [5, 6]], np.float32)]
    past = op != 'future_value'
    expected = [[0, 0], [1, 2], [3, 4]] if past else [[3, 4], [5, 6], [0, 0]]
    np.testing.assert_array_equal(f.eval({x: data})[0], expected)
    given = getattr(C.sequence, op)(x, initial_state=7, time_step=2)
    expected = [[7, 7], [7, 7], [1, 2]] if past else [[5, 6], [7, 7], [7, 7]]
    np.testing.assert_array_equal(given.eval({x: data})[0], expected)


def test_log_softmax_none_is_the_last_static_axis():
    x = np.array([[1, 2, 3], [0, 0, 1]], np.float32)  # a constant: no batch axis
    np.testing.assert_allclose(_eval(C.log_softmax(x)), x - _log_sum_exp(x, 1, keepdims=True),
                               rtol=1e-6)
    np.testing.assert_allclose(_eval(C.log_softmax(x, axis=0)),
                               x - _log_sum_exp(x, 0, keepdims=True), rtol=1e-6)


def test_sequence_unpack_gives_the_data_and_its_mask():
    x = C.sequence.input_variable(2)
    data = [np.array([[1, 2], [3, 4]], np.float32), np.array([[5, 6]], np.float32)]
    f = C.sequence.unpack(x, padding_value=-1)
    assert len(f.outputs) == 2
    out = f.eval({x: data})
    values = [np.asarray(v) for v in out.values()]
    padded = next(v for v in values if v.ndim == 3)
    mask = next(v for v in values if v.ndim == 2)
    np.testing.assert_array_equal(padded, [[[1, 2], [3, 4]], [[5, 6], [-1, -1]]])
    np.testing.assert_array_equal(mask, [[1, 1], [1, 0]])
    alone = C.sequence.unpack(x, 0, no_mask_output=True)
    assert len(alone.outputs) == 1
