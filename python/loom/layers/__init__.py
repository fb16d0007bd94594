"""The layers library (CNTK's cntk.layers). Each layer has CNTK's signature; an option whose
CNTK default is ``default_override_or(X)`` takes the value of the enclosing
``with default_options(...)`` (or ``default_options_for(layer, ...)``) when not given, else X;
given explicitly, even ``activation=None``, it wins. The layers are C++ (loom._loom): these
functions resolve the options and call them. ``dtype`` (Loom's, after ``name``) is the
parameters' data type; None takes default_options' ``dtype``, else float32."""
import inspect

import numpy as np

from loom import _loom
from loom._loom import layers as _layers
from loom.default_options import (default_options, default_options_for,  # noqa: F401
                                  default_override_or, get_default_override, get_global_option,
                                  is_default_override, set_global_option)
from loom.initializer import glorot_uniform
from loom.ops import sigmoid, tanh

#: CNTK's identity: a Function whose argument ``keep`` is its output. As an activation it means
#: none.
identity = _layers.identity()

# The C++ layers' defaults, which the keyword arguments take.
_CONV = _layers.ConvolutionLayerOptions()
_CONV_T = _layers.ConvolutionTransposeLayerOptions()
_BN = _layers.BatchNormalizationOptions()
_LN = _layers.LayerNormalizationOptions()
_UNFOLD = _layers.UnfoldOptions()

__all__ = ['Activation', 'AttentionModel', 'AveragePooling', 'BatchNormalization', 'Convolution',
           'Convolution1D', 'Convolution2D', 'Convolution3D', 'ConvolutionTranspose',
           'ConvolutionTranspose1D', 'ConvolutionTranspose2D', 'ConvolutionTranspose3D', 'Delay',
           'Dense', 'Dropout', 'Embedding', 'Fold', 'For', 'ForwardDeclaration',
           'GlobalAveragePooling', 'GlobalMaxPooling', 'GRU', 'Identity', 'LSTM', 'Label',
           'LayerNormalization', 'MaxPooling', 'MaxUnpooling', 'PastValueWindow', 'RNNStep',
           'Recurrence', 'RecurrenceFrom', 'ResNetBlock', 'Sequential', 'SequentialClique',
           'SequentialConvolution', 'Stabilizer', 'UnfoldFrom', 'UntestedBranchError',
           'default_options', 'default_options_for', 'default_override_or',
           'get_default_override', 'get_global_option', 'identity', 'is_default_override',
           'set_global_option']

Identity = _layers.Identity
GlobalMaxPooling = _layers.GlobalMaxPooling
GlobalAveragePooling = _layers.GlobalAveragePooling


def _resolve(layer, **options):
    """The options of layer, each given value as is, each default_override_or resolved."""
    return {k: get_default_override(layer, **{k: v}) for k, v in options.items()}


def _activation(f):
    """An activation for the C++ layers: None for none (None or identity)."""
    return None if f is None or f is identity else f


def _dtype(dtype):
    if dtype is not None:
        return dtype
    return get_default_override(None, dtype=default_override_or(np.float32))


def Label(name):
    """x passed through an alias named name, so that the value can be found by that name."""
    return _layers.Label(name)


def MaxUnpooling(filter_shape, strides=1, pad=False, name=''):
    """(x, pooling_input) -> unpooling(x, pooling_input) with max pooling's window."""
    return _layers.MaxUnpooling(filter_shape, strides=strides, pad=pad, name=name)


def UntestedBranchError(name):
    """CNTK's guard for options it never tested: raises NotImplementedError."""
    raise NotImplementedError("Untested code branch: " + name)


def Dense(shape, activation=default_override_or(identity), init=default_override_or(glorot_uniform()),
          input_rank=None, map_rank=None, bias=default_override_or(True),
          init_bias=default_override_or(0), name='', dtype=None):
    """activation(x @ W + b); W (input axes inferred, shape), b (shape): ``.W``, ``.b``."""
    o = _resolve(Dense, activation=activation, init=init, bias=bias, init_bias=init_bias)
    return _layers.Dense(shape, activation=_activation(o['activation']), init=o['init'],
                         input_rank=input_rank, map_rank=map_rank, bias=o['bias'],
                         init_bias=o['init_bias'], dtype=_dtype(dtype), name=name)


def Embedding(shape=None, init=default_override_or(glorot_uniform()), weights=None, name='',
              dtype=None):
    """x @ E with E (input dim inferred, shape), or the fixed table weights: ``.E``."""
    if weights is not None:
        return _layers.Embedding(weights=weights, name=name)
    return _layers.Embedding(shape, init=get_default_override(Embedding, init=init),
                             dtype=_dtype(dtype), name=name)


