#include "loom/distributed/quantization.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/core/error.h"
#include "loom/learners/parallel.h"

namespace loom::distributed {

namespace {

using Word = uint32_t;
constexpr int kWordBits = 32;

void check_bits(int bits) {
  LOOM_CHECK(bits >= kMinQuantizationBits && bits <= kMaxQuantizationBits, ArgumentError,
             "quantization: ", bits, " bits per value; expected ", kMinQuantizationBits, " to ",
             kMaxQuantizationBits);
}

size_t words_per_column(size_t rows, int bits) {
  const size_t per_word = size_t(kWordBits / bits);
  return (rows + per_word - 1) / per_word;
}

// The levels of one column: level q stands for lower + (q + 1/2) * step (CNTK's ValueQuantizer).
template <typename T>
struct Levels {
  T lower, upper, step, scale;  // scale = 1 / step; both 0 for an empty range
  Word top;                     // the highest level, 2^bits - 1

  Levels(T lo, T hi, int bits) : lower(lo), upper(hi), top((Word(1) << bits) - 1) {
    // Two levels for 1 bit; else one level fewer than 2^bits, which gives 0 a level of its own.
    const T used = bits == 1 ? T(2) : T(top);
    if (hi - lo < T(1e-36)) {
      step = scale = T(0);  // a constant column: every value reconstructs to lower
    } else {
      step = (hi - lo) / used;
      scale = used / (hi - lo);
    }
  }
  Word level(T v, int bits) const {
    if (bits == 1) return v >= T(0) ? 1 : 0;  // the threshold is 0 (CNTK's zeroThresholdFor1Bit)
    if (v <= lower) return 0;
    if (v >= upper) return top;
    return Word((v - lower) * scale);
  }
  T value(Word q) const { return (T(q) + T(0.5)) * step + lower; }
};

// The range of one column's values v (value + residual), as CNTK chooses it.
template <typename T, typename V>
Levels<T> column_levels(size_t rows, int bits, V v) {
  if (bits == 1) {
    T sum0 = 0, sum1 = 0;
    size_t n1 = 0;
    for (size_t i = 0; i < rows; ++i) {  // min and max, not branches the signs would mispredict
      const T x = v(i);
      sum0 += std::min(x, T(0));
      sum1 += std::max(x, T(0));
      n1 += x >= T(0);
    }
    const size_t n0 = rows - n1;
    // An empty group has mean 0 (CNTK counts it as one value).
    const T mean0 = sum0 / T(n0 ? n0 : 1), mean1 = sum1 / T(n1 ? n1 : 1);
    // Thresholds halfway: levels 0 and 1 reconstruct to exactly mean0 and mean1.
    const T mid = T(0.5) * (mean0 + mean1), radius = T(2) * (mean1 - mid);
    return Levels<T>(mid - radius, mid + radius, bits);
  }
  T squares = 0;
  for (size_t i = 0; i < rows; ++i) squares += v(i) * v(i);
  const T sigma = std::sqrt(squares / T(rows));
  return Levels<T>(T(-4) * sigma, T(4) * sigma, bits);
}

}  // namespace

template <typename T>
size_t quantized_column_bytes(size_t rows, int bits) {
  check_bits(bits);
  return 2 * sizeof(T) + words_per_column(rows, bits) * sizeof(Word);
}

template <typename T>
void quantize_columns(const T* values, T* residual, size_t rows, size_t cols, int bits,
                      std::byte* out) {
  const size_t column_bytes = quantized_column_bytes<T>(rows, bits);
  const size_t per_word = size_t(kWordBits / bits);
  learners_detail::parallel_for(
      cols,
      [&](size_t c) {
        const T* x = values + c * rows;
        T* r = residual + c * rows;
        const Levels<T> levels =
            column_levels<T>(rows, bits, [&](size_t i) { return x[i] + r[i]; });
        std::byte* column = out + c * column_bytes;
        std::memcpy(column, &levels.lower, sizeof(T));
        std::memcpy(column + sizeof(T), &levels.upper, sizeof(T));
        std::byte* words = column + 2 * sizeof(T);
        const T value0 = levels.value(0), value1 = levels.value(1);  // 1 bit's two values
        for (size_t w = 0, i = 0; i < rows; ++w) {
          Word word = 0;
          const size_t end = std::min(rows, i + per_word);
          if (bits == 1) {  // 1-bit SGD's case, half the time of the general level arithmetic
            for (size_t k = 0; i < end; ++k, ++i) {
              const T v = x[i] + r[i];
              const bool q = v >= T(0);
              r[i] = v - (q ? value1 : value0);
              word |= Word(q) << k;
            }
          } else {
            for (size_t k = 0; i < end; ++k, ++i) {
              const T v = x[i] + r[i];
              const Word q = levels.level(v, bits);
              r[i] = v - levels.value(q);
              word |= q << (k * size_t(bits));
            }
          }
          std::memcpy(words + w * sizeof(Word), &word, sizeof(Word));
        }
      },
      rows * cols);
}

template <typename T>
void unquantize_columns(const std::byte* in, size_t rows, size_t cols, int bits, T* out, bool add) {
  const size_t column_bytes = quantized_column_bytes<T>(rows, bits);
  const size_t per_word = size_t(kWordBits / bits);
  const Word mask = (Word(1) << bits) - 1;
  learners_detail::parallel_for(
      cols,
      [&](size_t c) {
        const std::byte* column = in + c * column_bytes;
        T lower, upper;
        std::memcpy(&lower, column, sizeof(T));
        std::memcpy(&upper, column + sizeof(T), sizeof(T));
        const Levels<T> levels(lower, upper, bits);
        const std::byte* words = column + 2 * sizeof(T);
        T* y = out + c * rows;
        for (size_t w = 0, i = 0; i < rows; ++w) {
          Word word;
          std::memcpy(&word, words + w * sizeof(Word), sizeof(Word));
          for (size_t k = 0; k < per_word && i < rows; ++k, ++i) {
            const T v = levels.value((word >> (k * size_t(bits))) & mask);
            y[i] = add ? y[i] + v : v;
          }
        }
      },
      rows * cols);
}

template size_t quantized_column_bytes<float>(size_t, int);
template size_t quantized_column_bytes<double>(size_t, int);
template void quantize_columns<float>(const float*, float*, size_t, size_t, int, std::byte*);
template void quantize_columns<double>(const double*, double*, size_t, size_t, int, std::byte*);
template void unquantize_columns<float>(const std::byte*, size_t, size_t, int, float*, bool);
template void unquantize_columns<double>(const std::byte*, size_t, size_t, int, double*, bool);

}  // namespace loom::distributed
