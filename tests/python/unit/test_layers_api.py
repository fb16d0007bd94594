"""CNTK's cntk.layers and cntk.default_options names added for issue 29: signatures, parameter
shapes and names, numbers against numpy, default_options scoping, and bad arguments."""
import importlib
import inspect
import warnings

import numpy as np
import pytest

import loom as C
from loom.layers import (Activation, AttentionModel, BatchNormalization, Convolution,
                         Convolution2D, ConvolutionTranspose, ConvolutionTranspose1D,
                         ConvolutionTranspose2D, ConvolutionTranspose3D, Delay, Dense, Fold, For,
                         ForwardDeclaration, GRU, Label, LayerNormalization, MaxPooling,
                         MaxUnpooling, PastValueWindow, ResNetBlock, SequentialClique,
                         SequentialConvolution, Stabilizer, UnfoldFrom, UntestedBranchError,
                         default_options, default_options_for, identity)

F32 = np.float32
# The module (loom.default_options at the top level is the function, as in CNTK).
D = importlib.import_module('loom.default_options')


def params(f):
    return {p.name: p.shape for p in f.parameters}


# --- default_options -------------------------------------------------------------------------

def test_default_options_names_at_both_paths():
    names = ['default_options', 'default_options_for', 'default_override_or',
             'is_default_override', 'get_default_override', 'set_global_option',
             'get_global_option']
    for n in names:
        assert getattr(D, n) is getattr(C.layers, n)
    assert list(inspect.signature(D.default_options_for).parameters) == ['functions', 'kwargs']


def test_get_default_override_resolves_innermost_scope_and_given_values():
    def layer(x, init=D.default_override_or(7)):
        return D.get_default_override(layer, init=init)
    assert layer(0) == 7
    assert D.is_default_override(D.default_override_or(1)) and not D.is_default_override(1)
    with D.default_options(init=1):
        assert layer(0) == 1
        with D.default_options(init=2, other=3):
            assert layer(0) == 2
        assert layer(0) == 1
        assert layer(0, init=5) == 5  # explicit wins
    with D.default_options_for(layer, init=4):
        assert layer(0) == 4
        assert D.get_default_override(Dense, init=D.default_override_or(9)) == 9  # not listed
    assert layer(0) == 7


def test_get_default_override_bad_arguments():
    with pytest.raises(TypeError, match='1 keyword argument'):
        D.get_default_override(None, a=D.default_override_or(1), b=2)
    with pytest.raises(TypeError, match="has no argument named 'nope'"):
        D.get_default_override(Dense, nope=D.default_override_or(1))
    with pytest.raises(ValueError, match='Python function or class'):
        D.get_default_override(3, init=D.default_override_or(1))
    with pytest.raises(ValueError, match='reserved'):
        D.default_options(_scope=1)


def test_global_options():
    assert D.get_global_option('align_axis_test', 5) == 5
    D.set_global_option('align_axis_test', 1)
    assert D.get_global_option('align_axis_test', 5) == 1


def test_default_options_reach_the_layers():
    x = C.input_variable(2)
    one = C.initializer.constant_initializer(1.0)
    with default_options(activation=C.relu, init=one, bias=False):
        d = Dense(2)
        d_none = Dense(2, activation=None)
    data = np.array([[-1, -2]], F32)
    assert d(x)(data).tolist() == [[0, 0]] and params(d(x)) == {'W': (2, 2)}
    assert d_none(x)(data).tolist() == [[-3, -3]]
    img = C.input_variable((1, 5, 5))
    with default_options_for(Convolution, pad=True):
        assert Convolution((3, 3), 2)(img).shape == (2, 5, 5)
        assert Convolution2D((3, 3), 2)(img).shape == (2, 3, 3)  # another function
        assert MaxPooling((3, 3))(img).shape == (1, 3, 3)
    with default_options(dtype=np.float64):
        assert Dense(2)(C.input_variable(2, dtype=np.float64)).W.dtype == np.float64
    with default_options(epsilon=0.5):
        ln = LayerNormalization()
    y = ln(x)(np.array([[1, 3]], F32))
    np.testing.assert_allclose(y, [[-1 / 1.5, 1 / 1.5]], rtol=1e-5)
    with default_options(enable_self_stabilization=False):
        assert Stabilizer() is identity