def _convolution(layer, cxx, filter_shape, num_filters, o, dtype, name, **fixed):
    return cxx(filter_shape, num_filters=num_filters, activation=_activation(o['activation']),
               init=o['init'], pad=o['pad'], bias=o['bias'], init_bias=o['init_bias'],
               dtype=_dtype(dtype), name=name, **fixed)


def _conv_options(layer, activation, init, pad, bias, init_bias):
    return _resolve(layer, activation=activation, init=init, pad=pad, bias=bias,
                    init_bias=init_bias)


def Convolution(filter_shape, num_filters=None, sequential=False,
                activation=default_override_or(identity),
                init=default_override_or(glorot_uniform()), pad=default_override_or(False),
                strides=1, sharing=True, bias=default_override_or(True),
                init_bias=default_override_or(0), reduction_rank=_CONV.reduction_rank,
                transpose_weight=False, dilation=1, groups=_CONV.groups,
                max_temp_mem_size_in_samples=_CONV.max_temp_mem_size_in_samples,
                op_name='Convolution', name='', dtype=None):
    """Convolution over the trailing axes of [C, spatial...] (W: num_filters, C, filter_shape);
    num_filters None: no output channel axis; sequential: filter_shape[0] runs along the
    sequence."""
    if transpose_weight:
        raise NotImplementedError("Convolution: transpose_weight option currently not supported")
    o = _conv_options(Convolution, activation, init, pad, bias, init_bias)
    return _convolution(Convolution, _layers.Convolution, filter_shape, num_filters, o, dtype, name,
                        sequential=sequential, strides=strides, sharing=sharing,
                        reduction_rank=reduction_rank, dilation=dilation, groups=groups,
                        max_temp_mem_size_in_samples=max_temp_mem_size_in_samples,
                        op_name=op_name)


def SequentialConvolution(filter_shape, num_filters=None, activation=default_override_or(identity),
                          init=default_override_or(glorot_uniform()),
                          pad=default_override_or(False), strides=1, sharing=True,
                          bias=default_override_or(True), init_bias=default_override_or(0),
                          reduction_rank=_CONV.reduction_rank, transpose_weight=False, dilation=1,
                          groups=_CONV.groups,
                          max_temp_mem_size_in_samples=_CONV.max_temp_mem_size_in_samples,
                          op_name='Convolution', name='', dtype=None):
    """Convolution that also convolves along the sequence axis (filter_shape[0])."""
    if transpose_weight:
        raise NotImplementedError("Convolution: transpose_weight option currently not supported")
    o = _conv_options(SequentialConvolution, activation, init, pad, bias, init_bias)
    return _convolution(SequentialConvolution, _layers.SequentialConvolution, filter_shape,
                        num_filters, o, dtype, name, strides=strides, sharing=sharing,
                        reduction_rank=reduction_rank, dilation=dilation, groups=groups,
                        max_temp_mem_size_in_samples=max_temp_mem_size_in_samples,
                        op_name=op_name)


def Convolution1D(filter_shape, num_filters=None, activation=default_override_or(identity),
                  init=default_override_or(glorot_uniform()), pad=default_override_or(False),
                  strides=1, bias=default_override_or(True), init_bias=default_override_or(0),
                  reduction_rank=_CONV.reduction_rank, dilation=1, name='', dtype=None):
    """Convolution with a 1-axis filter_shape."""
    o = _conv_options(Convolution1D, activation, init, pad, bias, init_bias)
    return _convolution(Convolution1D, _layers.Convolution1D, filter_shape, num_filters, o, dtype,
                        name, strides=strides, reduction_rank=reduction_rank, dilation=dilation)


def _convolution_nd(layer, cxx):
    """Convolution2D or Convolution3D: CNTK's separate functions (default_options_for tells them
    apart), with one signature."""
    def build(filter_shape, num_filters=None, activation=default_override_or(identity),
              init=default_override_or(glorot_uniform()), pad=default_override_or(False),
              strides=1, bias=default_override_or(True), init_bias=default_override_or(0),
              reduction_rank=_CONV.reduction_rank, dilation=1, groups=_CONV.groups, name='',
              dtype=None):
        o = _conv_options(build, activation, init, pad, bias, init_bias)
        return _convolution(build, cxx, filter_shape, num_filters, o, dtype, name,
                            strides=strides, reduction_rank=reduction_rank, dilation=dilation,
                            groups=groups)
    build.__name__ = build.__qualname__ = layer
    build.__doc__ = 'Convolution with a %s-axis filter_shape.' % layer[-2]
    return build


