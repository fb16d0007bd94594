"""cntk.losses and cntk.metrics: CNTK's documented examples and unit-test values, numpy
references, finite-difference gradients and bad arguments, for the losses and metrics of
loom/ops/losses.cpp and python/loom/{losses,metrics}.py."""
import inspect

import numpy as np
import pytest

import loom as C
from loom import ArgumentError, ShapeError

F64 = np.float64


def _inputs(shape, n, dtype=F64, sequence=False):
    make = C.sequence.input_variable if sequence else C.input_variable
    return [make(shape, dtype=dtype, needs_gradient=True) for _ in range(n)]


def _numeric_grad(f, args, wrt, eps=1e-6):
    """Central differences of the sum of f's outputs with respect to args[wrt] (an array)."""
    base = {k: np.array(v, dtype=F64) for k, v in args.items()}
    x = base[wrt]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        up = np.sum(f.eval(base))
        x[i] = saved - eps
        down = np.sum(f.eval(base))
        x[i] = saved
        grad[i] = (up - down) / (2 * eps)
    return grad


def _check_gradients(f, args, wrt, rtol=1e-5, atol=1e-7):
    grads = f.grad(args, wrt=wrt)
    if not isinstance(grads, dict):
        grads = {wrt[0]: grads}
    for v in wrt:
        np.testing.assert_allclose(grads[v], _numeric_grad(f, args, v), rtol=rtol, atol=atol)


def _raises(error, function, call):
    with pytest.raises(error) as info:
        call()
    assert function in str(info.value), str(info.value)


# ---- where the names live and their signatures (CNTK's) -----------------------------------------

SIGNATURES = {
    'losses': {
        'cosine_distance': '(x, y, name=\'\')',
        'squared_error': "(output, target, name='')",
        'binary_cross_entropy': "(output, target, name='')",
        'cosine_distance_with_negative_samples': "(x, y, shift, num_negative_samples, name='')",
        'weighted_binary_cross_entropy': "(output, target, weight, name='')",
        'cross_entropy_with_softmax': "(output_vector, target_vector, axis=-1, name='')",
        'lambda_rank': "(output, gain, group, name='')",
        'fmeasure': '(output, target, beta=1)',
        'hierarchical_softmax_layer': '(input_var, label_index, label_dim, label_classes=None)',
        'nce_loss': ("(weights, biases, inputs, labels, noise_distribution, num_samples=32, "
                     "allow_duplicates=True, seed=18446744073709551613, name='')"),
    },
    'metrics': {
        'classification_error': "(output_vector, target_vector, axis=-1, topN=1, name='')",
        'ndcg_at_1': "(output, gain, group, name='')",
        'edit_distance_error': ("(input_a, input_b, subPen=1, delPen=1, insPen=1, "
                                "squashInputs=False, tokensToIgnore=[], name='')"),
    },
}


@pytest.mark.parametrize('module, name', [(m, n) for m, names in SIGNATURES.items()
                                          for n in names])
def test_at_cntks_paths_with_cntks_signatures(module, name):
    f = getattr(getattr(C, module), name)
    assert getattr(C, name) is f  # CNTK re-exports the losses and metrics at the top
    # Defaults print as CNTK's, up to 1 for 1.0.
    assert str(inspect.signature(f)).replace('1.0', '1') == SIGNATURES[module][name]


# ---- squared_error, binary_cross_entropy (from the op table) ----------------------------------

def test_squared_error_and_binary_cross_entropy_against_numpy():
    rng = np.random.default_rng(3)
    p, t = C.input_variable((2, 3), np.float64), C.input_variable((2, 3), np.float64)
    vp, vt = rng.uniform(0.1, 0.9, (4, 2, 3)), rng.uniform(0, 1, (4, 2, 3))
    np.testing.assert_allclose(C.squared_error(p, t).eval({p: vp, t: vt}).ravel(),
                               ((vp - vt) ** 2).sum(axis=(1, 2)), rtol=1e-13)
    bce = -(vt * np.log(vp) + (1 - vt) * np.log(1 - vp)).sum(axis=(1, 2))
    np.testing.assert_allclose(C.binary_cross_entropy(p, t).eval({p: vp, t: vt}).ravel(), bce,
                               rtol=1e-13)
    # A number or an array becomes a constant of the other operand's dtype.
    assert C.squared_error(p, np.zeros((2, 3), np.float32)).dtype == np.float64
    _check_gradients(C.squared_error(p, t), {p: vp, t: vt}, [p, t])


# ---- cosine_distance ---------------------------------------------------------------------------

def _cos(a, b):
    return np.sum(a * b, -1) / np.sqrt(np.sum(a * a, -1)) / np.sqrt(np.sum(b * b, -1))


def test_cosine_distance_docstring():
    a = np.asarray([-1, -1, -1, 1, 1, -1, 1, 1, -1, 1, 1, -1], np.float32).reshape(3, 2, 2)
    b = np.asarray([1, 1, -1, 1, 1, -1, 1, -1, -1, -1, -1, 1], np.float32).reshape(3, 2, 2)
    x = C.sequence.input_variable(shape=(2,))
    y = C.sequence.input_variable(shape=(2,))
    out = np.round(C.cosine_distance(x, y).eval({x: a, y: b}), 5)
    np.testing.assert_array_equal(out, [[-1., 1.], [1., 0.], [0., -1.]])
    assert out.dtype == np.float32


