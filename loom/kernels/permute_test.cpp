#include "loom/kernels/permute.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "loom/core/error.h"
#include "loom/kernels/kernels_test_util.h"

namespace loom::kernels {
namespace {

using namespace loom::testing;

// y's element at each index of y (row-major), read from x through the permutation.
template <typename T>
std::vector<T> naive_permute(const std::vector<T>& x, const std::vector<size_t>& dims,
                             const std::vector<size_t>& perm) {
  const size_t rank = dims.size();
  std::vector<size_t> stride(rank), idx(rank, 0), out(rank);
  for (size_t a = rank, s = 1; a-- > 0; s *= dims[a]) stride[a] = s;
  for (size_t k = 0; k < rank; ++k) out[k] = dims[perm[k]];
  std::vector<T> y(x.size());
  for (size_t o = 0; o < y.size(); ++o) {
    size_t i = 0;
    for (size_t k = 0; k < rank; ++k) i += idx[k] * stride[perm[k]];
    y[o] = x[i];
    for (size_t k = rank; k-- > 0;)
      if (++idx[k] < out[k])
        break;
      else
        idx[k] = 0;
  }
  return y;
}

template <typename T>
class Permute : public ::testing::Test {};
TYPED_TEST_SUITE(Permute, RealTypes);

// Random shapes (extents of 1 among them, so axes drop and merge) and permutations, small and
// large enough to split over threads, copied and added; the inverse permutation gives x back.
TYPED_TEST(Permute, MatchesTheElementByElementWalk) {
  using T = TypeParam;
  std::mt19937 gen(3);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t rank = 1 + gen() % 5;
    const size_t most = trial < 40 ? 6 : 70;  // the last trials have 10^4 to 10^6 elements
    std::vector<size_t> dims(rank), perm(rank);
    for (size_t& d : dims) d = 1 + gen() % most;
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::shuffle(perm.begin(), perm.end(), gen);
    const size_t n = std::accumulate(dims.begin(), dims.end(), size_t{1}, std::multiplies<>());
    if (n > (size_t{1} << 21)) continue;
    SCOPED_TRACE(::testing::PrintToString(dims) + " perm " + ::testing::PrintToString(perm));
    const std::vector<T> x = random_vector<T>(n, unsigned(trial));
    const std::vector<T> want = naive_permute(x, dims, perm);
    std::vector<T> y(n, T(7));
    permute(x.data(), y.data(), dims, perm, false);
    EXPECT_EQ(y, want);
    std::vector<T> sum = random_vector<T>(n, unsigned(trial + 100));
    std::vector<T> expected = sum;
    for (size_t i = 0; i < n; ++i) expected[i] += want[i];
    permute(x.data(), sum.data(), dims, perm, true);
    EXPECT_EQ(sum, expected);
    std::vector<size_t> inverse(rank), out(rank);
    for (size_t k = 0; k < rank; ++k) inverse[perm[k]] = k, out[k] = dims[perm[k]];
    std::vector<T> back(n);
    permute(y.data(), back.data(), out, inverse, false);
    EXPECT_EQ(back, x);
  }
}

// Blocks few and long, many and short, and empty, in strided source and destination, copied and
// added; the large cases split over threads, a piece ending inside a block.
TYPED_TEST(Permute, CopyBlocksCopiesAndAddsEachBlock) {
  using T = TypeParam;
  struct Case {
    size_t count, len, gap;
  };
  for (const Case c :
       {Case{3, 5, 2}, Case{1, 300001, 0}, Case{3, 100003, 7}, Case{4096, 37, 3}, Case{5, 0, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.count << " blocks of " << c.len);
    const size_t xs = c.len + c.gap, ys = c.len + 2 * c.gap;
    const std::vector<T> x = random_vector<T>(c.count * xs, 1);
    const std::vector<T> y0 = random_vector<T>(c.count * ys, 2);
    std::vector<T> copied = y0, added = y0, want_copied = y0, want_added = y0;
    for (size_t b = 0; b < c.count; ++b)
      for (size_t i = 0; i < c.len; ++i) {
        want_copied[b * ys + i] = x[b * xs + i];
        want_added[b * ys + i] += x[b * xs + i];
      }
    copy_blocks(c.count, c.len, x.data(), xs, copied.data(), ys, false);
    copy_blocks(c.count, c.len, x.data(), xs, added.data(), ys, true);
    EXPECT_EQ(copied, want_copied);
    EXPECT_EQ(added, want_added);
  }
}

// Rows picked in any order, repeated and missing (kNoRow), few and many, copied and added.
TYPED_TEST(Permute, GatherRowsPicksEachRowOrZero) {
  using T = TypeParam;
  for (const size_t n : {size_t{3}, size_t{4099}}) {
    const size_t rows = 70, src_rows = 40;
    std::vector<size_t> map(rows);
    for (size_t i = 0; i < rows; ++i) map[i] = i % 9 == 4 ? kNoRow : (i * 7) % src_rows;
    const std::vector<T> x = random_vector<T>(src_rows * n, 3);
    const std::vector<T> y0 = random_vector<T>(rows * n, 4);
    std::vector<T> copied = y0, added = y0, want_copied(rows * n), want_added = y0;
    for (size_t i = 0; i < rows; ++i)
      for (size_t k = 0; k < n; ++k) {
        const T v = map[i] == kNoRow ? T(0) : x[map[i] * n + k];
        want_copied[i * n + k] = v;
        want_added[i * n + k] += v;
      }
    gather_rows(rows, n, map.data(), x.data(), copied.data(), false);
    gather_rows(rows, n, map.data(), x.data(), added.data(), true);
    EXPECT_EQ(copied, want_copied);
    EXPECT_EQ(added, want_added);
  }
}

// An axis of extent 0 (a minibatch of empty sequences) moves nothing, whichever axis it is.
TEST(Permute, AnEmptyAxisMovesNothing) {
  const std::vector<float> x(1);
  std::vector<float> y(1, 5.0f);
  permute(x.data(), y.data(), {2, 0, 3}, {2, 0, 1}, false);
  permute(x.data(), y.data(), {0, 4}, {1, 0}, true);
  permute(x.data(), y.data(), {3, 0}, {0, 1}, false);
  EXPECT_EQ(y[0], 5.0f);
}

TEST(Permute, RefusesAPermutationOfAnotherRank) {
  const std::vector<float> x(6);
  std::vector<float> y(6);
  EXPECT_THROW(permute(x.data(), y.data(), {2, 3}, {0}, false), ShapeError);
}

}  // namespace
}  // namespace loom::kernels
