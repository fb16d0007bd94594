#include "loom/serialize/dictionary_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "loom/core/error.h"

namespace loom {

static_assert(std::endian::native == std::endian::little,
              "Loom files are little-endian; a big-endian port must swap bytes here");

namespace {

enum class Storage : uint8_t { Dense = 0, SparseCsr = 1 };

}  // namespace

// ---- encoding ----

void Encoder::raw_bytes(const void* data, size_t n) {
  if (n == 0) return;
  if (used_ + n > sizeof buffer_) flush();
  if (n >= sizeof buffer_) {
    sink_.write(data, n);
    return;
  }
  std::memcpy(buffer_ + used_, data, n);
  used_ += n;
}

void Encoder::flush() {
  if (used_) sink_.write(buffer_, used_);
  used_ = 0;
}

void Encoder::raw_string(std::string_view s) {
  raw<uint64_t>(s.size());
  raw_bytes(s.data(), s.size());
}

void Encoder::raw_shape(const NDShape& shape) {
  raw<uint64_t>(shape.rank());
  for (size_t d : shape.dims()) raw<uint64_t>(d);
}

void Encoder::begin_map(size_t size) {
  raw(ValueTag::Map);
  raw<uint64_t>(size);
}

void Encoder::key(std::string_view key) {
  raw_string(key);
}

void Encoder::begin_vector(size_t size) {
  raw(ValueTag::Vector);
  raw<uint64_t>(size);
}

void Encoder::put_bool(bool v) {
  raw(ValueTag::Bool);
  raw<uint8_t>(v ? 1 : 0);
}

void Encoder::put_int64(int64_t v) {
  raw(ValueTag::Int64);
  raw(v);
}

void Encoder::put_uint64(uint64_t v) {
  raw(ValueTag::UInt64);
  raw(v);
}

void Encoder::put_double(double v) {
  raw(ValueTag::Double);
  raw(v);
}

void Encoder::put_string(std::string_view v) {
  raw(ValueTag::String);
  raw_string(v);
}

void Encoder::put_shape(const NDShape& v) {
  raw(ValueTag::Shape);
  raw_shape(v);
}

void Encoder::put_tensor(const NDArrayView& t) {
  raw(ValueTag::Tensor);
  raw<uint8_t>(uint8_t(t.dtype()));
  raw<uint8_t>(uint8_t(t.is_sparse() ? Storage::SparseCsr : Storage::Dense));
  raw_shape(t.shape());
  const size_t elem = size_of(t.dtype());
  if (!t.is_sparse()) {
    LOOM_CHECK(!t.shape().has_inferred(), ArgumentError, "cannot encode a tensor of shape ",
               t.shape().to_string(), ": it has inferred dimensions");
    raw_bytes(t.raw_data(), t.size() * elem);
    return;
  }
  raw<uint64_t>(t.nnz());
  raw_bytes(t.csr_row_offsets().data(), t.csr_row_offsets().size() * sizeof(int32_t));
  raw_bytes(t.csr_col_indices().data(), t.csr_col_indices().size() * sizeof(int32_t));
  dispatch(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    raw_bytes(t.csr_values<T>(), t.nnz() * elem);
  });
}

void Encoder::put(const DictionaryValue& value) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::monostate>) {
          raw(ValueTag::None);
        } else if constexpr (std::is_same_v<V, bool>) {
          put_bool(v);
        } else if constexpr (std::is_same_v<V, int64_t>) {
          put_int64(v);
        } else if constexpr (std::is_same_v<V, uint64_t>) {
          put_uint64(v);
        } else if constexpr (std::is_same_v<V, double>) {
          put_double(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          put_string(v);
        } else if constexpr (std::is_same_v<V, NDShape>) {
          put_shape(v);
        } else if constexpr (std::is_same_v<V, DictionaryVector>) {
          begin_vector(v.size());
          for (const auto& item : v) put(item);
        } else if constexpr (std::is_same_v<V, DictionaryMap>) {
          put(v);
        } else {
          static_assert(std::is_same_v<V, NDArrayView>);
          put_tensor(v);
        }
      },
      value.storage());
}

void Encoder::put(const DictionaryMap& m) {
  begin_map(m.size());
  for (const auto& [k, item] : m) {
    key(k);
    put(item);
  }
}

void VectorSink::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  out_.insert(out_.end(), p, p + n);
}

namespace {

// ---- decoding ----

class Decoder {
 public:
  // Encoded bytes per value above which a large input may hold values beyond
  // DecodeLimits::max_values (a model's graph is about 23 bytes a value).
  static constexpr size_t kBytesPerValue = 16;

