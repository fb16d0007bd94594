#include "loom/kernels/dropout.h"

#include <cmath>

#include "loom/core/random.h"
#include "loom/kernels/detail.h"

namespace loom::kernels {
namespace {
// Ten Philox rounds per four elements cost about as much as a dozen simple ops per element.
constexpr size_t kPhiloxCost = 12;
}  // namespace

template <typename T>
void dropout(size_t n, const T* src, T* dst, std::array<uint32_t, 2> key, double rate,
             bool accumulate) {
  // 64-bit so that a rate that rounds to 2^32 drops every element.
  const uint64_t threshold = uint64_t(std::llround(rate * 0x1.0p32));
  const T scale = T(1.0 / (1.0 - rate));
  const size_t blocks = (n + 3) / 4;
  detail::parallel_for(blocks, n * kPhiloxCost, [&](size_t begin, size_t end) {
    detail::with_accumulate(accumulate, [&](auto acc) {
      for (size_t b = begin; b < end; ++b) {
        const auto words = philox4x32(key, {uint32_t(b), uint32_t(uint64_t(b) >> 32), 0, 0});
        const size_t first = 4 * b, count = std::min<size_t>(4, n - first);
        for (size_t e = 0; e < count; ++e) {
          const T v = words[e] >= threshold ? src[first + e] * scale : T(0);
          if constexpr (decltype(acc)::value)
            dst[first + e] += v;
          else
            dst[first + e] = v;
        }
      }
    });
  });
}

template void dropout<float>(size_t, const float*, float*, std::array<uint32_t, 2>, double, bool);
template void dropout<double>(size_t, const double*, double*, std::array<uint32_t, 2>, double,
                              bool);

}  // namespace loom::kernels
