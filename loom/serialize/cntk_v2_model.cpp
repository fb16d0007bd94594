// CNTK's v2 model format (cntk_model.h, docs/cntk-formats.md): the protocol buffer is read
// into a Dictionary in CNTK's v2 schema, and one builder turns such a Dictionary (from a v2
// file, or from the v1 reader) into a Loom Function.
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "loom/core/error.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/user_function.h"
#include "loom/ops/ops.h"
#include "loom/serialize/cntk_model.h"
#include "loom/serialize/cntk_recurrence.h"
#include "loom/serialize/cntk_v2.pb.h"

namespace loom {

namespace {

namespace pb = cntk_proto;

// Shapes from a file: each dimension and the element count stay below this, so nothing
// downstream multiplies its way to an overflow or allocates what the file does not hold.
constexpr uint64_t kMaxElements = uint64_t(1) << 40;
constexpr uint64_t kMaxRank = 64;

// CNTK's sentinels: a dimension of an unknown shape, and the static axis indices that stand
// for other axes (Axis in CNTKLibrary.h).
constexpr uint64_t kUnknownDim = uint64_t(-2);
constexpr int64_t kDynamicAxisIndex = std::numeric_limits<int>::max();
constexpr int64_t kAllStaticAxesIndex = kDynamicAxisIndex - 1;
constexpr int64_t kUnknownAxesIndex = kDynamicAxisIndex - 2;
constexpr int64_t kEndStaticAxisIndex = kDynamicAxisIndex - 3;
constexpr int64_t kAllAxesIndex = kDynamicAxisIndex - 4;

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 80)) out += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > 80) out += "...";
  return out;
}

std::string dims_string(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") +
         (dims[i] > kMaxElements ? std::to_string(int64_t(dims[i])) : std::to_string(dims[i]));
  return s + "]";
}

// ---- protocol buffer -> Dictionary ----

// Where a value is in the message ("inputs[3].value"): spelled out only for a message, since
// building the string for every value was a tenth of a model's load.
struct Path {
  const Path* parent = nullptr;
  const std::string* key = nullptr;  // a dictionary's key, or
  int index = -1;                    // a vector's index
  std::string str() const {
    const std::string head = parent ? parent->str() : "";
    if (key) return head.empty() ? printable(*key) : head + "." + printable(*key);
    if (index >= 0) return head + "[" + std::to_string(index) + "]";
    return head;
  }
};

class ProtoReader {
 public:
  explicit ProtoReader(const std::string& name) : name_(name) {}

  DictionaryMap dictionary(const pb::Dictionary& d, const Path& path) const {
    DictionaryMap m;
    // A key given twice keeps its last value, as protobuf's maps do.
    for (const auto& entry : d.data())
      m[entry.key()] = value(entry.value(), Path{&path, &entry.key()});
    return m;
  }

 private:
  template <typename... Parts>
  [[noreturn]] void fail(const Path& path, const Parts&... parts) const {
    const std::string where = path.str();
    throw DataError(detail::concat("'", name_, "': ", where.empty() ? "the top dictionary" : where,
                                   ": ", parts...));
  }

  DictionaryValue value(const pb::DictionaryValue& v, const Path& path) const {
    using T = pb::DictionaryValue;
    // The type field says which member holds the value; a member of another type is damage.
    auto expect = [&](T::ValueCase c, const char* what) {
      if (v.value_case() != c && v.value_case() != T::VALUE_NOT_SET)
        fail(path, "the value type says ", what, " but the value is of another type");
    };
    switch (v.value_type()) {
      case T::None:
        return {};
      case T::Bool:
        expect(T::kBoolValue, "Bool");
        return v.bool_value();
      case T::Int:
        expect(T::kIntValue, "Int");
        return int64_t{v.int_value()};
      case T::SizeT:
        expect(T::kSizeTValue, "SizeT");
        return uint64_t{v.size_t_value()};
      case T::Float:
        expect(T::kFloatValue, "Float");
        return double{v.float_value()};
      case T::Double:
        expect(T::kDoubleValue, "Double");
        return v.double_value();
      case T::String:
        expect(T::kStringValue, "String");
        return v.string_value();
      case T::NDShape:
        expect(T::kNdShapeValue, "NDShape");
        return shape(v.nd_shape_value(), path);
      case T::Axis: {
        expect(T::kAxisValue, "Axis");
        DictionaryMap a;
        a["static_axis_idx"] = int64_t{v.axis_value().static_axis_idx()};
        a["name"] = v.axis_value().name();
        a["is_ordered_dynamic_axis"] = v.axis_value().is_ordered_dynamic_axis();
        return a;
      }
      case T::Vector: {
        expect(T::kVectorValue, "Vector");
        DictionaryVector out;
        const auto& items = v.vector_value().value();
        out.reserve(size_t(items.size()));
        for (int i = 0; i < items.size(); ++i)
          out.push_back(value(items[i], Path{&path, nullptr, i}));
        return out;
      }
      case T::Dictionary:
        expect(T::kDictionaryValue, "Dictionary");
        return dictionary(v.dictionary_value(), path);
      case T::NDArrayView:
        expect(T::kNdArrayViewValue, "NDArrayView");
        return array(v.nd_array_view_value(), path);
      default:
        break;
    }
    fail(path, "unknown value type ", int(v.value_type()),
         " (CNTK's types are 0 to 11: None, Bool, Int, SizeT, Float, Double, String, NDShape, "
         "Axis, Vector, Dictionary, NDArrayView)");
  }

  NDShape shape(const pb::NDShape& s, const Path& path) const {
    if (uint64_t(s.shape_dim_size()) > kMaxRank)
      fail(path, "a shape of rank ", s.shape_dim_size(), " exceeds the limit of ", kMaxRank);
    std::vector<size_t> dims(s.shape_dim().begin(), s.shape_dim().end());
    return NDShape(std::move(dims));
  }

  // Values are column-major in CNTK's C++ shape, which is row-major in the reversed shape:
  // Loom's order, so the values are copied as they are.
  NDArrayView array(const pb::NDArrayView& a, const Path& path) const {
    using A = pb::NDArrayView;
    if (a.storage_format() != A::Dense)
      fail(path, "a sparse NDArrayView (storage format ", int(a.storage_format()),
           "); Loom reads dense parameter and constant values only");
    std::vector<uint64_t> dims(a.shape().shape_dim().begin(), a.shape().shape_dim().end());
    if (dims.size() > kMaxRank)
      fail(path, "an NDArrayView of rank ", dims.size(), " exceeds the limit of ", kMaxRank);
    uint64_t n = 1;
    for (uint64_t d : dims)
      if (d > kMaxElements || (n *= d) > kMaxElements)
        fail(path, "an NDArrayView of shape ", dims_string(dims), " is too large or not fixed");
    NDShape shape(std::vector<size_t>(dims.rbegin(), dims.rend()));
    auto check_count = [&](size_t count) {
      if (count != n)
        fail(path, "an NDArrayView of shape ", dims_string(dims), " holds ", count,
             " values where ", n,
             " are expected (CNTK's files over 2 GB keep values outside the message: not read)");
    };
    // Every element is written: no zero-filling first (a model's values are most of its load).
    auto copy = [&](DataType dtype, const void* values, size_t bytes) {
      NDArrayView out = NDArrayView::uninitialized(dtype, shape);
      if (bytes) std::memcpy(out.raw_data(), values, bytes);
      return out;
    };
    switch (a.data_type()) {
      case A::Float:
      case A::Float16: {  // CNTK writes float16 values as floats: Loom computes them in float32
        const auto& v = a.float_values().value();
        check_count(size_t(v.size()));
        return copy(DataType::Float32, v.data(), n * sizeof(float));
      }
      case A::Double: {
        const auto& v = a.double_values().value();
        check_count(size_t(v.size()));
        return copy(DataType::Float64, v.data(), n * sizeof(double));
      }
      case A::Int8:
      case A::Int16:
        fail(path, "an NDArrayView of ", a.data_type() == A::Int8 ? "int8" : "int16",
             " values (a quantized model); Loom reads float, double and float16 values");
      default:
        break;
    }
    fail(path, "an NDArrayView of unknown data type ", int(a.data_type()));
  }

  const std::string& name_;
};

// ---- Dictionary -> Function ----

