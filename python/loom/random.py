"""Random tensors, drawn anew at every evaluation (CNTK's cntk.random).

Each op owns its generator: seed=None (CNTK's auto_select) takes the next one of the global
sequence (cntk_py.set_fixed_random_seed), an int >= 0 fixes it, so the same seed gives the
same values. The generator's state is saved with the model and in checkpoints: a loaded model
continues the values where the saved one stopped. The ``_like`` forms have x's shape, dtype and
dynamic axes (batch, sequences) and give x a zero gradient."""
import numbers

import numpy as np

from loom import _loom
from loom._loom import ArgumentError


def _seed(function, seed):
    """seed as the C++ builders take it: None (auto_select) or an int in [0, 2**64)."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) \
            or not 0 <= seed < 2 ** 64:
        raise ArgumentError(f'{function}: seed must be None (auto_select) or an int >= 0, '
                            f'not {seed!r}')
    return int(seed)


def _num_samples(function, num_samples):
    """random_sample's num_samples as an int >= 0 (the C++ builder refuses 0 by name)."""
    if isinstance(num_samples, (bool, np.bool_)) or not isinstance(num_samples, numbers.Integral) \
            or num_samples < 0:
        raise ArgumentError(f'{function}: num_samples must be an int >= 1, not {num_samples!r}')
    return int(num_samples)


def _shape(function, shape):
    """shape as a tuple of dimensions >= 0 (CNTK takes an int for a vector)."""
    dims = (shape,) if isinstance(shape, numbers.Integral) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        dims = None
    if dims is None or any(isinstance(d, (bool, np.bool_)) or not isinstance(d, numbers.Integral)
                           or d < 0 for d in dims):
        raise ArgumentError(f'{function}: shape must be an int or a tuple of ints >= 0 (every '
                            f'dimension known), not {shape!r}')
    return tuple(int(d) for d in dims)


def uniform(shape, dtype=np.float32, low=0.0, high=1.0, seed=None, name=''):
    """A tensor of shape and dtype (np.float32 or np.float64) uniform in [low, high), drawn anew
    at every evaluation; ArgumentError unless low < high."""
    return _loom.random._uniform_random(_shape('uniform', shape), dtype, low, high,
                                        _seed('uniform', seed), name)


def normal(shape, dtype=np.float32, mean=0.0, scale=1.0, seed=None, name=''):
    """A tensor of shape and dtype, normal with mean and standard deviation scale (>= 0), drawn
    anew at every evaluation."""
    return _loom.random._normal_random(_shape('normal', shape), dtype, mean, scale,
                                       _seed('normal', seed), name)


def gumbel(shape, dtype=np.float32, loc=0.0, scale=1.0, seed=None, name=''):
    """A tensor of shape and dtype from the Gumbel distribution of location loc and scale (>= 0;
    mean loc + 0.5772 scale), drawn anew at every evaluation."""
    return _loom.random._gumbel_random(_shape('gumbel', shape), dtype, loc, scale,
                                       _seed('gumbel', seed), name)


def bernoulli(shape, dtype=np.float32, mean=0.5, seed=None, name=''):
    """A tensor of shape and dtype of 1s with probability mean (in [0, 1]) and 0s otherwise,
    drawn anew at every evaluation."""
    return _loom.random._bernoulli_random(_shape('bernoulli', shape), dtype, mean,
                                          _seed('bernoulli', seed), name)


def uniform_like(x, low=0.0, high=1.0, seed=None, name=''):
    """uniform() of x's shape, dtype and dynamic axes; ArgumentError unless low < high."""
    return _loom.random._uniform_random_like(x, low, high, _seed('uniform_like', seed), name)


def normal_like(x, mean=0.0, scale=1.0, seed=None, name=''):
    """normal() of x's shape, dtype and dynamic axes; scale >= 0."""
    return _loom.random._normal_random_like(x, mean, scale, _seed('normal_like', seed), name)


def gumbel_like(x, loc=0.0, scale=1.0, seed=None, name=''):
    """gumbel() of x's shape, dtype and dynamic axes; scale >= 0."""
    return _loom.random._gumbel_random_like(x, loc, scale, _seed('gumbel_like', seed), name)


def bernoulli_like(x, mean=0.5, seed=None, name=''):
    """bernoulli() of x's shape, dtype and dynamic axes; mean in [0, 1]."""
    return _loom.random._bernoulli_random_like(x, mean, _seed('bernoulli_like', seed), name)
