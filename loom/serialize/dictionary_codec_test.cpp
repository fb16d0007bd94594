#include "loom/serialize/dictionary_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "loom/core/error.h"

namespace loom {
namespace {

bool same_tensor(const NDArrayView& a, const NDArrayView& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.is_sparse() != b.is_sparse())
    return false;
  if (a.is_sparse()) {
    if (a.csr_row_offsets() != b.csr_row_offsets() || a.csr_col_indices() != b.csr_col_indices())
      return false;
    return dispatch(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      return a.nnz() == 0 ||
             std::memcmp(a.csr_values<T>(), b.csr_values<T>(), a.nnz() * sizeof(T)) == 0;
    });
  }
  return a.size() == 0 ||
         std::memcmp(a.raw_data(), b.raw_data(), a.size() * size_of(a.dtype())) == 0;
}

// Deep equality, bit-exact for doubles and tensors.
bool same(const DictionaryValue& a, const DictionaryValue& b) {
  if (a.storage().index() != b.storage().index()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using V = std::decay_t<decltype(x)>;
        const V& y = std::get<V>(b.storage());
        if constexpr (std::is_same_v<V, std::monostate>) {
          return true;
        } else if constexpr (std::is_same_v<V, double>) {
          return std::memcmp(&x, &y, sizeof x) == 0;
        } else if constexpr (std::is_same_v<V, DictionaryVector>) {
          if (x.size() != y.size()) return false;
          for (size_t i = 0; i < x.size(); ++i)
            if (!same(x[i], y[i])) return false;
          return true;
        } else if constexpr (std::is_same_v<V, DictionaryMap>) {
          if (x.size() != y.size()) return false;
          for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
            if (i->first != j->first || !same(i->second, j->second)) return false;
          return true;
        } else if constexpr (std::is_same_v<V, NDArrayView>) {
          return same_tensor(x, y);
        } else {
          return x == y;
        }
      },
      a.storage());
}

Dictionary sample() {
  Dictionary d;
  d["none"] = DictionaryValue();
  d["true"] = true;
  d["false"] = false;
  d["int"] = int64_t(-1234567890123);
  d["int_min"] = std::numeric_limits<int64_t>::min();
  d["uint"] = std::numeric_limits<uint64_t>::max();
  d["double"] = 0.1;
  d["nan"] = std::numeric_limits<double>::quiet_NaN();
  d["neg_zero"] = -0.0;
  d["inf"] = -std::numeric_limits<double>::infinity();
  d["string"] = "hello";
  d["empty_string"] = "";
  d["binary_string"] = std::string("a\0b\xff", 4);
  d["shape"] = NDShape{2, 3};
  d["scalar_shape"] = NDShape{};
  d["inferred_shape"] = NDShape{NDShape::kInferred, 4};
  d["dense32"] = NDArrayView::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, -6.5f});
  d["dense64"] = NDArrayView::from_vector<double>({3}, {1e300, -0.0, 3});
  d["scalar"] = NDArrayView::from_vector<float>({}, {42});
  d["empty_tensor"] = NDArrayView(DataType::Float32, NDShape{0, 5});
  d["sparse32"] = NDArrayView::sparse_csr<float>({3, 4}, {0, 1, 1, 3}, {2, 0, 3}, {1.5f, 2, 3});
  d["sparse64"] = NDArrayView::sparse_csr<double>({2, 2, 5}, {0, 0, 1, 1, 2}, {4, 0}, {7, 8});
  d["vector"] = DictionaryVector{int64_t(1), "two", DictionaryVector{}, NDShape{5}};
  DictionaryMap inner{{"a", int64_t(1)}, {"b", DictionaryMap{{"c", true}}}};
  d["nested"] = DictionaryVector{inner, DictionaryVector{inner, DictionaryMap{}}};
  return d;
}