// A view of one dictionary of the model with its key path ("primitive_functions[3].attributes"),
// so every complaint says where it is.
class Fields {
 public:
  Fields(const DictionaryMap& m, std::string path, const std::string& where)
      : m_(&m), path_(std::move(path)), where_(&where) {}

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw DataError(detail::concat(*where_, ": ", path_, ": ", parts...));
  }

  bool has(const std::string& key) const { return m_->count(key) != 0; }
  const DictionaryValue& at(const std::string& key) const {
    auto it = m_->find(key);
    if (it == m_->end()) fail("missing '", key, "'");
    return it->second;
  }

  template <typename T>
  const T& get(const std::string& key) const {
    const DictionaryValue& v = at(key);
    if (!v.is<T>()) {
      if constexpr (std::is_same_v<T, NDArrayView>) {
        fail("'", key, "' holds ", v.type_name(), " where an NDArrayView is expected");
      } else {
        DictionaryValue probe{T{}};
        fail("'", key, "' holds ", v.type_name(), " where ", probe.type_name(), " is expected");
      }
    }
    return v.get<T>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    return has(key) ? get<std::string>(key) : fallback;
  }
  // An integer as CNTK's SizeT (uint64) or Int (int64); v1's reader may give either.
  int64_t integer(const std::string& key) const { return integer_of(at(key), key); }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }
  int64_t integer_of(const DictionaryValue& v, const std::string& what) const {
    if (v.is<int64_t>()) return v.get<int64_t>();
    if (v.is<uint64_t>() && v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
      return int64_t(v.get<uint64_t>());
    if (v.is<bool>()) return v.get<bool>();
    fail("'", what, "' holds ", v.type_name(), " where an integer is expected");
  }
  size_t size(const std::string& key) const {
    int64_t v = integer(key);
    if (v < 0) fail("'", key, "' is ", v, " where a size is expected");
    return size_t(v);
  }
  size_t size_or(const std::string& key, size_t fallback) const {
    return has(key) ? size(key) : fallback;
  }
  double number(const std::string& key) const {
    const DictionaryValue& v = at(key);
    if (v.is<double>()) return v.get<double>();
    return double(integer_of(v, key));
  }
  double number_or(const std::string& key, double fallback) const {
    return has(key) ? number(key) : fallback;
  }
  bool flag(const std::string& key) const { return get<bool>(key); }
  bool flag_or(const std::string& key, bool fallback) const {
    return has(key) ? flag(key) : fallback;
  }
  std::vector<bool> flags(const std::string& key) const {
    std::vector<bool> out;
    for (const DictionaryValue& v : get<DictionaryVector>(key)) {
      if (!v.is<bool>()) fail("'", key, "' holds ", v.type_name(), " where a bool is expected");
      out.push_back(v.get<bool>());
    }
    return out;
  }
  // A list of sizes, as an NDShape or a vector of integers (CNTK writes both).
  std::vector<size_t> sizes(const std::string& key) const {
    const DictionaryValue& v = at(key);
    if (v.is<NDShape>()) return v.get<NDShape>().dims();
    if (!v.is<DictionaryVector>())
      fail("'", key, "' holds ", v.type_name(), " where a shape or a list of sizes is expected");
    std::vector<size_t> out;
    for (const DictionaryValue& x : v.get<DictionaryVector>()) {
      int64_t i = integer_of(x, key);
      if (i < 0) fail("'", key, "' holds ", i, " where a size is expected");
      out.push_back(size_t(i));
    }
    return out;
  }
  std::vector<std::string> strings(const std::string& key) const {
    std::vector<std::string> out;
    const auto& v = get<DictionaryVector>(key);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is<std::string>())
        fail("'", key, "'[", i, "] holds ", v[i].type_name(), " where a uid is expected");
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }

  Fields child(const std::string& key) const {
    return Fields(get<DictionaryMap>(key), path_ + "." + key, *where_);
  }
  Fields item(const std::string& key, size_t i) const {
    const auto& v = get<DictionaryVector>(key);
    std::string path = path_ + "." + key + "[" + std::to_string(i) + "]";
    if (!v[i].is<DictionaryMap>())
      throw DataError(detail::concat(*where_, ": ", path, ": holds ", v[i].type_name(),
                                     " where a dictionary is expected"));
    return Fields(v[i].get<DictionaryMap>(), path, *where_);
  }
  const std::string& path() const { return path_; }

 private:
  const DictionaryMap* m_;
  std::string path_;
  const std::string* where_;
};

// CNTK's PrimitiveOpType names by number (PrimitiveOpType.h), for messages.
// clang-format off
const char* const kOpNames[] = {
    "Negate", "Sigmoid", "Tanh", "ReLU", "Exp", "Log", "Sqrt", "Floor", "Abs", "Reciprocal",
    "Softmax", "Hardmax", "TransposeAxes", "Where", "Slice", "Dropout", "Reshape", "Pooling",
    "SumAll", "Plus", "Minus", "ElementTimes", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "PackedIndex", "GatherPacked", "ScatterPacked", "Times", "TransposeTimes",
    "Convolution", "SquaredError", "CrossEntropyWithSoftmax", "ClassificationError", "PastValue",
    "FutureValue", "ReduceElements", "BatchNormalization", "Clip", "Select", "Splice", "Combine",
    "RandomSample", "RandomSampleInclusionFrequency", "ROIPooling", "Logistic", "OptimizedRNNStack",
    "ReconcileDynamicAxis", "LogSoftmax", "LogPlus", "CosDistance", "Sin", "Cos", "Pass", "Block",
    "Unpooling", "LambdaRank", "NDCG", "EditDistanceError", "NoOp", "LabelsToGraph", "StopGradient",
    "ELU", "ForwardBackward", "CosDistanceWithNegativeSamples", "OneHot", "Pow", "ToSequence",
    "ToSequenceLike", "UnpackSequence", "Assign", "Gather", "StableSigmoid", "RandomDistribution",
    "Sinh", "Cosh", "UnpackBatch", "ToBatch", "Asin", "Acos", "Pad", "Crop", "Atanh", "Asinh",
    "TopK", "Squeeze", "ConstantOp", "LatticeSequenceWithSoftmax", "Cast", "EyeLikeOp",
    "CustomProxyOp", "StraightThrough", "Tan", "Atan", "ConvolutionSequenceShape",
};
// clang-format on
constexpr size_t kOpCount = sizeof(kOpNames) / sizeof(kOpNames[0]);

// The op numbers the builder below maps (cntk_mapped_op_types; docs/cntk-formats.md).
// clang-format off
enum Op : int64_t {
  kNegate = 0, kSigmoid, kTanh, kReLU, kExp, kLog, kSqrt, kFloor, kAbs, kReciprocal, kSoftmax,
  kHardmax, kTransposeAxes, kWhere, kSlice, kDropout, kReshape, kPooling, kSumAll, kPlus, kMinus,
  kElementTimes, kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kPackedIndex,
  kGatherPacked, kScatterPacked, kTimes, kTransposeTimes, kConvolution, kSquaredError,
  kCrossEntropyWithSoftmax, kClassificationError, kPastValue, kFutureValue, kReduceElements,
  kBatchNormalization, kClip, kSelect, kSplice, kCombine, kRandomSample,
  kRandomSampleInclusionFrequency, kROIPooling, kLogistic, kOptimizedRNNStack,
  kReconcileDynamicAxis, kLogSoftmax, kLogPlus, kCosDistance, kSin, kCos, kPass, kBlock, kUnpooling,
  kLambdaRank, kNDCG, kEditDistanceError, kNoOp, kLabelsToGraph, kStopGradient, kELU,
  kForwardBackward, kCosDistanceWithNegativeSamples, kOneHot, kPow, kToSequence, kToSequenceLike,
  kUnpackSequence, kAssign, kGather, kStableSigmoid, kRandomDistribution, kSinh, kCosh,
  kUnpackBatch, kToBatch, kAsin, kAcos, kPad, kCrop, kAtanh, kAsinh, kTopK, kSqueeze, kConstantOp,
  kLatticeSequenceWithSoftmax, kCast, kEyeLikeOp, kCustomProxyOp, kStraightThrough, kTan, kAtan,
  kConvolutionSequenceShape,
};
// clang-format on

static_assert(kConvolutionSequenceShape == 97 && kOpCount == 98,
              "the op numbers and names follow CNTK 2.7's PrimitiveOpType");

// A user-defined function (a function of type "UserDefinedFunction"): it has no op number.
constexpr int64_t kUserDefinedFunction = -2;

std::string op_name(int64_t op) {
  if (op == kUserDefinedFunction) return "UserDefinedFunction";
  return op >= 0 && uint64_t(op) < kOpCount ? kOpNames[op] : "op " + std::to_string(op);
}

// A problem with the function being built; the builder adds the function's name, uid and op.
class OpError : public Error {
 public:
  using Error::Error;
};
template <typename... Parts>
[[noreturn]] void op_fail(const Parts&... parts) {
  throw OpError(detail::concat(parts...));
}

// CNTK's static axis k (C++ order, negative from the end) is Python's (and Loom's) axis -k-1:
// CNTK's Python API maps Python's axis a to C++'s -a-1 (sanitize_axis), and that map is its own
// inverse. It holds for any rank, so no rank is needed.
int loom_axis_index(int64_t k) {
  if (k < -int64_t(kMaxRank) - 1 || k > int64_t(kMaxRank))
    op_fail("static axis ", k, " is out of range");
  return int(-k - 1);
}

// An Axis attribute ({static_axis_idx, name, is_ordered_dynamic_axis}) as a Loom Axis.
Axis loom_axis(const Fields& f, const DictionaryValue& v, const std::string& what) {
  if (!v.is<DictionaryMap>())
    f.fail("'", what, "' holds ", v.type_name(), " where an Axis is expected");
  const DictionaryMap& m = v.get<DictionaryMap>();
  auto idx_it = m.find("static_axis_idx");
  if (idx_it == m.end()) f.fail("'", what, "' has no static_axis_idx");
  int64_t idx = f.integer_of(idx_it->second, what + ".static_axis_idx");
  std::string name;
  if (auto it = m.find("name"); it != m.end() && it->second.is<std::string>())
    name = it->second.get<std::string>();
  if (idx == kAllStaticAxesIndex) return Axis::all_static_axes();
  if (idx == kAllAxesIndex) return Axis::all_axes();
  if (idx == kDynamicAxisIndex) {
    if (name == "defaultBatchAxis") return Axis::default_batch_axis();
    if (name == "defaultDynamicAxis") return Axis::default_dynamic_axis();
    if (name.empty()) f.fail("'", what, "' is a dynamic axis without a name");
    return Axis::dynamic_axis_named(name);
  }
  if (idx == kUnknownAxesIndex || idx == kEndStaticAxisIndex)
    f.fail("'", what, "' is CNTK's sentinel axis ", idx, ", not an axis of data");
  return Axis(loom_axis_index(idx));
}

// The raw static index of an Axis attribute (for Reshape's begin and end axes).
int64_t cntk_static_index(const Fields& f, const std::string& key) {
  const DictionaryValue& v = f.at(key);
  if (!v.is<DictionaryMap>())
    f.fail("'", key, "' holds ", v.type_name(), " where an Axis is expected");
  const DictionaryMap& m = v.get<DictionaryMap>();
  auto it = m.find("static_axis_idx");
  if (it == m.end()) f.fail("'", key, "' has no static_axis_idx");
  return f.integer_of(it->second, key + ".static_axis_idx");
}

