#include "loom/core/crc32c.h"

#include <array>
#include <cstring>
#include <vector>

#include "loom/core/threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define LOOM_CRC32C_X86 1
#endif

namespace loom::detail {

namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // reflected Castagnoli

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
};
constexpr Tables kTables;

}  // namespace

uint32_t crc32c_table(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian: the first byte is the low byte
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = (c >> 8) ^ t[0][(c ^ *p) & 0xff];
  return ~c;
}

#ifdef LOOM_CRC32C_X86
namespace {

// The crc32 instruction has a latency of 3 cycles and a throughput of 1, so one chain of
// them runs at a third of the speed three independent chains do. Blocks of kLong (and then
// kShort) bytes are split in three streams whose CRCs are joined with shift operators: the
// CRC register of A followed by B is shift_|B|(register after A) ^ register of B alone.
constexpr size_t kLong = 8192, kShort = 256;

// Multiplication of a CRC register by x^(8 * len) mod P, one table per byte of the register.
struct ShiftTable {
  uint32_t t[4][256];
  __attribute__((target("sse4.2"))) explicit ShiftTable(size_t len) {
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) {
        uint64_t c = uint64_t(b) << (8 * k);
        for (size_t i = 0; i < len; i += 8) c = _mm_crc32_u64(c, 0);
        t[k][b] = uint32_t(c);
      }
  }
  uint32_t shift(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

// Three streams of `block` bytes each, as long as there are 3 * block bytes.
__attribute__((target("sse4.2"))) uint64_t crc_three_streams(const uint8_t*& p, size_t& n,
                                                             uint64_t c, size_t block,
                                                             const ShiftTable& shift) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    for (const uint8_t* end = p + block; p < end; p += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p, 8);
      std::memcpy(&v1, p + block, 8);
      std::memcpy(&v2, p + 2 * block, 8);
      c = _mm_crc32_u64(c, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    c = shift.shift(uint32_t(c)) ^ uint32_t(c1);
    c = shift.shift(uint32_t(c)) ^ uint32_t(c2);
    p += 2 * block;
    n -= 3 * block;
  }
  return c;
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc) {
  static const ShiftTable long_shift(kLong), short_shift(kShort);
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n, ++p)
    c = _mm_crc32_u8(uint32_t(c), *p);
  c = crc_three_streams(p, n, c, kLong, long_shift);
  c = crc_three_streams(p, n, c, kShort, short_shift);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(uint32_t(c), *p);
  return ~uint32_t(c);
}

bool crc32c_has_sse42() {
  return __builtin_cpu_supports("sse4.2");
}
#else
uint32_t crc32c_sse42(const void* data, size_t n, uint32_t crc) {
  return crc32c_table(data, n, crc);
}
bool crc32c_has_sse42() {
  return false;
}
#endif

}  // namespace loom::detail

namespace loom {

namespace {

// Polynomials over GF(2) modulo the CRC's, reflected as the CRC register is: bit 31 is x^0,
// bit 0 is x^31.
constexpr uint32_t kOne = 1u << 31;

uint32_t multiply_mod_p(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = kOne; bit != 0; bit >>= 1) {  // a's terms x^0, x^1, ...; b = b * x^i
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ detail::kPolynomial : b >> 1;
  }
  return product;
}

}  // namespace

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b) {
  // x^(8 * len_b) by squaring: power runs through x^8, x^16, x^32, ...
  uint32_t shift = kOne, power = kOne >> 8;
  for (size_t n = len_b; n != 0; n >>= 1) {
    if (n & 1) shift = multiply_mod_p(shift, power);
    power = multiply_mod_p(power, power);
  }
  return multiply_mod_p(shift, crc_a) ^ crc_b;
}

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  static const bool sse42 = detail::crc32c_has_sse42();
  const auto single = sse42 ? detail::crc32c_sse42 : detail::crc32c_table;
  const size_t pieces = byte_pieces(n);
  if (pieces == 1) return single(data, n, crc);
  const auto* p = static_cast<const uint8_t*>(data);
  std::vector<uint32_t> crcs(pieces);
  std::vector<size_t> lengths(pieces);
  for_each_piece(n, pieces, [&](size_t i, size_t begin, size_t end) {
    crcs[i] = single(p + begin, end - begin, i == 0 ? crc : 0);
    lengths[i] = end - begin;
  });
  uint32_t c = crcs[0];
  for (size_t i = 1; i < pieces; ++i) c = crc32c_combine(c, crcs[i], lengths[i]);
  return c;
}

}  // namespace loom
