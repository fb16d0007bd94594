"""Ops: functions that build graphs (CNTK's cntk.ops). Numbers and numpy arrays may stand for
any operand; they become constants of the other operand's dtype."""
import warnings

from loom import _loom
from loom._loom.io import INFINITELY_REPEAT  # noqa: F401 (CNTK's cntk.ops has it too)
from loom._loom.ops import constant, input_variable, parameter, placeholder
from loom._loom.ops import SentinelValueForAutoSelectRandomSeed  # noqa: F401 (CNTK's)
from loom.ops import functions, sequence  # noqa: F401
from loom.ops._table import associative_multi_arg  # noqa: F401
from loom.ops._table import op_functions as _op_functions
from loom.ops.functions import (BlockFunction, CloneMethod, Function, ModelFormat,  # noqa: F401
                                load_model, native_user_function, output_variable,
                                register_native_user_function)

# The op table's functions (plus, elu, pow, ...), made from the C++ table at import. Some have
# the names of Python built-ins (abs, pow, round), as in CNTK's cntk.ops; they replace the
# built-ins only in loom.ops and loom (`from loom.ops import *`), which call none of them.
globals().update(_op_functions('ops'))

# The C++ ops' defaults, which the keyword arguments take.
_CONV = _loom.ops.ConvolutionOptions()
_CONV_T = _loom.ops.ConvolutionTransposeOptions()

# pooling()'s and unpooling()'s types (CNTK's values).
MAX_POOLING = 0
AVG_POOLING = 1
MAX_UNPOOLING = 0

# times()'s infer_input_rank_to_map (CNTK's values).
TIMES_NO_INFERRED_INPUT_RANK = -1
TIMES_REDUCE_SEQUENCE_AXIS_WITHOUT_INFERRED_INPUT_RANK = -2

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
    return _loom.ops.combine(_operands(operands), name)


def as_composite(root_function, name=''):
    """A composite Function of root_function's outputs and the graph below them, named name
    (CNTK's: a primitive Function made a composite)."""
    return _loom.ops.combine(root_function.outputs, name)


def as_block(composite, block_arguments_map, block_op_name, block_instance_name=''):
    """CNTK's as_block: composite (a Function of placeholders) applied to the variables that
    block_arguments_map ([(placeholder, variable), ...]) gives for its placeholders, seen as one
    function of op block_op_name (is_block; block_root and block_arguments_mapping give the
    composite back; graph walks enter it only at depth > 0)."""
    return _loom.ops.as_block(composite, block_arguments_map, block_op_name, block_instance_name)


def custom_proxy_op(custom_op, output_shape, output_data_type, *operands, **kw_name):
    """A stand-in for the op custom_op, which only an ONNX consumer computes: a Function of the
    declared output_shape and output_data_type over the operands (varargs or a list; a Function
    with several outputs gives them all). Evaluating it is an error, as in CNTK; the ONNX
    exporter writes it as a custom_op node."""
    name = kw_name.pop('name', '')
    if kw_name:
        raise TypeError(f'custom_proxy_op() got an unexpected keyword argument '
                        f'{next(iter(kw_name))!r}')
    unfolded = []
    for o in _operands(operands):
        outputs = getattr(o, 'outputs', None)
        unfolded += list(outputs) if outputs is not None and len(outputs) > 1 else [o]
    return _loom.ops._apply_op('CustomProxyOp', unfolded,
                               {'custom_op': custom_op, 'output_shape': output_shape,
                            'output_data_type': output_data_type}, name)


def _per_axis(value, kind=int):
    """A per-axis option (strides, auto_padding, sharing, dilation, a window) as a list: one
    value for every axis, or one per axis (CNTK's tuples; a list or tuple of one value
    broadcasts)."""
    if isinstance(value, (list, tuple)):
        return [kind(v) for v in value]
    return [kind(value)]


