"""Ops: functions that build graphs (CNTK's cntk.ops). Numbers and numpy arrays may stand for
any operand; they become constants of the other operand's dtype."""
from loom import _loom
from loom._loom import (assign, binary_cross_entropy, classification_error, constant,
                        cross_entropy_with_softmax, depth_to_space, dropout, eye_like,
                        input_variable, log_softmax, parameter, placeholder, slice, softmax,
                        space_to_depth, splice, squared_error, times, times_transpose)
from loom.ops import functions, sequence  # noqa: F401
from loom.ops._table import associative_multi_arg  # noqa: F401
from loom.ops._table import op_functions as _op_functions
from loom.ops.functions import Function, load_model  # noqa: F401
from loom.random import _num_samples, _seed

# The op table's functions (plus, elu, pow, ...), made from the C++ table at import. Some have
# the names of Python built-ins (abs, pow, round), as in CNTK's cntk.ops; they replace the
# built-ins only in loom.ops and loom (`from loom.ops import *`), which call none of them.
globals().update(_op_functions('ops'))

# pad's modes (CNTK's values).
CONSTANT_PAD = 0
REFLECT_PAD = 1
SYMMETRIC_PAD = 2


def _operands(operands):
    """CNTK's (*operands): the operands as arguments, or one list or tuple of them."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        return list(operands[0])
    return list(operands)


def combine(*operands, name=''):
    """A Function with all outputs of the operands (CNTK's cntk.combine: varargs or a list)."""
    return _loom.combine(_operands(operands), name)


def sum(*operands, name=''):  # noqa: A001 (CNTK's name)
    """The elementwise sum of the operands, broadcasting (varargs or a list)."""
    return _loom._sum(_operands(operands), name)


def mean(*operands, name=''):
    """The elementwise mean of the operands, broadcasting (varargs or a list)."""
    return _loom._mean(_operands(operands), name)


def top_k(x, k, axis=-1, name=''):
    """The k largest values of x along axis in decreasing order (outputs[0]) and their positions
    along axis (outputs[1]); ties go to the lower position."""
    return _loom._top_k(x, k, axis, name)


def random_sample(weights, num_samples, allow_duplicates, seed=None, name=''):
    """num_samples classes drawn in proportion to weights (a vector of weights >= 0 without
    dynamic axes; numbers and arrays become a float32 constant), with or without duplicates:
    (num_samples, len(weights)) one-hot rows, no dynamic axis, drawn anew at every evaluation.
    Without duplicates num_samples must be below len(weights). seed: None (CNTK's auto_select)
    or an int, as loom.random's."""
    return _loom._random_sample(weights, _num_samples('random_sample', num_samples),
                                allow_duplicates, _seed('random_sample', seed), name)


def random_sample_inclusion_frequency(weights, num_samples, allow_duplicates, seed=None,
                                      name=''):
    """The expected number of times each class is in random_sample()'s draw of num_samples:
    num_samples * weights / sum(weights) with duplicates; without, CNTK's estimate
    1 - (1 - p)^T, p = weights / sum(weights) and T the mean number of draws 10 trial samplings
    took (a rough estimate for few samples). The arguments are random_sample()'s."""
    function = 'random_sample_inclusion_frequency'
    return _loom._random_sample_inclusion_frequency(
        weights, _num_samples(function, num_samples), allow_duplicates, _seed(function, seed),
        name)


def crop_automatic(node_input, node_referent, name=''):
    """node_input cropped to node_referent's height and width (the two trailing axes) at the
    offsets that align them, computed from the ops between the two and their common ancestor
    (convolutions and poolings by stride and window centre, elementwise ops as the identity)."""
    return _loom._crop_automatic(node_input, node_referent, name)


def crop_automatic_with_ancestors(node_input, node_referent, ancestor_input, ancestor_referent,
                                  name=''):
    """crop_automatic() where node_input and node_referent descend from different, aligned
    nodes: ancestor_input (above node_input) and ancestor_referent (above node_referent) count as
    one."""
    return _loom._crop_automatic_with_ancestors(node_input, node_referent, ancestor_input,
                                                ancestor_referent, name)


def per_dim_mean_variance_normalize(operand, mean, inv_stddev, name=''):
    """(operand - mean) * inv_stddev, elementwise with broadcasting (mean and inv_stddev:
    variables, numbers or arrays, made constants of operand's dtype)."""
    return _loom._per_dim_mean_variance_normalize(operand, mean, inv_stddev, name)


def image_scaler(x, scalar, biases, name=''):
    """x [channels, height, width] * scalar + biases[c] on channel c (one bias per channel)."""
    return _loom._image_scaler(x, float(scalar), [float(b) for b in biases], name)