def test_signatures_are_cntks():
    def names(f):
        return [p for p in inspect.signature(f).parameters if p != 'dtype']
    assert names(Convolution) == [
        'filter_shape', 'num_filters', 'sequential', 'activation', 'init', 'pad', 'strides',
        'sharing', 'bias', 'init_bias', 'reduction_rank', 'transpose_weight', 'dilation', 'groups',
        'max_temp_mem_size_in_samples', 'op_name', 'name']
    assert names(SequentialConvolution) == [n for n in names(Convolution) if n != 'sequential']
    assert names(ConvolutionTranspose)[-2:] == ['max_temp_mem_size_in_samples', 'name']
    assert names(ConvolutionTranspose2D) == [
        'filter_shape', 'num_filters', 'activation', 'init', 'pad', 'strides', 'bias', 'init_bias',
        'output_shape', 'reduction_rank', 'dilation', 'name']
    assert names(BatchNormalization) == [
        'map_rank', 'init_scale', 'normalization_time_constant', 'blend_time_constant', 'epsilon',
        'use_cntk_engine', 'disable_regularization', 'name']
    assert names(Fold)[0] == 'folder_function'
    assert names(AttentionModel) == ['attention_dim', 'attention_span', 'attention_axis', 'init',
                                     'go_backwards', 'enable_self_stabilization', 'name']
    assert names(Delay) == ['T', 'initial_state', 'name']
    assert names(PastValueWindow) == ['window_size', 'axis', 'go_backwards', 'name']
    assert names(UnfoldFrom) == ['generator_function', 'until_predicate', 'length_increase',
                                 'name']
    assert names(MaxUnpooling) == ['filter_shape', 'strides', 'pad', 'name']
    assert names(Activation) == ['activation', 'name']
    assert names(ForwardDeclaration) == ['name']
    assert inspect.signature(ForwardDeclaration).parameters['name'].default == \
        'forward_declaration'


# --- small layers ----------------------------------------------------------------------------

def test_activation_identity_label_untested_branch():
    x = C.input_variable(3)
    data = np.array([[-1, 0, 2]], F32)
    a = Activation(C.relu)(x)
    assert str(a) == 'Activation(Tensor[3]) -> Tensor[3]'
    assert a(data).tolist() == [[0, 0, 2]]
    assert Activation()(x)(data).tolist() == [[-1, 0, 2]]
    with default_options(activation=C.relu):
        assert Activation()(x)(data).tolist() == [[0, 0, 2]]
    assert identity(x)(data).tolist() == [[-1, 0, 2]]
    assert [a.name for a in identity.arguments] == ['keep']
    hidden = Label('hidden')(x)
    assert hidden.output.owner.name == 'hidden'
    assert hidden(data).tolist() == [[-1, 0, 2]]
    with pytest.raises(NotImplementedError, match='Untested code branch: here'):
        UntestedBranchError('here')


def test_resnet_block_is_f_plus_x():
    x = C.input_variable(2)
    d = Dense(2, activation=None)
    r = ResNetBlock(d)(x)
    data = np.array([[1, 2], [3, -1]], F32)
    np.testing.assert_allclose(r(data), data @ r.W.value + r.b.value + data, rtol=1e-6)
    assert params(r) == {'W': (2, 2), 'b': (2,)}
    assert ResNetBlock(d, name='res')(x).output.owner.name == 'res'


def test_sequential_clique_and_for():
    x = C.input_variable(2)
    clique = SequentialClique([C.abs, C.sqrt, C.square])
    assert clique(x)(np.array([[2, 8]], F32)).tolist() == [[36, 400]]  # CNTK's doc example
    with pytest.raises(ValueError, match='SequentialClique'):
        SequentialClique([])
    stack = For(range(3), lambda: Dense(4))
    assert len(stack(x).parameters) == 6
    pyramid = For(range(2), lambda i: Dense([5, 3][i]))(x)
    assert pyramid.shape == (3,)
    assert sorted(p.shape for p in pyramid.parameters) == [(2, 5), (3,), (5,), (5, 3)]
    with pytest.raises(ValueError, match='constructor'):
        For(range(2), C.relu(C.input_variable(1)))


def test_forward_declaration_closes_a_loop():
    x = C.sequence.input_variable(2)
    ones = C.sequence.broadcast_as(1, x)
    fwd = ForwardDeclaration()
    assert isinstance(fwd, C.Variable) and fwd.name == 'forward_declaration'
    out = C.sequence.past_value(fwd, initial_state=0) + ones
    fwd.resolve_to(out)
    length = C.sequence.last(out)
    x0 = np.reshape(np.arange(6, dtype=F32), (1, 3, 2))
    assert np.asarray(length(x0)).ravel().tolist() == [3]


# --- sequence layers -------------------------------------------------------------------------

def seq_data():
    return [np.arange(6, dtype=F32).reshape(3, 2), np.array([[7, 8]], F32)]


