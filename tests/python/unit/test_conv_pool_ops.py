"""CNTK's convolution, pooling and normalization ops of cntk.ops: convolution,
convolution_transpose, pooling, unpooling, roipooling, batch_normalization,
local_response_normalization and the op constants, with CNTK's docstring values and those of
its ops/tests/kernel_test.py and non_linear_test.py (loom/ops/{convolution,pooling,
normalization}_test.cpp test more cases, the conformance harness the gradients)."""
import inspect
import warnings

import numpy as np
import pytest

import loom as C

SIGNATURES = {
    'convolution': "(convolution_map, operand, strides=(1,), sharing=[True], "
                   "auto_padding=[True], sequential=False, dilation=(1,), reduction_rank=1, "
                   "groups=1, max_temp_mem_size_in_samples=0, name='')",
    'convolution_transpose': "(convolution_map, operand, strides=(1,), sharing=[True], "
                             "auto_padding=[True], output_shape=None, dilation=(1,), "
                             "reduction_rank=1, max_temp_mem_size_in_samples=0, name='')",
    'pooling': "(operand, pooling_type, pooling_window_shape, strides=(1,), "
               "auto_padding=[False], ceil_out_dim=False, include_pad=False, name='')",
    'unpooling': "(operand, pooling_input, unpooling_type, unpooling_window_shape, "
                 "strides=(1,), auto_padding=[False], name='')",
    'roipooling': "(operand, rois, pooling_type, roi_output_shape, spatial_scale, name='')",
    'batch_normalization': "(operand, scale, bias, running_mean, running_inv_std, spatial, "
                           "normalization_time_constant=5000, blend_time_constant=0, "
                           "epsilon=1e-05, use_cudnn_engine=False, "
                           "disable_regularization=False, name='', running_count=None)",
    'local_response_normalization': "(operand, depth_radius, bias, alpha, beta, name='')",
}


@pytest.mark.parametrize('name', sorted(SIGNATURES))
def test_signatures_are_cntks(name):
    f = getattr(C.ops, name)
    assert str(inspect.signature(f)) == SIGNATURES[name]
    assert getattr(C, name) is f
    assert f.__doc__


def test_the_functions_come_from_the_op_table():
    # Their parameters are the table's (loom/ops/op_schema.h), so saved models keep the C++
    # builders' attributes.
    table = {e['python']: e['op'] for e in C._loom.ops._op_table() if e['module'] == 'ops'}
    assert {n: table[n] for n in ('convolution', 'convolution_transpose', 'pooling', 'unpooling',
                                  'batch_normalization')} == {
        'convolution': 'Convolution', 'convolution_transpose': 'ConvolutionTranspose',
        'pooling': 'Pooling', 'unpooling': 'Unpooling', 'batch_normalization':
        'BatchNormalization'}
    assert C.convolution.__module__ == 'loom.ops'


def test_per_axis_options_take_a_value_a_list_or_a_tuple():
    x = C.input_variable((2, 6, 6))
    W = C.parameter((3, 2, 3, 3))
    for pad in (False, [False], (False, False), [np.bool_(False)] * 3):
        assert C.convolution(W, x, auto_padding=pad).shape == (3, 4, 4)
    for strides in (2, [2], (2, 2), np.int64(2), [1, 2, 2]):
        assert C.convolution(W, x, strides=strides).shape == (3, 3, 3)
    assert C.convolution(W, x, strides=[2, 1], max_temp_mem_size_in_samples=64).shape == \
        (3, 3, 6)
    assert C.pooling(x, C.MAX_POOLING, [2, 3], strides=(2, 3), auto_padding=True).shape == \
        (2, 3, 2)
    with pytest.raises(TypeError, match="convolution: 'auto_padding' must be a bool or a list of "
                                        "bools, not str"):
        C.convolution(W, x, auto_padding='no')
    with pytest.raises(TypeError, match="convolution: 'strides' must be an int"):
        C.convolution(W, x, strides=1.5)
    with pytest.raises(C.ArgumentError, match='convolution: strides holds the negative value -1'):
        C.convolution(W, x, strides=-1)
    with pytest.raises(C.ArgumentError, match='pooling: pooling_type 3 is neither MAX_POOLING'):
        C.pooling(x, 3, (2, 2))


