"""CNTK's cntk.internal sanitize helpers: the conversions CNTK's own Python applies to user
arguments, which scripts and extensions also call. CNTK's core reverses axes (its C++ order);
Loom's core keeps Python's order, so the axis, shape and permutation helpers check and normalize
but do not reverse."""
import collections.abc
import numbers

import numpy as np

from loom._loom.ops.functions import Function
from loom._loom.ops import combine, constant
from loom._loom.variables import Variable
from loom._loom.axis import Axis
from loom._loom.core import NDArrayView, Value

_FLOAT32 = ('float', 'float32')
_FLOAT64 = ('double', 'float64')


def sanitize_precision(precision):
    """'float'/'float32'/np.float32 -> np.float32; 'double'/'float64'/np.float64 ->
    np.float64; ValueError for anything else (Loom computes in these two)."""
    if precision in (*_FLOAT32, np.float32):
        return np.float32
    if precision in (*_FLOAT64, np.float64):
        return np.float64
    raise ValueError(f'precision value: "{precision}" is not supported (Loom computes in '
                     'float32 or float64)')


def sanitize_dtype_numpy(dtype):
    """A numpy element type for Loom's core: ints and float32 -> np.float32, float and
    float64 -> np.float64."""
    if isinstance(dtype, str):
        return sanitize_precision(dtype)
    if dtype is int or dtype is np.float32 or (hasattr(dtype, 'kind') and dtype.kind in 'iu'):
        return np.float32
    if dtype is float or dtype is np.float64:
        return np.float64
    if isinstance(dtype, np.dtype) and dtype in (np.float32, np.float64):
        return dtype.type
    raise ValueError(f'data type "{dtype}" is not supported (Loom computes in float32 or '
                     'float64)')


def sanitize_dtype_cntk(dtype):
    """The element type as Loom's core takes it (a numpy type); None stays None (unknown)."""
    return None if dtype is None else sanitize_dtype_numpy(dtype)


def sanitize_shape(shape):
    """A shape as a tuple: a number n is (n,)."""
    if np.isscalar(shape):
        return (shape,)
    return tuple(shape)


def sanitize_2d_number(x):
    """A number n as (n, n), or a pair of numbers as it is."""
    if isinstance(x, numbers.Number):
        return (x, x)
    if (isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], numbers.Number)
            and isinstance(x[1], numbers.Number)):
        return x
    raise ValueError('Input argument must be a number or a tuple of two numbers.')


def sanitize_range(x):
    """sanitize_2d_number, checked to be (low, high) with low <= high."""
    x = sanitize_2d_number(x)
    if x[0] <= x[1]:
        return x
    raise ValueError('Input argument must be a number or a tuple of two numbers such as the '
                     'first number is smaller than or equal to the second number.')


def sanitize_dynamic_axes(axes):
    """A tuple of Axis objects from one Axis or a list of them."""
    if type(axes) not in (list, tuple):
        axes = [axes]
    for ax in axes:
        if not isinstance(ax, Axis):
            raise TypeError(f'type Axis expected, got {type(ax)} instead')
    return tuple(axes)


def sanitize_permutation(perm):
    """A permutation of range(n) with negative entries counted from the end; ValueError for
    entries out of range or repeated."""
    n = len(perm)
    if not all(-n <= i < n for i in perm):
        raise ValueError('invalid permutation element: elements must be from {-len(perm), ..., '
                         'len(perm)-1}')
    positive = [i if i >= 0 else n + i for i in perm]
    if n != len(set(positive)):
        raise ValueError('duplicate item in permutation')
    return positive


def sanitize_axis(axis):
    """None -> Axis.all_static_axes(); an int -> that static Axis; an Axis as it is."""
    if axis is None:
        return Axis.all_static_axes()
    if isinstance(axis, numbers.Integral):
        return Axis(int(axis))
    return axis


def sanitize_axis_list(axes):
    if type(axes) not in (list, tuple):
        axes = [axes]
    return [sanitize_axis(ax) for ax in axes]


def sanitize_multi_axis_reduction_list(axes):
    """sanitize_axis_list, refusing sequence axes (a reduction over several axes cannot take
    one)."""
    if type(axes) not in (list, tuple):
        axes = [axes]
    for ax in axes:
        if isinstance(ax, Axis) and ax.is_sequence_axis:
            raise ValueError('Reduction operation over multiple axes can not contain sequence '
                             f'axis: {ax}')
    return [sanitize_axis(ax) for ax in axes]


def sanitize_pooling_args(pooling_window_shape, strides, auto_padding):
    return sanitize_shape(pooling_window_shape), sanitize_shape(strides), list(auto_padding)


def sanitize_convolution_args(strides, sharing, auto_padding):
    return sanitize_shape(strides), list(sharing), list(auto_padding)


def sanitize_Function_attributes(attributes):
    """A Function's attributes as Python sees them (Loom stores them in Python's order)."""
    return attributes