def test_cosine_distance_cntk_backward_values():
    # cntk/losses/tests/cosine_distance_test.py, test_cos_distane_backward.
    x = C.sequence.input_variable(shape=(2,), needs_gradient=True)
    y = C.sequence.input_variable(shape=(2,), needs_gradient=True)
    z = C.cosine_distance(x, y)
    a = np.float32([0.25, 0.5, 0.1, 1]).reshape(1, 2, 2)
    b = np.float32([-0.5, 1.5, -0.3, -1]).reshape(1, 2, 2)
    np.testing.assert_allclose(z.eval({x: a, y: b}), [[0.707107, -0.981665]], atol=1e-6)
    g = z.grad({x: a, y: b}, wrt=[x, y])
    np.testing.assert_allclose(np.concatenate(g[x]).reshape(-1),
                               [-1.131371, 0.565686, -0.188727, 0.018873], atol=1e-6)
    np.testing.assert_allclose(np.concatenate(g[y]).reshape(-1),
                               [0.424264, 0.141421, -0.174876, 0.052463], atol=1e-6)


def test_cosine_distance_with_a_broadcast_operand():
    # cosine_distance_test.py, test_cosine_distance: a sequence against one vector.
    a = np.arange(25.0, dtype=np.float32).reshape(5, 5)
    b = np.arange(0, 5, dtype=np.float32).reshape(1, 5)
    src = C.sequence.input_variable(shape=(5,))
    tgt = C.input_variable(shape=(5,))
    cos = C.cosine_distance(src, C.sequence.broadcast_as(tgt, src))
    np.testing.assert_allclose(cos.eval({src: [a], tgt: b}),
                               [[1., 0.914659, 0.878459, 0.86155, 0.851852]], rtol=1e-5)


def test_cosine_distance_matches_numpy_with_gradients():
    rng = np.random.default_rng(0)
    x, y = _inputs((2, 3), 2)
    a, b = rng.uniform(-1, 1, (4, 2, 3)), rng.uniform(-1, 1, (4, 2, 3))
    f = C.cosine_distance(x, y)
    np.testing.assert_allclose(f.eval({x: a, y: b}),
                               _cos(a.reshape(4, -1), b.reshape(4, -1)), rtol=1e-13)
    _check_gradients(f, {x: a, y: b}, [x, y])
    # cosine_distance(x, x): the two gradients add (test_cos_distane_backward3).
    _check_gradients(C.cosine_distance(x, x), {x: a}, [x])


def test_cosine_distance_bad_operands():
    _raises(ShapeError, 'cosine_distance',
            lambda: C.cosine_distance(C.input_variable(3), C.input_variable(4)))


# ---- cosine_distance_with_negative_samples -----------------------------------------------------

def _negatives(a, b, shift, k):
    rows = len(a)
    return np.array([[_cos(a[j], b[j if m == 0 else (j + shift + m - 1) % rows])
                      for m in range(k + 1)] for j in range(rows)])


def test_cosine_distance_with_negative_samples_docstring():
    qry = np.asarray([1., 1., 0., 0., 0., 1., 1., 0., 0., 0., 1., 1.],
                     dtype=np.float32).reshape(3, 1, 4)
    x = C.sequence.input_variable(shape=(4,))
    y = C.sequence.input_variable(shape=(4,))
    model = C.cosine_distance_with_negative_samples(x, y, shift=1, num_negative_samples=2)
    np.testing.assert_array_equal(np.round(model.eval({x: qry, y: qry}), decimals=4),
                                  [[[1., 0.5, 0.]], [[1., 0.5, 0.5]], [[1., 0., 0.5]]])


def test_cosine_distance_with_negative_samples_cntk_test():
    a = np.array([[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1],
                  [1, 0, 0, 0, 1]], dtype=np.float32)
    qry = C.sequence.input_variable(shape=(5,))
    doc = C.sequence.input_variable(shape=(5,))
    result = C.cosine_distance_with_negative_samples(qry, doc, shift=1,
                                                     num_negative_samples=2).eval({qry: [a],
                                                                                   doc: [a]})
    assert len(result) == 1 and result[0].shape == (5, 3)
    np.testing.assert_allclose(result[0], np.tile([1, 0.5, 0.], (5, 1)), atol=1e-7)


@pytest.mark.parametrize('shift, k', [(1, 2), (2, 1), (5, 3)])
def test_cosine_distance_with_negative_samples_matches_numpy_with_gradients(shift, k):
    rng = np.random.default_rng(shift)
    x, y = _inputs((3,), 2)
    a, b = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (4, 3))
    f = C.cosine_distance_with_negative_samples(x, y, shift, k)
    np.testing.assert_allclose(f.eval({x: a, y: b}), _negatives(a, b, shift, k), rtol=1e-13)
    _check_gradients(f, {x: a, y: b}, [x, y])


def test_cosine_distance_with_negative_samples_bad_arguments():
    x, y = C.input_variable(3), C.input_variable(3)
    for shift, k in [(0, 1), (1, 0)]:
        _raises(ArgumentError, 'cosine_distance_with_negative_samples',
                lambda: C.cosine_distance_with_negative_samples(x, y, shift, k))
    _raises(ShapeError, 'cosine_distance_with_negative_samples',
            lambda: C.cosine_distance_with_negative_samples(x, C.input_variable(4), 1, 1))
    with pytest.raises(TypeError):
        C.cosine_distance_with_negative_samples(x, y, 1)  # num_negative_samples is required


# ---- weighted_binary_cross_entropy -------------------------------------------------------------

def test_weighted_binary_cross_entropy_matches_numpy_with_gradients():
    rng = np.random.default_rng(1)
    p, t, w = _inputs((4,), 3)
    vp, vt, vw = rng.uniform(0.1, 0.9, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0, 2, (3, 4))
    f = C.weighted_binary_cross_entropy(p, t, w)
    expected = -np.sum(vw * np.log(vt * vp + (1 - vt) * (1 - vp)), axis=1, keepdims=True)
    np.testing.assert_allclose(f.eval({p: vp, t: vt, w: vw}), expected, rtol=1e-13)
    _check_gradients(f, {p: vp, t: vt, w: vw}, [p, t, w])
    # Unit weights on 0/1 targets: binary_cross_entropy.
    vt = (vt > 0.5).astype(F64)
    np.testing.assert_allclose(f.eval({p: vp, t: vt, w: np.ones((3, 4))}),
                               C.binary_cross_entropy(p, t).eval({p: vp, t: vt}), rtol=1e-13)


