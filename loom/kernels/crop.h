// Cropping of the two trailing axes of a dense row-major tensor (CNTK's Crop) and its gradient.
#pragma once

#include <cstddef>

namespace loom::kernels {

// A tensor of `outer` images of height x width, cropped to window_height x window_width at
// (top, left).
struct CropGeometry {
  size_t outer = 0, height = 0, width = 0;
  size_t window_height = 0, window_width = 0, top = 0, left = 0;
};

// y [outer, window_height, window_width] = the window of x [outer, height, width].
template <typename T>
void crop_forward(const CropGeometry& g, const T* x, T* y);

// dx [outer, height, width] = (accumulate: dx +) dy in the window, 0 elsewhere.
template <typename T>
void crop_backward(const CropGeometry& g, const T* dy, T* dx, bool accumulate);

}  // namespace loom::kernels