def sanitize_random_args(shape, dtype):
    """(shape tuple, element type) for the random ops; dtype None is float32, unless
    default_options says otherwise."""
    from loom.default_options import get_default_override
    dtype = get_default_override(None, dtype=dtype)
    return sanitize_shape(shape), sanitize_dtype_cntk(np.float32 if dtype is None else dtype)


def sanitize_input(arg, fallback_dtype=np.float32, reshape=None):
    """Variables and Functions as they are; numbers, lists and arrays as a Constant of
    fallback_dtype (reshaped when reshape is given)."""
    if isinstance(arg, (Variable, Function)):
        return arg
    if isinstance(arg, list) and not arg:
        raise ValueError('input is empty')
    if not isinstance(arg, np.ndarray) or arg.dtype != fallback_dtype:
        arg = np.asarray(arg, dtype=fallback_dtype)
    if reshape:
        arg = np.reshape(arg, reshape)
    return constant(value=arg)


def sanitize_batch(var, batch, seq_starts=None, device=None):
    """The Value for var from its data (a Value as it is)."""
    if isinstance(batch, Value):
        if seq_starts is not None:
            raise ValueError('for directly passed Value objects sequence starts cannot be used '
                             'yet.')
        return batch
    if seq_starts and len(var.dynamic_axes) <= 1:
        raise ValueError('you specified sequence begin markers, but your input does not '
                         'contain a sequence axis.')
    return Value.create(var, batch, seq_starts, device)


def sanitize_value(shape, value, dtype, device):
    """An NDArrayView from value (zeros of shape when value is None), of dtype."""
    if value is None:
        if shape is None:
            raise ValueError('you need to specify at least shape or value')
        return NDArrayView(sanitize_shape(shape), sanitize_dtype_numpy(dtype), device)
    dtype = sanitize_dtype_numpy(dtype)
    if np.isscalar(value) and shape:
        value = np.full(shape, value, dtype=dtype)
    return NDArrayView.from_dense(np.asarray(value, dtype=dtype), device)


def sanitize_var_map(op_arguments, arguments, precision=None, device=None,
                     extract_values_from_minibatch_data=True):
    """{Variable: Value} from eval/train arguments: a dict keyed by Variables or their names,
    data for the only argument, or (arguments, seq_starts)."""
    from loom.io import MinibatchData
    seq_starts = None
    if isinstance(arguments, tuple):
        arguments, seq_starts = arguments
    if arguments is None or isinstance(arguments, (dict, list)) and len(arguments) == 0:
        if len(op_arguments) > 0:
            raise ValueError(f'function expects {len(op_arguments)} arguments')
        return {}
    if not isinstance(arguments, dict):
        if len(op_arguments) != 1:
            raise ValueError(f'non-dict argument ({type(arguments).__name__}) is not supported '
                             'for nodes with more than one input')
        arguments = {op_arguments[0]: arguments}
    names = collections.Counter(v.name for v in op_arguments)
    by_name = {v.name: v for v in op_arguments}
    if precision is not None:
        sanitize_precision(precision)
    var_map = {}
    for var, batch in arguments.items():
        if isinstance(var, str):
            if names[var] == 0:
                raise ValueError(f'variable with name "{var}" does not exist in the network. '
                                 f'Available variable names: {", ".join(by_name)}')
            if names[var] > 1:
                raise ValueError(f'node name "{var}" is not unique')
            var = by_name[var]
        if isinstance(batch, MinibatchData) and extract_values_from_minibatch_data:
            batch = batch.data
        if not isinstance(batch, (MinibatchData, Value)):
            batch = sanitize_batch(var, batch, seq_starts, device)
        var_map[var] = batch
    return var_map


def sanitize_variable_value_dict(var_value_dict):
    """The only value of a one-entry dict; the dict otherwise."""
    if len(var_value_dict) > 1:
        return var_value_dict
    return list(var_value_dict.values())[0]


def sanitize_function(arg):
    """A Function from a Function or a Variable (combine([v]))."""
    if isinstance(arg, Variable) and not isinstance(arg, Function):
        arg = combine([arg])
    if not isinstance(arg, Function):
        raise TypeError(f'Object of type {type(arg)} cannot be cast to Variable')
    return arg


def sanitize_variable_or_function(arg):
    if isinstance(arg, (Variable, Function)):
        return arg
    raise TypeError('expected an instance of Variable or single-output Function, but got '
                    f"'{type(arg)}' instead")


def sanitize_variables_or_functions(arg):
    if isinstance(arg, collections.abc.Iterable) and not isinstance(arg, (Variable, Function)):
        try:
            return [sanitize_variable_or_function(o) for o in arg]
        except TypeError:
            raise TypeError('expected list of Variables or single-output Functions, but got '
                            f'[{", ".join(str(type(o)) for o in arg)}] instead') from None
    return [sanitize_variable_or_function(arg)]


__all__ = [n for n in dir() if n.startswith('sanitize_')]