def test_delay_is_past_and_future_value():
    x = C.sequence.input_variable(2)
    data = seq_data()
    for T, ref in [(1, C.sequence.past_value(x)), (-1, C.sequence.future_value(x)),
                   (2, C.sequence.past_value(x, time_step=2))]:
        got, want = Delay(T)(x)(data), ref(data)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    assert Delay(0)(x)(data)[0].tolist() == data[0].tolist()
    five = Delay(1, initial_state=5)(x)(data)
    assert five[0].tolist() == [[5, 5], [0, 1], [2, 3]]
    with default_options(initial_state=-1):
        assert Delay()(x)(data)[1].tolist() == [[-1, -1]]
    assert Delay()(x).owner.op_name == 'Delay' or str(Delay()(x)).startswith('Delay')


def test_past_value_window_values_and_mask():
    x = C.sequence.input_variable(2)
    w = PastValueWindow(4, axis=-2)(x)
    value, valid = w.outputs
    assert value.shape == (4, 2) and valid.shape == (4, 1)
    x0 = np.reshape(np.arange(6, dtype=F32), (1, 3, 2))
    r = w.eval({x: x0})
    np.testing.assert_array_equal(r[value], [[[4, 5], [2, 3], [0, 1], [0, 0]]])
    np.testing.assert_array_equal(r[valid], [[[1], [1], [1], [0]]])
    back = PastValueWindow(2, axis=-2, go_backwards=True)(x)
    np.testing.assert_array_equal(back.eval({x: x0})[back.outputs[0]], [[[0, 1], [2, 3]]])
    with pytest.raises(ValueError, match='window_size'):
        PastValueWindow(0, axis=-2)


def test_fold_takes_folder_function():
    x = C.sequence.input_variable(3)
    f = Fold(folder_function=GRU(4))(x)
    assert f.shape == (4,) and len(f.dynamic_axes) == 1
    assert sorted(params(f)) == ['H', 'H1', 'W', 'b']
    r = C.layers.Recurrence(C.layers.LSTM(4), initial_state=(0.5, 0))(x)
    assert r.shape == (4,)


def test_unfold_from_generates_steps():
    s = C.placeholder(shape=(1,), dynamic_axes=[C.Axis.default_batch_axis(),
                                                 C.Axis.default_dynamic_axis()])
    gen = s * 2
    x = C.sequence.input_variable(1)
    init = C.input_variable(1)
    u = UnfoldFrom(gen)(init, x)
    out = u.eval({init: np.array([[1]], F32), x: [np.zeros((3, 1), F32)]})
    np.testing.assert_array_equal(np.asarray(out[0]).ravel(), [2, 4, 8])


# --- convolutions and pooling ----------------------------------------------------------------

def correlate(x, W):
    """Valid cross-correlation of x [C, H, W] with W [O, C, kh, kw] -> [O, H', W']."""
    O, _, kh, kw = W.shape
    H, Wd = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    y = np.zeros((O, H, Wd))
    for o in range(O):
        for i in range(H):
            for j in range(Wd):
                y[o, i, j] = np.sum(x[:, i:i + kh, j:j + kw] * W[o])
    return y


