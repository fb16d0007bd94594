"""cntk.random (loom.random) and cntk.ops' random_sample, random_sample_inclusion_frequency:
CNTK's signatures, the distributions' moments, seeds, dynamic axes and the save/load stream."""
import inspect
import math
import re

import numpy as np
import pytest

import loom as C

# CNTK's parameters in order with their defaults (seed: CNTK's auto_select sentinel).
EMPTY = inspect.Parameter.empty
AUTO = 2 ** 64 - 3  # CNTK's SentinelValueForAutoSelectRandomSeed (an unsigned long, Linux's)
SIGNATURES = {
    C.ops.dropout: [('x', EMPTY), ('dropout_rate', 0.0), ('seed', AUTO), ('name', '')],
    C.random.uniform: [('shape', EMPTY), ('dtype', np.float32), ('low', 0.0), ('high', 1.0),
                       ('seed', AUTO), ('name', '')],
    C.random.normal: [('shape', EMPTY), ('dtype', np.float32), ('mean', 0.0), ('scale', 1.0),
                      ('seed', AUTO), ('name', '')],
    C.random.gumbel: [('shape', EMPTY), ('dtype', np.float32), ('loc', 0.0), ('scale', 1.0),
                      ('seed', AUTO), ('name', '')],
    C.random.bernoulli: [('shape', EMPTY), ('dtype', np.float32), ('mean', 0.5), ('seed', AUTO),
                         ('name', '')],
    C.random.uniform_like: [('x', EMPTY), ('low', 0.0), ('high', 1.0), ('seed', AUTO),
                            ('name', '')],
    C.random.normal_like: [('x', EMPTY), ('mean', 0.0), ('scale', 1.0), ('seed', AUTO),
                           ('name', '')],
    C.random.gumbel_like: [('x', EMPTY), ('loc', 0.0), ('scale', 1.0), ('seed', AUTO),
                           ('name', '')],
    C.random.bernoulli_like: [('x', EMPTY), ('mean', 0.5), ('seed', AUTO), ('name', '')],
    C.ops.random_sample: [('weights', EMPTY), ('num_samples', EMPTY),
                          ('allow_duplicates', EMPTY), ('seed', AUTO), ('name', '')],
    C.ops.random_sample_inclusion_frequency: [('weights', EMPTY), ('num_samples', EMPTY),
                                              ('allow_duplicates', EMPTY), ('seed', AUTO),
                                              ('name', '')],
}

N = 100_000


@pytest.mark.parametrize('function', list(SIGNATURES), ids=lambda f: f.__name__)
def test_signature_is_cntks(function):
    params = inspect.signature(function).parameters.values()
    assert [(p.name, p.default) for p in params] == SIGNATURES[function]


def test_names_are_at_cntks_paths():
    assert C.random.auto_select == C.ops.SentinelValueForAutoSelectRandomSeed == AUTO
    assert C.cntk_py.sentinel_value_for_auto_select_random_seed == AUTO
    assert C.random_sample is C.ops.random_sample
    assert C.random_sample_inclusion_frequency is C.ops.random_sample_inclusion_frequency
    from loom.random import bernoulli_like, uniform  # noqa: F401 (importable as in CNTK)