  Decoder(std::span<const uint8_t> bytes, const std::string& where, uint64_t base,
          const DecodeLimits& limits, std::shared_ptr<const void> view_owner = nullptr)
      : bytes_(bytes),
        where_(where),
        base_(base),
        limits_(limits),
        max_values_(std::max<size_t>(limits.max_values, bytes.size() / kBytesPerValue)),
        view_owner_(std::move(view_owner)) {}

  size_t left() const { return bytes_.size() - pos_; }
  size_t pos() const { return pos_; }

  template <typename... Parts>
  [[noreturn]] void fail_at(size_t pos, const Parts&... parts) const {
    throw DataError(detail::concat(where_, ": at byte ", base_ + pos, ": ", parts...));
  }

  void need(size_t n, const char* what) const {
    if (n > left())
      fail_at(pos_, "truncated: ", what, " needs ", n, " bytes, only ", left(), " are left");
  }

  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  const uint8_t* take(size_t n, const char* what) {
    need(n, what);
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

  // A count of items of at least min_item_bytes each: more than the bytes left can hold
  // is malformed, which bounds every allocation by the input size.
  size_t count(const char* what, size_t min_item_bytes) {
    size_t at = pos_;
    uint64_t n = get<uint64_t>(what);
    if (n > left() / min_item_bytes)
      fail_at(at, what, " ", n, " cannot fit in the ", left(), " bytes left");
    return size_t(n);
  }

  std::string string(const char* what) {
    size_t n = count(what, 1);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

  size_t shape_rank() {
    size_t at = pos_;
    size_t rank = count("shape rank", sizeof(uint64_t));
    if (rank > limits_.max_rank)
      fail_at(at, "shape rank ", rank, " exceeds the limit of ", limits_.max_rank);
    return rank;
  }

  NDShape shape() {
    std::vector<size_t> dims(shape_rank());
    for (auto& d : dims) d = size_t(get<uint64_t>("shape dimension"));
    return NDShape(std::move(dims));
  }

  DictionaryValue value(size_t depth) {
    size_t at = pos_;
    auto tag = get<uint8_t>("value tag");
    count_value(at);
    switch (ValueTag(tag)) {
      case ValueTag::None:
        return {};
      case ValueTag::Bool: {
        auto b = get<uint8_t>("bool");
        if (b > 1) fail_at(at + 1, "bool byte is ", int(b), ", not 0 or 1");
        return DictionaryValue(b == 1);
      }
      case ValueTag::Int64:
        return DictionaryValue(get<int64_t>("int64"));
      case ValueTag::UInt64:
        return DictionaryValue(get<uint64_t>("uint64"));
      case ValueTag::Double:
        return DictionaryValue(get<double>("double"));
      case ValueTag::String:
        return DictionaryValue(string("string length"));
      case ValueTag::Shape:
        return DictionaryValue(shape());
      case ValueTag::Vector: {
        size_t n = vector_length(at, depth);
        DictionaryVector v;
        v.reserve(std::min<size_t>(n, 1024));  // grows with what is really there
        for (size_t i = 0; i < n; ++i) v.push_back(value(depth + 1));
        return DictionaryValue(std::move(v));
      }
      case ValueTag::Map:
        return DictionaryValue(map(at, depth));
      case ValueTag::Tensor:
        return DictionaryValue(tensor(at));
    }
    unknown_tag(at, tag);
  }

  // Passes over one value without building it. Its tags, counts, lengths and nesting are
  // checked as value() checks them; what it holds is checked when it is decoded.
  void skip(size_t depth) {
    size_t at = pos_;
    auto tag = get<uint8_t>("value tag");
    switch (ValueTag(tag)) {
      case ValueTag::None:
        return;
      case ValueTag::Bool:
        take(1, "bool");
        return;
      case ValueTag::Int64:
      case ValueTag::UInt64:
      case ValueTag::Double:
        take(8, "number");
        return;
      case ValueTag::String:
        take(count("string length", 1), "string");
        return;
      case ValueTag::Shape:
        take(shape_rank() * sizeof(uint64_t), "shape dimensions");
        return;
      case ValueTag::Vector:
        for (size_t i = 0, n = vector_length(at, depth); i < n; ++i) skip(depth + 1);
        return;
      case ValueTag::Map:
        for (size_t i = 0, n = map_size(at, depth); i < n; ++i) {
          take(count("key length", 1), "key");
          skip(depth + 1);
        }
        return;
      case ValueTag::Tensor: {
        const TensorHeader h = tensor_header(at);
        if (h.dense) {
          take(h.elements * size_of(h.dtype), "tensor data");
        } else {
          const SparseSizes z = sparse_sizes(h);
          take((z.rows + 1 + z.nnz) * sizeof(int32_t) + z.nnz * size_of(h.dtype), "sparse data");
        }
        return;
      }
    }
    unknown_tag(at, tag);
  }

  // The whole input, a value of tag `expected` (a map or a vector), as its items left encoded:
  // each one's bytes and offset, and for a map its key.
  std::vector<std::pair<std::string, EncodedValue>> encoded(ValueTag expected) {
    size_t at = pos_;
    auto tag = get<uint8_t>("value tag");
    if (tag != uint8_t(expected))
      fail_at(at, "value tag ", int(tag), " where ",
              expected == ValueTag::Map ? "a dictionary" : "a vector", " (tag ", int(expected),
              ") was expected");
    const bool map = expected == ValueTag::Map;
    const size_t n = map ? map_size(at, 0) : vector_length(at, 0);
    std::vector<std::pair<std::string, EncodedValue>> items;
    items.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      std::string key;
      if (map) {
        size_t key_at = pos_;
        key = string("key length");
        if (i > 0) check_key_order(key_at, items.back().first, key);
      }
      size_t start = pos_;
      skip(1);
      items.emplace_back(std::move(key),
                         EncodedValue{bytes_.subspan(start, pos_ - start), base_ + start});
    }
    expect_end();
    return items;
  }

  // A whole input that holds a map, as a map (decode_map has checked its tag byte), without
  // the copy that taking it out of a DictionaryValue would make.
  DictionaryMap top_map() {
    get<uint8_t>("value tag");
    count_value(0);
    return map(0, 0);
  }

  void expect_end() const {
    if (left() != 0) fail_at(pos_, left(), " bytes follow the end of the value");
  }

 private:
  void count_value(size_t at) {
    if (++values_ > max_values_) fail_at(at, "more than the limit of ", max_values_, " values");
  }

  // The entries of a map whose tag byte (at `at`) has been read.
  DictionaryMap map(size_t at, size_t depth) {
    size_t n = map_size(at, depth);
    DictionaryMap m;
    for (size_t i = 0; i < n; ++i) {
      size_t key_at = pos_;
      std::string key = string("key length");
      if (!m.empty()) check_key_order(key_at, m.rbegin()->first, key);
      m.emplace_hint(m.end(), std::move(key), value(depth + 1));
    }
    return m;
  }

  // Keys come sorted, as std::map writes them; anything else (a duplicate) is damage.
  void check_key_order(size_t key_at, const std::string& previous, const std::string& key) const {
    if (!(previous < key))
      fail_at(key_at, "map key '", printable(key), "' is not after the previous key '",
              printable(previous), "' (keys are written sorted and unique)");
  }

  // The item counts of a vector and a map whose tag byte (at `at`) has been read.
  size_t vector_length(size_t at, size_t depth) {
    check_depth(at, depth);
    return count("vector length", 1);  // each item has at least its tag byte
  }
  size_t map_size(size_t at, size_t depth) {
    check_depth(at, depth);
    return count("map size", sizeof(uint64_t) + 1);  // key length + value tag
  }

  [[noreturn]] void unknown_tag(size_t at, uint8_t tag) const {
    fail_at(at, "unknown value tag ", int(tag), " (known tags are 0 to ", int(ValueTag::Tensor),
            ")");
  }

  void check_depth(size_t at, size_t depth) const {
    if (depth >= limits_.max_depth)
      fail_at(at, "values nest deeper than the limit of ", limits_.max_depth);
  }

  static std::string printable(const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 64)) out += (c >= 32 && c < 127) ? c : '?';
    if (s.size() > 64) out += "...";
    return out;
  }