template <typename T>
std::vector<T> reversed(std::vector<T> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

// CNTK's dynamic axes (innermost first: [defaultDynamicAxis, defaultBatchAxis]) as Loom's
// (outermost first: {batch, sequence}).
std::vector<Axis> loom_dynamic_axes(const Fields& f, bool* unknown) {
  const auto& v = f.get<DictionaryVector>("dynamic_axis");
  std::vector<Axis> axes;
  for (size_t i = v.size(); i-- > 0;) {
    if (!v[i].is<DictionaryMap>())
      f.fail("dynamic_axis[", i, "] holds ", v[i].type_name(), " where an Axis is expected");
    const DictionaryMap& m = v[i].get<DictionaryMap>();
    auto idx = m.find("static_axis_idx");
    if (idx != m.end() && f.integer_of(idx->second, "static_axis_idx") == kUnknownAxesIndex) {
      *unknown = true;  // a placeholder's axes that its first use decides
      return unknown_dynamic_axes();
    }
    Axis a = loom_axis(f, v[i], "dynamic_axis[" + std::to_string(i) + "]");
    if (!a.is_dynamic()) f.fail("dynamic_axis[", i, "] is not a dynamic axis");
    axes.push_back(a);
  }
  if (axes.size() > 2) f.fail(axes.size(), " dynamic axes; Loom has at most 2 (batch, sequence)");
  if (!axes.empty() && !axes[0].is_batch())
    f.fail("the outermost dynamic axis is '", printable(axes[0].name()),
           "', not the batch axis (defaultBatchAxis)");
  return axes;
}

DataType loom_dtype(const Fields& f, int64_t t) {
  if (t == 1 || t == 4) return DataType::Float32;  // float16: computed in float32
  if (t == 2) return DataType::Float64;
  f.fail("data type ", t, " is not one Loom computes in (1: float, 2: double, 4: float16)");
}

// One primitive function of the file.
struct Record {
  Fields f;
  std::string uid = {}, name = {};
  int64_t op = -1;
  std::vector<std::string> inputs = {};
  // Blocks: the composite's root, and its placeholders with the variables they stand for.
  std::string block_root = {}, block_op_name = {};
  std::vector<std::string> keys = {}, values = {};
  // GatherPacked and ScatterPacked reading PackedIndex(layout, Where(condition)): CNTK's
  // sequence.gather and sequence.scatter, built as Loom's (packed_where: the Where record).
  const Record* packed_where = nullptr;
  // The uids it reads (blocks: their arguments; the packed ops: the data and the condition).
  std::vector<std::string> reads = {};
  // Once built: its outputs.
  std::vector<Variable> outputs = {};
  bool built = false;
};

class Builder {
 public:
  Builder(const Dictionary& composite, const std::string& where, bool share_values,
          bool fuse_recurrences)
      : where_(where),
        top_(composite.map(), "composite", where_),
        share_values_(share_values),
        fuse_recurrences_(fuse_recurrences) {}

  Function build() {
    const std::string type = top_.string_or("type", "CompositeFunction");
    if (type != "CompositeFunction")
      top_.fail("the model is a '", printable(type), "', not a CompositeFunction");
    read_variables();
    read_functions();
    const std::string& root_uid = top_.get<std::string>("root");
    auto root_it = function_index_.find(root_uid);
    if (root_it == function_index_.end())
      top_.fail("the root '", printable(root_uid), "' is none of the primitive functions");
    for (size_t i : build_order(root_it->second)) build_record(records_[i]);
    Record& root = records_[root_it->second];
    if (root.outputs.empty()) root.f.fail("the root function has no outputs");

    const std::string name = top_.string_or("name", "");
    Function result;
    if (root.op == kBlock) {
      result = combine(root.outputs, name.empty() ? root.name : name);
      result.impl()->block_name = root.block_op_name;
      result.impl()->uid = top_.string_or("uid", result.uid());
    } else if (root.op == kCombine || root.outputs.size() > 1 || !root.outputs[0].is_output()) {
      result = combine(root.outputs, name);
      result.impl()->uid = top_.string_or("uid", result.uid());
    } else {
      result = root.outputs[0].owner();
    }
    close_loops(result);
    if (fuse_recurrences_) fuse_cntk_recurrences(result);
    return result;
  }

 private:
  // ---- variables ----

  void read_variables() {
    const auto& inputs = top_.get<DictionaryVector>("inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      Fields f = top_.item("inputs", i);
      Variable v = make_variable(f);
      if (!leaves_.emplace(v.uid(), v).second)
        f.fail("the uid '", printable(v.uid()), "' is given to two inputs");
    }
  }

  Variable make_variable(const Fields& f) {
    const std::string uid = f.get<std::string>("uid");
    if (uid.empty()) f.fail("an empty uid");
    const std::string name = f.string_or("name", "");
    const int64_t kind = f.integer("kind");
    const NDShape cntk_shape = f.get<NDShape>("shape");
    bool unknown_shape = false;
    for (size_t d : cntk_shape.dims()) unknown_shape = unknown_shape || d == kUnknownDim;
    if (!unknown_shape) check_shape(f, cntk_shape);
    const NDShape shape(reversed(cntk_shape.dims()));
    bool unknown_axes = false;
    const std::vector<Axis> axes = loom_dynamic_axes(f, &unknown_axes);
    const bool sparse = f.flag_or("is_sparse", false);
    const bool needs_gradient = f.flag_or("needs_gradient", false);
    const int64_t dtype_number = f.integer("data_type");

    Variable v;
    switch (kind) {
      case 0: {  // Input
        if (unknown_shape || shape.has_inferred())
          f.fail("an input of shape ", cntk_shape.to_string(), " that is not fully known");
        if (unknown_axes) f.fail("an input whose dynamic axes are not known");
        if (sparse && shape.rank() == 0) f.fail("a sparse input needs at least one axis");
        InputOptions o;
        o.dtype = loom_dtype(f, dtype_number);
        o.is_sparse = sparse;
        o.name = name;
        o.needs_gradient = needs_gradient;
        o.dynamic_axes = axes;
        v = input_variable(shape, o);
        break;
      }
      case 2:    // Parameter
      case 3: {  // Constant
        const char* what = kind == 2 ? "parameter" : "constant";
        if (!axes.empty() || sparse) f.fail("a ", what, " has no dynamic axes and is dense");
        const NDArrayView& value = f.get<NDArrayView>("value");
        if (value.is_sparse()) f.fail("a sparse ", what, " value");
        const DataType dtype = loom_dtype(f, dtype_number);
        if (value.dtype() != dtype)
          f.fail("a value of type ", to_string(value.dtype()), " for a ", what, " of type ",
                 to_string(dtype));
        if (unknown_shape || value.shape() != shape)
          f.fail("a value of shape ", value.shape().to_string(), " (Loom's order) for a ", what,
                 " of shape ", shape.to_string());
        v = leaf(kind == 2 ? VariableKind::Parameter : VariableKind::Constant, value, name);
        break;
      }
      case 4: {  // Placeholder
        if (unknown_shape || unknown_axes || shape.has_inferred() || dtype_number == 0)
          v = placeholder(name);
        else
          v = placeholder(shape, loom_dtype(f, dtype_number), axes, name);
        if (sparse) v.impl()->is_sparse = true;
        break;
      }
      default:
        f.fail("variable kind ", kind,
               " is not an input (0), parameter (2), constant (3) or placeholder (4)");
    }
    v.impl()->uid = uid;
    return v;
  }

  // A parameter or constant holding value: its own copy, or (share_values_: the dictionary
  // is the loader's own, dropped after the build) the value itself, which saves copying every
  // weight once more.
  Variable leaf(VariableKind kind, const NDArrayView& value, const std::string& name) const {
    auto v = std::make_shared<VariableImpl>();
    v->kind = kind;
    v->shape = value.shape();
    v->dtype = value.dtype();
    v->needs_gradient = kind == VariableKind::Parameter;
    v->name = name;
    if (share_values_) {
      v->value = value;
    } else {  // every element is written: no zero-filling first
      NDArrayView copy = NDArrayView::uninitialized(value.dtype(), value.shape());
      if (value.size())
        std::memcpy(copy.raw_data(), value.raw_data(), value.size() * size_of(value.dtype()));
      v->value = copy;
    }
    return Variable(v);
  }

  static void check_shape(const Fields& f, const NDShape& s) {
    uint64_t n = 1;
    for (size_t d : s.dims()) {
      if (d == NDShape::kInferred || d == NDShape::kFree) continue;
      if (d > kMaxElements || (n *= std::max<uint64_t>(d, 1)) > kMaxElements)
        f.fail("shape ", s.to_string(), " has more than 2^40 elements");
    }
  }

  // ---- functions ----

  void read_functions() {
    const auto& functions = top_.get<DictionaryVector>("primitive_functions");
    records_.reserve(functions.size());
    for (size_t i = 0; i < functions.size(); ++i) {
      Fields f = top_.item("primitive_functions", i);
      const std::string type = f.string_or("type", "PrimitiveFunction");
      if (type != "PrimitiveFunction" && type != "UserDefinedFunction")
        f.fail("a function of type '", printable(type),
               "' (CNTK writes PrimitiveFunction and UserDefinedFunction)");
      const bool user = type == "UserDefinedFunction";
      Record r{f};
      r.uid = f.get<std::string>("uid");
      r.name = f.string_or("name", "");
      r.op = user ? kUserDefinedFunction : f.integer("op");
      if (r.uid.empty()) f.fail("an empty uid");
      if (r.op == kBlock) {
        Fields c = f.child("block_function_composite");
        r.block_root = c.get<std::string>("root");
        r.block_op_name = f.get<std::string>("block_function_op_name");
        r.keys = f.strings("block_function_composite_arguments_map_keys");
        r.values = f.strings("block_function_composite_arguments_map_values");
        if (r.keys.size() != r.values.size())
          f.fail(r.keys.size(), " argument keys but ", r.values.size(), " values");
        for (size_t k = 0; k < r.keys.size(); ++k) {
          auto leaf = leaves_.find(r.keys[k]);
          if (leaf == leaves_.end() || !leaf->second.is_placeholder())
            f.fail("argument key '", printable(r.keys[k]),
                   "' is not a placeholder among the inputs");
          if (!arguments_.emplace(r.keys[k], r.values[k]).second)
            f.fail("the placeholder '", printable(r.keys[k]), "' is an argument of two blocks");
        }
      }
      if (f.has("inputs"))
        r.inputs = f.strings("inputs");
      else
        f.fail("missing 'inputs'");
      // Present in every CNTK function; a user function keeps its state instead.
      f.get<DictionaryMap>(user ? "user_defined_state" : "attributes");
      if (!function_index_.emplace(r.uid, records_.size()).second)
        f.fail("the function uid '", printable(r.uid), "' is given twice");
      // One uid names one thing in a Loom graph (a saved model could not tell them apart).
      if (leaves_.count(r.uid))
        f.fail("the uid '", printable(r.uid), "' is both an input's and a function's");
      records_.push_back(std::move(r));
    }
  }

  // A block's placeholder stands for its argument, which may be another block's placeholder.
  std::string argument_of(const std::string& uid) const {
    std::string u = uid;
    for (size_t hops = 0; hops <= arguments_.size(); ++hops) {
      auto it = arguments_.find(u);
      if (it == arguments_.end()) return u;
      u = it->second;
    }
    top_.fail("block arguments map the placeholder '", printable(uid), "' in a circle");
  }

  static bool is_delay_op(int64_t op) { return op == kPastValue || op == kFutureValue; }

  // The record producing a uid (after block arguments), if any: CNTK names output k of the
  // function F "F_Output_k"; a leaf of the inputs list has none, nor a loop's placeholder
  // unless through (a reader other than a delay op reads the output itself, see resolve).
  std::optional<size_t> producer(const std::string& uid, bool through = false) const {
    const std::string u = argument_of(uid);
    if (auto l = leaves_.find(u); l != leaves_.end() && !(through && l->second.is_placeholder()))
      return std::nullopt;
    auto cut = u.rfind("_Output_");
    if (cut == std::string::npos) return std::nullopt;
    auto it = function_index_.find(u.substr(0, cut));
    if (it == function_index_.end()) return std::nullopt;
    return it->second;
  }

  // The record a uid stands for when it is a loop's placeholder (a leaf named as an output).
  std::optional<size_t> loop_producer(const std::string& uid) const {
    const std::string u = argument_of(uid);
    auto leaf = leaves_.find(u);
    if (leaf == leaves_.end() || !leaf->second.is_placeholder()) return std::nullopt;
    auto cut = u.rfind("_Output_");
    if (cut == std::string::npos) return std::nullopt;
    auto it = function_index_.find(u.substr(0, cut));
    if (it == function_index_.end()) return std::nullopt;
    return it->second;
  }

  // The record producing uid when it is op's (after block arguments), else null.
  const Record* produced_by(const std::string& uid, int64_t op) const {
    auto p = producer(uid);
    return p && records_[*p].op == op ? &records_[*p] : nullptr;
  }

  // What each record reads. CNTK builds sequence.gather and sequence.scatter from three
  // primitives Loom has as one op: the pattern is recognised here, so that the PackedIndex and
  // Where between are never built.
  void find_reads() {
    for (Record& r : records_) {
      r.reads = r.op == kBlock ? r.values : r.inputs;
      if ((r.op == kGatherPacked && r.inputs.size() == 2) ||
          (r.op == kScatterPacked && r.inputs.size() == 3)) {
        const Record* index = produced_by(r.inputs[1], kPackedIndex);
        const Record* where =
            index && index->inputs.size() == 2 ? produced_by(index->inputs[1], kWhere) : nullptr;
        if (where && where->inputs.size() == 1) {
          r.packed_where = where;
          r.reads = {r.inputs[0], where->inputs[0]};
        }
      }
    }
  }

  // The records the root needs, in an order that builds each after what it reads (Kahn's
  // algorithm, so a deep graph needs no deep recursion). A block also waits for its inner root;
  // a loop's placeholder makes its function needed without an edge. Records nothing needs
  // (the inner parts of a recognised pattern) are not built. A cycle that no placeholder breaks
  // is damage.
  std::vector<size_t> build_order(size_t root) {
    find_reads();
    const size_t n = records_.size();
    std::vector<std::vector<size_t>> deps(n), loop_deps(n);
    for (size_t i = 0; i < n; ++i) {
      const Record& r = records_[i];
      if (r.op == kBlock) {
        auto inner = function_index_.find(r.block_root);
        if (inner == function_index_.end())
          r.f.fail("the block's root '", printable(r.block_root), "' is none of the functions");
        deps[i].push_back(inner->second);
      }
      for (const auto& in : r.reads) {
        if (auto p = producer(in, !is_delay_op(r.op))) deps[i].push_back(*p);
        if (auto p = loop_producer(in)) loop_deps[i].push_back(*p);
      }
      std::sort(deps[i].begin(), deps[i].end());
      deps[i].erase(std::unique(deps[i].begin(), deps[i].end()), deps[i].end());
      for (size_t d : deps[i])
        if (d == i) r.f.fail("the function reads its own output without a placeholder between");
    }
    std::vector<char> needed(n, 0);
    std::vector<size_t> stack = {root};
    needed[root] = 1;
    while (!stack.empty()) {
      const size_t i = stack.back();
      stack.pop_back();
      for (const auto* list : {&deps[i], &loop_deps[i]})
        for (size_t d : *list)
          if (!needed[d]) {
            needed[d] = 1;
            stack.push_back(d);
          }
    }
    std::vector<std::vector<size_t>> users(n);
    std::vector<size_t> pending(n, 0);
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!needed[i]) continue;
      ++count;
      for (size_t d : deps[i]) users[d].push_back(i);
      pending[i] = deps[i].size();
    }
    std::vector<size_t> order, ready;
    for (size_t i = n; i-- > 0;)
      if (needed[i] && pending[i] == 0) ready.push_back(i);
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      order.push_back(i);
      for (size_t u : users[i])
        if (--pending[u] == 0) ready.push_back(u);
    }
    if (order.size() != count) {
      for (size_t i = 0; i < n; ++i)
        if (needed[i] && pending[i] != 0)
          records_[i].f.fail("the function '", printable(records_[i].uid),
                             "' is on a cycle of functions that no placeholder breaks");
    }
    return order;
  }

  // A loop's placeholder (a leaf named as a function's output) is read by the delay op that
  // closes the loop; any other reader reads the output itself, built before it (build_order),
  // so that only delay ops wait for close_loops.
  Variable resolve(const Record& r, const std::string& uid) {
    const std::string u = argument_of(uid);
    if (auto it = leaves_.find(u); it != leaves_.end()) {
      if (it->second.is_placeholder() && !arguments_.count(u)) {
        if (!is_delay_op(r.op))
          if (auto o = outputs_.find(u); o != outputs_.end()) return o->second;
        maybe_loop(it->second);
      }
      return it->second;
    }
    if (auto it = outputs_.find(u); it != outputs_.end()) return it->second;
    r.f.fail("input '", printable(uid),
             "' is neither among the inputs nor an output of a function");
  }

  // A placeholder whose uid is a function's output: CNTK breaks a recurrent loop (or a shared
  // output) there when saving; the loop closes once everything is built (close_loops).
  void maybe_loop(const Variable& p) {
    if (loop_seen_.insert(p.uid()).second) loops_.push_back(p);
  }

  void close_loops(Function& result) {
    std::unordered_map<std::string, Variable> loops;
    for (const Variable& p : loops_)
      if (auto it = outputs_.find(p.uid()); it != outputs_.end())
        loops.emplace(p.uid(), it->second);
    // Functions behind a loop's placeholder are reached only once it is replaced, and may read
    // other loops' placeholders: replace until none is left (as CNTK's loader does).
    for (size_t round = 0; round <= loops.size(); ++round) {
      std::unordered_map<Variable, Variable> substitutions;
      for (const Variable& p : result.placeholders())
        if (auto it = loops.find(p.uid()); it != loops.end()) substitutions.emplace(p, it->second);
      if (substitutions.empty()) return;
      try {
        result.replace_placeholders(substitutions);
      } catch (const Error& e) {
        top_.fail("cannot close the recurrent loops: ", e.what());
      }
    }
    top_.fail("the recurrent loops' placeholders do not close");
  }

  void build_record(Record& r) {
    try {
      if (r.op == kBlock) {
        build_block(r);
      } else {
        std::vector<Variable> inputs;
        for (const auto& in : r.reads) inputs.push_back(resolve(r, in));
        r.outputs =
            build_op(r, inputs,
                     r.f.child(r.op == kUserDefinedFunction ? "user_defined_state" : "attributes"));
        if (r.op != kCombine) claim_uids(r, inputs);
      }
    } catch (const DataError&) {
      throw;
    } catch (const std::exception& e) {
      r.f.fail("cannot build ", op_name(r.op), " '", printable(r.uid), "'",
               r.name.empty() ? "" : " (" + printable(r.name) + ")", ": ", e.what());
    }
    for (size_t k = 0; k < r.outputs.size() && r.op != kCombine; ++k) {
      const std::string uid = r.uid + "_Output_" + std::to_string(k);
      // Only a placeholder may share an output's uid: it stands for the output (a loop).
      if (auto leaf = leaves_.find(uid); leaf != leaves_.end() && !leaf->second.is_placeholder())
        r.f.fail("the output uid '", printable(uid), "' is also an input's");
      outputs_[uid] = r.outputs[k];
    }
    r.built = true;
  }

  // The functions built for r carry CNTK's uids, so the graph reads as the file does: its
  // outputs CNTK's, and the function making the first one CNTK's function's. Anything else a
  // Loom op made for it (the mask of unpack, the reshape inside times_transpose, a constant)
  // gets a uid under r's, "<uid>_<Loom's uid>": Loom's own uids ("Reshape12") have CNTK's form
  // and could name something else of the file, and one uid names one thing in a Loom graph.
  void claim_uids(const Record& r, const std::vector<Variable>& inputs) {
    std::unordered_set<const VariableImpl*> stop;
    for (const Variable& in : inputs) stop.insert(in.impl().get());
    FunctionImpl* named = nullptr;
    std::vector<std::shared_ptr<FunctionImpl>> todo;
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      const Variable& o = r.outputs[k];
      if (!o.is_output() || stop.count(o.impl().get())) continue;
      o.impl()->uid = r.uid + "_Output_" + std::to_string(k);
      auto owner = o.impl()->owner.lock();
      if (owner && !named) {
        owner->uid = r.uid;
        named = owner.get();
      }
      if (owner) todo.push_back(owner);
    }
    std::unordered_set<const void*> seen;
    while (!todo.empty()) {
      std::shared_ptr<FunctionImpl> f = std::move(todo.back());
      todo.pop_back();
      if (!seen.insert(f.get()).second) continue;
      if (f.get() != named) {
        f->uid = r.uid + "_" + f->uid;
        for (auto& o : f->outputs)
          if (o->uid.rfind(r.uid + "_Output_", 0) != 0) o->uid = r.uid + "_" + o->uid;
      }
      for (const Variable& in : f->inputs) {
        if (stop.count(in.impl().get()) || !seen.insert(in.impl().get()).second) continue;
        if (auto producer = in.impl()->owner.lock())
          todo.push_back(std::move(producer));
        else if (!in.is_placeholder())
          in.impl()->uid = r.uid + "_" + in.uid();  // a constant the op made
      }
    }
  }

  // A block is built in place: its inner functions read the block's arguments directly (its
  // placeholders resolve to them), which is Loom's expansion of a block (as_block), and the
  // block is recorded on its root's outputs (those it computes). Its own parameters become a
  // layer's, so that parameter paths name them by the block.
  void build_block(Record& r) {
    Record& root = records_[function_index_.at(r.block_root)];
    if (!root.built) r.f.fail("the block's root '", printable(r.block_root), "' is not built");
    r.outputs = root.outputs;
    auto block = std::make_shared<BlockInfo>();
    block->op_name = r.block_op_name;
    block->name = r.name;
    block->uid = r.uid;
    for (const std::string& value : r.values)
      block->arguments.emplace_back(resolve(r, value).impl());
    for (const Variable& o : r.outputs)
      if (computed_inside(*block, o)) block->outputs.push_back(o.impl());
    attach_block(block);
    auto tag = std::make_shared<const LayerTag>(LayerTag{r.block_op_name, r.name});
    for (const auto& in : r.inputs) {
      // A parameter passed as an argument (a Stabilizer's alpha into its softplus) belongs to
      // the block that passes it.
      if (std::find(r.values.begin(), r.values.end(), in) != r.values.end()) continue;
      auto it = leaves_.find(in);
      if (it != leaves_.end() && it->second.is_parameter() && !it->second.impl()->layer)
        it->second.impl()->layer = tag;
    }
  }

  std::vector<Variable> build_op(const Record& r, const std::vector<Variable>& in, const Fields& a);

  std::string where_;
  Fields top_;
  bool share_values_;
  bool fuse_recurrences_;                                   // fuse_cntk_recurrences once built
  std::unordered_map<std::string, Variable> leaves_;        // the inputs list, by uid
  std::unordered_map<std::string, std::string> arguments_;  // block placeholder -> argument
  std::unordered_map<std::string, size_t> function_index_;  // function uid -> record
  std::vector<Record> records_;
  std::unordered_map<std::string, Variable> outputs_;  // "F_Output_k" -> built variable
  std::vector<Variable> loops_;
  std::unordered_set<std::string> loop_seen_;
};