TEST(DictionaryCodec, RoundTripsEveryValueType) {
  Dictionary d = sample();
  auto bytes = encode_dictionary(d);
  Dictionary back = decode_dictionary(bytes, "test");
  EXPECT_TRUE(same(DictionaryValue(d.map()), DictionaryValue(back.map())));
  EXPECT_EQ(back.at("binary_string").get<std::string>(), std::string("a\0b\xff", 4));
  EXPECT_TRUE(std::isnan(back.get<double>("nan")));
  EXPECT_TRUE(std::signbit(back.get<double>("neg_zero")));
  EXPECT_TRUE(back.get<NDArrayView>("sparse32").is_sparse());
  EXPECT_EQ(back.get<NDArrayView>("sparse32").to_vector<float>(),
            d.get<NDArrayView>("sparse32").to_vector<float>());
  // Encoding is deterministic: the same dictionary gives the same bytes.
  EXPECT_EQ(encode_dictionary(back), bytes);
}

TEST(DictionaryCodec, RoundTripsSingleValues) {
  for (const DictionaryValue& v : {DictionaryValue(), DictionaryValue(true), DictionaryValue(7),
                                   DictionaryValue("x"), DictionaryValue(NDShape{1, 2})}) {
    std::vector<uint8_t> bytes;
    encode_value(v, bytes);
    EXPECT_TRUE(same(decode_value(bytes, "test"), v)) << v.type_name();
  }
}

