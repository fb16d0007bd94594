// NDArrayView: a tensor's data. A view is a handle: copies share the storage (as CNTK's
// NDArrayViewPtr does); deep_clone() copies it. Dense storage is row-major and 64-byte
// aligned. Sparse storage is CSR over the matrix [rows = product of all but the last axis,
// cols = last axis], so a batch of one-hot vectors is one CSR row per sample.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/core/data_type.h"
#include "loom/core/device.h"
#include "loom/core/error.h"
#include "loom/core/shape.h"

namespace loom {

// An aligned, zero-initialized block of bytes.
class Buffer {
 public:
  // Zero-filled, or left as allocated where the caller writes every byte.
  explicit Buffer(size_t bytes, bool zeroed = true);
  // Memory someone else owns (a mapped file): owner keeps it alive as long as the buffer lives,
  // and nothing here frees it.
  Buffer(void* data, size_t bytes, std::shared_ptr<const void> owner);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
  std::shared_ptr<const void> owner_;  // set for borrowed memory
};

class NDArrayView {
 public:
  // A zero-filled dense tensor.
  NDArrayView(DataType dtype, const NDShape& shape,
              DeviceDescriptor device = DeviceDescriptor::use_default_device());

  template <typename T>
  static NDArrayView from_vector(const NDShape& shape, std::span<const T> values);
  template <typename T>
  static NDArrayView from_vector(const NDShape& shape, const std::vector<T>& values) {
    return from_vector<T>(shape, std::span<const T>(values));
  }
  // A dense tensor whose values are undefined until written, for code that writes every
  // element (zero-filling a minibatch's 800 KB took a third of its reading).
  static NDArrayView uninitialized(DataType dtype, const NDShape& shape);
  // A dense tensor over storage (at least shape's bytes), which it shares.
  static NDArrayView over(DataType dtype, const NDShape& shape, std::shared_ptr<Buffer> storage);
  // A sparse CSR tensor; row_offsets has rows+1 entries, col_indices and values nnz each.
  template <typename T>
  static NDArrayView sparse_csr(const NDShape& shape, std::vector<int32_t> row_offsets,
                                std::vector<int32_t> col_indices, const std::vector<T>& values);

  DataType dtype() const { return dtype_; }
  const NDShape& shape() const { return shape_; }
  DeviceDescriptor device() const { return device_; }
  bool is_sparse() const { return csr_ != nullptr; }
  size_t size() const { return shape_.total_size(); }

  // Dense element access; the dtype must match T.
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;
  void* raw_data();
  const void* raw_data() const;

  // CSR parts (sparse views only).
  size_t csr_rows() const;
  size_t csr_cols() const { return shape_.rank() ? shape_[shape_.rank() - 1] : 1; }
  size_t nnz() const;
  const std::vector<int32_t>& csr_row_offsets() const;
  const std::vector<int32_t>& csr_col_indices() const;
  template <typename T>
  const T* csr_values() const;
  // CSR rows [first, first + count) written dense at dst (count rows of csr_cols() elements of
  // this view's dtype; zeros where a row has no entry).
  void csr_rows_to_dense(size_t first, size_t count, void* dst) const;

  // All elements in row-major order, densified, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;
  NDArrayView to_dense() const;
  NDArrayView deep_clone() const;
  // Copies other's elements into this view's storage; shapes must match (dense target).
  void copy_from(const NDArrayView& other);
  void fill(double value);
  // A view of the same storage with another shape of equal total size (sparse: same last axis).
  NDArrayView reshaped(const NDShape& shape) const;
  // True when both handles share storage.
  bool aliases(const NDArrayView& other) const { return buffer_ && buffer_ == other.buffer_; }

  // Item i along the first axis (a batch's sample i): a view of the same storage (a sparse
  // tensor's item is densified), of the shape without that axis.
  NDArrayView operator[](size_t i) const;
  // The position of the largest element in row-major order, the first of equals (numpy's
  // a.argmax()): a class index for one sample's scores.
  size_t argmax() const;
  // The elements as print(a) shows them in numpy 1.13, as the seeds print arrays:
  // "[[ 1.5  -2.  ]\n [ 0.25  3.  ]]": 8 decimals with trailing zeros dropped, the points
  // aligned, a column for the sign, exponent form when the magnitudes reach 1e8, go below 1e-4
  // or span over 1e3, rows wrapped at 75 characters, and more than 1000 elements summarized as
  // the first and last 3 along each axis around "...,".
  std::string to_string() const;

 private:
  struct Csr {
    std::vector<int32_t> row_offsets;
    std::vector<int32_t> col_indices;
    std::shared_ptr<Buffer> values;
  };
  NDArrayView() = default;
  void check_dtype(DataType expected) const;

  DataType dtype_ = DataType::Float32;
  NDShape shape_;
  DeviceDescriptor device_ = DeviceDescriptor::cpu_device();
  std::shared_ptr<Buffer> buffer_;  // dense storage
  std::shared_ptr<const Csr> csr_;  // sparse storage (immutable once built)
};

std::ostream& operator<<(std::ostream& out, const NDArrayView& a);

}  // namespace loom