Convolution2D = _convolution_nd('Convolution2D', _layers.Convolution2D)
Convolution3D = _convolution_nd('Convolution3D', _layers.Convolution3D)


def ConvolutionTranspose(filter_shape, num_filters, activation=default_override_or(identity),
                         init=default_override_or(glorot_uniform()), pad=default_override_or(False),
                         strides=1, sharing=True, bias=default_override_or(True),
                         init_bias=default_override_or(0), output_shape=None,
                         reduction_rank=_CONV_T.reduction_rank, dilation=1,
                         max_temp_mem_size_in_samples=_CONV_T.max_temp_mem_size_in_samples, name='',
                         dtype=None):
    """Transposed convolution, W (C, num_filters, filter_shape); output_shape fixes the spatial
    extents."""
    o = _conv_options(ConvolutionTranspose, activation, init, pad, bias, init_bias)
    output_shape = get_default_override(ConvolutionTranspose, output_shape=output_shape)
    return _convolution(ConvolutionTranspose, _layers.ConvolutionTranspose, filter_shape,
                        num_filters, o, dtype, name, strides=strides, sharing=sharing,
                        output_shape=output_shape, reduction_rank=reduction_rank,
                        dilation=dilation,
                        max_temp_mem_size_in_samples=max_temp_mem_size_in_samples)


def _transpose_nd(layer, cxx):
    def build(filter_shape, num_filters, activation=default_override_or(identity),
              init=default_override_or(glorot_uniform()), pad=default_override_or(False),
              strides=1, bias=default_override_or(True), init_bias=default_override_or(0),
              output_shape=None, reduction_rank=_CONV_T.reduction_rank, dilation=1, name='',
              dtype=None):
        o = _conv_options(build, activation, init, pad, bias, init_bias)
        output_shape = get_default_override(build, output_shape=output_shape)
        return _convolution(build, cxx, filter_shape, num_filters, o, dtype, name,
                            strides=strides, output_shape=output_shape,
                            reduction_rank=reduction_rank, dilation=dilation)
    build.__name__ = build.__qualname__ = layer
    build.__doc__ = 'ConvolutionTranspose with a %s-axis filter_shape.' % layer[-2]
    return build


ConvolutionTranspose1D = _transpose_nd('ConvolutionTranspose1D', _layers.ConvolutionTranspose1D)
ConvolutionTranspose2D = _transpose_nd('ConvolutionTranspose2D', _layers.ConvolutionTranspose2D)
ConvolutionTranspose3D = _transpose_nd('ConvolutionTranspose3D', _layers.ConvolutionTranspose3D)


def MaxPooling(filter_shape, strides=1, pad=default_override_or(False), name=''):
    """Max pooling over the spatial axes."""
    return _layers.MaxPooling(filter_shape, strides=strides,
                              pad=get_default_override(MaxPooling, pad=pad), name=name)


def AveragePooling(filter_shape, strides=1, pad=default_override_or(False), name=''):
    """Average pooling over the spatial axes."""
    return _layers.AveragePooling(filter_shape, strides=strides,
                                  pad=get_default_override(AveragePooling, pad=pad), name=name)


def Dropout(dropout_rate=None, keep_prob=None,
            seed=_loom.ops.SentinelValueForAutoSelectRandomSeed, name=''):
    """Dropout (training only); give dropout_rate or keep_prob. seed: CNTK's auto_select (the
    default) or None takes the next seed of the global sequence; an int fixes the draws."""
    if seed == _loom.ops.SentinelValueForAutoSelectRandomSeed:
        seed = None
    return _layers.Dropout(dropout_rate=dropout_rate, keep_prob=keep_prob, seed=seed, name=name)


def Activation(activation=default_override_or(identity), name=''):
    """activation as a layer (a block "Activation")."""
    activation = get_default_override(Activation, activation=activation)
    return _layers.Activation(_activation(activation), name=name)