std::string error_of(std::span<const uint8_t> bytes, const DecodeLimits& limits = {}) {
  try {
    decode_dictionary(bytes, "'f' section s", 100, limits);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(DictionaryCodec, TruncationAtEveryByteIsADataError) {
  auto bytes = encode_dictionary(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string e = error_of(std::span(bytes.data(), n));
    ASSERT_FALSE(e.empty()) << "prefix of " << n << " bytes decoded";
    ASSERT_EQ(e.rfind("'f' section s: ", 0), 0u) << e;
  }
  // And a byte too many.
  bytes.push_back(0);
  EXPECT_NE(error_of(bytes).find("1 bytes follow the end"), std::string::npos) << error_of(bytes);
}

TEST(DictionaryCodec, RandomDamageIsAnErrorOrAValidValueNeverACrash) {
  const auto good = encode_dictionary(sample());
  std::mt19937 gen(5);
  size_t errors = 0, trials = 3000;
  for (size_t t = 0; t < trials; ++t) {
    auto bytes = good;
    int flips = 1 + int(gen() % 4);
    for (int k = 0; k < flips; ++k) bytes[gen() % bytes.size()] ^= uint8_t(1 + gen() % 255);
    try {
      decode_dictionary(bytes, "test");
    } catch (const Error&) {
      ++errors;
    }
  }
  // Without a CRC (the container adds one) a flip in tensor data or a number still decodes.
  EXPECT_GT(errors, trials / 4);
}

// Bigger than the encoder's 64 KiB buffer, so its data goes to the sink uncopied.
Dictionary sample_with_large_tensor() {
  Dictionary d = sample();
  std::vector<float> values(40000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.5f;
  d["large"] = NDArrayView::from_vector<float>({200, 200}, values);
  return d;
}

TEST(DictionaryCodec, StreamedEncodingIsTheSameBytes) {
  const Dictionary d = sample_with_large_tensor();
  // A sink that takes each write as is, to see the pieces arrive in order.
  struct Pieces final : ByteSink {
    std::vector<uint8_t> bytes;
    size_t writes = 0;
    void write(const void* data, size_t n) override {
      const auto* p = static_cast<const uint8_t*>(data);
      bytes.insert(bytes.end(), p, p + n);
      ++writes;
    }
  } sink;
  encode_dictionary(d, sink);
  const std::vector<uint8_t> whole = encode_dictionary(d);
  EXPECT_EQ(sink.bytes, whole);
  EXPECT_GE(sink.writes, 3u);  // buffered fields, the large tensor on its own, the rest
  EXPECT_TRUE(
      same(DictionaryValue(decode_dictionary(whole, "test").map()), DictionaryValue(d.map())));
}

TEST(DictionaryCodec, TensorViewsDecodeTheSameValuesWithoutCopies) {
  const auto bytes = encode_dictionary(sample_with_large_tensor());
  auto owner = std::make_shared<int>(0);
  const Dictionary views = decode_dictionary_views(bytes, "test", 0, owner);
  EXPECT_TRUE(
      same(DictionaryValue(views.map()), DictionaryValue(decode_dictionary(bytes, "test").map())));
  const NDArrayView& large = views.get<NDArrayView>("large");
  const auto* data = static_cast<const uint8_t*>(large.raw_data());
  EXPECT_TRUE(data > bytes.data() && data < bytes.data() + bytes.size());  // a view of bytes
  EXPECT_GT(owner.use_count(), 1);  // the views keep the bytes' owner alive
  const Dictionary own = with_own_tensors(views);
  EXPECT_FALSE(own.get<NDArrayView>("large").aliases(large));
  EXPECT_TRUE(same_tensor(own.get<NDArrayView>("large"), large));
}

TEST(DictionaryCodec, TensorViewsRejectTheSameDamage) {
  const auto good = encode_dictionary(sample_with_large_tensor());
  auto views_error = [](std::span<const uint8_t> bytes) -> std::string {
    try {
      decode_dictionary_views(bytes, "'f' section s", 100, std::make_shared<int>(0));
    } catch (const DataError& e) {
      return e.what();
    }
    return "";
  };
  for (size_t n = 0; n < good.size(); n += (n < 2000 ? 1 : 997)) {
    const std::span<const uint8_t> prefix(good.data(), n);
    ASSERT_EQ(views_error(prefix), error_of(prefix)) << n;
    ASSERT_FALSE(views_error(prefix).empty()) << n;
  }
  std::mt19937 gen(7);
  for (int t = 0; t < 2000; ++t) {
    auto bytes = good;
    bytes[gen() % 2000] ^= uint8_t(1 + gen() % 255);  // the structure before the large data
    ASSERT_EQ(views_error(bytes), error_of(bytes)) << t;
  }
}

std::vector<uint8_t> raw(std::initializer_list<uint8_t> head, uint64_t count) {
  std::vector<uint8_t> b(head);
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(count >> (8 * i)));
  return b;
}

TEST(DictionaryCodec, HugeCountsAreRejectedBeforeAllocating) {
  // A map claiming 2^60 entries, a string of 2^62 bytes, a vector of 2^63 items.
  auto e = error_of(raw({uint8_t(ValueTag::Map)}, uint64_t(1) << 60));
  EXPECT_NE(e.find("map size 1152921504606846976 cannot fit in the 0 bytes left"),
            std::string::npos)
      << e;
  auto s = raw({uint8_t(ValueTag::Map)}, 1);
  auto key = raw({}, uint64_t(1) << 62);
  s.insert(s.end(), key.begin(), key.end());
  s.resize(s.size() + 8);
  EXPECT_NE(error_of(s).find("key length 4611686018427387904 cannot fit"), std::string::npos)
      << error_of(s);
  // A dense tensor of 2^32 x 2^32 elements (an overflowing product) and of 2^40 elements.
  std::vector<uint8_t> t = {
      uint8_t(ValueTag::Map),    1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 'k',
      uint8_t(ValueTag::Tensor), 1, 0};
  auto big = t;
  for (auto part : {raw({}, 2), raw({}, uint64_t(1) << 32), raw({}, uint64_t(1) << 32)})
    big.insert(big.end(), part.begin(), part.end());
  EXPECT_NE(error_of(big).find("too many elements"), std::string::npos) << error_of(big);
  auto large = t;
  for (auto part : {raw({}, 1), raw({}, uint64_t(1) << 40)})
    large.insert(large.end(), part.begin(), part.end());
  EXPECT_NE(error_of(large).find("truncated: tensor of shape [1099511627776] needs"),
            std::string::npos)
      << error_of(large);
  // A sparse tensor claiming more nonzeros than elements.
  auto sparse = t;
  sparse.back() = 1;
  for (auto part : {raw({}, 1), raw({}, 3), raw({}, 4)})
    sparse.insert(sparse.end(), part.begin(), part.end());
  EXPECT_NE(error_of(sparse).find("claims 4 nonzeros, more than its 3 elements"), std::string::npos)
      << error_of(sparse);
}

TEST(DictionaryCodec, DepthAndRankLimits) {
  DictionaryValue v = DictionaryVector{};
  for (int i = 0; i < 10; ++i) v = DictionaryMap{{"k", DictionaryVector{v}}};
  Dictionary d(v.get<DictionaryMap>());
  auto bytes = encode_dictionary(d);
  EXPECT_EQ(error_of(bytes), "");
  EXPECT_NE(error_of(bytes, {.max_depth = 8}).find("nest deeper than the limit of 8"),
            std::string::npos);
  Dictionary s;
  s["shape"] = NDShape(std::vector<size_t>(10, 1));
  EXPECT_NE(error_of(encode_dictionary(s), {.max_rank = 4}).find("rank 10 exceeds the limit of 4"),
            std::string::npos);
  Dictionary many;
  many["v"] = DictionaryVector(100, DictionaryValue());
  EXPECT_EQ(error_of(encode_dictionary(many), {.max_values = 102}), "");
  EXPECT_NE(error_of(encode_dictionary(many), {.max_values = 101}).find("limit of 101 values"),
            std::string::npos);
}

TEST(DictionaryCodec, StructuralDamageIsNamed) {
  Dictionary d;
  d["a"] = int64_t(1);
  d["b"] = true;
  auto bytes = encode_dictionary(d);
  // Layout: tag(1) count(8) | len(8) "a" tag int64(8) | len(8) "b" tag bool(1).
  auto bad_bool = bytes;
  bad_bool.back() = 2;
  EXPECT_NE(error_of(bad_bool).find("bool byte is 2"), std::string::npos) << error_of(bad_bool);
  auto bad_tag = bytes;
  bad_tag[1 + 8 + 8 + 1] = 77;
  EXPECT_NE(error_of(bad_tag).find("at byte 118: unknown value tag 77"), std::string::npos)
      << error_of(bad_tag);
  auto unsorted = bytes;
  unsorted[1 + 8 + 8] = 'c';  // keys "c", "b": out of order
  EXPECT_NE(error_of(unsorted).find("map key 'b' is not after the previous key 'c'"),
            std::string::npos)
      << error_of(unsorted);
  EXPECT_NE(error_of(std::vector<uint8_t>{uint8_t(ValueTag::Int64), 0, 0, 0, 0, 0, 0, 0, 0})
                .find("where a dictionary (tag 8) was expected"),
            std::string::npos);
}

TEST(DictionaryCodec, BadSparseStructureIsRejected) {
  Dictionary d;
  d["s"] = NDArrayView::sparse_csr<float>({2, 3}, {0, 1, 2}, {0, 2}, {1, 2});
  auto bytes = encode_dictionary(d);
  // ... tag(1) dtype(1) storage(1) rank(8) dims(16) nnz(8) offsets(12) cols(8) values(8)
  const size_t cols = bytes.size() - 8 - 8, offsets = cols - 12;
  auto bad_col = bytes;
  bad_col[cols + 4] = 3;
  EXPECT_NE(error_of(bad_col).find("column index 3 is out of range for dimension 3"),
            std::string::npos)
      << error_of(bad_col);
  auto bad_offsets = bytes;
  bad_offsets[offsets + 4] = 3;  // offsets {0, 3, 2}
  EXPECT_NE(error_of(bad_offsets).find("row offsets decrease at row 1"), std::string::npos)
      << error_of(bad_offsets);
}

}  // namespace
}  // namespace loom