def convolution(convolution_map, operand, strides=(1,), sharing=[True],  # noqa: B006 (CNTK's)
                auto_padding=[True], sequential=False, dilation=(1,),
                reduction_rank=_CONV.reduction_rank, groups=_CONV.groups,
                max_temp_mem_size_in_samples=0, name=''):
    """The convolution of operand (C, spatial...) with convolution_map (O, C / groups,
    kernel...): (O, out...). strides, sharing (only True), auto_padding (centred, zero padded,
    ceil(input / stride) outputs) and dilation take one value for every spatial axis, one per
    spatial axis, or one more in front for the channel axis. reduction_rank 0: operand has no
    channel axis. sequential=True: operand is a sequence and convolution_map (O, C / groups, kT,
    kernel...) convolves along its steps too (the options' first spatial axis), giving sequences
    on a new sequence axis, each as long as its steps convolve to. max_temp_mem_size_in_samples
    is accepted and not used."""
    return _loom.ops._convolution(convolution_map, operand, _per_axis(strides),
                                  _per_axis(sharing, bool), _per_axis(auto_padding, bool),
                                  bool(sequential), _per_axis(dilation), reduction_rank, groups,
                                  name)


def convolution_transpose(convolution_map, operand, strides=(1,),
                          sharing=[True], auto_padding=[True],  # noqa: B006 (CNTK's)
                          output_shape=None, dilation=(1,), reduction_rank=_CONV_T.reduction_rank,
                          max_temp_mem_size_in_samples=0, name=''):
    """The transposed convolution of operand (I, spatial...) with convolution_map (I, O,
    kernel...): (O, out...), the shape a convolution with the same map takes back to operand's.
    output_shape: the spatial extents (or (O, extents...)) where several would do; None: the
    smallest. The options are convolution()'s."""
    return _loom.ops._convolution_transpose(
        convolution_map, operand, _per_axis(strides), _per_axis(sharing, bool),
        _per_axis(auto_padding, bool), None if output_shape is None else _per_axis(output_shape),
        _per_axis(dilation), reduction_rank, name)


def pooling(operand, pooling_type, pooling_window_shape, strides=(1,),
            auto_padding=[False], ceil_out_dim=False, include_pad=False,  # noqa: B006 (CNTK's)
            name=''):
    """MAX_POOLING or AVG_POOLING of the trailing axes of operand (C..., spatial...) in windows
    of pooling_window_shape, each channel on its own. strides and auto_padding: one value or
    one per window axis. Average pooling divides by the window's elements inside the input
    unless include_pad; ceil_out_dim (without auto_padding) adds the window that overhangs the
    input's end."""
    return _loom.ops._pooling(operand, pooling_type, _per_axis(pooling_window_shape),
                              _per_axis(strides), _per_axis(auto_padding, bool), ceil_out_dim,
                              include_pad, name)


def unpooling(operand, pooling_input, unpooling_type, unpooling_window_shape, strides=(1,),
              auto_padding=[False], name=''):  # noqa: B006 (CNTK's)
    """The inverse of max pooling pooling_input (MAX_UNPOOLING only): operand has the pooled
    shape; the result, pooling_input's shape, is 0 but where the pooling with these options
    finds its maxima, which take operand's values."""
    return _loom.ops._unpooling(operand, pooling_input, unpooling_type,
                                _per_axis(unpooling_window_shape), _per_axis(strides),
                                _per_axis(auto_padding, bool), name)


def batch_normalization(operand, scale, bias, running_mean, running_inv_std, spatial,
                        normalization_time_constant=_loom.ops.kBatchNormalizationTimeConstant,
                        blend_time_constant=_loom.ops.kBatchNormalizationBlendTimeConstant,
                        epsilon=_loom.ops.kBatchNormalizationEpsilon, use_cudnn_engine=False,
                        disable_regularization=False, name='', running_count=None):
    """Batch normalization of operand (which has a batch axis) by the minibatch's statistics
    in training (also updating running_mean, running_inv_std, which holds the variance, and
    running_count, all constants) and by the running ones in inference; spatial: one statistic
    per channel (the first axis). running_count None: a constant 0 of operand's dtype, with
    CNTK's warning.
    use_cudnn_engine and disable_regularization are accepted and not used."""
    if running_count is None:
        running_count = 0
        warnings.warn("batch_normalization requires an additional 'running_count' parameter, "
                      "which can be instantiated as 'constant(0)'", Warning, stacklevel=2)
    return _loom.ops._batch_normalization(operand, scale, bias, running_mean, running_inv_std,
                                          running_count, spatial, normalization_time_constant,
                                          blend_time_constant, epsilon, name)