def test_weighted_binary_cross_entropy_bad_operands():
    _raises(ShapeError, 'weighted_binary_cross_entropy',
            lambda: C.weighted_binary_cross_entropy(C.input_variable(3), C.input_variable(3),
                                                    C.input_variable(2)))


# ---- cross_entropy_with_softmax and classification_error along an axis -------------------------

def test_cross_entropy_with_softmax_docstring():
    np.testing.assert_allclose(
        C.cross_entropy_with_softmax([[1., 1., 1., 50.]], [[0., 0., 0., 1.]]).eval(), [[0.]])
    np.testing.assert_allclose(
        C.cross_entropy_with_softmax([[1., 2., 3., 4.]], [[0.35, 0.15, 0.05, 0.45]]).eval(),
        [[1.84019]], rtol=1e-5)


AXIS_PAIRS = [  # cntk/losses/tests/losses_test.py, TARGET_OUT_PAIRS_WITH_AXIS
    ([[0., 0., 0., 1]], [[1., 2., 3., 4.]], -1),
    ([[0., 0., 0.5, 0.5]], [[1., 2., 3., 4.]], 1),
    ([[0., 0.4, 0.3, 0.3]], [[2., 1., 1., 4.]], 1),
    ([[0., 0., 0., 1], [0., 0., 1., 0.]], [[1., 2., 3., 4.], [1., 2., 3., 5.]], 1),
    ([[0., 0., 0., 1], [0., 1., 0., 0.]], [[1., 2., 3., 4.], [1., 7., 3., 5.]], 1),
]


@pytest.mark.parametrize('target, output, axis', AXIS_PAIRS)
def test_cross_entropy_with_softmax_along_an_axis(target, output, axis):
    o, t = np.array(output, F64), np.array(target, F64)
    z, y = _inputs(o.shape, 2)
    f = C.cross_entropy_with_softmax(z, y, axis=axis)
    shifted = o - o.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    expected = -np.sum(t * log_softmax, axis=1, keepdims=True)
    np.testing.assert_allclose(f.eval({z: o[None], y: t[None]}), expected[None], rtol=1e-13)
    # CNTK's composite log_sum_exp(z) - sum(t * z): d/dz = softmax(z) - t, d/dt = -z (CNTK's
    # expected gradients, its targets summing to 1).
    g = f.grad({z: o[None], y: t[None]}, wrt=[z, y])
    np.testing.assert_allclose(g[z][0], np.exp(log_softmax) - t, atol=1e-13)
    np.testing.assert_allclose(g[y][0], -o, atol=1e-13)
    _check_gradients(f, {z: o[None], y: t[None]}, [z, y])


def test_cross_entropy_with_softmax_along_the_first_axis():
    rng = np.random.default_rng(2)
    z, y = _inputs((3, 4), 2)
    o, t = rng.uniform(-2, 2, (2, 3, 4)), rng.uniform(0, 1, (2, 3, 4))
    f = C.cross_entropy_with_softmax(z, y, axis=0)
    lse = np.log(np.sum(np.exp(o), axis=1, keepdims=True))
    np.testing.assert_allclose(f.eval({z: o, y: t}),
                               lse - np.sum(t * o, axis=1, keepdims=True), rtol=1e-13)
    assert f.shape == (1, 4)
    _check_gradients(f, {z: o, y: t}, [z, y])


def test_cross_entropy_with_softmax_bad_axis_and_shapes():
    z, y = C.input_variable((2, 4)), C.input_variable((2, 4))
    for axis in (2, -3):
        _raises(ArgumentError, 'cross_entropy_with_softmax',
                lambda: C.cross_entropy_with_softmax(z, y, axis=axis))
    _raises(ArgumentError, 'cross_entropy_with_softmax',
            lambda: C.cross_entropy_with_softmax(z, y, axis=C.Axis.default_batch_axis()))
    _raises(TypeError, 'cross_entropy_with_softmax',
            lambda: C.cross_entropy_with_softmax(z, y, axis='1'))
    _raises(ShapeError, 'cross_entropy_with_softmax',
            lambda: C.cross_entropy_with_softmax(z, C.input_variable((2, 3)), axis=1))
    _raises(ArgumentError, 'cross_entropy_with_softmax',
            lambda: C.cross_entropy_with_softmax(C.input_variable(4), C.input_variable(4),
                                                 axis=1))


def test_classification_error_docstring():
    ce = C.classification_error
    np.testing.assert_array_equal(ce([[1., 2., 3., 4.]], [[0., 0., 0., 1.]]).eval(), [[0.]])
    np.testing.assert_array_equal(ce([[1., 2., 3., 4.]], [[0., 0., 1., 0.]]).eval(), [[1.]])
    # "Note that non-1 values are treated as 0"
    np.testing.assert_array_equal(ce([[1., 2., 3., 4.]], [[5., 0., 1., 0.]]).eval(), [[1.]])


AXIS_CLASSIFICATION = [  # cntk/metrics/tests/metrics_test.py
    ([[0., 1., 0., 0.], [0., 1., 0., 0.]], [[1., 2., 3., 4.], [1., 5., 3., 4.]], 1),
    ([[0., 1., 0., 0.], [0., 0., 1., 0.], [0., 1., 0., 0.]],
     [[1., 2., 3., 4.], [6., 2., 7., 4.], [1., 5., 3., 4.]], 1),
    ([[0., 0., 0.5, 0.5], [0., 0., 1., 0.], [0., 1., 0., 0.]],
     [[1., 2., 3., 4.], [6., 2., 7., 4.], [1., 5., 3., 4.]], 1),
]