void need_inputs(const std::vector<Variable>& in, size_t low, size_t high) {
  if (in.size() < low || in.size() > high) {
    if (low == high) op_fail("takes ", low, " inputs, the file gives ", in.size());
    op_fail("takes ", low, " to ", high, " inputs, the file gives ", in.size());
  }
}

std::vector<Variable> outs(const Function& f) {
  return f.outputs();
}

// A scalar held by a constant input (CNTK passes some counts so).
double constant_scalar(const Variable& v, const char* what) {
  if (!v.is_constant() || v.value().size() != 1)
    op_fail(what, " is not a constant scalar: ", v.describe());
  return v.value().to_vector<double>()[0];
}

// CNTK's slice with a stride (TensorShape::NarrowTo): the elements begin, begin + s, ... below
// end for s > 0, and end - 1, end - 1 + s, ... down to begin for s < 0, a negative begin and an
// end <= 0 counting from the end of the axis. Loom's slice has no stride: the same elements are
// gathered by their indices (the gradient adds back into them, as CNTK's does).
Function strided_slice(const Variable& x, const Axis& axis, int64_t begin, int64_t end,
                       int64_t stride, const std::string& name) {
  if (!axis.is_static() || !x.has_known_shape())
    op_fail("a slice with stride ", stride, " of a non-static axis or of an unknown shape");
  const int64_t rank = int64_t(x.shape().rank()), k = axis.static_index();
  if (k < -rank || k >= rank) op_fail("slice axis ", k, " of a rank-", rank, " input");
  const int64_t dim = int64_t(x.shape()[size_t(k < 0 ? k + rank : k)]);
  if (begin < 0) begin += dim;
  if (end <= 0) end += dim;
  if (stride == 0 || begin < 0 || end > dim || begin >= end || std::abs(stride) > end - begin)
    op_fail("a slice [", begin, ", ", end, ") with stride ", stride, " of an axis of ", dim);
  const int64_t step = std::abs(stride), count = (end - begin + step - 1) / step;
  std::vector<float> indices;
  for (int64_t i = 0; i < count; ++i)
    indices.push_back(float(stride > 0 ? begin + i * step : end - 1 - i * step));
  return gather(x, constant(NDArrayView::from_vector<float>(NDShape{size_t(count)}, indices)), axis,
                name);
}

