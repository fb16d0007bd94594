// NDShape: the static shape of a tensor, in row-major (numpy) order: the last axis is the
// contiguous one. A dimension may be unknown until shape inference fixes it (kInferred), or
// decided anew by each minibatch (kFree).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace loom {

class NDShape {
 public:
  // A dimension whose size is filled in by shape inference at the first call of a layer.
  static constexpr size_t kInferred = static_cast<size_t>(-1);
  // CNTK's FreeDimension: a static axis whose size the data give at run time (the steps of
  // sequence::unpack's result); it stays free through shape inference of the ops downstream,
  // and the executor learns each minibatch's size from OpDef::output_shape.
  static constexpr size_t kFree = static_cast<size_t>(-3);

  NDShape() = default;
  NDShape(std::initializer_list<size_t> dims) : dims_(dims) {}
  // One axis, as CNTK's `input_variable(2)`: `NDShape(2)` is `NDShape{2}`.
  NDShape(size_t dim) : dims_{dim} {}
  explicit NDShape(std::vector<size_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  size_t operator[](size_t i) const { return dims_.at(i); }
  size_t& operator[](size_t i) { return dims_.at(i); }
  const std::vector<size_t>& dims() const { return dims_; }
  bool empty() const { return dims_.empty(); }

  // Number of elements; 1 for a scalar (rank 0). Not meaningful while has_inferred() or
  // has_free().
  size_t total_size() const;
  bool has_inferred() const;
  bool has_free() const;

  // Sub-shape of axes [begin, end).
  NDShape sub_shape(size_t begin, size_t end) const;
  NDShape sub_shape(size_t begin) const { return sub_shape(begin, rank()); }
  // This shape followed by other's axes.
  NDShape append(const NDShape& other) const;
  NDShape prepend(size_t dim) const;
  // Becomes [first, rest...] reusing this shape's storage (no allocation once it is large
  // enough: the executor does this for every tensor of every minibatch).
  void assign_prepended(size_t first, const NDShape& rest);

  // "[2]", "[28,28]", "[]"; an inferred dimension prints as -1 and a free one as -3, as in
  // CNTK's Python API.
  std::string to_string() const;

  bool operator==(const NDShape&) const = default;

 private:
  std::vector<size_t> dims_;
};

}  // namespace loom
