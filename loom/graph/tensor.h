// What ops compute on inside the executor. A tensor with dynamic axes is packed: its rows
// are the real (unmasked) samples of the minibatch, one row per (sequence, step), so no op
// ever sees padding and every reduction over samples is a plain sum over rows. The rows lie
// as SequenceLayout (loom/core/sequence_layout.h) says, as a packed Value's do.
#pragma once

#include <memory>
#include <vector>

#include "loom/core/ndarray_view.h"
#include "loom/core/sequence_layout.h"
#include "loom/core/value.h"

namespace loom {

// Layouts of one minibatch; owned by the executor, valid until the next minibatch (and for as
// long as a Value made on one holds it).
class LayoutCache {
 public:
  // The layout of a batch of n samples without a sequence axis (identity order).
  const SequenceLayout* batch(size_t n);
  const SequenceLayout* add(SequenceLayout layout);
  void clear() { layouts_.clear(); }
  size_t size() const { return layouts_.size(); }

 private:
  std::vector<std::shared_ptr<const SequenceLayout>> layouts_;
};

// Grow-only storage: reallocated only when a minibatch needs more than any before it.
class TensorStorage {
 public:
  void* ensure(size_t bytes);

 private:
  std::unique_ptr<Buffer> buffer_;
};

struct Tensor {
  DataType dtype = DataType::Float32;
  // [rows] + sample shape when the tensor has dynamic axes, else the static shape.
  NDShape shape;
  const SequenceLayout* layout = nullptr;  // null: no dynamic axes
  void* data = nullptr;                    // dense elements (null when sparse)
  const NDArrayView* sparse = nullptr;     // CSR data, one CSR row per tensor row
  // Dense data [rows, C, spatial...] in oneDNN's channel-blocked layout (kernels::
  // kChannelBlock; C a multiple of the block, so the size is the same) instead of row-major.
  // The executor keeps a value blocked between the ops that take it so (OpDef::blocked_input);
  // the value and its gradient share the layout.
  bool blocked = false;

  bool dynamic() const { return layout != nullptr; }
  bool is_sparse() const { return sparse != nullptr; }
  size_t rows() const { return dynamic() ? shape[0] : 1; }
  size_t size() const { return shape.total_size(); }
  NDShape sample_shape() const { return dynamic() ? shape.sub_shape(1) : shape; }
  size_t sample_size() const {
    size_t n = 1;
    for (size_t i = dynamic() ? 1 : 0; i < shape.rank(); ++i) n *= shape[i];
    return n;
  }
  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
};

// Copies the real samples of a dense Value (padded [B, T, sample...] or packed with
// sequences, else [B, sample...]) into the packed rows of layout at dst.
void pack_dense(const Value& value, const SequenceLayout& layout, void* dst);
// A packed tensor (a value or a gradient) copied into a Value of its variable's form: packed
// sequences when as_sequence (Value::packed: the rows as they are, on the tensor's layout,
// shared when a shared_ptr holds it, else copied), else [B, sample...] (a tensor without
// dynamic axes: [1, shape...]).
Value to_value(const Tensor& t, bool as_sequence);

}  // namespace loom
