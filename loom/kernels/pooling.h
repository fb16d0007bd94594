// Max and average pooling over dense row-major tensors [N, C, spatial...] (1 to 3 spatial
// axes, each channel on its own), windows placed as SpatialAxis says (kernel = window,
// dilation 1). float runs oneDNN primitives, except max pooling in training of activations
// held blocked (Loom's own kernel) and shapes with a window entirely in the padding (the plain
// loops); double runs plain loops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "loom/kernels/convolution.h"

namespace loom::kernels {

enum class PoolKind {
  Max,                // padding never wins
  Average,            // the mean of the window's elements inside the input
  AverageIncludePad,  // padding counts as zeros: the sum over the full window size
};

// Where a max pooling's maximum came from: an offset within one channel plane of the input,
// kNoInput where there is none (a window entirely in the padding).
using ArgMax = uint32_t;
constexpr ArgMax kNoInput = std::numeric_limits<ArgMax>::max();

struct PoolShape {
  size_t batch = 1, channels = 1;
  std::vector<SpatialAxis> axes;  // 1 to 3; dilation must be 1
  ConvLayout layout = ConvLayout::Auto;
  // Loom's memory of x and dx (input) and of y and dy (output): row-major, or blocked (see
  // kChannelBlock; only where can_block() says so).
  bool input_blocked = false, output_blocked = false;

  size_t input_size() const;
  size_t output_size() const;
};

// Checks extents and rank; throws ShapeError naming `what`.
void check_pool_shape(const PoolShape& s, const char* what);

// Whether the float kernels can keep this shape's activations in the blocked layout.
bool can_block(const PoolShape& s);

// Bytes of the workspace that max pooling's forward (training) fills and its backward reads:
// where each maximum came from. 0 for average pooling.
template <typename T>
size_t pooling_workspace_bytes(const PoolShape& s, PoolKind kind);

// y = pool(x). With a workspace (of pooling_workspace_bytes), max pooling records the argmax
// for backward; without (nullptr), it runs in inference mode.
template <typename T>
void pooling_forward(const PoolShape& s, PoolKind kind, const T* x, T* y, void* workspace);
// dx (+)= the gradient with respect to x given dy; max pooling needs the forward's workspace.
template <typename T>
void pooling_backward(const PoolShape& s, PoolKind kind, const T* dy, const void* workspace, T* dx,
                      bool accumulate);

// Max unpooling (CNTK's MaxUnpooling): y, of the pooling input's shape (input_size()), is 0
// but where max pooling of pooling_input finds its maxima, which take the values of x (of the
// pooled shape, output_size()); where two windows choose one position, the later window's value
// stays. where (output_size() entries) receives, per element of x, the offset in its channel
// plane its value went to, kNoInput where none (its window is in the padding, or a later
// window's value replaced it), which backward reads.
template <typename T>
void max_unpooling_forward(const PoolShape& s, const T* x, const T* pooling_input, T* y,
                           ArgMax* where);
// dx (+)= dy at the positions where forward put x's values (0 where none).
template <typename T>
void max_unpooling_backward(const PoolShape& s, const T* dy, const ArgMax* where, T* dx,
                            bool accumulate);

// Max pooling of regions of interest (CNTK's ROIPooling; Fast R-CNN's). x is [N, C, H, W], rois
// [N, R, 4] with each region's (x1, y1, x2, y2) in the original image's coordinates, y
// [N, R, C, PH, PW]. A region covers columns round(x1 * spatial_scale) to
// round(x2 * spatial_scale) and rows likewise (at least one each), cut into PH x PW cells of
// floor to ceil fractional bounds, clipped to the map; an empty cell gives 0.
struct RoiPoolShape {
  size_t batch = 1, channels = 1, height = 1, width = 1, rois = 1;
  size_t pooled_height = 1, pooled_width = 1;
  double spatial_scale = 1;

  size_t input_size() const { return batch * channels * height * width; }
  size_t output_size() const { return batch * rois * channels * pooled_height * pooled_width; }
};

// where (output_size() entries) receives each output's offset in its channel plane of x, or
// kNoInput for an empty cell.
template <typename T>
void roi_pooling_forward(const RoiPoolShape& s, const T* x, const T* rois, T* y, ArgMax* where);
// dx (+)= the sum of the gradients of the outputs whose maxima each element of x was.
template <typename T>
void roi_pooling_backward(const RoiPoolShape& s, const T* dy, const ArgMax* where, T* dx,
                          bool accumulate);

}  // namespace loom::kernels