@pytest.mark.parametrize('target, output, axis', AXIS_CLASSIFICATION)
def test_classification_error_along_an_axis(target, output, axis):
    o, t = np.array(output, F64), np.array(target, F64)
    z, y = C.input_variable(o.shape, dtype=F64), C.input_variable(o.shape, dtype=F64)
    out = C.classification_error(z, y, axis=axis).eval({z: o[None], y: t[None]})
    expected = np.mean([np.argmax(a) != np.argmax(b) for a, b in zip(o, t)])
    assert np.size(out) == 1
    np.testing.assert_allclose(np.ravel(out), [expected])


def test_classification_error_takes_topn_after_axis():
    z, y = C.input_variable(4, dtype=F64), C.input_variable(4, dtype=F64)
    o, t = np.array([[1., 3., 2., 0.]]), np.array([[0., 0., 1., 0.]])
    assert C.classification_error(z, y).eval({z: o, y: t}).ravel()[0] == 1
    assert C.classification_error(z, y, -1, 2).eval({z: o, y: t}).ravel()[0] == 0
    assert C.classification_error(z, y, topN=2).eval({z: o, y: t}).ravel()[0] == 0


def test_classification_error_bad_arguments():
    z, y = C.input_variable((2, 4)), C.input_variable((2, 4))
    _raises(ArgumentError, 'classification_error', lambda: C.classification_error(z, y, axis=5))
    _raises(ArgumentError, 'classification_error',
            lambda: C.classification_error(z, y, axis=1, topN=2))
    _raises(ArgumentError, 'classification_error',
            lambda: C.classification_error(C.input_variable(4), C.input_variable(4), topN=0))


def _along_axis_reference(o, t, axis):
    """CNTK's composites along `axis` of each sample of o and t (batch first): the cross entropy
    (the axis kept as 1) and the fraction of slices where t differs from (o == the slice's max)
    (every axis kept as 1)."""
    k = axis % (o.ndim - 1) + 1
    top = o.max(axis=k, keepdims=True)
    ce = np.log(np.sum(np.exp(o - top), axis=k, keepdims=True)) + top - np.sum(t * o, axis=k,
                                                                               keepdims=True)
    wrong = np.any(t != (o == top), axis=k)
    error = wrong.reshape(len(o), -1).mean(axis=1).reshape((len(o),) + (1,) * (o.ndim - 1))
    return ce, error


@pytest.mark.parametrize('axis', [0, 1, -1, -2])
def test_along_an_axis_over_placeholders_as_over_inputs(axis):
    # A criterion made over placeholders (@Function) knows its sample's rank only when applied:
    # it gives what the same criterion over typed inputs gives, with CNTK's output shapes.
    rng = np.random.default_rng(5)
    o = rng.uniform(-2, 2, (3, 2, 4))
    t = np.zeros_like(o)
    classes = rng.integers(0, o.shape[axis % 2 + 1], (3, 2, 4))
    np.put_along_axis(t, np.take(classes, [0], axis=axis % 2 + 1), 1, axis=axis % 2 + 1)
    t[0] = o[0] == o[0].max(axis=axis % 2, keepdims=True)  # every slice right

    @C.Function
    def criterion(z, y):
        return (C.cross_entropy_with_softmax(z, y, axis=axis),
                C.classification_error(z, y, axis=axis))

    z, y = _inputs((2, 4), 2)
    typed = C.combine([C.cross_entropy_with_softmax(z, y, axis=axis),
                       C.classification_error(z, y, axis=axis)])
    bound = criterion(z, y)
    ce, error = _along_axis_reference(o, t, axis)
    for f in (typed, bound):
        outputs = f.outputs
        assert outputs[0].shape == ce.shape[1:] and outputs[1].shape == (1, 1)
        values = f.eval({z: o, y: t})
        np.testing.assert_allclose(values[outputs[0]], ce, rtol=1e-12)
        np.testing.assert_array_equal(values[outputs[1]], error)
        _check_gradients(C.combine([outputs[0]]), {z: o, y: t}, [z, y])
    assert error.ravel()[0] == 0 and error.max() > 0


def test_along_an_axis_saves_and_loads(tmp_path):
    z, y = C.input_variable((2, 3), name='z'), C.input_variable((2, 3), name='y')
    f = C.combine([C.cross_entropy_with_softmax(z, y, axis=0),
                   C.classification_error(z, y, axis=1)])
    f.save(str(tmp_path / 'm.model'))
    g = C.load_model(str(tmp_path / 'm.model'))
    rng = np.random.default_rng(1)
    o, t = rng.uniform(-1, 1, (2, 2, 3)).astype(np.float32), np.eye(3, dtype=np.float32)[[[0, 2]]]
    t = np.concatenate([t, t])
    want = [np.asarray(v) for v in f.eval({z: o, y: t}).values()]
    got = [np.asarray(v) for v in g.eval({g.arguments[0]: o, g.arguments[1]: t}).values()]
    for w, v in zip(want, got):
        np.testing.assert_array_equal(w, v)
    assert [w.shape for w in want] == [(2, 1, 3), (2, 1, 1)]