  // A tensor's header, after its tag byte (at `at`): data type, storage and shape, and its
  // element count without overflow. Each element needs bytes in the input (dense), or the CSR
  // row offsets need them (sparse), so the count bounds what is allocated.
  struct TensorHeader {
    DataType dtype;
    bool dense;
    NDShape shape;
    size_t elements = 1;
    size_t shape_at;
  };
  TensorHeader tensor_header(size_t at) {
    auto dtype_byte = get<uint8_t>("tensor data type");
    if (dtype_byte != uint8_t(DataType::Float32) && dtype_byte != uint8_t(DataType::Float64))
      fail_at(at + 1, "tensor data type ", int(dtype_byte), " is not 1 (float32) or 2 (float64)");
    auto storage = get<uint8_t>("tensor storage");
    if (storage > uint8_t(Storage::SparseCsr))
      fail_at(at + 2, "tensor storage ", int(storage), " is not 0 (dense) or 1 (sparse CSR)");
    TensorHeader h{DataType(dtype_byte), storage == uint8_t(Storage::Dense), {}, 1, pos_};
    h.shape = shape();
    for (size_t d : h.shape.dims())
      if (d == NDShape::kInferred || __builtin_mul_overflow(h.elements, d, &h.elements))
        fail_at(h.shape_at, "tensor shape ", h.shape.to_string(), " has ",
                d == NDShape::kInferred ? "an inferred dimension" : "too many elements");
    if (h.dense && h.elements > left() / size_of(h.dtype))
      fail_at(pos_, "truncated: tensor of shape ", h.shape.to_string(), " needs ", h.elements,
              " elements of ", size_of(h.dtype), " bytes, only ", left(), " bytes are left");
    return h;
  }