def test_convolution_without_num_filters_has_no_channel_axis():
    img = C.input_variable((2, 5, 5))
    c = Convolution((3, 3))(img)
    assert c.shape == (3, 3)
    assert params(c) == {'W': (1, 2, 3, 3), 'b': (1, 1, 1)}
    x0 = np.random.RandomState(0).randn(1, 2, 5, 5).astype(F32)
    np.testing.assert_allclose(c(x0)[0], correlate(x0[0], c.W.value)[0] + c.b.value.ravel(),
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(NotImplementedError, match='transpose_weight'):
        Convolution((3, 3), 2, transpose_weight=True)


def sequential_reference(W, b, x, pad):
    """out[t] = b + sum_{k,c} W[o, c, k] x[t + k - lpad, c] (steps outside are 0)."""
    O, Cn, fs = W.shape
    lpad = (fs - 1) // 2
    T = len(x)
    ts = range(T) if pad else range(lpad, T - (fs - 1 - lpad))
    out = []
    for t in ts:
        row = np.array(b, np.float64).ravel().copy()
        for k in range(fs):
            u = t + k - lpad
            if 0 <= u < T:
                row += W[:, :, k] @ x[u]
        out.append(row)
    return np.array(out)


@pytest.mark.parametrize('pad', [False, True])
@pytest.mark.parametrize('layer', ['Convolution', 'SequentialConvolution'])
def test_sequential_convolution_against_numpy(pad, layer):
    x = C.sequence.input_variable(2)
    if layer == 'Convolution':
        c = Convolution(3, 4, sequential=True, pad=pad)(x)
        assert params(c) == {'W': (4, 2, 3), 'b': (4, 1)}
    else:
        c = SequentialConvolution(3, 4, pad=pad)(x)
        assert params(c) == {'W': (4, 2, 3), 'b': (4,)}
    c.b.value = np.arange(4, dtype=F32).reshape(c.b.shape)
    x0 = np.random.RandomState(1).randn(6, 2).astype(F32)
    got = c([x0])[0]
    np.testing.assert_allclose(got, sequential_reference(c.W.value, c.b.value, x0, pad),
                               rtol=1e-4, atol=1e-5)
    assert c.shape == (4,)
    with pytest.raises(ValueError, match='stride'):
        SequentialConvolution((3, 3), 4, strides=(2, 1))


def test_convolution_transpose_nd_and_max_unpooling():
    img = C.input_variable((2, 4, 4))
    t = ConvolutionTranspose2D((3, 3), 5, pad=True)(img)
    assert t.shape == (5, 4, 4) and params(t) == {'W': (2, 5, 3, 3), 'b': (5, 1, 1)}
    assert ConvolutionTranspose((3, 3), 5, max_temp_mem_size_in_samples=16)(img).shape == \
        (5, 6, 6)
    with pytest.raises(ValueError, match='ConvolutionTranspose1D'):
        ConvolutionTranspose1D((3, 3), 5)
    with pytest.raises(ValueError, match='ConvolutionTranspose3D'):
        ConvolutionTranspose3D((3, 3), 5)
    x = C.input_variable((1, 2, 4))
    pooled = MaxPooling((2, 2), strides=2)(x)
    un = MaxUnpooling((2, 2), strides=2)(pooled, x)
    assert un.shape == (1, 2, 4)
    x0 = np.array([1, 5, 2, 0, 3, 4, 7, 6], F32).reshape(1, 1, 2, 4)
    np.testing.assert_array_equal(un.eval({x: x0}).ravel(), [0, 5, 0, 0, 0, 0, 7, 0])


def test_batch_normalization_accepts_cntk_flags():
    x = C.input_variable(3)
    bn = BatchNormalization(use_cntk_engine=True, disable_regularization=True)(x)
    assert params(bn) == {'scale': (3,), 'bias': (3,)}
    with default_options(map_rank=2):
        with pytest.raises(NotImplementedError, match='map_rank'):
            BatchNormalization()


# --- AttentionModel --------------------------------------------------------------------------

def attention_reference(We, Wd, Wt, enc, dec):
    """For each decoder step: softmax over the encoder steps of tanh(d Wd + e We) Wt, then the
    weighted sum of the encoder states."""
    out = []
    for t in range(len(dec)):
        u = np.tanh(dec[t] @ Wd + enc @ We) @ Wt  # [Te, 1]
        w = np.exp(u - u.max())
        w /= w.sum()
        out.append((w * enc).sum(axis=0))
    return np.array(out)


@pytest.mark.parametrize('stabilize', [False, True])
def test_attention_model_against_numpy(stabilize):
    enc = C.sequence.input_variable(3, sequence_axis=C.Axis('enc_axis'))
    dec = C.sequence.input_variable(2, sequence_axis=C.Axis('dec_axis'))
    att = AttentionModel(4, enable_self_stabilization=stabilize)
    y = att(enc, dec)
    assert y.shape == (3,)
    shapes = sorted(p.shape for p in y.parameters)
    assert shapes == sorted([(3, 4), (2, 4), (4, 1)] + [()] * (4 if stabilize else 0))
    W = {p.shape: p.value for p in y.parameters if p.shape}
    rs = np.random.RandomState(2)
    E = [rs.randn(4, 3).astype(F32), rs.randn(2, 3).astype(F32)]
    Dd = [rs.randn(3, 2).astype(F32), rs.randn(1, 2).astype(F32)]
    got = y.eval({enc: E, dec: Dd})
    for b in range(2):
        np.testing.assert_allclose(got[b], attention_reference(W[(3, 4)], W[(2, 4)], W[(4, 1)],
                                                               E[b], Dd[b]),
                                   rtol=1e-4, atol=1e-5)


def test_attention_model_bad_arguments_and_deprecated_mode():
    with pytest.raises(ValueError, match='attention_axis cannot be None'):
        AttentionModel(4, attention_span=3)
    with pytest.raises(ValueError, match='attention_span cannot be None'):
        AttentionModel(4, attention_axis=-2)
    with pytest.raises(ValueError, match='positive'):
        AttentionModel(4, attention_span=0, attention_axis=-2)
    enc = C.sequence.input_variable(3, sequence_axis=C.Axis('enc_axis'))
    dec = C.sequence.input_variable(2, sequence_axis=C.Axis('dec_axis'))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        old = AttentionModel(4, attention_span=5, attention_axis=-2)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert old(enc, dec).shape == (1, 3)