def test_table_functions_save_and_load(tmp_path):
    x = C.input_variable((2, 6, 6), name='x')
    rng = np.random.default_rng(4)
    W = C.constant(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    Wt = C.constant(rng.standard_normal((3, 2, 2, 2)).astype(np.float32))
    y = C.convolution(W, x, strides=(1, 2), auto_padding=[False, True])
    p = C.pooling(y, C.AVG_POOLING, (2, 2), (2, 1), include_pad=True)
    u = C.unpooling(p, y, C.MAX_UNPOOLING, (2, 2), (2, 1))
    t = C.convolution_transpose(Wt, u, strides=2, output_shape=(8, 6))
    f = C.combine(p, t)
    f.save(str(tmp_path / 'm.model'))
    g = C.load_model(str(tmp_path / 'm.model'))
    data = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    want = [np.asarray(v) for v in f.eval({x: data}).values()]
    got = [np.asarray(v) for v in g.eval({g.arguments[0]: data}).values()]
    assert [w.shape for w in want] == [(2, 3, 2, 2), (2, 2, 8, 6)]
    for a, b in zip(sorted(got, key=np.shape), sorted(want, key=np.shape)):
        np.testing.assert_array_equal(a, b)


def test_constants_are_cntks():
    assert (C.MAX_POOLING, C.AVG_POOLING, C.MAX_UNPOOLING) == (0, 1, 0)
    assert C.ops.TIMES_NO_INFERRED_INPUT_RANK == -1
    assert C.ops.TIMES_REDUCE_SEQUENCE_AXIS_WITHOUT_INFERRED_INPUT_RANK == -2
    assert C.ops.INFINITELY_REPEAT == C.io.INFINITELY_REPEAT
    x = C.input_variable(3)
    W = C.constant(np.ones((3, 2), np.float32))
    assert C.times(x, W, infer_input_rank_to_map=C.TIMES_NO_INFERRED_INPUT_RANK).shape == (2,)


def _iota(shape, first=0, dtype=np.float32):
    return np.arange(first, first + np.prod(shape), dtype=dtype).reshape(shape)


def _conv(kernel, sample, **kwargs):
    """convolution(constant(kernel), x) of the sample (one of a batch)."""
    x = C.input_variable(sample.shape, dtype=sample.dtype)
    w = C.constant(kernel, dtype=sample.dtype)
    return C.convolution(w, x, **kwargs).eval({x: sample[None]})[0]


def _conv_transpose(kernel, sample, **kwargs):
    x = C.input_variable(sample.shape, dtype=sample.dtype)
    w = C.constant(kernel, dtype=sample.dtype)
    return C.convolution_transpose(w, x, **kwargs).eval({x: sample[None]})[0]


# ---- convolution ----

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_convolution_docstring_example(dtype):
    img = _iota((1, 5, 5), dtype=dtype)
    kernel = np.array([2, -1, -1, 2], dtype).reshape(1, 2, 2)  # no output-channel axis: one
    out = _conv(kernel, img, auto_padding=[False])
    np.testing.assert_array_equal(out, [[[6, 8, 10, 12], [16, 18, 20, 22], [26, 28, 30, 32],
                                         [36, 38, 40, 42]]])
    assert out.dtype == dtype


def test_convolution_kernel_test_values():
    # ASYM_CONVOLUTION_DATA: an even kernel with automatic padding pads 0 below, 1 above.
    expected = [[[19, 25, 10], [37, 43, 16], [7, 8, 0]]]
    np.testing.assert_array_equal(_conv(_iota((1, 2, 2)), _iota((1, 3, 3)),
                                        auto_padding=[True]), expected)
    # SPATIAL_CONVOLUTION_DATA: reduction_rank=0, no channel axis.
    np.testing.assert_array_equal(_conv(_iota((2, 2)), _iota((3, 3)), reduction_rank=0),
                                  expected)
    # REDUCED_OUTPUT_CONVOLUTION_DATA: 3 filters over (2, 3) samples, one position each.
    x = C.input_variable((2, 3))
    f = C.convolution(C.constant(_iota((3, 2, 3))), x, auto_padding=[False])
    np.testing.assert_array_equal(f.eval({x: _iota((4, 2, 3))}),
                                  [[[55], [145], [235]], [[145], [451], [757]],
                                   [[235], [757], [1279]], [[325], [1063], [1801]]])


def test_convolution_dilated_kernel_test_values():
    # DILATED_CONVOLUTION_DATA, without padding: the 3x3 kernel dilated by 2 spans all 5x5.
    out = _conv(_iota((1, 3, 3)), _iota((1, 5, 5)), auto_padding=[False], dilation=2)
    np.testing.assert_array_equal(out, [[[624]]])
    # With padding (CNTK ran this case on GPUs only).
    out = _conv(_iota((1, 3, 3)), _iota((1, 5, 5)), auto_padding=[True], dilation=2)
    np.testing.assert_array_equal(out, [[[176, 200, 284, 172, 192], [296, 320, 449, 272, 292],
                                         [420, 447, 624, 375, 396], [164, 176, 233, 128, 136],
                                         [224, 236, 308, 168, 176]]])


def test_convolution_per_axis_options_follow_cntks_rules():
    x = C.input_variable((2, 9, 8))
    W = C.parameter((4, 2, 3, 3))
    # One value: every spatial axis; one per axis; one more in front for the channel axis.
    assert C.convolution(W, x, strides=2).shape == (4, 5, 4)
    assert C.convolution(W, x, strides=(2, 1), auto_padding=[False]).shape == (4, 4, 6)
    assert C.convolution(W, x, strides=(1, 2, 1), auto_padding=[False, True, False]).shape == \
        (4, 5, 6)
    # Fewer values than axes are the trailing axes' (pooling's window covers three axes here).
    y = C.input_variable((1, 6, 6))
    out = C.pooling(y, C.MAX_POOLING, (1, 4, 4), (1, 2, 2), auto_padding=[True, False])
    assert out.shape == (1, 3, 2)
    # POOLING_GEOMETRY_DATA's third case.
    np.testing.assert_array_equal(out.eval({y: _iota((1, 1, 6, 6))}),
                                  [[[[15, 17], [27, 29], [33, 35]]]])


def test_convolution_groups_match_separate_convolutions():
    rng = np.random.default_rng(1)
    x = C.input_variable((4, 5, 5))
    kernel = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    data = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    grouped = C.convolution(C.constant(kernel), x, groups=2).eval({x: data})
    halves = [C.convolution(C.constant(kernel[3 * g:3 * g + 3]), x[2 * g:2 * g + 2])
              for g in range(2)]
    np.testing.assert_allclose(grouped, C.splice(*halves, axis=0).eval({x: data}), atol=1e-5)


def test_convolution_rejects_bad_inputs():
    x = C.input_variable((3, 8, 8))
    with pytest.raises(C.ShapeError, match='Convolution.*must have 3 input channels'):
        C.convolution(C.parameter((4, 2, 3, 3)), x)
    with pytest.raises(C.ShapeError, match='Convolution.*must have 3 axes'):
        C.convolution(C.parameter((4, 3, 3, 3)), C.input_variable((8, 8)))
    with pytest.raises(C.ShapeError, match='Convolution.*smaller than the window extent 9'):
        C.convolution(C.parameter((4, 3, 9, 9)), x, auto_padding=[False])
    with pytest.raises(C.ShapeError, match='Convolution.*sharing=False'):
        C.convolution(C.parameter((4, 3, 3, 3)), x, sharing=[False])
    with pytest.raises(C.ShapeError, match='convolution: sequential=True .* has none'):
        C.convolution(C.parameter((4, 3, 3, 3, 3)), x, sequential=True)


def test_sequential_convolution_convolves_along_the_steps():
    # Steps (1, 4) and a kernel (2, 1, 3, 3): 3 steps by 3 positions, zero padded both ways
    # ('same'), so each sequence keeps its length; a sequence's steps past its end are zeros.
    x = C.sequence.input_variable((1, 4))
    w = np.arange(18, dtype=np.float32).reshape(2, 1, 3, 3) / 10 - 0.8
    y = C.convolution(C.constant(w), x, sequential=True)
    seqs = [np.sin(np.arange(20, dtype=np.float32)).reshape(5, 1, 4),
            np.cos(np.arange(8, dtype=np.float32)).reshape(2, 1, 4)]
    got = y.eval({x: seqs})
    for s, out in zip(seqs, got):
        T = s.shape[0]
        padded = np.zeros((T + 2, 6), np.float32)
        padded[1:T + 1, 1:5] = s[:, 0, :]
        want = np.zeros((T, 2, 4), np.float32)
        for t in range(T):
            for o in range(2):
                for i in range(4):
                    want[t, o, i] = np.sum(padded[t:t + 3, i:i + 3] * w[o, 0])
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


# ---- convolution_transpose ----

def test_convolution_transpose_docstring_example():
    kernel = np.array([2, -1, -1, 2], np.float32).reshape(1, 2, 2)
    out = _conv_transpose(kernel, _iota((1, 3, 3)), auto_padding=[False])
    np.testing.assert_array_equal(out, [[[0, 2, 3, -2], [6, 4, 6, -1], [9, 10, 12, 2],
                                         [-6, 5, 6, 16]]])


def test_convolution_transpose_kernel_test_values():
    expected = [[[0, 0, 1, 2], [0, 5, 11, 11], [6, 23, 29, 23], [12, 32, 37, 24]]]
    # CONVOLUTION_TRANSPOSE_DATA, and SPATIAL_ (reduction_rank=0).
    np.testing.assert_array_equal(
        _conv_transpose(_iota((1, 2, 2)), _iota((1, 3, 3)), auto_padding=[False]), expected)
    np.testing.assert_array_equal(
        _conv_transpose(_iota((2, 2)), _iota((3, 3)), auto_padding=[False], reduction_rank=0),
        expected)
    # CONVOLUTION_TRANSPOSE_OUTPUT_DATA: stride 2, output_shape picks (5, 6) of the extents
    # that convolve back to 3x3; and SPATIAL_..._OUTPUT_DATA.
    expected = [[[0, 3, 4, 11, 8, 10], [3, 12, 11, 28, 19, 26], [12, 27, 16, 35, 20, 25],
                 [27, 60, 35, 76, 43, 56], [24, 51, 28, 59, 32, 40]]]
    np.testing.assert_array_equal(
        _conv_transpose(_iota((1, 3, 3)), _iota((1, 3, 3)), auto_padding=[True], strides=2,
                        output_shape=(1, 5, 6)), expected)
    np.testing.assert_array_equal(
        _conv_transpose(_iota((3, 3)), _iota((3, 3)), auto_padding=[True], strides=2,
                        output_shape=(1, 5, 6), reduction_rank=0), expected)


def test_convolution_transpose_rejects_bad_inputs():
    x = C.input_variable((3, 4, 4))
    with pytest.raises(C.ShapeError, match="ConvolutionTranspose.*operand's 3 channels"):
        C.convolution_transpose(C.parameter((2, 5, 3, 3)), x)
    with pytest.raises(C.ShapeError, match='ConvolutionTranspose.*does not convolve back'):
        C.convolution_transpose(C.parameter((3, 5, 3, 3)), x, strides=2, output_shape=(4, 4))


# ---- pooling ----

def test_pooling_docstring_examples():
    img = _iota((1, 4, 4))
    x = C.input_variable(img.shape)
    np.testing.assert_array_equal(C.pooling(x, C.AVG_POOLING, (2, 2), (2, 2)).eval({x: [img]}),
                                  [[[[2.5, 4.5], [10.5, 12.5]]]])
    np.testing.assert_array_equal(C.pooling(x, C.MAX_POOLING, (2, 2), (2, 2)).eval({x: [img]}),
                                  [[[[5, 7], [13, 15]]]])


POOLING_GEOMETRY = [  # kernel_test.py's POOLING_GEOMETRY_DATA (0, 1, 2, ...)
    ((1, 6, 6), (1, 5, 5), (1, 3, 3), [True], [[[21, 23], [33, 35]]]),
    ((1, 8, 8), (1, 4, 4), (1, 5, 5), [False], [[[27]]]),
]


@pytest.mark.parametrize('shape, window, strides, pad, expected', POOLING_GEOMETRY)
def test_pooling_geometry_kernel_test_values(shape, window, strides, pad, expected):
    x = C.input_variable(shape)
    out = C.pooling(x, C.MAX_POOLING, window, strides, auto_padding=pad)
    np.testing.assert_array_equal(out.eval({x: _iota((1,) + shape)})[0], expected)


MAX_POOLING = [  # kernel_test.py's MAX_POOLING_DATA: (batch, sequence, sample...) of 1, 2, ...
    ((1, 2, 2, 4, 3), (2, 2, 1), (2, 2, 1), [False],
     [[[[16, 17, 18], [22, 23, 24]]], [[[40, 41, 42], [46, 47, 48]]]]),
    ((1, 2, 4, 4, 4), (2, 2, 2), (2, 2, 2), [False],
     [[[[22, 24], [30, 32]], [[54, 56], [62, 64]]],
      [[[86, 88], [94, 96]], [[118, 120], [126, 128]]]]),
    ((1, 1, 1, 8, 8), (5, 5), (2, 2), [True],
     [[[[19, 21, 23, 24], [35, 37, 39, 40], [51, 53, 55, 56], [59, 61, 63, 64]]]]),
    ((1, 1, 1, 6, 6), (5, 3), (1, 1), [True],
     [[[[14, 15, 16, 17, 18, 18], [20, 21, 22, 23, 24, 24], [26, 27, 28, 29, 30, 30],
        [32, 33, 34, 35, 36, 36], [32, 33, 34, 35, 36, 36], [32, 33, 34, 35, 36, 36]]]]),
]


def _max_counts(data, result):
    """kernel_test.py's expected gradient of max pooling: on each element, the number of
    windows it is the maximum of (elements are distinct)."""
    return sum((data == m).astype(data.dtype) for m in np.ravel(result))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('size, window, strides, pad, expected', MAX_POOLING)
def test_max_pooling_kernel_test_values(size, window, strides, pad, expected, dtype):
    x = C.sequence.input_variable(size[2:], dtype=dtype, needs_gradient=True)
    data = _iota(size, 1, dtype)
    f = C.pooling(x, C.MAX_POOLING, window, strides, pad)
    np.testing.assert_array_equal(np.asarray(f.eval({x: data})), [expected])
    np.testing.assert_array_equal(np.asarray(f.grad({x: data}, wrt=[x])),
                                  _max_counts(data, expected))


def test_average_pooling_kernel_test_values():
    # AVG_POOLING_DATA's first case, sequences of two steps: no padding, gradient 1 / window.
    x = C.sequence.input_variable((2, 4, 3), needs_gradient=True)
    f = C.pooling(x, C.AVG_POOLING, (2, 2, 1), (2, 2, 1), auto_padding=[False])
    data = _iota((1, 2, 2, 4, 3), 1)
    np.testing.assert_array_equal(np.asarray(f.eval({x: data})),
                                  [[[[[8.5, 9.5, 10.5], [14.5, 15.5, 16.5]]],
                                    [[[32.5, 33.5, 34.5], [38.5, 39.5, 40.5]]]]])
    np.testing.assert_allclose(np.asarray(f.grad({x: data}, wrt=[x])), np.full(data.shape, 0.25))
    # AVG_POOLING_AUTOPAD_DATA's second case: windows at the border average what is inside.
    y = C.input_variable((1, 6, 6))
    g = C.pooling(y, C.AVG_POOLING, (1, 5, 3), (1, 2, 2), auto_padding=[True])
    np.testing.assert_array_equal(g.eval({y: _iota((1, 1, 6, 6), 1)})[0],
                                  [[[7.5, 9, 11], [13.5, 15, 17], [22.5, 24, 26]]])


def test_pooling_ceil_out_dim_kernel_test_values():
    # POOLING_CEIL_DATA.
    x = C.input_variable((1, 8, 8), needs_gradient=True)
    data = _iota((1, 1, 8, 8), 1)
    f = C.pooling(x, C.MAX_POOLING, (2, 2), (2, 2), ceil_out_dim=True)
    np.testing.assert_array_equal(f.eval({x: data})[0], [[[10, 12, 14, 16], [26, 28, 30, 32],
                                                           [42, 44, 46, 48],
                                                           [58, 60, 62, 64]]])
    expected = [[[19, 21, 23, 24], [35, 37, 39, 40], [51, 53, 55, 56], [59, 61, 63, 64]]]
    f = C.pooling(x, C.MAX_POOLING, (3, 3), (2, 2), ceil_out_dim=True)
    np.testing.assert_array_equal(f.eval({x: data})[0], expected)
    np.testing.assert_array_equal(f.grad({x: data}, wrt=[x]), _max_counts(data, expected))
    assert C.pooling(x, C.MAX_POOLING, (3, 3), (2, 2)).shape == (1, 3, 3)


def test_average_pooling_include_pad_kernel_test_values():
    # POOLING_AVG_INCLUDE_PAD_DATA: padding counts as zeros, each window divides by 9.
    x = C.input_variable((1, 7, 7), needs_gradient=True)
    data = _iota((1, 1, 7, 7), 1)
    f = C.pooling(x, C.AVG_POOLING, (3, 3), (3, 3), auto_padding=[True], include_pad=True)
    np.testing.assert_allclose(f.eval({x: data})[0], np.array(
        [[[20, 45, 40], [135, 225, 165], [160, 255, 180]]]) / 9, rtol=1e-6)
    np.testing.assert_allclose(f.grad({x: data}, wrt=[x]), np.full(data.shape, 1 / 9),
                               rtol=1e-6)


def test_pooling_rejects_bad_inputs():
    x = C.input_variable((2, 4, 4))
    with pytest.raises(C.ShapeError, match='Pooling.*input extent of 4.*window extent 5'):
        C.pooling(x, C.MAX_POOLING, (5, 5))
    with pytest.raises(C.ShapeError, match='Pooling.*cannot pool an operand of shape'):
        C.pooling(x, C.MAX_POOLING, (2, 2, 2, 2))
    with pytest.raises(C.ShapeError, match='Pooling: strides has 4 values'):
        C.pooling(x, C.MAX_POOLING, (2, 2), (1, 1, 1, 1))


# ---- unpooling ----

def test_unpooling_docstring_example():
    img = _iota((1, 4, 4))
    x = C.input_variable(img.shape)
    y = C.pooling(x, C.MAX_POOLING, (2, 2), (2, 2))
    out = C.unpooling(y, x, C.MAX_UNPOOLING, (2, 2), (2, 2)).eval({x: [img]})
    np.testing.assert_array_equal(out, [[[[0, 0, 0, 0], [0, 5, 0, 7], [0, 0, 0, 0],
                                          [0, 13, 0, 15]]]])


@pytest.mark.parametrize('size, window, strides, pad, expected', MAX_POOLING)
def test_unpooling_kernel_test_values(size, window, strides, pad, expected):
    # test_op_max_unpooling: the maxima in place, zeros elsewhere; pooling the unpooled input
    # gives the pooling again. The gradient is 1 on each maximum: where windows overlap, the
    # value of the last window choosing a position stays, and the others' get no gradient
    # (CNTK's, max pooling of the output's gradient, gives the count of windows).
    x = C.sequence.input_variable(size[2:], needs_gradient=True)
    data = _iota(size, 1)
    p = C.pooling(x, C.MAX_POOLING, window, strides, pad)
    u = C.unpooling(p, x, C.MAX_UNPOOLING, window, strides, pad)
    q = C.pooling(u, C.MAX_POOLING, window, strides, pad)
    maxima = (_max_counts(data, expected) > 0).astype(data.dtype)
    np.testing.assert_array_equal(np.asarray(u.eval({x: data})), maxima * data)
    np.testing.assert_array_equal(np.asarray(u.grad({x: data}, wrt=[x])), maxima)
    np.testing.assert_array_equal(np.asarray(q.eval({x: data})), np.asarray(p.eval({x: data})))


def test_unpooling_rejects_bad_inputs():
    x = C.input_variable((1, 4, 4))
    with pytest.raises(C.ShapeError, match=r'Unpooling.*must have the shape \[1,2,2\]'):
        C.unpooling(C.input_variable((1, 3, 3)), x, C.MAX_UNPOOLING, (2, 2), (2, 2))
    with pytest.raises(C.ArgumentError, match='unpooling.*only MAX_UNPOOLING'):
        C.unpooling(C.input_variable((1, 2, 2)), x, C.AVG_POOLING, (2, 2), (2, 2))
    with pytest.raises(C.ShapeError, match='Unpooling.*window extent 5'):
        C.unpooling(C.input_variable((1, 1, 1)), x, C.MAX_UNPOOLING, (5, 5))


# ---- roipooling ----

@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_roipooling_kernel_test_values(dtype):
    # ROIPOOLING_OPERANDS: the 3x3 map 1..9, the region (1, 1) to (2, 2) pooled into 3x3.
    x = C.input_variable((1, 3, 3), dtype=dtype, needs_gradient=True)
    rois = C.input_variable((1, 4), dtype=dtype)
    f = C.roipooling(x, rois, C.MAX_POOLING, (3, 3), 1.)
    assert f.shape == (1, 1, 3, 3)
    data = {x: _iota((1, 1, 3, 3), 1, dtype), rois: np.array([[[1, 1, 2, 2]]], dtype)}
    np.testing.assert_array_equal(f.eval(data)[0], [[[[5, 6, 6], [8, 9, 9], [8, 9, 9]]]])
    np.testing.assert_array_equal(f.grad(data, wrt=[x])[0],
                                  [[[0, 0, 0], [0, 1, 2], [0, 2, 4]]])


def test_roipooling_scales_the_regions():
    # Regions of an image twice the map's size: spatial_scale 0.5; two regions per image.
    x = C.input_variable((1, 4, 4))
    rois = C.input_variable((2, 4))
    f = C.roipooling(x, rois, C.MAX_POOLING, (1, 2), 0.5)
    out = f.eval({x: _iota((1, 1, 4, 4)), rois: np.array([[[0, 0, 7, 7], [2, 2, 4, 2]]],
                                                           np.float32)})
    # All of the map (0 to round(3.5) = 4, cut to 3) in cells of columns 0-2 and 2-3; then
    # row 1, columns 1 and 2.
    np.testing.assert_array_equal(out[0], [[[[14, 15]]], [[[5, 6]]]])


def test_roipooling_rejects_bad_inputs():
    x = C.input_variable((2, 6, 8))
    rois = C.input_variable((3, 4))
    with pytest.raises(C.ArgumentError, match='roipooling.*only MAX_POOLING'):
        C.roipooling(x, rois, C.AVG_POOLING, (2, 2), 1.)
    with pytest.raises(C.ShapeError, match=r'ROIPooling.*\(channels, height, width\)'):
        C.roipooling(C.input_variable((6, 8)), rois, C.MAX_POOLING, (2, 2), 1.)
    with pytest.raises(C.ShapeError, match=r'ROIPooling.*\(x1, y1, x2, y2\)'):
        C.roipooling(x, C.input_variable((3, 5)), C.MAX_POOLING, (2, 2), 1.)
    with pytest.raises(C.ShapeError, match='ROIPooling.*smaller than roi_output_shape'):
        C.roipooling(x, rois, C.MAX_POOLING, (7, 2), 1.)


# ---- local_response_normalization ----

def _lrn(x, depth_radius, bias, alpha, beta):
    """CNTK's LRN (its non_linear_test.py builds it of a convolution of the squares) of samples
    (N, C, ...): the sum over the channels within depth_radius."""
    sq = x.astype(np.float64) ** 2
    s = np.zeros_like(sq)
    channels = x.shape[1]
    for c in range(channels):
        s[:, c] = sq[:, max(0, c - depth_radius):min(channels, c + depth_radius + 1)].sum(1)
    return x / (bias + alpha / (2 * depth_radius + 1) * s) ** beta


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_local_response_normalization_non_linear_test_values(dtype):
    rng = np.random.default_rng(2)
    img = rng.uniform(-1, 1, (2, 16, 8, 8)).astype(dtype)
    x = C.input_variable(img.shape[1:], dtype=dtype)
    for args in [(2, 1.0, 0.0001, 0.75), (1, 2.0, 0.5, 0.5)]:  # non_linear_test.py's; larger
        out = C.local_response_normalization(x, *args).eval({x: img})
        np.testing.assert_allclose(out, _lrn(img, *args), rtol=1e-5 if dtype == np.float32
                                   else 1e-12)


def test_local_response_normalization_rejects_bad_inputs():
    with pytest.raises(C.ShapeError, match='LocalResponseNormalization.*channel axis'):
        C.local_response_normalization(C.input_variable(()), 2, 1.0, 0.0001, 0.75)
    with pytest.raises(C.ArgumentError, match='local_response_normalization: depth_radius -1'):
        C.local_response_normalization(C.input_variable((3, 2, 2)), -1, 1.0, 0.0001, 0.75)


# ---- batch_normalization ----

@pytest.mark.parametrize('shape', [(1,), (16,), (16, 32), (4, 6, 6)])
@pytest.mark.parametrize('spatial', [True, False])
def test_batch_normalization_non_linear_test_values(shape, spatial):
    # test_op_batch_normalization_numpy's forward: inference by the running statistics.
    param_shape = (shape[0],) if spatial else (int(np.prod(shape)),) if len(shape) == 1 \
        else shape
    x = 10 * np.random.default_rng(3).random((3,) + shape).astype(np.float32)
    i = C.input_variable(shape)
    scale = C.parameter(param_shape, init=1)
    bias = C.parameter(param_shape, init=2)
    run_mean = C.constant(3, shape=param_shape)
    run_var = C.constant(4, shape=param_shape)
    run_count = C.constant(2, shape=())
    bn = C.batch_normalization(i, scale, bias, run_mean, run_var, spatial,
                               normalization_time_constant=-1, epsilon=0.01,
                               running_count=run_count)
    np.testing.assert_allclose(bn.eval({i: x}), (x - 3) / np.sqrt(4 + 0.01) * 1 + 2,
                               rtol=1e-5)


def test_batch_normalization_without_running_count_warns_as_cntk():
    x = C.input_variable(1, dtype=np.float64)
    args = (x, C.parameter(1, init=3, dtype=np.float64), C.parameter(1, init=4, dtype=np.float64),
            C.constant(1, shape=1, dtype=np.float64), C.constant(2, shape=1, dtype=np.float64),
            False)
    with pytest.warns(Warning, match="batch_normalization requires an additional "
                                     "'running_count' parameter"):
        bn = C.batch_normalization(*args, use_cudnn_engine=True)
    assert bn.shape == (1,)
    count = bn.root_function.inputs[5]  # a constant 0 of the operand's dtype
    assert count.is_constant and count.dtype == np.float64 and np.asarray(count.value) == 0
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        given = C.constant(0, shape=(), dtype=np.float64)
        assert C.batch_normalization(*args, running_count=given).root_function.inputs[5] == given