def test_a_vector_criterion_over_placeholders_is_the_vector_op():
    # A vector sample bound later: CNTK's primitive formula, 1 - t . hardmax(z) (the first
    # largest score among equal ones).
    @C.Function
    def criterion(z, y):
        return C.cross_entropy_with_softmax(z, y), C.classification_error(z, y)

    z, y = C.input_variable(3, dtype=F64), C.input_variable(3, dtype=F64)
    f = criterion(z, y)
    o = np.array([[2., 2., 1.], [0., 1., 3.]])
    t = np.array([[1., 0., 0.], [0., 1., 0.]])
    values = f.eval({z: o, y: t})
    lse = np.log(np.sum(np.exp(o), axis=1, keepdims=True))
    np.testing.assert_allclose(values[f.outputs[0]], lse - np.sum(t * o, 1, keepdims=True),
                               rtol=1e-14)
    np.testing.assert_array_equal(values[f.outputs[1]], [[0.], [1.]])
    with pytest.raises(ShapeError, match=r'operand shapes \[3\] and \[4\] differ'):
        criterion(z, C.input_variable(4, dtype=F64))
    _raises(ArgumentError, 'classification_error',
            lambda: C.Function(lambda a, b: C.classification_error(a, b, axis=1, topN=2))(
                C.input_variable((2, 3)), C.input_variable((2, 3))))


# ---- lambda_rank and ndcg_at_1 -----------------------------------------------------------------

def _ranked(s, gain):
    """Rank of each sample by decreasing score, equal scores: smaller gain first (CNTK)."""
    order = sorted(range(len(s)), key=lambda i: (-s[i], gain[i]))
    rank = np.empty(len(s), int)
    rank[order] = np.arange(len(s))
    return rank


def _groups(group):
    starts = [0] + [i for i in range(1, len(group)) if group[i] != group[i - 1]]
    return [slice(b, e) for b, e in zip(starts, starts[1:] + [len(group)])]


def _lambda_rank_value(s, gain, group):
    total = 0.0
    groups = _groups(group)
    for g in groups:
        rank = _ranked(s[g], gain[g])
        ideal = np.sum(gain[g] / np.log(2 + np.arange(len(rank))))
        if ideal:
            total += np.sum(gain[g] / np.log(2 + rank)) / ideal
    return (1 - total / len(groups)) * 100 * len(s)


def _ndcg_at_1_value(s, gain, group):
    total = 0.0
    groups = _groups(group)
    for g in groups:
        if gain[g][0]:
            total += gain[g][np.argmin(_ranked(s[g], gain[g]))] / gain[g][0]
    return total / len(groups) * 100 * len(s)


def test_lambda_rank_docstring():
    group = C.input_variable((1,))
    score = C.input_variable((1,), needs_gradient=True)
    gain = C.input_variable((1,))
    g = np.array([1, 1, 2, 2], dtype=np.float32).reshape(4, 1)
    s = np.array([1, 2, 3, 4], dtype=np.float32).reshape(4, 1)
    n = np.array([7, 1, 3, 1], dtype=np.float32).reshape(4, 1)
    f = C.lambda_rank(score, gain, group)
    np.testing.assert_allclose(np.round(f.grad({score: s, gain: n, group: g}, wrt=[score]), 4),
                               [[-0.2121], [0.2121], [-0.1486], [0.1486]], atol=1e-7)


@pytest.mark.parametrize('grad, value, output, gain', [  # losses_test.py
    ([[-0.2121461], [0.2121461]], 58.038055419921875, [1, 2], [7, 1]),
    ([[-0.14861868], [0.14861868]], 40.65847396850586, [3, 4], [3, 1])])
def test_lambda_rank_cntk_values(grad, value, output, gain):
    score = np.array(output, np.float32).reshape(-1, 1)
    gains = np.array(gain, np.float32).reshape(-1, 1)
    g, s, n = C.input_variable((1,)), C.input_variable((1,), needs_gradient=True), \
        C.input_variable((1,))
    f = C.lambda_rank(s, n, g)
    args = {s: score, n: gains, g: np.ones_like(score)}
    # CNTK's value: one number for the minibatch, without dynamic axes.
    assert f.shape == () and not f.output.dynamic_axes
    out = f.eval(args)
    assert np.shape(out) == ()
    np.testing.assert_allclose(out, value, rtol=1e-6)
    np.testing.assert_allclose(f.grad(args, wrt=[s]), grad, rtol=1e-5)


def test_lambda_rank_matches_numpy_over_groups():
    rng = np.random.default_rng(3)
    group = np.repeat([4, 1, 7, 2], [3, 4, 1, 5]).astype(F64)
    gain = np.concatenate([np.sort(rng.integers(0, 4, n))[::-1] for n in (3, 4, 1, 5)]).astype(F64)
    s = rng.uniform(-2, 2, len(group))
    s[1] = s[0]  # a tie
    sc, gn, gr = _inputs((1,), 3)
    args = {sc: s[:, None], gn: gain[:, None], gr: group[:, None]}
    out = C.lambda_rank(sc, gn, gr).eval(args)
    np.testing.assert_allclose(np.sum(out), _lambda_rank_value(s, gain, group), rtol=1e-12)
    out = C.ndcg_at_1(sc, gn, gr).eval(args)
    np.testing.assert_allclose(np.sum(out), _ndcg_at_1_value(s, gain, group), rtol=1e-12)
    # LambdaRank's gradient moves no mass out of a group.
    grad = C.lambda_rank(sc, gn, gr).grad(args, wrt=[sc]).ravel()
    for g in _groups(group):
        assert abs(np.sum(grad[g])) < 1e-12


