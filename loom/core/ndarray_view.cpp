#include "loom/core/ndarray_view.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "loom/core/threads.h"

namespace loom {

Buffer::Buffer(size_t bytes, bool zeroed) : bytes_(bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data_) throw std::bad_alloc();
  if (zeroed) std::memset(data_, 0, rounded ? rounded : 64);
}

Buffer::Buffer(void* data, size_t bytes, std::shared_ptr<const void> owner)
    : data_(data), bytes_(bytes), owner_(std::move(owner)) {}

Buffer::~Buffer() {
  if (!owner_) std::free(data_);
}

NDArrayView NDArrayView::uninitialized(DataType dtype, const NDShape& shape) {
  LOOM_CHECK(!shape.has_inferred(), ShapeError, "cannot allocate a tensor of shape ",
             shape.to_string(), " whose dimensions are not all known");
  return over(dtype, shape, std::make_shared<Buffer>(shape.total_size() * size_of(dtype), false));
}

NDArrayView NDArrayView::over(DataType dtype, const NDShape& shape,
                              std::shared_ptr<Buffer> storage) {
  LOOM_CHECK(
      !shape.has_inferred() && storage && storage->bytes() >= shape.total_size() * size_of(dtype),
      ArgumentError, "cannot view storage of ", storage ? storage->bytes() : 0,
      " bytes as a tensor of shape ", shape.to_string());
  NDArrayView v;
  v.dtype_ = dtype;
  v.shape_ = shape;
  v.buffer_ = std::move(storage);
  return v;
}

NDArrayView::NDArrayView(DataType dtype, const NDShape& shape, DeviceDescriptor device)
    : dtype_(dtype), shape_(shape), device_(device) {
  LOOM_CHECK(!shape.has_inferred(), ShapeError, "cannot allocate a tensor of shape ",
             shape.to_string(), " whose dimensions are not all known");
  LOOM_CHECK(device.kind() == DeviceKind::CPU, ArgumentError, "device ", device.to_string(),
             " is not available in this build");
  buffer_ = std::make_shared<Buffer>(shape.total_size() * size_of(dtype));
}

template <typename T>
NDArrayView NDArrayView::from_vector(const NDShape& shape, std::span<const T> values) {
  LOOM_CHECK(values.size() == shape.total_size(), ShapeError, "from_vector: ", values.size(),
             " values do not fill shape ", shape.to_string(), " (", shape.total_size(),
             " elements)");
  NDArrayView v(data_type_of<T>(), shape);
  if (!values.empty()) std::memcpy(v.raw_data(), values.data(), values.size() * sizeof(T));
  return v;
}

