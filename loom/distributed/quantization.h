// Column-wise quantization with error feedback (CNTK's ColumnQuantizer / QuantizedMatrix, the
// heart of 1-bit SGD).
//
// A tensor is read as columns of `rows` consecutive elements (its last axis, CNTK's first:
// CNTK's column-major matrices keep that axis contiguous). Each column is quantized on its
// own: the residual of the previous step is added first, every value becomes a bits-wide
// level, and what the levels lose is the new residual, carried to the next step, so that over
// steps nothing is lost (error feedback).
//  - 1 bit: values >= 0 and values < 0 form two groups; each reconstructs to its group's mean.
//  - 2..8 bits: 2^bits levels spread evenly over mean +- 4 sigma, the mean taken as 0 and sigma
//    the column's root mean square (CNTK); values outside clip to the end levels.
// A quantized column is its range (two values of the element type: lower, upper) followed by
// the levels packed into 32-bit words, 32 / bits levels per word, the first in the lowest bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::distributed {

// The bit widths the quantizer accepts.
inline constexpr int kMinQuantizationBits = 1;
inline constexpr int kMaxQuantizationBits = 8;

// The bytes of one quantized column of `rows` elements of T.
template <typename T>
size_t quantized_column_bytes(size_t rows, int bits);

// Quantizes the `cols` columns of `rows` elements at values (column c at values + c * rows)
// plus residual, into `out` (cols * quantized_column_bytes bytes), and stores the new residual.
template <typename T>
void quantize_columns(const T* values, T* residual, size_t rows, size_t cols, int bits,
                      std::byte* out);

// Reconstructs the columns that quantize_columns wrote; adds them to `out` when add is true.
template <typename T>
void unquantize_columns(const std::byte* in, size_t rows, size_t cols, int bits, T* out, bool add);

}  // namespace loom::distributed