def test_ndcg_at_1_docstring_and_cntk_values():
    group, score, gain = C.input_variable((1,)), C.input_variable((1,)), C.input_variable((1,))
    # CNTK's docstring shapes its data (4, 1, 1), a sequence axis of one step on a non-sequence
    # input, which Loom's data conversion does not take: (4, 1) here.
    g = np.array([1, 1, 2, 2], dtype=np.float32).reshape(4, 1)
    s = np.array([2, 1, 3, 1], dtype=np.float32).reshape(4, 1)
    n = np.array([7, 1, 3, 1], dtype=np.float32).reshape(4, 1)
    f = C.ndcg_at_1(score, gain, group)
    out = f.eval({score: s, gain: n, group: g})
    assert np.shape(out) == () and out == 400.0  # CNTK: array(400.0), the minibatch's total
    for value, output, gains in [(200, [2, 1], [7, 1]), (300, [4, 2, 1], [3, 2, 1])]:
        sv = np.array(output, np.float32).reshape(-1, 1)
        out = f.eval({score: sv, gain: np.array(gains, np.float32).reshape(-1, 1),
                      group: np.ones_like(sv)})
        np.testing.assert_allclose(np.sum(out), value, rtol=1e-6)


def test_ndcg_at_1_has_no_gradient():
    group, score, gain = C.input_variable((1,)), C.input_variable((1,), needs_gradient=True), \
        C.input_variable((1,))
    f = C.ndcg_at_1(score, gain, group)
    ones = np.ones((2, 1), np.float32)
    with pytest.raises(Exception):
        f.grad({score: ones, gain: ones, group: ones}, wrt=[score])


@pytest.mark.parametrize('name', ['lambda_rank', 'ndcg_at_1'])
def test_ranking_bad_operands(name):
    f = getattr(C, name)
    _raises(ShapeError, name, lambda: f(C.input_variable(2), C.input_variable(1),
                                        C.input_variable(1)))
    _raises(ShapeError, name, lambda: f(C.input_variable(1), np.ones(1, np.float32),
                                        C.input_variable(1)))


# ---- edit_distance_error -----------------------------------------------------------------------

def test_edit_distance_error_docstring():
    i1 = C.input_variable(shape=(2,))
    i2 = C.input_variable(shape=(2,))
    arguments = {i1: np.array([[1, 3], [2, 0]], np.float32),
                 i2: np.array([[2, 0], [2, 0]], np.float32)}
    a = C.edit_distance_error(i1, i2, 0, 1, 1, True, [1])
    out = a.eval(arguments)
    assert np.shape(out) == () and out == 1.0  # CNTK: array(1.0)


@pytest.mark.parametrize('left, right, sub, dele, ins, squash, ignore, result', [
    ([[1, 2]], [[1, 2]], 0, 0, 0, False, [], 0.0),  # metrics_test.py
    ([[1, 3], [2, 0]], [[2, 0], [2, 0]], 0, 0, 0, False, [], 1.0),
    ([[1, 3], [2, 0]], [[2, 0], [2, 0]], 1, 0, 0, False, [], 2.0),
    ([[1, 3], [2, 0]], [[2, 0], [2, 0]], 0, 1, 1, False, [], 1.0),
    ([[1, 3], [2, 0]], [[2, 0], [2, 0]], 0, 1, 1, True, [1], 1.0),
])
def test_edit_distance_error_cntk_cases(left, right, sub, dele, ins, squash, ignore, result):
    i1, i2 = C.input_variable(shape=(2,)), C.input_variable(shape=(2,))
    a = C.edit_distance_error(i1, i2, sub, dele, ins, squash, ignore)
    out = a.eval({i1: np.array(left, np.float32), i2: np.array(right, np.float32)})
    assert np.allclose(np.sum(out), result)


def _levenshtein(a, b):
    d = np.arange(len(b) + 1)
    for i in range(1, len(a) + 1):
        prev, d[0] = d.copy(), i
        for j in range(1, len(b) + 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1]


def _squash_and_drop(labels, squash, ignore):
    out, last = [], None
    for i, label in enumerate(labels):
        repeat = squash and i > 0 and label == last
        last = label
        if not repeat and label not in ignore:
            out.append(label)
    return out


@pytest.mark.parametrize('squash, ignore', [(False, []), (True, []), (True, [0]), (False, [2])])
def test_edit_distance_error_on_sequences_matches_numpy(squash, ignore):
    rng = np.random.default_rng(4)
    lengths = [5, 2, 7]
    a = [rng.uniform(0, 1, (n, 3)) for n in lengths]
    b = [rng.uniform(0, 1, (n, 3)) for n in lengths]
    x, y = C.sequence.input_variable(3, dtype=F64), C.sequence.input_variable(3, dtype=F64)
    out = C.edit_distance_error(x, y, squashInputs=squash, tokensToIgnore=ignore).eval(
        {x: a, y: b})
    la = [_squash_and_drop(list(s.argmax(axis=1)), squash, ignore) for s in a]
    lb = [_squash_and_drop(list(s.argmax(axis=1)), squash, ignore) for s in b]
    errors = sum(_levenshtein(p, q) for p, q in zip(la, lb))
    reference = max(sum(len(q) for q in lb), 1)
    # CNTK's minibatch value: errors * #steps / reference, one number.
    assert np.shape(out) == ()
    np.testing.assert_allclose(out, errors * sum(lengths) / reference, rtol=1e-13)


def test_edit_distance_error_comes_from_the_table_with_cntks_defaults():
    f = C.metrics.edit_distance_error
    assert str(inspect.signature(f)) == SIGNATURES['metrics']['edit_distance_error']
    assert [type(inspect.signature(f).parameters[p].default) for p in
            ('subPen', 'delPen', 'insPen', 'tokensToIgnore')] == [int, int, int, list]
    assert any(e['python'] == 'edit_distance_error' and e['module'] == 'metrics'
               for e in C._loom.ops._op_table())
    # An int is a list of one, as every list-of-ints parameter takes it.
    i1, i2 = C.input_variable(shape=(2,)), C.input_variable(shape=(2,))
    data = {i1: np.array([[1, 3], [2, 0]], np.float32), i2: np.array([[2, 0], [2, 0]], np.float32)}
    assert f(i1, i2, 0, 1, 1, True, 1).eval(data) == f(i1, i2, 0, 1, 1, True, [1]).eval(data)