  // A sparse tensor's rows and nonzero count (read after its header), checked against its
  // elements and the bytes left.
  struct SparseSizes {
    size_t rows, cols, nnz, nnz_at;
  };
  SparseSizes sparse_sizes(const TensorHeader& h) {
    if (h.shape.rank() == 0) fail_at(h.shape_at, "a sparse tensor needs at least one axis");
    SparseSizes z;
    z.cols = h.shape[h.shape.rank() - 1];
    z.rows = z.cols ? h.elements / z.cols : 0;
    z.nnz_at = pos_;
    uint64_t nnz = get<uint64_t>("sparse nonzero count");
    if (nnz > h.elements)
      fail_at(z.nnz_at, "sparse tensor of shape ", h.shape.to_string(), " claims ", nnz,
              " nonzeros, more than its ", h.elements, " elements");
    if (z.rows >= left() / sizeof(int32_t) ||  // rows + 1 offsets
        nnz > (left() - (z.rows + 1) * sizeof(int32_t)) / (sizeof(int32_t) + size_of(h.dtype)))
      fail_at(pos_, "truncated: sparse tensor of shape ", h.shape.to_string(), " with ", nnz,
              " nonzeros needs more than the ", left(), " bytes left");
    z.nnz = size_t(nnz);
    return z;
  }

  NDArrayView tensor(size_t at) {
    const TensorHeader h = tensor_header(at);
    const DataType dtype = h.dtype;
    const size_t elem = size_of(dtype), elements = h.elements;
    if (h.dense) {
      const uint8_t* p = take(elements * elem, "tensor data");
      if (view_owner_)  // read-only memory: decode_dictionary_views says how it may be used
        return NDArrayView::over(
            dtype, h.shape,
            std::make_shared<Buffer>(const_cast<uint8_t*>(p), elements * elem, view_owner_));
      NDArrayView t(dtype, h.shape);
      if (elements) std::memcpy(t.raw_data(), p, elements * elem);
      return t;
    }
    const auto [rows, cols, nnz, nnz_at] = sparse_sizes(h);
    std::vector<int32_t> offsets(rows + 1), cols_idx(nnz);
    std::memcpy(offsets.data(), take(offsets.size() * 4, "row offsets"), offsets.size() * 4);
    size_t cols_at = pos_;
    if (nnz) std::memcpy(cols_idx.data(), take(nnz * 4, "column indices"), nnz * 4);
    if (offsets.front() != 0 || uint64_t(offsets.back()) != nnz)
      fail_at(nnz_at + 8, "sparse row offsets run from ", offsets.front(), " to ", offsets.back(),
              ", not from 0 to the nonzero count ", nnz);
    for (size_t r = 0; r < rows; ++r)
      if (offsets[r] > offsets[r + 1])
        fail_at(nnz_at + 8 + 4 * r, "sparse row offsets decrease at row ", r);
    for (size_t k = 0; k < nnz; ++k)
      if (cols_idx[k] < 0 || size_t(cols_idx[k]) >= cols)
        fail_at(cols_at + 4 * k, "sparse column index ", cols_idx[k],
                " is out of range for dimension ", cols);
    const uint8_t* p = take(nnz * elem, "sparse values");
    return dispatch(dtype, [&, count = nnz](auto zero) {
      using T = decltype(zero);
      std::vector<T> values(count);
      if (count) std::memcpy(values.data(), p, count * elem);
      return NDArrayView::sparse_csr<T>(h.shape, std::move(offsets), std::move(cols_idx), values);
    });
  }