std::vector<Variable> Builder::build_op(const Record& r, const std::vector<Variable>& in,
                                        const Fields& a) {
  const std::string& name = r.name;
  auto axis_or = [&](const std::string& key, Axis fallback) {
    return a.has(key) ? loom_axis(a, a.at(key), key) : fallback;
  };
  // The ops that are one Loom function of their inputs and the name.
  using Unary = Function (*)(const Variable&, const std::string&);
  using Binary = Function (*)(const Variable&, const Variable&, const std::string&);
  static const std::unordered_map<int64_t, Unary> unary_ops = {{kNegate, negate},
                                                               {kSigmoid, sigmoid},
                                                               {kStableSigmoid, sigmoid},
                                                               {kTanh, tanh},
                                                               {kReLU, relu},
                                                               {kExp, exp},
                                                               {kLog, log},
                                                               {kSqrt, sqrt},
                                                               {kFloor, floor},
                                                               {kAbs, abs},
                                                               {kReciprocal, reciprocal},
                                                               {kSin, sin},
                                                               {kCos, cos},
                                                               {kTan, tan},
                                                               {kAsin, asin},
                                                               {kAcos, acos},
                                                               {kAtan, atan},
                                                               {kSinh, sinh},
                                                               {kCosh, cosh},
                                                               {kAsinh, asinh},
                                                               {kAtanh, atanh},
                                                               {kHardmax, hardmax},
                                                               {kStopGradient, stop_gradient},
                                                               {kStraightThrough, straight_through},
                                                               {kNoOp, alias},
                                                               {kPass, alias},
                                                               {kUnpackBatch, unpack_batch},
                                                               {kToBatch, to_batch}};
  static const std::unordered_map<int64_t, Binary> binary_ops = {
      {kPlus, plus},
      {kMinus, minus},
      {kElementTimes, element_times},
      {kEqual, equal},
      {kNotEqual, not_equal},
      {kLess, less},
      {kLessEqual, less_equal},
      {kGreater, greater},
      {kGreaterEqual, greater_equal},
      {kLogPlus, log_add_exp},
      {kPow, pow},
      {kCosDistance, cosine_distance},
      {kAssign, assign},
      {kReconcileDynamicAxis, reconcile_dynamic_axes},
      {kToSequenceLike, to_sequence_like},
      {kSquaredError, squared_error}};
  // A Pass of sparse data (CNTK writes one before an Embedding's Times) is the data itself:
  // Loom's ops write dense outputs, and a dense copy would make that lookup a dense product.
  if ((r.op == kPass || r.op == kNoOp) && in.size() == 1 && in[0].is_sparse()) return {in[0]};
  if (auto it = unary_ops.find(r.op); it != unary_ops.end()) {
    need_inputs(in, 1, 1);
    return outs(it->second(in[0], name));
  }
  if (auto it = binary_ops.find(r.op); it != binary_ops.end()) {
    need_inputs(in, 2, 2);
    return outs(it->second(in[0], in[1], name));
  }
  switch (r.op) {
    case kELU:
      need_inputs(in, 1, 1);
      return outs(elu(in[0], {.alpha = a.number_or("alpha", 1.0)}, name));
    case kSoftmax:
      need_inputs(in, 1, 1);
      return outs(softmax(in[0], axis_or("axis", Axis::all_static_axes()), name));
    case kLogSoftmax:
      need_inputs(in, 1, 1);
      return outs(log_softmax(in[0], axis_or("axis", Axis(-1)), name));
    case kClip:
      need_inputs(in, 3, 3);
      return outs(clip(in[0], in[1], in[2], name));
    case kSelect:
      need_inputs(in, 3, 3);
      return outs(element_select(in[0], in[1], in[2], name));
    case kCombine:
      return in;  // its outputs are its inputs
    case kTimes: {
      // CNTK's C++ Times(W, x) is Python's (and Loom's) times(x, W).
      need_inputs(in, 2, 2);
      const int64_t infer = a.integer_or("inferInputRankToMap", -1);
      return outs(times(in[1], in[0], a.size_or("outputRank", 1), int(infer), name));
    }
    case kTransposeTimes:
      // C++ TransposeTimes(A, B) is Python's times_transpose(B, A).
      need_inputs(in, 2, 2);
      if (a.size_or("outputRank", 1) != 1) op_fail("an output rank other than 1");
      return outs(times_transpose(in[1], in[0], name));
    case kSlice: {
      need_inputs(in, 1, 1);
      std::vector<Axis> axes;
      std::vector<int64_t> begins, ends, strides;
      if (a.has("axisVec")) {
        for (const auto& v : a.get<DictionaryVector>("axisVec"))
          axes.push_back(loom_axis(a, v, "axisVec"));
        for (const auto& v : a.get<DictionaryVector>("beginIndexVec"))
          begins.push_back(a.integer_of(v, "beginIndexVec"));
        for (const auto& v : a.get<DictionaryVector>("endIndexVec"))
          ends.push_back(a.integer_of(v, "endIndexVec"));
        if (a.has("sliceStridesVec"))
          for (const auto& v : a.get<DictionaryVector>("sliceStridesVec"))
            strides.push_back(a.integer_of(v, "sliceStridesVec"));
      } else {
        axes.push_back(loom_axis(a, a.at("axis"), "axis"));
        begins.push_back(a.integer("beginIndex"));
        ends.push_back(a.integer("endIndex"));
        if (a.has("sliceStrides")) strides.push_back(a.integer("sliceStrides"));
      }
      if (begins.size() != axes.size() || ends.size() != axes.size())
        op_fail(axes.size(), " axes with ", begins.size(), " begin and ", ends.size(),
                " end indices");
      if (!strides.empty() && strides.size() != axes.size())
        op_fail(axes.size(), " axes with ", strides.size(), " strides");
      Variable x = in[0];
      for (size_t i = 0; i < axes.size(); ++i) {
        if (begins[i] < INT32_MIN || begins[i] > INT32_MAX || ends[i] < INT32_MIN ||
            ends[i] > INT32_MAX)
          op_fail("slice indices ", begins[i], ":", ends[i], " are out of range");
        if (strides.empty() || strides[i] == 1)
          x = Variable(slice(x, axes[i], int(begins[i]), int(ends[i]), name));
        else
          x = Variable(strided_slice(x, axes[i], begins[i], ends[i], strides[i], name));
      }
      return {x};
    }
    case kSplice: {
      if (in.empty()) op_fail("no inputs");
      return outs(splice(in, axis_or("axis", Axis(-1)), name));
    }
    case kReshape: {
      need_inputs(in, 1, 1);
      const std::vector<size_t> dims = a.get<NDShape>("newShape").dims();
      if (dims.size() > kMaxRank) op_fail("a shape of rank ", dims.size());
      const NDShape shape(reversed(dims));
      if (!in[0].has_known_shape()) return outs(reshape(in[0], shape, name));
      // CNTK's [begin, end) of its C++ axes is Python's [rank - end, rank - begin).
      const int64_t rank = int64_t(in[0].shape().rank());
      auto normal = [&](int64_t k, int64_t fallback) {
        if (k == kEndStaticAxisIndex) return rank;
        if (k >= kAllAxesIndex) return fallback;
        if (k < 0) k += rank;
        if (k < 0 || k > rank) op_fail("reshape axis ", k, " is outside the input's rank ", rank);
        return k;
      };
      const int64_t begin = a.has("beginAxis") ? normal(cntk_static_index(a, "beginAxis"), 0) : 0;
      const int64_t end = a.has("endAxis") ? normal(cntk_static_index(a, "endAxis"), rank) : rank;
      if (begin == 0 && end == rank) return outs(reshape(in[0], shape, name));
      ReshapeOptions o;
      o.begin_axis = int(rank - end);
      if (begin != 0) o.end_axis = int(rank - begin);
      return outs(reshape(in[0], shape, o, name));
    }
    case kTransposeAxes: {
      need_inputs(in, 1, 1);
      if (a.has("axisVec")) {
        // C++ permutation q is Python's p[i] = n-1-q[n-1-i] (sanitize_permutation's inverse).
        const auto& v = a.get<DictionaryVector>("axisVec");
        const int n = int(v.size());
        std::vector<int> perm(v.size());
        for (int i = 0; i < n; ++i) {
          Axis ax = loom_axis(a, v[size_t(n - 1 - i)], "axisVec");
          if (!ax.is_static()) op_fail("a permutation of non-static axes");
          const int q = -ax.static_index() - 1;  // back to C++'s index
          perm[size_t(i)] = n - 1 - (q < 0 ? q + n : q);
        }
        return outs(transpose(in[0], perm, name));
      }
      Axis a1 = loom_axis(a, a.at("axis1"), "axis1"), a2 = loom_axis(a, a.at("axis2"), "axis2");
      if (!a1.is_static() || !a2.is_static()) op_fail("swapping non-static axes");
      return outs(swapaxes(in[0], {.axis1 = a1.static_index(), .axis2 = a2.static_index()}, name));
    }
    case kReduceElements: {
      need_inputs(in, 1, 1);
      std::vector<Axis> axes;
      if (a.has("axisVec")) {
        for (const auto& v : a.get<DictionaryVector>("axisVec"))
          axes.push_back(loom_axis(a, v, "axisVec"));
      } else {
        axes.push_back(loom_axis(a, a.at("axis"), "axis"));
      }
      const bool keep = a.flag_or("reductionKeepDimensions", true);
      const std::string op = a.get<std::string>("reductionOpName");
      using Reduce =
          Function (*)(const Variable&, const std::vector<Axis>&, bool, const std::string&);
      static const std::unordered_map<std::string, Reduce> reductions = {
          {"Sum", reduce_sum}, {"Mean", reduce_mean}, {"Max", reduce_max},
          {"Min", reduce_min}, {"Prod", reduce_prod}, {"LogSum", reduce_log_sum_exp},
      };
      if (auto it = reductions.find(op); it != reductions.end())
        return outs(it->second(in[0], axes, keep, name));
      if (op == "Argmax" || op == "Argmin") {
        if (axes.size() != 1) op_fail(op, " over ", axes.size(), " axes");
        return outs(op == "Argmax" ? argmax(in[0], axes[0], name) : argmin(in[0], axes[0], name));
      }
      op_fail("reduction '", printable(op), "' (Loom maps Sum, Mean, Max, Min, Prod, LogSum, ",
              "Argmax, Argmin)");
    }
    case kSumAll:  // every element of the minibatch summed into one number (SumElementsNode)
      need_inputs(in, 1, 1);
      return outs(reduce_sum(in[0], std::vector<Axis>{Axis::all_axes()}, false, name));
    case kPastValue:
    case kFutureValue: {
      need_inputs(in, 2, 2);
      const size_t offset = a.size_or("offset", 1);
      return outs(r.op == kPastValue ? sequence::past_value(in[0], in[1], offset, name)
                                     : sequence::future_value(in[0], in[1], offset, name));
    }
    case kDropout: {
      need_inputs(in, 1, 1);
      std::optional<uint64_t> seed;
      if (a.has("rngSeed")) seed = uint64_t(a.size("rngSeed"));
      return outs(dropout(in[0], a.number("dropoutRate"), seed, name));
    }
    case kOneHot: {
      need_inputs(in, 1, 1);
      return outs(one_hot(in[0], a.size("numClass"), a.flag_or("oneHotOutputSparse", false),
                          axis_or("onehotAxis", Axis(-1)), name));
    }
    case kGather:
      // C++ Gather(indices, reference) is Python's gather(reference, indices).
      need_inputs(in, 2, 2);
      return outs(gather(in[1], in[0], axis_or("axis", Axis(0)), name));
    case kCrossEntropyWithSoftmax:
      need_inputs(in, 2, 2);
      if (a.has("axis"))
        return outs(
            cross_entropy_with_softmax(in[0], in[1], loom_axis(a, a.at("axis"), "axis"), name));
      return outs(cross_entropy_with_softmax(in[0], in[1], name));
    case kClassificationError: {
      need_inputs(in, 2, 3);
      const size_t top_n = in.size() == 3 ? size_t(constant_scalar(in[2], "topN")) : 1;
      // The file's op is CNTK's node, which compares classes (CNTK's classification_error function
      // saves its top-1 error as a composite); a sample of higher rank along an axis is CNTK's
      // composite for that.
      if (a.has("axis") && in[0].shape().rank() > 1)
        return outs(
            classification_error(in[0], in[1], top_n, loom_axis(a, a.at("axis"), "axis"), name));
      return outs(classification_error_node(in[0], in[1], top_n, name));
    }
    case kLogistic:
      need_inputs(in, 2, 3);
      if (in.size() == 3) return outs(weighted_binary_cross_entropy(in[0], in[1], in[2], name));
      return outs(binary_cross_entropy(in[0], in[1], name));
    case kBatchNormalization: {
      need_inputs(in, 5, 6);
      // Files before version 4 have no running count: CNTK starts it at 0.
      Variable count = in.size() == 6 ? in[5] : Variable(constant(0.0, in[0].dtype()));
      return outs(batch_normalization(
          in[0], in[1], in[2], in[3], in[4], count, a.flag_or("spatial", false),
          a.number_or("normalizationTimeConstant", 5000), a.number_or("blendTimeConstant", 0),
          a.number_or("epsilon", 0.00001), name));
    }
    case kPooling: {
      need_inputs(in, 1, 1);
      const int64_t type = a.integer("poolingType");
      if (type != 0 && type != 1) op_fail("pooling type ", type, " is not 0 (max) or 1 (average)");
      const PoolingType pt = type == 0 ? PoolingType::Max : PoolingType::Average;
      const std::vector<size_t> window = a.sizes("poolingWindowShape");
      bool global = window.empty();
      for (size_t d : window) global = global || d == NDShape::kInferred || d == kUnknownDim;
      if (global) return outs(global_pooling(in[0], pt, name));
      for (const char* pad : {"lowerPad", "upperPad"})
        if (a.has(pad))
          for (size_t p : a.sizes(pad))
            if (p != 0) op_fail("explicit padding (", pad, "); Loom pools with auto-padding only");
      PoolingOptions o;
      if (a.has("strides")) o.strides = reversed(a.sizes("strides"));
      if (a.has("autoPadding")) o.auto_padding = reversed(a.flags("autoPadding"));
      o.include_pad = a.flag_or("includePad", false);
      o.ceil_out_dim = a.flag_or("ceilOutDim", false);
      o.name = name;
      return outs(pooling(in[0], pt, NDShape(reversed(window)), o));
    }
    case kConvolution:
    case kConvolutionSequenceShape: {
      // C++ Convolution(W, x) has Python's argument order; vectors are in C++ order. CNTK
      // writes its sequential convolution as Unpack, TransposeAxes, Convolution,
      // ConvolutionSequenceShape (the lengths of the sequences it packs again), ToSequence.
      need_inputs(in, 2, 2);
      const bool transpose = a.flag_or("transpose", false);
      if (transpose && r.op == kConvolutionSequenceShape)
        op_fail("the sequence lengths of a transposed convolution");
      auto vec = [&](const char* key, std::vector<size_t> fallback) {
        return a.has(key) ? reversed(a.sizes(key)) : fallback;
      };
      auto bools = [&](const char* key, std::vector<bool> fallback) {
        return a.has(key) ? reversed(a.flags(key)) : fallback;
      };
      if (!transpose) {
        ConvolutionOptions o;
        o.strides = vec("strides", o.strides);
        o.sharing = bools("sharing", o.sharing);
        o.auto_padding = bools("autoPadding", o.auto_padding);
        o.lower_pad = vec("lowerPad", o.lower_pad);
        o.upper_pad = vec("upperPad", o.upper_pad);
        o.dilation = vec("dilation", o.dilation);
        o.groups = a.size_or("groups", 1);
        o.name = name;
        if (r.op == kConvolutionSequenceShape)
          return outs(convolution_sequence_lengths(in[0], in[1], o));
        o.sequential = a.flag_or("sequential", false);
        return outs(convolution(in[0], in[1], o));
      }
      ConvolutionTransposeOptions o;
      o.strides = vec("strides", o.strides);
      o.sharing = bools("sharing", o.sharing);
      o.auto_padding = bools("autoPadding", o.auto_padding);
      o.lower_pad = vec("lowerPad", o.lower_pad);
      o.upper_pad = vec("upperPad", o.upper_pad);
      o.dilation = vec("dilation", o.dilation);
      if (a.has("outputShape")) {
        std::vector<size_t> s = a.sizes("outputShape");
        bool known = !s.empty();
        for (size_t d : s) known = known && d != kUnknownDim && d != 0;
        if (known) o.output_shape = NDShape(reversed(s));
      }
      o.name = name;
      return outs(convolution_transpose(in[0], in[1], o));
    }
    case kPad: {
      need_inputs(in, 1, 1);
      const std::vector<size_t> head = a.sizes("paddingHead"), foot = a.sizes("paddingFoot");
      if (head.size() != foot.size()) op_fail("padding head and foot of different lengths");
      std::vector<std::pair<size_t, size_t>> pattern;
      for (size_t i = head.size(); i-- > 0;) pattern.emplace_back(head[i], foot[i]);
      const int64_t mode = a.integer_or("paddingMode", 0);
      if (mode < 0 || mode > 2) op_fail("padding mode ", mode, " is not 0, 1 or 2");
      return outs(pad(in[0], pattern,
                      {.mode = int(mode), .constant_value = a.number_or("paddingConstantValue", 0)},
                      name));
    }
    case kSqueeze: {
      need_inputs(in, 1, 1);
      if (!a.has("axisVec")) return outs(squeeze(in[0], std::nullopt, name));
      std::vector<int> axes;
      for (const auto& v : a.get<DictionaryVector>("axisVec")) {
        Axis ax = loom_axis(a, v, "axisVec");
        if (!ax.is_static()) op_fail("squeezing a non-static axis");
        axes.push_back(ax.static_index());
      }
      return outs(squeeze(in[0], axes, name));
    }
    case kCast: {
      need_inputs(in, 1, 1);
      const int64_t t = a.integer("newDataType");
      if (t != 1 && t != 2)
        op_fail("a cast to data type ", t, " (Loom casts to 1: float, 2: double)");
      return outs(cast(in[0], t == 1 ? DataType::Float32 : DataType::Float64, name));
    }
    case kEyeLikeOp:
      need_inputs(in, 1, 1);
      return outs(eye_like(in[0], a.flag_or("OutputSparse", false), name));
    case kConstantOp: {
      // CNTK's ConstantLike (zeros_like and ones_like are its fill values 0 and 1).
      need_inputs(in, 1, 1);
      const double fill = a.number("fillValue");
      if (fill == 0) return outs(zeros_like(in[0], name));
      if (fill == 1) return outs(ones_like(in[0], name));
      return outs(plus(zeros_like(in[0]), constant(fill, in[0].dtype()), name));
    }
    case kCustomProxyOp: {
      const int64_t t = a.integer("newDataType");
      if (t != 1 && t != 2)
        op_fail("an output of data type ", t, " (Loom's are 1: float, 2: double)");
      const std::vector<size_t> dims = a.get<NDShape>("outputShape").dims();
      if (dims.size() > kMaxRank) op_fail("a shape of rank ", dims.size());
      return outs(custom_proxy_op(in, a.get<std::string>("customOp"), NDShape(reversed(dims)),
                                  t == 1 ? DataType::Float32 : DataType::Float64, name));
    }
    case kWhere: {
      need_inputs(in, 1, 1);
      if (a.size_or("newSequenceAxisLengthScalingFactor", 1) != 1 ||
          a.integer_or("newSequenceAxisLengthAdditiveFactor", 0) != 0)
        op_fail("a Where of a derived sequence axis outside a gather");
      return outs(sequence::where(in[0], name));
    }
    case kGatherPacked:
    case kScatterPacked: {
      // in: the data and the condition (find_reads); the factors are the Where's.
      if (!r.packed_where)
        op_fail("a ", op_name(r.op), " that does not read PackedIndex(layout, Where(condition))");
      need_inputs(in, 2, 2);
      const Fields w = r.packed_where->f.child("attributes");
      const bool derived = w.has("newSequenceAxisLengthScalingFactor") ||
                           w.has("newSequenceAxisLengthAdditiveFactor");
      if (r.op == kScatterPacked) {
        if (derived) op_fail("a scatter onto a derived sequence axis");
        return outs(sequence::scatter(in[0], in[1], name));
      }
      if (!derived) return outs(sequence::gather(in[0], in[1], name));
      const int64_t additive = w.integer_or("newSequenceAxisLengthAdditiveFactor", 0);
      if (additive < INT32_MIN || additive > INT32_MAX) op_fail("additive factor ", additive);
      return outs(sequence::gather(
          in[0], in[1], {w.size_or("newSequenceAxisLengthScalingFactor", 1), int(additive)}, name));
    }
    case kTopK:  // values, then positions
      need_inputs(in, 1, 1);
      return outs(top_k(in[0], a.size("numItems"), axis_or("axis", Axis(-1)), name));
    case kToSequence: {
      need_inputs(in, 1, 2);
      const std::string prefix = a.string_or("sequenceAxis", kToSequenceAxisPrefix);
      if (in.size() == 2) return outs(to_sequence(in[0], in[1], prefix, name));
      return outs(to_sequence(in[0], prefix, name));
    }
    case kUnpackSequence:  // the padded data, then (unless suppressed) the mask
      need_inputs(in, 1, 1);
      return outs(sequence::unpack(in[0], a.number_or("sequenceUnpackPaddingValue", 0),
                                   a.flag_or("sequenceUnpackSuppressMaskOutput", false), name));
    case kCrop: {
      need_inputs(in, 2, 4);
      if (in.size() == 4)
        return outs(crop_automatic_with_ancestors(in[0], in[1], in[2], in[3], name));
      if (in.size() == 3) op_fail("3 inputs (Crop takes 2 or 4)");
      if (!a.has("offset")) return outs(crop_automatic(in[0], in[1], name));
      const std::vector<size_t> offset = a.sizes("offset");  // x, then y
      if (offset.size() != 2) op_fail("a crop offset of ", offset.size(), " values, not 2");
      return outs(crop_manual(in[0], in[1], offset[0], offset[1], name));
    }
    case kRandomSample:
    case kRandomSampleInclusionFrequency: {
      need_inputs(in, 1, 1);
      std::optional<uint64_t> seed;
      if (a.has("rngSeed")) seed = uint64_t(a.size("rngSeed"));
      const size_t n = a.size("numSamples");
      const bool duplicates = a.flag("allowDuplicates");
      return outs(r.op == kRandomSample
                      ? random_sample(in[0], n, duplicates, seed, name)
                      : random_sample_inclusion_frequency(in[0], n, duplicates, seed, name));
    }
    case kRandomDistribution: {
      need_inputs(in, 0, 1);
      const std::string type = a.get<std::string>("randomDistributionType");
      std::vector<double> args;
      for (const DictionaryValue& v : a.get<DictionaryVector>("randomDistributionArgs"))
        args.push_back(v.is<double>() ? v.get<double>()
                                      : double(a.integer_of(v, "randomDistributionArgs")));
      std::optional<uint64_t> seed;
      if (a.has("rngSeed")) seed = uint64_t(a.size("rngSeed"));
      auto arg = [&](size_t i) {
        if (i >= args.size()) op_fail("a ", type, " distribution with ", args.size(), " arguments");
        return args[i];
      };
      NDShape shape;
      DataType dtype = DataType::Float32;
      if (in.empty()) {
        const std::vector<size_t> dims = a.get<NDShape>("newShape").dims();
        for (size_t d : dims)
          if (d == 0 || d > kMaxElements) op_fail("a random tensor of shape with dimension ", d);
        shape = NDShape(reversed(dims));
        const int64_t t = a.integer_or("newDataType", 1);
        if (t != 1 && t != 2) op_fail("random values of data type ", t);
        dtype = t == 1 ? DataType::Float32 : DataType::Float64;
      }
      if (type == "uniform") {
        UniformRandomOptions o{.low = arg(0), .high = arg(1), .seed = seed};
        return outs(in.empty() ? uniform_random(shape, dtype, o, name)
                               : uniform_random_like(in[0], o, name));
      }
      if (type == "normal") {
        NormalRandomOptions o{.mean = arg(0), .scale = arg(1), .seed = seed};
        return outs(in.empty() ? normal_random(shape, dtype, o, name)
                               : normal_random_like(in[0], o, name));
      }
      if (type == "gumbel") {
        GumbelRandomOptions o{.loc = arg(0), .scale = arg(1), .seed = seed};
        return outs(in.empty() ? gumbel_random(shape, dtype, o, name)
                               : gumbel_random_like(in[0], o, name));
      }
      if (type == "bernoulli") {
        BernoulliRandomOptions o{.mean = arg(0), .seed = seed};
        return outs(in.empty() ? bernoulli_random(shape, dtype, o, name)
                               : bernoulli_random_like(in[0], o, name));
      }
      op_fail("random distribution '", printable(type),
              "' (Loom maps uniform, normal, gumbel, bernoulli)");
    }
    case kROIPooling: {
      need_inputs(in, 2, 2);
      const int64_t type = a.integer_or("poolingType", 0);
      if (type != 0 && type != 1) op_fail("pooling type ", type, " is not 0 (max) or 1 (average)");
      return outs(roipooling(in[0], in[1], type == 0 ? PoolingType::Max : PoolingType::Average,
                             NDShape(reversed(a.sizes("roiOutputShape"))),
                             a.number_or("spatialScale", 1.0 / 16), name));
    }
    case kUnpooling: {
      need_inputs(in, 2, 2);
      const int64_t type = a.integer_or("poolingType", 0);
      if (type != 0 && type != 1) op_fail("pooling type ", type, " is not 0 (max) or 1 (average)");
      for (const char* pad : {"lowerPad", "upperPad"})
        if (a.has(pad))
          for (size_t p : a.sizes(pad))
            if (p != 0) op_fail("explicit padding (", pad, ")");
      PoolingOptions o;
      if (a.has("strides")) o.strides = reversed(a.sizes("strides"));
      if (a.has("autoPadding")) o.auto_padding = reversed(a.flags("autoPadding"));
      o.name = name;
      return outs(unpooling(in[0], in[1], type == 0 ? PoolingType::Max : PoolingType::Average,
                            NDShape(reversed(a.sizes("unpoolingWindowShape"))), o));
    }
    case kCosDistanceWithNegativeSamples:
      // CNTK passes the shift and the number of negative samples as constant scalars.
      need_inputs(in, 4, 4);
      return outs(cosine_distance_with_negative_samples(
          in[0], in[1], size_t(constant_scalar(in[2], "the shift")),
          size_t(constant_scalar(in[3], "the number of negative samples")), name));
    case kLambdaRank:
    case kNDCG:
      need_inputs(in, 3, 3);
      return outs(r.op == kLambdaRank ? lambda_rank(in[0], in[1], in[2], name)
                                      : ndcg_at_1(in[0], in[1], in[2], name));
    case kUserDefinedFunction: {
      // A Python UserFunction as CNTK's Python saved it: its state is {class, module, op_name,
      // state}, which Loom's Python takes back as it does from its own files (the deserializer
      // registered for op_name, or the class imported and its static deserialize called).
      const std::string module = a.string_or("module", ""), cls = a.string_or("class", "");
      if (r.f.flag_or("native", false))
        op_fail("a native (C++ library) user function of module '", printable(module),
                "' (Loom loads native user functions from its own files only)");
      Dictionary attributes;
      attributes["op_name"] = a.string_or("op_name", module + "." + cls);
      attributes["state"] = r.f.get<DictionaryMap>("user_defined_state");
      try {
        return outs(user_function_from_attributes(in, attributes, name));
      } catch (const std::exception& e) {
        op_fail("the user function of class '", printable(cls), "' of module '", printable(module),
                "' cannot be loaded: ", e.what());
      }
    }
    case kLabelsToGraph:
      need_inputs(in, 1, 1);
      return outs(labels_to_graph(in[0], name));
    case kForwardBackward: {
      // CNTK's CTC criterion: graph (a LabelsToGraph), then the features.
      need_inputs(in, 2, 2);
      const int64_t delay = a.integer_or("DelayConstraint", -1);
      if (delay < -1 || delay > INT32_MAX) op_fail("delay constraint ", delay);
      return outs(forward_backward(in[0], in[1], a.size("BlankTokenId"),
                                   {.delay_constraint = delay}, name));
    }
    case kEditDistanceError: {
      need_inputs(in, 2, 2);
      EditDistanceOptions o;
      o.sub_pen = a.number_or("SubstitutionPenalty", 1);
      o.del_pen = a.number_or("DeletionPenalty", 1);
      o.ins_pen = a.number_or("InsertionPenalty", 1);
      o.squash_inputs = a.flag_or("SquashInputs", false);
      if (a.has("TokensToIgnore")) o.tokens_to_ignore = a.sizes("TokensToIgnore");
      return outs(edit_distance_error(in[0], in[1], o, name));
    }
    default:
      break;
  }
  op_fail("Loom has no mapping for CNTK's ", op_name(r.op), " (op ", r.op,
          "); docs/cntk-formats.md lists the ops Loom maps");
}

}  // namespace