def test_edit_distance_error_bad_arguments():
    x, y = C.input_variable(3), C.input_variable(3)
    _raises(ArgumentError, 'edit_distance_error',
            lambda: C.edit_distance_error(x, y, tokensToIgnore=[-1]))
    for ignore in ([0.5], ['a'], None, [True]):
        _raises(TypeError, 'edit_distance_error',
                lambda: C.edit_distance_error(x, y, tokensToIgnore=ignore))
    _raises(ArgumentError, 'edit_distance_error', lambda: C.edit_distance_error(x, y, subPen=-1))
    _raises(ShapeError, 'edit_distance_error',
            lambda: C.edit_distance_error(x, C.input_variable(2)))


# ---- fmeasure ----------------------------------------------------------------------------------

def _fmeasure(o, t, beta, axis):
    c = np.sum(o * t, axis=axis)
    p, r = c / np.sum(o, axis=axis), c / np.sum(t, axis=axis)
    return 1 - (1 + beta ** 2) * p * r / (beta ** 2 * p + r)


def test_fmeasure_cntk_value():
    a = np.array([[[[1., 1., 1., 0., 0.], [1., 1., 1., 0., 0.], [1., 1., 1., 0., 0.],
                    [1., 0., 0., 0., 0.], [0., 0., 0., 0., 0.]]]], dtype=np.float32)
    b = np.array([[[[1., 1., 1., 0., 0.], [1., 1., 0., 0., 0.], [0., 0., 0., 1., 1.],
                    [0., 0., 0., 1., 1.], [0., 0., 0., 0., 1.]]]], dtype=np.float32)
    i, t = C.input_variable((1, 5, 5)), C.input_variable((1, 5, 5))
    score = C.fmeasure(i, t).eval({i: a, t: b})
    assert np.allclose(score, [[[[0.5]]]])


@pytest.mark.parametrize('shape, beta', [((6,), 1), ((6,), 0.5), ((2, 3), 2), ((2, 2, 3), 1)])
def test_fmeasure_matches_numpy_with_gradients(shape, beta):
    rng = np.random.default_rng(5)
    o, t = _inputs(shape, 2)
    vo, vt = rng.uniform(0.05, 1, (3,) + shape), rng.uniform(0, 1, (3,) + shape)
    f = C.fmeasure(o, t, beta)
    axis = (2, 3) if len(shape) == 3 else tuple(range(1, len(shape) + 1))
    np.testing.assert_allclose(np.ravel(f.eval({o: vo, t: vt})),
                               np.ravel(_fmeasure(vo, vt, beta, axis)), rtol=1e-12)
    _check_gradients(f, {o: vo, t: vt}, [o, t])


def test_fmeasure_bad_operands():
    _raises(ShapeError, 'fmeasure', lambda: C.fmeasure(C.input_variable(3),
                                                       C.input_variable((1, 3))))
    _raises(ArgumentError, 'fmeasure', lambda: C.fmeasure(C.input_variable(3),
                                                          C.input_variable(3), float('nan')))


# ---- hierarchical_softmax_layer ----------------------------------------------------------------

def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize('label_dim, label_classes', [(10, None), (7, 3)])
def test_hierarchical_softmax_layer_matches_numpy(label_dim, label_classes):
    rng = np.random.default_rng(6)
    x = C.input_variable(4, dtype=F64, needs_gradient=True)
    label = C.input_variable(1, dtype=F64)
    output_prob, class_probs, all_probs = C.hierarchical_softmax_layer(x, label, label_dim,
                                                                       label_classes)
    classes = label_classes or int(np.ceil(np.sqrt(label_dim)))
    n = int(np.ceil(label_dim / classes))
    params = {p.name: p.value for p in output_prob.parameters}
    assert sorted(params) == ['hsoftmax_b1', 'hsoftmax_b2s', 'hsoftmax_w1', 'hsoftmax_w2s']
    assert params['hsoftmax_w2s'].shape == (classes, 4, n)
    assert class_probs.shape == (classes,) and len(all_probs) == classes
    xv = rng.uniform(-1, 1, (5, 4))
    labels = rng.integers(0, label_dim, (5, 1)).astype(F64)
    cp = _softmax(xv @ params['hsoftmax_w1'] + params['hsoftmax_b1'])
    in_class = _softmax(np.einsum('bd,cdn->bcn', xv, params['hsoftmax_w2s']) +
                        params['hsoftmax_b2s'])
    target_class = np.floor((labels[:, 0] + 0.5) / n).astype(int)
    target_in = np.round(labels[:, 0] - target_class * n).astype(int)
    expected = in_class[np.arange(5), target_class, target_in] * cp[np.arange(5), target_class]
    np.testing.assert_allclose(np.ravel(output_prob.eval({x: xv, label: labels})), expected,
                               rtol=1e-12)
    np.testing.assert_allclose(class_probs.eval({x: xv}), cp, rtol=1e-12)
    every = np.concatenate([all_probs[i].eval({x: xv}) for i in range(classes)], axis=1)
    np.testing.assert_allclose(every, (in_class * cp[:, :, None]).reshape(5, -1), rtol=1e-12)
    np.testing.assert_allclose(every.sum(axis=1), 1, rtol=1e-12)
    _check_gradients(output_prob, {x: xv, label: labels}, [x])


