#include "loom/graph/initializer.h"

#include <cmath>

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
}  // namespace

void Initializer::fill(NDArrayView& t, RandomGenerator& gen) const {
  auto [fan_in, fan_out] = fans(t.shape(), output_rank, filter_rank);
  double uniform_range = 0, normal_std = 0;
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
  }
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* d = t.data<T>();
    for (size_t i = 0, n = t.size(); i < n; ++i)
      d[i] = static_cast<T>(uniform_range > 0 ? (2 * gen.uniform() - 1) * uniform_range
                                              : gen.normal() * normal_std);
  });
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

}  // namespace loom