CntkFormat cntk_format_of(std::span<const uint8_t> b) {
  static const uint8_t v1_marker[] = {'B', 0, 'C', 0, 'N', 0, 0, 0};
  if (b.size() >= sizeof v1_marker && std::memcmp(b.data(), v1_marker, sizeof v1_marker) == 0)
    return CntkFormat::V1;
  // A v2 file is a Dictionary message: field 1 (version, a varint), then field 2 (data, a map
  // entry): bytes 08 <version> 12.
  if (b.size() >= 3 && b[0] == 0x08 && b[1] >= 1 && b[1] < 0x80 && b[2] == 0x12)
    return CntkFormat::V2;
  return CntkFormat::None;
}

Dictionary cntk_v2_dictionary(std::span<const uint8_t> bytes, const std::string& name) {
  // On an arena, the message's thousands of small parts are allocated and freed at once.
  google::protobuf::Arena arena;
  pb::Dictionary& message = *google::protobuf::Arena::CreateMessage<pb::Dictionary>(&arena);
  // ParseFromArray allocates no more than the input holds (a repeated field grows with the
  // values actually present), so a damaged length cannot make it allocate gigabytes.
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    throw DataError("'" + name + "': " + std::to_string(bytes.size()) +
                    " bytes: CNTK's v2 files over 2 GB keep their values outside the protocol "
                    "buffer, which Loom does not read");
  if (!message.ParseFromArray(bytes.data(), int(bytes.size())))
    throw DataError("'" + name +
                    "': not a CNTK v2 model (the bytes are not a CNTK.proto Dictionary "
                    "message: truncated or damaged)");
  ProtoReader reader(name);
  Dictionary d(reader.dictionary(message, Path{}));
  return d;
}