def _moments_ok(v, mean, variance, kurtosis):
    """The sample mean and variance within 6 standard errors of the distribution's."""
    n = v.size
    assert abs(v.mean() - mean) < 6 * math.sqrt(variance / n)
    assert abs(v.var(ddof=1) - variance) < 6 * variance * math.sqrt((kurtosis - 1) / n)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_distributions_have_their_moments(dtype):
    shape = (100, N // 100)
    u = C.random.uniform(shape, dtype, low=-1, high=3, seed=1).eval()
    assert u.shape == shape and u.dtype == dtype
    assert u.min() >= -1 and u.max() < 3
    _moments_ok(u, 1, 16 / 12, 1.8)
    _moments_ok(C.random.normal(shape, dtype, mean=-2, scale=0.5, seed=2).eval(), -2, 0.25, 3)
    g = C.random.gumbel(shape, dtype, loc=1, scale=3, seed=3).eval()
    _moments_ok(g, 1 + 0.5772156649 * 3, math.pi ** 2 / 6 * 9, 5.4)
    b = C.random.bernoulli(shape, dtype, mean=0.8, seed=4).eval()
    assert set(np.unique(b)) <= {0, 1}
    _moments_ok(b, 0.8, 0.16, (1 - 3 * 0.16) / 0.16 + 3)


def test_each_evaluation_draws_anew_and_seeds_repeat():
    f = C.random.normal((50,), seed=98052)
    first, second = f.eval(), f.eval()
    assert not np.array_equal(first, second)
    g = C.random.normal((50,), seed=98052)
    np.testing.assert_array_equal(g.eval(), first)
    np.testing.assert_array_equal(g.eval(), second)
    assert not np.array_equal(C.random.normal((50,), seed=98053).eval(), first)
    # auto_select follows set_fixed_random_seed.
    C.cntk_py.set_fixed_random_seed(5)
    a = C.random.uniform(7).eval()
    C.cntk_py.set_fixed_random_seed(5)
    np.testing.assert_array_equal(C.random.uniform(7).eval(), a)


def test_like_takes_shape_dtype_and_dynamic_axes():
    x = C.input_variable((2, 3), dtype=np.float64)
    u = C.random.uniform_like(x, low=2, high=4, seed=1)
    assert u.shape == (2, 3) and u.dtype == np.float64
    assert u.output.dynamic_axes == x.dynamic_axes
    out = u.eval({x: np.zeros((5, 2, 3))})
    assert out.shape == (5, 2, 3) and out.dtype == np.float64
    assert out.min() >= 2 and out.max() < 4
    # Ragged sequences: one (3,)-shaped draw per step of each sequence.
    s = C.sequence.input_variable(3)
    seqs = [np.zeros((4, 3), np.float32), np.zeros((1, 3), np.float32)]
    out = C.random.bernoulli_like(s, mean=1.0, seed=2).eval({s: seqs})
    assert [o.shape for o in out] == [(4, 3), (1, 3)]
    assert all((o == 1).all() for o in out)


def test_like_gives_the_operand_a_zero_gradient():
    x = C.input_variable(3, needs_gradient=True)
    f = C.reduce_sum(C.random.gumbel_like(x, seed=1))
    grad = f.grad({x: np.ones((2, 3), np.float32)}, wrt=[x])
    np.testing.assert_array_equal(grad, np.zeros((2, 3)))


def test_saved_model_continues_the_draws(tmp_path):
    f = C.random.uniform((20,), np.float64, seed=3)
    f.eval()
    f.save(str(tmp_path / 'f.model'))
    expected = [f.eval(), f.eval()]
    g = C.load_model(str(tmp_path / 'f.model'))
    np.testing.assert_array_equal(g.eval(), expected[0])
    np.testing.assert_array_equal(g.eval(), expected[1])


@pytest.mark.parametrize('call, message', [
    (lambda: C.random.uniform(3, low=1, high=1), 'uniform: low (1) must be below high (1)'),
    (lambda: C.random.normal(3, scale=-1), 'normal: scale (-1) must be >= 0'),
    (lambda: C.random.gumbel_like(C.input_variable(2), scale=-2), 'gumbel_like: scale (-2)'),
    (lambda: C.random.bernoulli(3, mean=1.5), 'bernoulli: mean (1.5)'),
    (lambda: C.random.bernoulli_like(C.input_variable(2), mean=-1), 'bernoulli_like: mean'),
    (lambda: C.random.uniform((2, -1)), 'uniform: shape [2,-1] must have every dimension known'),
    (lambda: C.random.normal(3, seed=-1), 'normal: seed must be None (auto_select) or an int'),
    (lambda: C.random.normal(3, seed=2 ** 64), 'normal: seed must be None (auto_select) or an int'),
    (lambda: C.dropout(C.input_variable(2), 0.5, seed=-2), 'dropout: seed must be None'),
    (lambda: C.random_sample([1, 2, 3], 3, False),
     'random_sample: without duplicates num_samples (3) must be below the number of classes'),
    (lambda: C.random_sample(np.ones((2, 2)), 1, True), 'random_sample: weights must be a vector'),
    (lambda: C.random_sample([1, 2], -1, True), 'random_sample: num_samples must be at least 1'),
    (lambda: C.random_sample([1, 2], 0, True), 'random_sample: num_samples must be at least 1'),
    (lambda: C.random_sample_inclusion_frequency([1, -2, 3], 1, True).eval(),
     'random_sample_inclusion_frequency: weights has a negative weight -2 at class 1'),
    (lambda: C.random_sample([0, 0, 0], 1, True).eval(), 'random_sample: weights is all zeros'),
])
def test_bad_arguments_name_the_function(call, message):
    with pytest.raises(C.ArgumentError, match=re.escape(message)):
        call()


def test_float16_is_refused():
    with pytest.raises(TypeError, match='np.float32 or np.float64'):
        C.random.uniform(3, dtype=np.float16)


def test_a_seed_is_an_int():
    with pytest.raises(TypeError, match="uniform_like: 'seed' must be an int"):
        C.random.uniform_like(C.input_variable(2), seed=1.5)
    with pytest.raises(TypeError, match="dropout: 'seed' must be an int"):
        C.dropout(C.input_variable(2), seed=True)


@pytest.mark.parametrize('auto', [None, AUTO])
def test_auto_select_leaves_the_seed_out(auto):
    # None and CNTK's sentinel both take the global sequence's next generator: the op holds no
    # seed, and set_fixed_random_seed repeats its draws.
    x = C.input_variable(50)
    for make in (lambda: C.random.normal(50, seed=auto), lambda: C.random.normal_like(x, seed=auto),
                 lambda: C.dropout(x, 0.5, seed=auto),
                 lambda: C.random_sample(np.ones(50), 3, True, seed=auto)):
        assert 'seed' not in make().attributes
    C.cntk_py.set_fixed_random_seed(11)
    a = C.random.normal(50, seed=auto).eval()
    C.cntk_py.set_fixed_random_seed(11)
    np.testing.assert_array_equal(C.random.normal(50).eval(), a)
    assert C.random.normal(50, seed=7).attributes['seed'] == 7
    assert C.dropout(x, seed=2 ** 64 - 1).attributes['seed'] == 2 ** 64 - 1


def _dropout_primitive_of(f):
    return C.logging.graph.depth_first_search(
        f, lambda n: getattr(n, 'op_name', '') == 'Dropout' and not n.is_block, depth=-1)[0]


@pytest.mark.parametrize('auto', [None, AUTO])
def test_the_dropout_layer_takes_auto_select(auto):
    # CNTK's Dropout layer defaults to the sentinel, which, as None, leaves the seed out.
    assert inspect.signature(C.layers.Dropout).parameters['seed'].default == AUTO
    x = C.input_variable(50)
    assert 'seed' not in _dropout_primitive_of(C.layers.Dropout(0.5, seed=auto)(x)).attributes
    assert _dropout_primitive_of(C.layers.Dropout(0.5, seed=3)(x)).attributes['seed'] == 3


def test_random_sample_draws_one_hot_rows_by_weight():
    w = np.array([1, 3, 0, 6], np.float32)
    f = C.random_sample(w, 4000, True, seed=7)
    y = f.eval()
    assert y.shape == (4000, 4) and y.dtype == np.float32
    assert (y.sum(axis=1) == 1).all() and set(np.unique(y)) == {0, 1}
    frequency = y.mean(axis=0)
    p = w / w.sum()
    assert (np.abs(frequency - p) <= 6 * np.sqrt(p * (1 - p) / 4000) + 1e-12).all()
    assert not np.array_equal(f.eval(), y)
    # Without duplicates: distinct classes.
    distinct = C.random_sample(np.arange(1.0, 11.0), 6, False, seed=8).eval()
    assert (distinct.sum(axis=0) <= 1).all() and distinct.sum() == 6
    # The same seed, the same draws.
    np.testing.assert_array_equal(C.random_sample(w, 4000, True, seed=7).eval(), y)


def test_inclusion_frequency_matches_cntks_docstring():
    # CNTK's example: 100 weights of 1000, then 100 of 1.
    w = np.concatenate((np.full(100, 1000.0), np.full(100, 1.0)))
    f = C.random_sample_inclusion_frequency(w, 150, True).eval()
    assert f.shape == (200,) and f.dtype == np.float32
    np.testing.assert_allclose(f[0], 1.4985015, rtol=1e-6)
    np.testing.assert_allclose(f[1], 1.4985015, rtol=1e-6)
    np.testing.assert_allclose(f[110], 0.0014985015, rtol=1e-6)
    g = C.random_sample_inclusion_frequency(w, 150, False, seed=1).eval()
    np.testing.assert_allclose(g[0], 1.0, atol=1e-6)
    # 1 - (1 - p)^T for one T >= 150 (the mean draws of CNTK's 10 trial samplings).
    p = w / w.sum()
    tries = np.log1p(-g[150].astype(np.float64)) / np.log1p(-p[150])
    assert tries >= 150
    np.testing.assert_allclose(g, -np.expm1(tries * np.log1p(-p)), rtol=1e-4, atol=1e-7)
