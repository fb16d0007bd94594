#include "loom/ops/op_util.h"

#include "loom/ops/op_schema.h"

namespace loom::op_util {

kernels::Dims& dims_buffer(size_t slot) {
  thread_local kernels::Dims buffers[kDimsSlots];
  return buffers[slot];
}

const kernels::Dims& aligned_dims(size_t slot, const Tensor& t, size_t sample_rank, bool row_axis) {
  kernels::Dims& d = dims_buffer(slot);
  const size_t own = op_util::sample_rank(t);
  const size_t first = t.dynamic() ? 1 : 0;
  d.assign(sample_rank + (row_axis ? 1 : 0), 1);
  if (row_axis) d[0] = t.rows();
  for (size_t i = 0; i < own; ++i) d[d.size() - own + i] = t.shape[first + i];
  return d;
}

size_t static_axis_index(const char* op, const Axis& axis, const Variable& input) {
  LOOM_CHECK(axis.is_static(), ShapeError, op, ": axis ", axis.to_string(),
             " is not a static axis; input ", input.type_string(),
             " can be indexed by static axes only here");
  const int64_t rank = int64_t(input.shape().rank());
  const int64_t i = axis.static_index();
  LOOM_CHECK(i >= -rank && i < rank, ShapeError, op, ": static axis ", i,
             " is out of range for input ", input.type_string(), " of rank ", rank);
  return static_axis_index(i, size_t(rank));
}

}  // namespace loom::op_util

namespace loom {

// The attribute helpers of op_schema.h's parameter types (axis_attribute is in registry.cpp).
namespace {

template <typename T>
DictionaryValue list_attribute(const std::vector<T>& values) {
  DictionaryVector v;
  v.reserve(values.size());
  for (T x : values) v.emplace_back(x);
  return v;
}

// The elements of a list attribute of `what` ("ints"), each of which `is` accepts as `element`
// ("an int"); an ArgumentError otherwise.
const DictionaryVector& list_elements(const DictionaryValue& value, const char* what,
                                      const char* element, bool (*is)(const DictionaryValue&)) {
  LOOM_CHECK(value.is<DictionaryVector>(), ArgumentError, "a list-of-", what, " attribute holds ",
             value.type_name(), ", not a list");
  for (const DictionaryValue& v : value.get<DictionaryVector>())
    LOOM_CHECK(is(v), ArgumentError, "a list-of-", what, " attribute holds ", v.type_name(),
               ", not ", element);
  return value.get<DictionaryVector>();
}

}  // namespace

DictionaryValue int_list_attribute(const std::vector<int64_t>& ints) {
  return list_attribute(ints);
}

std::vector<int64_t> attribute_ints(const DictionaryValue& value) {
  std::vector<int64_t> ints;
  for (const DictionaryValue& v :
       list_elements(value, "ints", "an int",
                     [](const DictionaryValue& v) { return v.is<int64_t>() || v.is<uint64_t>(); }))
    ints.push_back(v.is<int64_t>() ? v.get<int64_t>() : int64_t(v.get<uint64_t>()));
  return ints;
}

DictionaryValue bool_list_attribute(const std::vector<bool>& bools) {
  return list_attribute(bools);
}

std::vector<bool> attribute_bools(const DictionaryValue& value) {
  std::vector<bool> bools;
  for (const DictionaryValue& v : list_elements(
           value, "bools", "a bool", [](const DictionaryValue& v) { return v.is<bool>(); }))
    bools.push_back(v.get<bool>());
  return bools;
}

DictionaryValue dtype_attribute(DataType dtype) {
  return to_string(dtype);
}

DataType attribute_dtype(const DictionaryValue& value) {
  if (value.is<std::string>()) {
    const std::string& name = value.get<std::string>();
    if (name == to_string(DataType::Float32)) return DataType::Float32;
    if (name == to_string(DataType::Float64)) return DataType::Float64;
  }
  throw ArgumentError(detail::concat(
      "a data type attribute holds ",
      value.is<std::string>() ? value.get<std::string>() : std::string(value.type_name()),
      ", not 'float32' or 'float64'"));
}

}  // namespace loom
