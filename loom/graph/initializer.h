// Parameter initializers (CNTK's glorot_uniform, he_normal, ...). An initializer is a small
// description, not code, so a model file can record how a parameter was made.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "loom/core/ndarray_view.h"
#include "loom/core/random.h"

namespace loom {

enum class InitKind {
  Zeros,
  Constant,
  Uniform,
  Normal,
  GlorotUniform,
  GlorotNormal,
  HeUniform,
  HeNormal,
  Xavier,           // CNTK's: uniform in +-scale * sqrt(3 / fan_in)
  TruncatedNormal,  // normal with standard deviation scale, drawn again beyond 2 of them
  Bilinear,         // CNTK's bilinear upsampling kernel [K, C, size, size], K = C
  // The values of an array (CNTK's init given as a NumPy array): a parameter made with it takes
  // them at once, so model files never hold this kind.
  Array
};
constexpr InitKind kLastInitKind = InitKind::Bilinear;  // the last kind a model file holds

// CNTK's DefaultParamInitScale (an int, as CNTK's), and the ranks its random initializers take
// when they are left to infer them (DefaultParamInitOutputRank, DefaultParamInitFilterRank):
// Loom's defaults.
inline constexpr int kDefaultParamInitScale = 1;
inline constexpr int kDefaultParamInitOutputRank = 1;
inline constexpr int kDefaultParamInitFilterRank = 0;

struct Initializer {
  InitKind kind = InitKind::GlorotUniform;
  double scale = kDefaultParamInitScale;  // the value for Constant; the kernel size for Bilinear
  // Trailing axes of the shape that are the output (fan-out) axes; the rest are fan-in.
  // Negative (CNTK's -1 for convolution kernels [O, C, k...]): the leading -output_rank axes
  // are the outputs and the trailing filter_rank axes the receptive field.
  int output_rank = kDefaultParamInitOutputRank;
  // Leading axes that are filter (receptive-field) axes counted in both fans; trailing ones
  // when output_rank is negative.
  int filter_rank = kDefaultParamInitFilterRank;
  // Seed of the generator; none: the parameter draws the next default stream when it is
  // created (set_fixed_random_seed), so creation order, not inference order, decides values.
  std::optional<uint64_t> seed;
  std::shared_ptr<const NDArrayView> values = nullptr;  // Array's

  // Fills t (dense, any shape) as the kind says, drawing from gen. Array: t must have the
  // array's shape (a ShapeError otherwise); its values are converted to t's type.
  void fill(NDArrayView& t, RandomGenerator& gen) const;
};

Initializer zeros();
// The initial value itself (CNTK's init as an array): parameter(shape, array_initializer(v))
// has v's shape, which must fit shape (equal extents, or an inferred one), and v's values in
// the parameter's type.
Initializer array_initializer(const NDArrayView& values);
Initializer constant_initializer(double value);
Initializer uniform(double scale, std::optional<uint64_t> seed = std::nullopt);
Initializer normal(double scale, std::optional<uint64_t> seed = std::nullopt);
Initializer glorot_uniform(double scale = kDefaultParamInitScale,
                           int output_rank = kDefaultParamInitOutputRank,
                           int filter_rank = kDefaultParamInitFilterRank,
                           std::optional<uint64_t> seed = std::nullopt);
Initializer glorot_normal(double scale = kDefaultParamInitScale,
                          int output_rank = kDefaultParamInitOutputRank,
                          int filter_rank = kDefaultParamInitFilterRank,
                          std::optional<uint64_t> seed = std::nullopt);
Initializer he_uniform(double scale = kDefaultParamInitScale,
                       int output_rank = kDefaultParamInitOutputRank,
                       int filter_rank = kDefaultParamInitFilterRank,
                       std::optional<uint64_t> seed = std::nullopt);
Initializer he_normal(double scale = kDefaultParamInitScale,
                      int output_rank = kDefaultParamInitOutputRank,
                      int filter_rank = kDefaultParamInitFilterRank,
                      std::optional<uint64_t> seed = std::nullopt);
Initializer xavier(double scale = kDefaultParamInitScale,
                   int output_rank = kDefaultParamInitOutputRank,
                   int filter_rank = kDefaultParamInitFilterRank,
                   std::optional<uint64_t> seed = std::nullopt);
Initializer truncated_normal(double stdev, std::optional<uint64_t> seed = std::nullopt);
// For a square kernel only (ArgumentError otherwise), as CNTK's.
Initializer bilinear(size_t kernel_width, size_t kernel_height);
// A copy of init with its output and filter ranks set where given (CNTK's
// initializer_with_rank).
Initializer initializer_with_rank(Initializer init, std::optional<int> output_rank = std::nullopt,
                                  std::optional<int> filter_rank = std::nullopt);

}  // namespace loom