namespace {

Function build_function(const Dictionary& composite, const std::string& where, bool share_values,
                        bool fuse_recurrences = true) {
  try {
    return Builder(composite, where, share_values, fuse_recurrences).build();
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(where + ": " + e.what());
  }
}

}  // namespace

Function function_from_cntk_dictionary(const Dictionary& composite, const std::string& where,
                                       bool fuse_recurrences) {
  return build_function(composite, where, /*share_values=*/false, fuse_recurrences);
}

std::string cntk_op_type_name(int64_t op) {
  return op_name(op);
}

std::vector<int64_t> cntk_mapped_op_types() {
  // The cases of Builder::build_op, and Block.
  // clang-format off
  std::vector<int64_t> ops = {
      kNegate, kSigmoid, kTanh, kReLU, kExp, kLog, kSqrt, kFloor, kAbs, kReciprocal, kSoftmax,
      kHardmax, kTransposeAxes, kSlice, kDropout, kReshape, kPooling, kSumAll, kPlus, kMinus,
      kElementTimes,
      kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual, kTimes, kTransposeTimes,
      kConvolution, kSquaredError, kCrossEntropyWithSoftmax, kClassificationError, kPastValue,
      kFutureValue, kReduceElements, kBatchNormalization, kClip, kSelect, kSplice, kCombine,
      kLogistic, kReconcileDynamicAxis, kLogSoftmax, kLogPlus, kCosDistance, kSin, kCos, kPass,
      kBlock, kNoOp, kStopGradient, kELU, kOneHot, kPow, kToSequenceLike, kAssign, kGather,
      kStableSigmoid, kSinh, kCosh, kUnpackBatch, kToBatch, kAsin, kAcos, kPad, kAtanh, kAsinh,
      kSqueeze, kCast, kEyeLikeOp, kConstantOp, kCustomProxyOp, kStraightThrough, kTan, kAtan,
      kTopK, kToSequence, kUnpackSequence, kCrop, kRandomSample, kRandomSampleInclusionFrequency,
      kRandomDistribution, kROIPooling, kUnpooling, kCosDistanceWithNegativeSamples, kLambdaRank,
      kNDCG, kEditDistanceError,
      kWhere, kGatherPacked, kScatterPacked, kLabelsToGraph, kForwardBackward,
      kConvolutionSequenceShape,
  };
  // clang-format on
  std::sort(ops.begin(), ops.end());
  return ops;
}

Function load_cntk_model_from_bytes(std::span<const uint8_t> bytes, const std::string& name) {
  switch (cntk_format_of(bytes)) {
    // The v2 dictionary is this function's own, with arrays of its own: the parameters take
    // their values as they are. (The v1 reader's arrays may be views of the bytes: copied.)
    case CntkFormat::V2:
      return build_function(cntk_v2_dictionary(bytes, name), "'" + name + "'", true);
    case CntkFormat::V1:
      return build_function(cntk_v1_dictionary(bytes, name), "'" + name + "'", false);
    case CntkFormat::None:
      break;
  }
  throw ArgumentError("'" + name + "' is not a CNTK model file");
}

}  // namespace loom
