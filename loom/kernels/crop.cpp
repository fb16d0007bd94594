#include "loom/kernels/crop.h"

#include <algorithm>

#include "loom/kernels/detail.h"

namespace loom::kernels {

namespace {

// Calls f(window row pointer offset in x, row offset in y) for each of the window's rows, the
// images split over threads.
template <class F>
void for_each_window_row(const CropGeometry& g, F&& f) {
  const size_t image = g.height * g.width, window = g.window_height * g.window_width;
  detail::parallel_for(g.outer, g.outer * window, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      for (size_t r = 0; r < g.window_height; ++r)
        f(i * image + (g.top + r) * g.width + g.left, i * window + r * g.window_width);
  });
}

}  // namespace

template <typename T>
void crop_forward(const CropGeometry& g, const T* x, T* y) {
  for_each_window_row(
      g, [&](size_t from, size_t to) { std::copy_n(x + from, g.window_width, y + to); });
}

template <typename T>
void crop_backward(const CropGeometry& g, const T* dy, T* dx, bool accumulate) {
  if (!accumulate) std::fill_n(dx, g.outer * g.height * g.width, T(0));
  for_each_window_row(g, [&](size_t to, size_t from) {
    for (size_t k = 0; k < g.window_width; ++k) dx[to + k] += dy[from + k];
  });
}

template void crop_forward<float>(const CropGeometry&, const float*, float*);
template void crop_forward<double>(const CropGeometry&, const double*, double*);
template void crop_backward<float>(const CropGeometry&, const float*, float*, bool);
template void crop_backward<double>(const CropGeometry&, const double*, double*, bool);

}  // namespace loom::kernels
