#include "loom/graph/initializer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/core/error.h"

namespace loom {

namespace {
// Fan-in and fan-out of a weight tensor: the trailing output_rank axes are the outputs, the
// leading filter_rank axes the receptive field (counted in both), the rest the inputs. A
// negative output_rank mirrors that: the leading -output_rank axes are the outputs and the
// trailing filter_rank axes the field (a convolution kernel [O, C, k...], as CNTK's -1).
std::pair<double, double> fans(const NDShape& s, int output_rank, int filter_rank) {
  int rank = static_cast<int>(s.rank());
  if (rank == 0) return {1, 1};
  const bool leading_outputs = output_rank < 0;
  int out_rank = std::min(leading_outputs ? -output_rank : output_rank, rank);
  int filt_rank = std::min(filter_rank, rank - out_rank);
  double out = 1, in = 1, field = 1;
  for (int i = 0; i < rank; ++i) {
    const bool is_out = leading_outputs ? i < out_rank : i >= rank - out_rank;
    const bool is_field = leading_outputs ? i >= rank - filt_rank : i < filt_rank;
    if (is_out)
      out *= double(s[i]);
    else if (is_field)
      field *= double(s[i]);
    else
      in *= double(s[i]);
  }
  if (rank == out_rank) in = 1;  // a bias: no input axes
  return {in * field, out * field};
}

// CNTK's bilinear kernel: for output channel k and input channel c, zero unless k == c, else
// (1 - |w - center| / f)(1 - |h - center| / f) with f = (size + 1) / 2, center = (size - 1) / 2.
void fill_bilinear(NDArrayView& t, size_t size) {
  const NDShape& s = t.shape();
  LOOM_CHECK(s.rank() == 4 && s[2] == size && s[3] == size && s[0] == s[1], ShapeError, "bilinear(",
             size, ", ", size, ") fills a kernel [K, C, ", size, ", ", size,
             "] with as many output channels K as input channels C, not ", s.to_string());
  const double factor = double((size + 1) / 2), center = (double(size) - 1) / 2;
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* d = t.data<T>();
    for (size_t k = 0; k < s[0]; ++k)
      for (size_t c = 0; c < s[1]; ++c)
        for (size_t h = 0; h < size; ++h)
          for (size_t w = 0; w < size; ++w)
            *d++ = k != c ? T(0)
                          : static_cast<T>((1 - std::fabs(double(w) - center) / factor) *
                                           (1 - std::fabs(double(h) - center) / factor));
  });
}

}  // namespace

void Initializer::fill(NDArrayView& t, RandomGenerator& gen) const {
  auto [fan_in, fan_out] = fans(t.shape(), output_rank, filter_rank);
  double uniform_range = 0, normal_std = 0;
  bool truncated = false;
  switch (kind) {
    case InitKind::Zeros:
      t.fill(0);
      return;
    case InitKind::Constant:
      t.fill(scale);
      return;
    case InitKind::Uniform:
      uniform_range = scale;
      break;
    case InitKind::Normal:
      normal_std = scale;
      break;
    case InitKind::GlorotUniform:
      uniform_range = scale * std::sqrt(6.0 / (fan_in + fan_out));
      break;
    case InitKind::GlorotNormal:
      normal_std = scale * std::sqrt(2.0 / (fan_in + fan_out));
      break;
    case InitKind::HeUniform:
      uniform_range = scale * std::sqrt(6.0 / fan_in);
      break;
    case InitKind::HeNormal:
      normal_std = scale * std::sqrt(2.0 / fan_in);
      break;
    case InitKind::Xavier:
      uniform_range = scale * std::sqrt(3.0 / fan_in);
      break;
    case InitKind::TruncatedNormal:
      normal_std = scale;
      truncated = true;
      break;
    case InitKind::Bilinear:
      fill_bilinear(t, static_cast<size_t>(scale));
      return;
    case InitKind::Array:
      LOOM_CHECK(values && values->shape() == t.shape(), ShapeError, "an init array of shape ",
                 values ? values->shape().to_string() : "(none)", " for a tensor of shape ",
                 t.shape().to_string());
      dispatch(t.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const std::vector<T> v = values->to_vector<T>();
        std::copy(v.begin(), v.end(), t.data<T>());
      });
      return;
  }
  auto draw = [&] {
    if (uniform_range > 0) return (2 * gen.uniform() - 1) * uniform_range;
    double x = gen.normal();
    while (truncated && std::fabs(x) > 2) x = gen.normal();
    return x * normal_std;
  };
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* d = t.data<T>();
    for (size_t i = 0, n = t.size(); i < n; ++i) d[i] = static_cast<T>(draw());
  });
}

Initializer array_initializer(const NDArrayView& values) {
  return {.kind = InitKind::Array,
          .seed = std::nullopt,
          .values = std::make_shared<const NDArrayView>(values.to_dense().deep_clone())};
}

Initializer zeros() {
  return {.kind = InitKind::Zeros, .seed = std::nullopt};
}
Initializer constant_initializer(double value) {
  return {.kind = InitKind::Constant, .scale = value, .seed = std::nullopt};
}
Initializer uniform(double scale, std::optional<uint64_t> seed) {
  return {.kind = InitKind::Uniform, .scale = scale, .seed = seed};
}
Initializer normal(double scale, std::optional<uint64_t> seed) {
  return {.kind = InitKind::Normal, .scale = scale, .seed = seed};
}
Initializer glorot_uniform(double scale, int output_rank, int filter_rank,
                           std::optional<uint64_t> seed) {
  return {InitKind::GlorotUniform, scale, output_rank, filter_rank, seed};
}
Initializer glorot_normal(double scale, int output_rank, int filter_rank,
                          std::optional<uint64_t> seed) {
  return {InitKind::GlorotNormal, scale, output_rank, filter_rank, seed};
}
Initializer he_uniform(double scale, int output_rank, int filter_rank,
                       std::optional<uint64_t> seed) {
  return {InitKind::HeUniform, scale, output_rank, filter_rank, seed};
}
Initializer he_normal(double scale, int output_rank, int filter_rank,
                      std::optional<uint64_t> seed) {
  return {InitKind::HeNormal, scale, output_rank, filter_rank, seed};
}

Initializer xavier(double scale, int output_rank, int filter_rank, std::optional<uint64_t> seed) {
  return {InitKind::Xavier, scale, output_rank, filter_rank, seed};
}
Initializer truncated_normal(double stdev, std::optional<uint64_t> seed) {
  return {.kind = InitKind::TruncatedNormal, .scale = stdev, .seed = seed};
}
Initializer bilinear(size_t kernel_width, size_t kernel_height) {
  LOOM_CHECK(kernel_width == kernel_height && kernel_width > 0, ArgumentError,
             "bilinear: the kernel must be square (CNTK's bilinear interpolation), not ",
             kernel_width, "x", kernel_height);
  return {.kind = InitKind::Bilinear, .scale = double(kernel_width), .seed = std::nullopt};
}
Initializer initializer_with_rank(Initializer init, std::optional<int> output_rank,
                                  std::optional<int> filter_rank) {
  if (output_rank) init.output_rank = *output_rank;
  if (filter_rank) {
    LOOM_CHECK(*filter_rank >= 0, ArgumentError, "initializer_with_rank: filter_rank ",
               *filter_rank, " is negative");
    init.filter_rank = *filter_rank;
  }
  return init;
}

}  // namespace loom