def BatchNormalization(map_rank=default_override_or(None), init_scale=_BN.init_scale,
                       normalization_time_constant=default_override_or(
                           _BN.normalization_time_constant),
                       blend_time_constant=_BN.blend_time_constant,
                       epsilon=default_override_or(_BN.epsilon),
                       use_cntk_engine=default_override_or(False),
                       disable_regularization=default_override_or(False), name='', dtype=None):
    """Batch normalization: ``.scale``, ``.bias``, running aggregate_mean, aggregate_variance,
    aggregate_count. use_cntk_engine: one engine here, either value computes the same.
    disable_regularization is accepted; Loom's learners still regularize scale and bias."""
    o = _resolve(BatchNormalization, map_rank=map_rank,
                 normalization_time_constant=normalization_time_constant, epsilon=epsilon,
                 use_cntk_engine=use_cntk_engine, disable_regularization=disable_regularization)
    if o['map_rank'] is not None and o['map_rank'] != 1:
        UntestedBranchError("BatchNormalization map_rank can only be 1 or None for now")
    return _layers.BatchNormalization(init_scale=init_scale,
                                      blend_time_constant=blend_time_constant,
                                      dtype=_dtype(dtype), name=name, **o)


def LayerNormalization(initial_scale=_LN.initial_scale, initial_bias=_LN.initial_bias,
                       epsilon=default_override_or(_LN.epsilon), name='', dtype=None):
    """(x - mean) / (std + epsilon) * scale + bias over each sample."""
    return _layers.LayerNormalization(initial_scale=initial_scale, initial_bias=initial_bias,
                                      epsilon=get_default_override(LayerNormalization,
                                                                 epsilon=epsilon),
                                    dtype=_dtype(dtype), name=name)


def ForwardDeclaration(name='forward_declaration'):
    """A placeholder with ``.resolve_to(value)``, which closes a loop written by hand."""
    return _ForwardDeclaration(_layers.ForwardDeclaration(name))


class _ForwardDeclaration(_loom.variables.Variable):
    """The placeholder of ForwardDeclaration: a Variable with resolve_to."""

    def __init__(self, placeholder):
        _loom.variables.Variable.__init__(self, _loom.ops.combine([placeholder]))

    def resolve_to(self, value):
        """Replace this placeholder by value in value's graph."""
        _layers.resolve_to(self, value)


def Stabilizer(steepness=_layers.kStabilizerSteepness,
               enable_self_stabilization=default_override_or(True), name='', dtype=None):
    """beta * x with a learned scalar beta = softplus(steepness * alpha) / steepness (1 at
    first); identity when not enabled."""
    enable = get_default_override(Stabilizer, enable_self_stabilization=enable_self_stabilization)
    if not enable:
        return identity
    return _layers.Stabilizer(steepness, True, dtype=_dtype(dtype), name=name)


def _cell(layer, cxx, shape, cell_shape, activation, use_peepholes, init, init_bias,
          enable_self_stabilization, name, dtype):
    o = _resolve(layer, activation=activation, init=init, init_bias=init_bias,
                 enable_self_stabilization=enable_self_stabilization)
    return cxx(shape, cell_shape=cell_shape, activation=_activation(o['activation']),
               use_peepholes=use_peepholes, init=o['init'], init_bias=o['init_bias'],
               enable_self_stabilization=o['enable_self_stabilization'], dtype=_dtype(dtype),
               name=name)


def LSTM(shape, cell_shape=None, activation=default_override_or(tanh),
         use_peepholes=default_override_or(False), init=default_override_or(glorot_uniform()),
         init_bias=default_override_or(0), enable_self_stabilization=default_override_or(False),
         name='', dtype=None):
    """LSTM step (h, c, x) -> (h, c) for Recurrence."""
    use_peepholes = get_default_override(LSTM, use_peepholes=use_peepholes)
    return _cell(LSTM, _layers.LSTM, shape, cell_shape, activation, use_peepholes, init, init_bias,
                 enable_self_stabilization, name, dtype)


def GRU(shape, cell_shape=None, activation=default_override_or(tanh),
        init=default_override_or(glorot_uniform()), init_bias=default_override_or(0),
        enable_self_stabilization=default_override_or(False), name='', dtype=None):
    """GRU step (h, x) -> h."""
    return _cell(GRU, _layers.GRU, shape, cell_shape, activation, False, init, init_bias,
                 enable_self_stabilization, name, dtype)


def RNNStep(shape, cell_shape=None, activation=default_override_or(sigmoid),
            init=default_override_or(glorot_uniform()), init_bias=default_override_or(0),
            enable_self_stabilization=default_override_or(False), name='', dtype=None):
    """Plain RNN step h = activation(x W + h H + b)."""
    return _cell(RNNStep, _layers.RNNStep, shape, cell_shape, activation, False, init, init_bias,
                 enable_self_stabilization, name, dtype)


