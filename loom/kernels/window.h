// Internal to the kernels layer: the sliding-window loops shared by the reference
// (double) convolution and pooling, and which windows oneDNN runs.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "loom/kernels/convolution.h"

namespace loom::kernels::detail {

// Product of one field over the spatial axes (input, kernel or output extents).
inline size_t spatial(const std::vector<SpatialAxis>& axes, size_t SpatialAxis::*field) {
  size_t n = 1;
  for (const SpatialAxis& a : axes) n *= a.*field;
  return n;
}

// Whether oneDNN's convolution and pooling run windows so placed: they take no negative padding
// (CNTK's centred automatic padding with a stride larger than the window has some).
inline bool onednn_runs(const std::vector<SpatialAxis>& axes) {
  return std::all_of(axes.begin(), axes.end(),
                     [](const SpatialAxis& a) { return a.pad_lower >= 0 && a.pad_upper >= 0; });
}

// The axes padded in front to three, so one loop nest serves 1D, 2D and 3D.
inline std::array<SpatialAxis, 3> axes3(const std::vector<SpatialAxis>& axes) {
  std::array<SpatialAxis, 3> a{};
  std::copy(axes.begin(), axes.end(), a.begin() + (3 - axes.size()));
  return a;
}

// Calls f(output offset, input offset, kernel offset) for every (output position, kernel tap)
// pair whose input position lies inside the input (spatial offsets within one channel).
template <class F>
void for_each_tap(const std::array<SpatialAxis, 3>& a, F&& f) {
  const long in_h = long(a[1].input), in_w = long(a[2].input);
  for (size_t od = 0; od < a[0].output; ++od)
    for (size_t oh = 0; oh < a[1].output; ++oh)
      for (size_t ow = 0; ow < a[2].output; ++ow) {
        const size_t o = (od * a[1].output + oh) * a[2].output + ow;
        for (size_t kd = 0; kd < a[0].kernel; ++kd) {
          const long id = long(od * a[0].stride + kd * a[0].dilation) - a[0].pad_lower;
          if (id < 0 || id >= long(a[0].input)) continue;
          for (size_t kh = 0; kh < a[1].kernel; ++kh) {
            const long ih = long(oh * a[1].stride + kh * a[1].dilation) - a[1].pad_lower;
            if (ih < 0 || ih >= in_h) continue;
            for (size_t kw = 0; kw < a[2].kernel; ++kw) {
              const long iw = long(ow * a[2].stride + kw * a[2].dilation) - a[2].pad_lower;
              if (iw < 0 || iw >= in_w) continue;
              f(o, size_t((id * in_h + ih) * in_w + iw),
                (kd * a[1].kernel + kh) * a[2].kernel + kw);
            }
          }
        }
      }
}

}  // namespace loom::kernels::detail
