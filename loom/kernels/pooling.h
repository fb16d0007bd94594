// Max and average pooling over dense row-major tensors [N, C, spatial...] (1 to 3 spatial
// axes, each channel on its own), windows placed as SpatialAxis says (kernel = window,
// dilation 1). float runs oneDNN primitives, except max pooling in training of activations
// held blocked (Loom's own kernel) and shapes with a window entirely in the padding (the plain
// loops); double runs plain loops.
#pragma once

#include <cstddef>
#include <vector>

#include "loom/kernels/convolution.h"

namespace loom::kernels {

enum class PoolKind {
  Max,                // padding never wins
  Average,            // the mean of the window's elements inside the input
  AverageIncludePad,  // padding counts as zeros: the sum over the full window size
};

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

}  // namespace loom::kernels
