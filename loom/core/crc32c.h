// CRC32C (Castagnoli, the polynomial of iSCSI, ext4 and TensorFlow's record files): the
// checksum of every section of a Loom file and of TensorBoard records. Uses the SSE4.2
// crc32 instruction when the CPU has it, a table otherwise; both give the same values. Long
// inputs (kParallelBytes and more, threads.h) are split in a piece per thread, whose CRCs are
// joined with crc32c_combine: the value does not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom {

// The CRC32C of n bytes, continuing from crc (the CRC of the bytes before them, 0 at the
// start): crc32c(b, nb, crc32c(a, na)) is the CRC of a followed by b.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t crc = 0) {
  return crc32c(bytes.data(), bytes.size(), crc);
}

// The CRC32C of A followed by B, from crc_a = crc32c(A) (or A's CRC continuing an earlier
// one), crc_b = crc32c(B) and B's length: zlib's crc32_combine (crc_a times x^(8 * len_b) modulo
// the polynomial, plus crc_b), in O(log len_b) steps.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);

// TensorFlow's masked CRC for record files (a CRC of data that holds CRCs is weak otherwise).
inline uint32_t crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

namespace detail {
// The two implementations, for tests; crc32c() picks one once.
uint32_t crc32c_table(const void* data, size_t n, uint32_t crc);
uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc);
bool crc32c_has_sse42();
}  // namespace detail

}  // namespace loom