  std::span<const uint8_t> bytes_;
  const std::string& where_;
  uint64_t base_;
  DecodeLimits limits_;
  size_t max_values_;
  std::shared_ptr<const void> view_owner_;  // set: dense tensors are views of bytes_
  size_t pos_ = 0;
  size_t values_ = 0;
};

}  // namespace

void encode_value(const DictionaryValue& value, ByteSink& out) {
  Encoder e(out);
  e.put(value);
  e.flush();
}

void encode_dictionary(const Dictionary& dictionary, ByteSink& out) {
  Encoder e(out);
  e.put(dictionary.map());
  e.flush();
}

void encode_value(const DictionaryValue& value, std::vector<uint8_t>& out) {
  VectorSink sink(out);
  encode_value(value, sink);
}

std::vector<uint8_t> encode_dictionary(const Dictionary& dictionary) {
  std::vector<uint8_t> out;
  VectorSink sink(out);
  encode_dictionary(dictionary, sink);
  return out;
}

namespace {

DictionaryValue decode(std::span<const uint8_t> bytes, const std::string& where,
                       uint64_t base_offset, const DecodeLimits& limits,
                       std::shared_ptr<const void> view_owner) {
  Decoder d(bytes, where, base_offset, limits, std::move(view_owner));
  DictionaryValue v = d.value(0);
  d.expect_end();
  return v;
}

Dictionary decode_map(std::span<const uint8_t> bytes, const std::string& where,
                      uint64_t base_offset, const DecodeLimits& limits,
                      std::shared_ptr<const void> view_owner) {
  if (!bytes.empty() && bytes[0] != uint8_t(ValueTag::Map))
    throw DataError(detail::concat(where, ": at byte ", base_offset, ": value tag ", int(bytes[0]),
                                   " where a dictionary (tag ", int(ValueTag::Map),
                                   ") was expected"));
  Decoder d(bytes, where, base_offset, limits, std::move(view_owner));
  DictionaryMap m = d.top_map();
  d.expect_end();
  return Dictionary(std::move(m));
}

}  // namespace

DictionaryValue decode_value(std::span<const uint8_t> bytes, const std::string& where,
                             uint64_t base_offset, const DecodeLimits& limits) {
  return decode(bytes, where, base_offset, limits, nullptr);
}

Dictionary decode_dictionary(std::span<const uint8_t> bytes, const std::string& where,
                             uint64_t base_offset, const DecodeLimits& limits) {
  return decode_map(bytes, where, base_offset, limits, nullptr);
}

std::vector<std::pair<std::string, EncodedValue>> encoded_entries(const EncodedValue& map,
                                                                  const std::string& where,
                                                                  const DecodeLimits& limits) {
  return Decoder(map.bytes, where, map.offset, limits).encoded(ValueTag::Map);
}

std::vector<EncodedValue> encoded_items(const EncodedValue& vector, const std::string& where,
                                        const DecodeLimits& limits) {
  auto items = Decoder(vector.bytes, where, vector.offset, limits).encoded(ValueTag::Vector);
  std::vector<EncodedValue> out;
  out.reserve(items.size());
  for (auto& item : items) out.push_back(item.second);
  return out;
}

Dictionary decode_dictionary_views(std::span<const uint8_t> bytes, const std::string& where,
                                   uint64_t base_offset, std::shared_ptr<const void> owner,
                                   const DecodeLimits& limits) {
  LOOM_CHECK(owner != nullptr, ArgumentError, "decode_dictionary_views needs the bytes' owner");
  return decode_map(bytes, where, base_offset, limits, std::move(owner));
}

namespace {
DictionaryValue own_tensors(const DictionaryValue& value) {
  if (value.is<NDArrayView>()) return DictionaryValue(value.get<NDArrayView>().deep_clone());
  if (value.is<DictionaryVector>()) {
    DictionaryVector v;
    for (const auto& item : value.get<DictionaryVector>()) v.push_back(own_tensors(item));
    return DictionaryValue(std::move(v));
  }
  if (value.is<DictionaryMap>()) {
    DictionaryMap m;
    for (const auto& [key, item] : value.get<DictionaryMap>())
      m.emplace_hint(m.end(), key, own_tensors(item));
    return DictionaryValue(std::move(m));
  }
  return value;
}
}  // namespace

Dictionary with_own_tensors(const Dictionary& d) {
  return Dictionary(own_tensors(DictionaryValue(d.map())).get<DictionaryMap>());
}

}  // namespace loom
