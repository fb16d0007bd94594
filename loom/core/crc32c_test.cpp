#include "loom/core/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "loom/core/threads.h"

namespace loom {
namespace {

uint32_t crc_of(const std::string& s) {
  return crc32c(s.data(), s.size());
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc_of(""), 0u);
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);  // the check value of CRC-32C
  EXPECT_EQ(crc_of("a"), 0xC1D04330u);
  // RFC 3720 (iSCSI) B.4 test patterns.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
  for (int i = 0; i < 32; ++i) inc[i] = uint8_t(i), dec[i] = uint8_t(31 - i);
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(crc32c(dec), 0x113FDB5Cu);
}

TEST(Crc32c, TableAndInstructionAgreeAtEveryLengthAndAlignment) {
  std::mt19937 gen(1);
  std::vector<uint8_t> data(1100);
  for (auto& b : data) b = uint8_t(gen());
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t n = 0; n + offset <= data.size(); n += (n < 70 ? 1 : 37)) {
      uint32_t t = detail::crc32c_table(data.data() + offset, n, 0);
      ASSERT_EQ(crc32c(data.data() + offset, n), t) << "offset " << offset << " length " << n;
      if (detail::crc32c_has_sse42()) {
        ASSERT_EQ(detail::crc32c_sse42(data.data() + offset, n, 0), t) << n;
      }
    }
}

// Long inputs run through the three-stream blocks (3 x 8192 and 3 x 256 bytes) and their joins.
TEST(Crc32c, TableAndInstructionAgreeAcrossTheBlockSizes) {
  std::mt19937 gen(2);
  std::vector<uint8_t> data(3 * 8192 * 2 + 3 * 256 + 100);
  for (auto& b : data) b = uint8_t(gen());
  for (size_t n : {767, 768, 769, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 3 * 256 + 7, 6 * 8192 + 1})
    for (size_t offset : {0, 3}) {
      uint32_t t = detail::crc32c_table(data.data() + offset, n, 0x12345678u);
      EXPECT_EQ(crc32c(data.data() + offset, n, 0x12345678u), t) << n << " at " << offset;
    }
}

TEST(Crc32c, ExtendsAcrossPieces) {
  std::string a = "The quick brown fox ", b = "jumps over the lazy dog";
  uint32_t whole = crc_of(a + b);
  EXPECT_EQ(crc32c(b.data(), b.size(), crc_of(a)), whole);
  EXPECT_EQ(detail::crc32c_table(b.data(), b.size(), detail::crc32c_table(a.data(), a.size(), 0)),
            whole);
  EXPECT_EQ(crc_of("The quick brown fox jumps over the lazy dog"), 0x22620404u);
}

TEST(Crc32c, CombineEqualsTheCrcOfTheJoinedBytes) {
  std::mt19937 gen(3);
  std::vector<uint8_t> data(5000);
  for (auto& b : data) b = uint8_t(gen());
  const uint32_t whole = crc32c(data.data(), data.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{255}, size_t{4096},
                       data.size() - 1, data.size()}) {
    const uint32_t a = crc32c(data.data(), split);
    const uint32_t b = crc32c(data.data() + split, data.size() - split);
    EXPECT_EQ(crc32c_combine(a, b, data.size() - split), whole) << "split at " << split;
  }
  EXPECT_EQ(crc32c_combine(0, 0, 0), 0u);  // empty followed by empty
  EXPECT_EQ(crc32c_combine(crc_of("123456789"), crc_of(""), 0), 0xE3069283u);
  EXPECT_EQ(crc32c_combine(crc_of(""), crc_of("123456789"), 9), 0xE3069283u);
}

// From kParallelBytes on, crc32c() computes a piece per thread and combines them: the value
// is the single-thread one for any thread count (three make unequal, unaligned pieces).
TEST(Crc32c, ThreadedLongInputsEqualTheTable) {
  std::mt19937 gen(4);
  std::vector<uint8_t> data((size_t{20} << 20) + 13);
  for (auto& b : data) b = uint8_t(gen());
  const uint32_t expected = detail::crc32c_table(data.data(), data.size(), 0);
  const uint32_t continued = detail::crc32c_table(data.data() + 5, data.size() - 5, 0xdeadbeefu);
  const int before = get_max_num_cpu_threads();
  for (int threads : {1, 2, 3}) {
    set_max_num_cpu_threads(threads);
    EXPECT_EQ(crc32c(data.data(), data.size()), expected) << threads << " threads";
    EXPECT_EQ(crc32c(data.data() + 5, data.size() - 5, 0xdeadbeefu), continued)
        << threads << " threads";
  }
  set_max_num_cpu_threads(before);
}

TEST(Crc32c, MaskRoundTripsAsTensorFlowDefinesIt) {
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu}) EXPECT_EQ(crc32c_unmask(crc32c_mask(c)), c);
  // TensorFlow: masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
  EXPECT_EQ(crc32c_mask(0), 0xa282ead8u);
  EXPECT_EQ(crc32c_mask(0xE3069283u), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

}  // namespace
}  // namespace loom