def Delay(T=_layers.kDelayTimeStep, initial_state=default_override_or(0), name=''):
    """sequence.delay as a layer: T > 0 past, T < 0 future, 0 x itself."""
    initial_state = get_default_override(Delay, initial_state=initial_state)
    return _layers.Delay(T, initial_state=initial_state, name=name)


def PastValueWindow(window_size, axis, go_backwards=default_override_or(False), name=''):
    """(value, valid): the last window_size steps of each sequence, newest first, stacked along
    axis, and 1 for the steps that exist."""
    go_backwards = get_default_override(PastValueWindow, go_backwards=go_backwards)
    return _layers.PastValueWindow(window_size, axis, go_backwards=go_backwards, name=name)


def RecurrenceFrom(step_function, go_backwards=default_override_or(False),
                   return_full_state=False, name=''):
    """Recurrence whose initial states are the first arguments of the call."""
    go_backwards = get_default_override(RecurrenceFrom, go_backwards=go_backwards)
    return _layers.RecurrenceFrom(step_function, go_backwards=go_backwards,
                                  return_full_state=return_full_state, name=name)


def Recurrence(step_function, go_backwards=default_override_or(False),
               initial_state=default_override_or(0), return_full_state=False, name=''):
    """step_function run along each sequence: the sequence of its first state (all states with
    return_full_state)."""
    o = _resolve(Recurrence, go_backwards=go_backwards, initial_state=initial_state)
    return _layers.Recurrence(step_function, return_full_state=return_full_state, name=name, **o)


def Fold(folder_function, go_backwards=default_override_or(False),
         initial_state=default_override_or(0), return_full_state=False, name=''):
    """Recurrence's final state (no sequence axis)."""
    o = _resolve(Fold, go_backwards=go_backwards, initial_state=initial_state)
    return _layers.Fold(folder_function, return_full_state=return_full_state, name=name, **o)


def UnfoldFrom(generator_function, until_predicate=None, length_increase=_UNFOLD.length_increase,
               name=''):
    """(initial_state, dynamic_axes_like) -> the sequence generator_function generates from
    initial_state, up to length_increase x the length of dynamic_axes_like."""
    return _layers.UnfoldFrom(generator_function, until_predicate=until_predicate,
                              length_increase=length_increase, name=name)


def Sequential(layers, name=''):
    """Sequential([f, g, h])(x) = h(g(f(x))); a non-list is returned as it is."""
    if not isinstance(layers, list):
        return layers
    return _layers.Sequential(layers, name=name)


def For(what_range, constructor, name=''):
    """Sequential([constructor(i) for i in what_range]); constructor may take no argument."""
    if not inspect.isfunction(constructor):
        raise ValueError("constructor must be a Python function/lambda")
    takes_arg = len(inspect.signature(constructor).parameters) > 0
    layers = [constructor(i) if takes_arg else constructor() for i in what_range]
    return Sequential(layers, name=name)


def SequentialClique(functions, name=''):
    """Each function gets the sum of the input and all previous outputs; the last output."""
    return _layers.SequentialClique(functions, name=name)


def ResNetBlock(f, name=''):
    """x -> f(x) + x."""
    return _layers.ResNetBlock(f, name=name)


def AttentionModel(attention_dim, attention_span=None, attention_axis=None,
                   init=default_override_or(glorot_uniform()),
                   go_backwards=default_override_or(False),
                   enable_self_stabilization=default_override_or(True), name='', dtype=None):
    """(encoder_hidden_state, decoder_hidden_state) -> the attention context at each decoder
    step (Bahdanau et al.); the weights are the output named 'attention_weights'."""
    o = _resolve(AttentionModel, init=init, go_backwards=go_backwards,
                 enable_self_stabilization=enable_self_stabilization)
    if attention_span is None:
        if attention_axis is not None:
            raise ValueError('attention_span cannot be None when attention_axis is not None')
    elif attention_span <= 0:
        raise ValueError('attention_span must be a positive value')
    elif attention_axis is None:
        raise ValueError('attention_axis cannot be None when attention_span is not None')
    else:
        import warnings
        warnings.warn('Specifying non-default values for attention_span and attention_axis has '
                      'been deprecated since version 2.2. These arguments will be removed in the '
                      'future.', DeprecationWarning, stacklevel=2)
    return _layers.AttentionModel(attention_dim, attention_span=attention_span,
                                  attention_axis=attention_axis, dtype=_dtype(dtype), name=name,
                                  **o)

# CNTK's cntk.layers also star-imports cntk.layers.typing, and has the module blocks.
from loom.layers.typing import *  # noqa: F401,F403,E402
from loom.layers import blocks  # noqa: F401,E402