def test_hierarchical_softmax_layer_bad_arguments():
    label = C.input_variable(1)
    _raises(ShapeError, 'hierarchical_softmax_layer',
            lambda: C.hierarchical_softmax_layer(C.input_variable((2, 3)), label, 10))
    _raises(ArgumentError, 'hierarchical_softmax_layer',
            lambda: C.hierarchical_softmax_layer(C.input_variable(3), label, 0))


# ---- nce_loss ----------------------------------------------------------------------------------

def _logaddexp(a, b):
    return np.logaddexp(a, b)


def _nce_setup(dtype=F64):
    rng = np.random.default_rng(7)
    classes, xdim, batch = 6, 3, 4
    x = C.input_variable(xdim, dtype=dtype, needs_gradient=True)
    y = C.input_variable(classes, dtype=dtype)
    W = C.parameter((classes, xdim), init=rng.uniform(-1, 1, (classes, xdim)), dtype=dtype)
    b = C.parameter((classes, 1), init=rng.uniform(-1, 1, (classes, 1)), dtype=dtype)
    x0 = rng.uniform(-1, 1, (batch, xdim))
    labels = np.array([2, 0, 5, 2])
    y0 = np.eye(classes)[labels]
    return x, y, W, b, x0, y0, labels


def test_nce_loss_docstring_shapes():
    # CNTK's docstring example with dense labels: its values come from CNTK's own random
    # draws and glorot init, so only the shape and finiteness carry over.
    xdim, samples, batch, classes = 10, 32, 4, 100
    x = C.input_variable(xdim)
    y = C.input_variable(classes)
    x0 = np.arange(batch * xdim, dtype=np.float32).reshape((batch, xdim)) / (batch * xdim)
    y0 = np.eye(classes, dtype=np.float32)[list(range(10, 10 * batch + 1, 10))]
    q = np.arange(classes, dtype=np.float32) + 1
    b = C.parameter((classes, 1), init=-np.log(classes))
    # CNTK's (classes, C.InferredDimension): Loom's Python has no InferredDimension yet (the C++
    # op infers it: NceLoss.InfersTheWeightsInputDimension).
    W = C.parameter((classes, xdim), init=C.initializer.glorot_uniform(seed=98052))
    loss = C.nce_loss(W, b, x, y, q, num_samples=samples, seed=98052)
    assert W.shape == (classes, xdim)
    out = loss.eval({x: x0, y: y0})
    assert out.shape == (batch, 1) and np.all(np.isfinite(out)) and np.all(out > 0)
    grads = loss.grad({x: x0, y: y0}, wrt=loss.parameters)
    assert {p.shape for p in grads} == {(classes, xdim), (classes, 1)}


def test_nce_loss_with_all_noise_on_one_class_matches_numpy_with_gradients():
    x, y, W, b, x0, y0, labels = _nce_setup()
    q = np.array([0, 0, 2, 0, 0, 0], F64)
    loss = C.nce_loss(W, b, x, y, q, num_samples=4)
    z = x0 @ W.value.T + b.value.T  # (batch, classes)
    log4 = np.log(4.0)
    zp = z[np.arange(4), labels]
    pos = np.where(labels == 2, _logaddexp(zp, log4) - zp, 0.0)
    expected = pos + 4 * _logaddexp(z[:, 2], log4) - 4 * log4
    np.testing.assert_allclose(np.ravel(loss.eval({x: x0, y: y0})), expected, rtol=1e-12)
    _check_gradients(loss, {x: x0, y: y0}, [x])


def test_nce_loss_mean_over_draws_is_the_expected_loss():
    x, y, W, b, x0, y0, labels = _nce_setup()
    w = np.arange(1, 7, dtype=F64)
    k = 3
    loss = C.nce_loss(W, b, x, y, w, num_samples=k)
    q = w / w.sum()
    lp = np.log(k * q)
    z = x0 @ W.value.T + b.value.T
    zp = z[np.arange(4), labels]
    expected = (_logaddexp(zp, lp[labels]) - zp + k * np.sum(q * _logaddexp(z, lp), axis=1) -
                np.sum(k * q * lp))
    mean = np.mean([np.ravel(loss.eval({x: x0, y: y0})) for _ in range(3000)], axis=0)
    np.testing.assert_allclose(mean, expected, rtol=0.02)


def test_nce_loss_seeds_repeat_the_sequence_of_draws():
    x, y, W, b, x0, y0, _ = _nce_setup()
    q = np.arange(1, 7, dtype=F64)

    def three(seed):
        f = C.nce_loss(W, b, x, y, q, 2, seed=seed)
        return np.array([np.ravel(f.eval({x: x0, y: y0})) for _ in range(3)])
    a = three(5)
    np.testing.assert_array_equal(a, three(5))
    # auto_select (the default) and None take the next seed of the global sequence: new draws
    for auto in (C.random.auto_select, None):
        assert not np.array_equal(three(auto), three(auto))
    assert not (np.array_equal(a[0], a[1]) and np.array_equal(a[1], a[2]))  # new draws each time
    assert any(not np.array_equal(a, three(s)) for s in (6, 7, 8))


def test_nce_loss_bad_arguments():
    x, y, W, b, _, _, _ = _nce_setup()
    q = np.ones(6)
    _raises(ShapeError, 'nce_loss', lambda: C.nce_loss(W, b, x, C.input_variable(5), q))
    _raises(ShapeError, 'nce_loss', lambda: C.nce_loss(W, b, C.input_variable(4, dtype=F64),
                                                       y, q))
    _raises(ArgumentError, 'nce_loss', lambda: C.nce_loss(W, b, x, y, q, num_samples=0))
    _raises(ArgumentError, 'nce_loss', lambda: C.nce_loss(W, b, x, y, q, 7,
                                                          allow_duplicates=False))
    _raises(ArgumentError, 'nce_loss', lambda: C.nce_loss(W, b, x, y, q, seed=-1))