template <typename T>
NDArrayView NDArrayView::sparse_csr(const NDShape& shape, std::vector<int32_t> row_offsets,
                                    std::vector<int32_t> col_indices,
                                    const std::vector<T>& values) {
  LOOM_CHECK(shape.rank() >= 1 && !shape.has_inferred(), ShapeError, "sparse_csr: shape ",
             shape.to_string(), " needs at least one known axis");
  size_t cols = shape[shape.rank() - 1];
  size_t rows = cols ? shape.total_size() / cols : 0;
  LOOM_CHECK(row_offsets.size() == rows + 1, ShapeError, "sparse_csr: ", row_offsets.size(),
             " row offsets for ", rows, " rows of shape ", shape.to_string(), " (need rows+1)");
  LOOM_CHECK(col_indices.size() == values.size(), ShapeError, "sparse_csr: ", col_indices.size(),
             " column indices but ", values.size(), " values");
  LOOM_CHECK(row_offsets.front() == 0 && size_t(row_offsets.back()) == values.size(), ShapeError,
             "sparse_csr: row offsets must start at 0 and end at nnz=", values.size());
  for (size_t r = 0; r < rows; ++r)
    LOOM_CHECK(row_offsets[r] <= row_offsets[r + 1], ShapeError,
               "sparse_csr: row offsets decrease at row ", r);
  for (int32_t c : col_indices)
    LOOM_CHECK(c >= 0 && size_t(c) < cols, ShapeError, "sparse_csr: column index ", c,
               " is out of range for dimension ", cols);
  NDArrayView v;
  v.dtype_ = data_type_of<T>();
  v.shape_ = shape;
  auto csr = std::make_shared<Csr>();
  csr->row_offsets = std::move(row_offsets);
  csr->col_indices = std::move(col_indices);
  csr->values = std::make_shared<Buffer>(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(csr->values->data(), values.data(), values.size() * sizeof(T));
  v.csr_ = std::move(csr);
  return v;
}

void NDArrayView::check_dtype(DataType expected) const {
  LOOM_CHECK(dtype_ == expected, ShapeError, "tensor of type ", loom::to_string(dtype_),
             " accessed as ", loom::to_string(expected));
}

template <typename T>
T* NDArrayView::data() {
  check_dtype(data_type_of<T>());
  return static_cast<T*>(raw_data());
}

template <typename T>
const T* NDArrayView::data() const {
  check_dtype(data_type_of<T>());
  return static_cast<const T*>(raw_data());
}

void* NDArrayView::raw_data() {
  LOOM_CHECK(!is_sparse(), StateError, "dense access to a sparse tensor; use to_dense()");
  return buffer_->data();
}

const void* NDArrayView::raw_data() const {
  LOOM_CHECK(!is_sparse(), StateError, "dense access to a sparse tensor; use to_dense()");
  return buffer_->data();
}

size_t NDArrayView::csr_rows() const {
  LOOM_CHECK(is_sparse(), StateError, "CSR access to a dense tensor");
  return csr_->row_offsets.size() - 1;
}

size_t NDArrayView::nnz() const {
  LOOM_CHECK(is_sparse(), StateError, "CSR access to a dense tensor");
  return csr_->col_indices.size();
}

const std::vector<int32_t>& NDArrayView::csr_row_offsets() const {
  LOOM_CHECK(is_sparse(), StateError, "CSR access to a dense tensor");
  return csr_->row_offsets;
}

const std::vector<int32_t>& NDArrayView::csr_col_indices() const {
  LOOM_CHECK(is_sparse(), StateError, "CSR access to a dense tensor");
  return csr_->col_indices;
}

template <typename T>
const T* NDArrayView::csr_values() const {
  LOOM_CHECK(is_sparse(), StateError, "CSR access to a dense tensor");
  check_dtype(data_type_of<T>());
  return static_cast<const T*>(csr_->values->data());
}

template <typename T>
std::vector<T> NDArrayView::to_vector() const {
  std::vector<T> out(size());
  dispatch(dtype_, [&](auto zero) {
    using S = decltype(zero);
    if (is_sparse()) {
      const S* v = csr_values<S>();
      size_t cols = csr_cols();
      for (size_t r = 0; r + 1 < csr_->row_offsets.size(); ++r)
        for (int32_t k = csr_->row_offsets[r]; k < csr_->row_offsets[r + 1]; ++k)
          out[r * cols + csr_->col_indices[k]] += static_cast<T>(v[k]);
    } else {
      const S* d = data<S>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(d[i]);
    }
  });
  return out;
}

void NDArrayView::csr_rows_to_dense(size_t first, size_t count, void* dst) const {
  LOOM_CHECK(first + count <= csr_rows(), StateError, "CSR rows ", first, " to ", first + count,
             " of ", csr_rows());
  dispatch(dtype_, [&](auto zero) {
    using S = decltype(zero);
    const size_t cols = csr_cols();
    const S* v = csr_values<S>();
    S* out = static_cast<S*>(dst);
    std::fill_n(out, count * cols, S(0));
    for (size_t r = 0; r < count; ++r)
      for (int32_t k = csr_->row_offsets[first + r]; k < csr_->row_offsets[first + r + 1]; ++k)
        out[r * cols + size_t(csr_->col_indices[size_t(k)])] += v[k];
  });
}

NDArrayView NDArrayView::to_dense() const {
  if (!is_sparse()) return *this;
  NDArrayView d(dtype_, shape_, device_);
  csr_rows_to_dense(0, csr_rows(), d.raw_data());
  return d;
}

NDArrayView NDArrayView::deep_clone() const {
  if (is_sparse()) {
    NDArrayView v = *this;  // CSR storage is immutable, sharing it is a copy
    return v;
  }
  NDArrayView v(dtype_, shape_, device_);
  v.copy_from(*this);
  return v;
}

void NDArrayView::copy_from(const NDArrayView& other) {
  LOOM_CHECK(other.shape_ == shape_, ShapeError, "copy_from: shape ", other.shape_.to_string(),
             " does not match ", shape_.to_string());
  if (!other.is_sparse() && other.dtype_ == dtype_) {  // the common case, without a temporary
    copy_bytes(raw_data(), other.raw_data(), size() * size_of(dtype_));
    return;
  }
  dispatch(dtype_, [&](auto zero) {
    using T = decltype(zero);
    auto v = other.to_vector<T>();
    std::memcpy(raw_data(), v.data(), v.size() * sizeof(T));
  });
}

void NDArrayView::fill(double value) {
  dispatch(dtype_, [&](auto zero) {
    using T = decltype(zero);
    T* d = data<T>();
    for (size_t i = 0, n = size(); i < n; ++i) d[i] = static_cast<T>(value);
  });
}

NDArrayView NDArrayView::reshaped(const NDShape& shape) const {
  // CSR rows are all axes but the last, so a sparse view keeps its storage while that holds.
  LOOM_CHECK(!is_sparse() || (shape.rank() > 0 && shape[shape.rank() - 1] == csr_cols()),
             StateError, "reshaped: a sparse tensor of shape ", shape_.to_string(),
             " can only be reshaped with the same last axis, not to ", shape.to_string());
  LOOM_CHECK(shape.total_size() == size(), ShapeError, "reshaped: shape ", shape.to_string(),
             " does not have the ", size(), " elements of ", shape_.to_string());
  NDArrayView v = *this;
  v.shape_ = shape;
  return v;
}

#define LOOM_INSTANTIATE(T)                                                                     \
  template NDArrayView NDArrayView::from_vector<T>(const NDShape&, std::span<const T>);         \
  template NDArrayView NDArrayView::sparse_csr<T>(const NDShape&, std::vector<int32_t>,         \
                                                  std::vector<int32_t>, const std::vector<T>&); \
  template T* NDArrayView::data<T>();                                                           \
  template const T* NDArrayView::data<T>() const;                                               \
  template const T* NDArrayView::csr_values<T>() const;                                         \
  template std::vector<T> NDArrayView::to_vector<T>() const;
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom
