// ONNX import: each node becomes Loom ops (docs/onnx.md). Axis 0 of a graph input is the batch
// axis (or, where OnnxImportOptions say so and its size is fixed, a static axis), or axes 0 and
// 1 (both without a fixed size) the sequence and batch axes of a batch of sequences;
// initializers become parameters (batch normalization's statistics constants).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "loom/deploy/onnx.h"
#include "loom/deploy/onnx.pb.h"
#include "loom/deploy/onnx_common.h"
#include "loom/deploy/onnx_tensors.inc"
#include "loom/ops/fused_rnn.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/ops.h"
#include "loom/serialize/container.h"
#include "loom/serialize/model_file.h"

namespace loom {

namespace {

using namespace onnx_detail;
namespace pb = onnx_proto;

// Dimensions of tensors and inputs in a file stay below these, so that nothing downstream
// multiplies its way to an overflow.
constexpr int64_t kMaxDim = int64_t(1) << 31;
constexpr uint64_t kMaxElements = uint64_t(1) << 40;
constexpr size_t kMaxPositions = size_t(1) << 24;  // constants of positions the importer makes

// A value of the graph: a Loom variable and how many of ONNX's leading axes are its dynamic
// axes (0; 1: the batch axis; 2: the sequence and batch axes), so that ONNX's axis k is the
// variable's static axis k - dynamic.
struct Val {
  Variable var;
  size_t dynamic = 0;
  // An ONNX integer tensor (held as float values): Div of two truncates.
  bool integer = false;
  size_t rank() const { return var.shape().rank() + dynamic; }
};

// A problem with the node being imported; the importer adds the file and the node.
class NodeError : public Error {
 public:
  using Error::Error;
};

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw NodeError(detail::concat(parts...));
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

const pb::AttributeProto* find_attribute(const pb::NodeProto& n, const std::string& name) {
  for (const pb::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t int_attribute(const pb::NodeProto& n, const std::string& name, int64_t fallback) {
  const pb::AttributeProto* a = find_attribute(n, name);
  return a ? a->i() : fallback;
}
float float_attribute(const pb::NodeProto& n, const std::string& name, float fallback) {
  const pb::AttributeProto* a = find_attribute(n, name);
  return a ? a->f() : fallback;
}
std::vector<int64_t> ints_attribute(const pb::NodeProto& n, const std::string& name,
                                    std::vector<int64_t> fallback) {
  const pb::AttributeProto* a = find_attribute(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
}
std::string string_attribute(const pb::NodeProto& n, const std::string& name,
                             const std::string& fallback) {
  const pb::AttributeProto* a = find_attribute(n, name);
  return a ? a->s() : fallback;
}

// ONNX's integer element types, which Loom holds as float values.
bool is_integer_type(int32_t t) {
  switch (t) {
    case pb::TensorProto::INT8:
    case pb::TensorProto::UINT8:
    case pb::TensorProto::INT16:
    case pb::TensorProto::UINT16:
    case pb::TensorProto::INT32:
    case pb::TensorProto::UINT32:
    case pb::TensorProto::INT64:
    case pb::TensorProto::UINT64:
      return true;
    default:
      return false;
  }
}

// The values v as an array of type t.
NDArrayView array_of(const NDShape& shape, const std::vector<double>& v, DataType t) {
  if (t == DataType::Float64) return NDArrayView::from_vector(shape, v);
  return NDArrayView::from_vector(shape, std::vector<float>(v.begin(), v.end()));
}

// x rounded toward zero (ONNX's integer division, its Cast to an integer type).
Variable truncated(const Variable& x, const std::string& name = "") {
  return element_select(less(x, constant(0.0, x.dtype())), ceil(x), floor(x), name);
}

// An ONNX axis (negative counts from the end) of a value of `rank` axes.
size_t onnx_axis(int64_t axis, size_t rank) {
  const int64_t a = axis < 0 ? axis + int64_t(rank) : axis;
  if (a < 0 || a >= int64_t(rank)) fail("axis ", axis, " is out of range for rank ", rank);
  return size_t(a);
}

// The Loom static axis of ONNX axis `axis` of v; a dynamic axis cannot be one.
Axis static_axis(const Val& v, int64_t axis) {
  const size_t a = onnx_axis(axis, v.rank());
  if (a < v.dynamic)
    fail("the op works along axis ", a, ", a ", v.dynamic == 2 && a == 0 ? "sequence" : "batch",
         " axis, which Loom cannot (OnnxImportOptions::fixed_axis0_is_batch false reads an axis ",
         "0 of fixed size as a static axis)");
  return Axis(int(a - v.dynamic));
}

std::vector<size_t> to_sizes(const std::vector<int64_t>& v, const char* what) {
  std::vector<size_t> s;
  for (int64_t x : v) {
    if (x < 0 || x > kMaxDim) fail(what, " ", list(v), " has a value out of range");
    s.push_back(size_t(x));
  }
  return s;
}

// ---- resizing (Resize, and Upsample, its earlier form) ----
// Along each axis in turn, output i is a weighted sum of a few input elements around its
// position in the input (coordinate_transformation_mode): one (nearest), two (linear) or four
// (cubic), their positions clamped to the input (its edge elements repeated).
struct Interpolation {
  std::string mode = "nearest";  // nearest, linear, cubic
  std::string coordinates = "asymmetric";
  // nearest_mode; empty: Resize's before opset 11 and Upsample's, which onnxruntime reads as
  // floor where the axis grows and ceil where it shrinks.
  std::string nearest{};
  double cubic_a = -0.75;
  bool exclude_outside = false;  // cubic: the elements outside the input weigh 0
  double extrapolation = 0;      // tf_crop_and_resize: the value of positions outside the input
};

// The input elements that outputs along one axis weigh: output i is the sum over taps t of
// weight[t][i] x[index[t][i]], or the extrapolation value where outside[i] is 1.
struct AxisResize {
  std::vector<std::vector<double>> index, weight;
  std::vector<double> outside;
};

// Keys' cubic convolution kernel of parameter a at distance d.
double keys_kernel(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

// Resizing an axis of n elements to m: `scale` is the scale given (or m / n for sizes),
// `length` ONNX's length_resized (n scale as ONNX's reference computes it, or the size given),
// [start, end] the axis's roi (tf_crop_and_resize).
AxisResize resize_axis(const Interpolation& how, size_t n, size_t m, double scale, double length,
                       double start, double end) {
  const std::string& c = how.coordinates;
  const double last = double(n - 1);
  const size_t taps = how.mode == "nearest" ? 1 : how.mode == "linear" ? 2 : 4;
  AxisResize r{std::vector<std::vector<double>>(taps), std::vector<std::vector<double>>(taps),
               std::vector<double>(m)};
  for (size_t i = 0; i < m; ++i) {
    const double o = double(i);
    const double x = c == "half_pixel"             ? (o + 0.5) / scale - 0.5
                     : c == "pytorch_half_pixel"   ? (length > 1 ? (o + 0.5) / scale - 0.5 : 0)
                     : c == "align_corners"        ? (length > 1 ? o * last / (length - 1) : 0)
                     : c == "tf_half_pixel_for_nn" ? (o + 0.5) / scale
                     : c == "tf_crop_and_resize"
                         ? (length > 1 ? start * last + o * (end - start) * last / (length - 1)
                                       : (start + end) / 2 * last)
                         : o / scale;  // asymmetric
    // The element before x (where x is an element's position, the one before that: x is then
    // base + 1), and x's distance d in (0, 1] from it, as ONNX's reference picks them.
    const double base = std::ceil(x) - 1, d = x - base;
    std::vector<double> at, w;
    if (how.mode == "nearest") {
      const std::string rule = how.nearest.empty() ? (scale < 1 ? "ceil" : "floor") : how.nearest;
      const bool after = rule == "floor"               ? d == 1
                         : rule == "ceil"              ? true
                         : rule == "round_prefer_ceil" ? d >= 0.5
                                                       : d > 0.5;  // round_prefer_floor
      at = {after ? base + 1 : base};
      w = {1};
    } else if (how.mode == "linear") {
      at = {base, base + 1};
      w = {1 - d, d};
    } else {
      at = {base - 1, base, base + 1, base + 2};
      w = {keys_kernel(d + 1, how.cubic_a), keys_kernel(d, how.cubic_a),
           keys_kernel(1 - d, how.cubic_a), keys_kernel(2 - d, how.cubic_a)};
      if (how.exclude_outside) {
        double sum = 0;
        for (size_t t = 0; t < taps; ++t) {
          if (at[t] < 0 || at[t] > last) w[t] = 0;
          sum += w[t];
        }
        for (double& v : w) v /= sum;
      }
    }
    r.outside[i] = c == "tf_crop_and_resize" && (x < 0 || x > last);
    for (size_t t = 0; t < taps; ++t) {
      r.index[t].push_back(std::clamp(at[t], 0.0, last));
      r.weight[t].push_back(r.outside[i] ? 0 : w[t]);
    }
  }
  return r;
}

// Whether resizing an axis leaves it as it is (each output the input element at its position).
bool is_identity(const AxisResize& r, size_t n) {
  if (r.outside.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    double own = 0;
    for (size_t t = 0; t < r.index.size(); ++t) {
      if (r.index[t][i] == double(i))
        own += r.weight[t][i];
      else if (r.weight[t][i] != 0)
        return false;
    }
    if (own != 1) return false;
  }
  return true;
}

// ---- opsets ----
// The importer reads opsets 7 to 17, each op in its form at the model's opset (its definition
// of the highest since_version not above it). Its code reads each op's latest form; an earlier
// form that differs in what Loom reads is one change here, applying to models of opsets below
// `opset`. The imported ops' other definitions between 7 and 17 differ from their latest in
// types and broadcasting only (Add's, Max's, PRelu's, Gemm's C), or in attributes the earlier
// forms lack (MaxPool's ceil_mode, dilations and indices, LSTM's layout, ArgMax's
// select_last_index), read with their defaults; Dropout before 12 has no training mode (the
// identity, as at inference) and its ratio is an attribute it ignores.
struct OpsetChange {
  const char* op_type;
  int64_t opset;        // the opset that gave the op the form the importer reads
  const char* earlier;  // how the earlier form differs
  // Attributes of the earlier form that are inputs from `opset` on (the attribute's ints as an
  // int64 vector, an int as a vector of one, a float as a scalar of input 0's type): the node
  // is read as the later form with them as constant inputs.
  std::vector<std::pair<const char*, int>> inputs = {};
};
const std::vector<OpsetChange>& opset_changes() {
  static const std::vector<OpsetChange> changes = {
      {"Clip", 11, "min and max are attributes", {{"min", 1}, {"max", 2}}},
      {"Pad", 11, "pads and value are attributes", {{"pads", 1}, {"value", 2}}},
      {"Slice",
       10,
       "starts, ends and axes are attributes (steps 1)",
       {{"starts", 1}, {"ends", 2}, {"axes", 3}}},
      {"TopK", 10, "k is an attribute", {{"k", 1}}},
      {"Squeeze", 13, "axes is an attribute", {{"axes", 1}}},
      {"Unsqueeze", 13, "axes is an attribute", {{"axes", 1}}},
      {"ReduceSum", 13, "axes is an attribute", {{"axes", 1}}},
      {"Softmax", 13, "x is normalized flattened to 2-D at axis (default 1)"},
      {"LogSoftmax", 13, "x is normalized flattened to 2-D at axis (default 1)"},
      {"Hardmax", 13, "the maximum is over x flattened to 2-D at axis (default 1)"},
      {"BatchNormalization", 14,
       "training mode is the node having more outputs than Y (no training_mode attribute)"},
      {"BatchNormalization", 9, "the attribute spatial (0: statistics per element of the sample)"},
      {"Split", 13, "split is an attribute", {{"split", 1}}},
      {"Upsample", 9, "scales is an attribute", {{"scales", 1}}},
      {"Resize", 11,
       "X and scales alone (no roi, sizes or attributes but mode, nearest or linear) at "
       "asymmetric coordinates, nearest floor where an axis grows and ceil where it shrinks"},
  };
  return changes;
}
// The opsets at which imported ops first appear, where that is after 7.
const std::map<std::string, int64_t>& opset_introduced() {
  static const std::map<std::string, int64_t> introduced = {
      {"Expand", 8},  {"Asinh", 9},        {"Atanh", 9},           {"Cosh", 9},
      {"Sinh", 9},    {"Where", 9},        {"OneHot", 9},          {"ConstantOfShape", 9},
      {"Round", 11},  {"LessOrEqual", 12}, {"GreaterOrEqual", 12}, {"MaxUnpool", 9},
      {"Resize", 10},
  };
  return introduced;
}

class Importer {
 public:
  Importer(std::span<const uint8_t> bytes, const std::string& name,
           const OnnxImportOptions& options)
      : file_(name), options_(options) {
    if (bytes.size() > size_t(INT32_MAX) || !model_.ParseFromArray(bytes.data(), int(bytes.size())))
      throw DataError(file_ + ": not an ONNX model (the bytes are not an ONNX ModelProto)");
    if (!model_.has_graph() || model_.graph().output_size() == 0)
      throw DataError(file_ + ": not an ONNX model (it has no graph with outputs)");
    check_opset();
  }

  Function import() {
    const pb::GraphProto& g = model_.graph();
    // Integer and boolean tensors are read as values of the graph's float type.
    auto is_double = [](const pb::ValueInfoProto& v) {
      return v.type().tensor_type().elem_type() == pb::TensorProto::DOUBLE;
    };
    if (std::any_of(g.input().begin(), g.input().end(), is_double) ||
        std::any_of(g.output().begin(), g.output().end(), is_double) ||
        std::any_of(g.initializer().begin(), g.initializer().end(), [](const pb::TensorProto& t) {
          return t.data_type() == pb::TensorProto::DOUBLE;
        }))
      integer_dtype_ = DataType::Float64;
    for (const pb::TensorProto& t : g.initializer()) {
      constants_[t.name()] = &t;
      names_.insert(t.name());
    }
    for (const pb::ValueInfoProto& in : g.input()) {
      names_.insert(in.name());
      if (!constants_.count(in.name())) add_input(in);
    }
    for (const pb::NodeProto& n : g.node()) read_.insert(n.input().begin(), n.input().end());
    for (const pb::ValueInfoProto& o : g.output()) read_.insert(o.name());
    for (int i = 0; i < g.node_size(); ++i) {
      node_ = &g.node(i);
      // Loom's errors and any other (std::bad_alloc, ...) name the file, the node and the
      // opset (which gives the op's form).
      auto failed = [&](const char* what) {
        return DataError(detail::concat(file_, ": node ", i, " '", node_->name(), "' (",
                                        node_->op_type(), ", opset ", opset_, "): ", what));
      };
      try {
        import_node();
      } catch (const Error& e) {
        throw failed(e.what());
      } catch (const std::exception& e) {
        throw failed(e.what());
      }
    }
    std::vector<Variable> outputs;
    for (const pb::ValueInfoProto& o : g.output()) {
      auto it = values_.find(o.name());
      if (it != values_.end())
        // An output keeps its name where its value was made under another (an Identity node's,
        // a Cast to the type it has).
        outputs.push_back(it->second.var.name() == o.name()
                              ? it->second.var
                              : Variable(alias(it->second.var, o.name())));
      else if (constants_.count(o.name()))  // an initializer or a Constant node's output
        outputs.push_back(constant_output(o.name()));
      else if (const std::string why = unavailable(o.name()); !why.empty())
        throw DataError(file_ + ": the graph output '" + o.name() + "' is " + why);
      else
        throw DataError(file_ + ": the graph output '" + o.name() + "' is computed by no node");
    }
    return outputs.size() == 1 ? Function(outputs[0]) : combine(outputs);
  }

  // Every op type import_node reads (onnx_imported_op_types), sorted.
  static std::vector<std::string> op_types() {
    std::set<std::string> types;
    for (const auto& entry : importings()) types.insert(entry.first);
    for (const auto& entry : recordings()) types.insert(entry.first);
    for (const OpSchema& s : op_table())
      if (s.onnx.generic) types.insert(s.onnx.op_type);
    return {types.begin(), types.end()};
  }

 private:
  // How one op is imported: the Loom value of the node's first output.
  using Importing = std::function<Val(Importer&)>;
  using ReduceFn = Function (*)(const Variable&, const std::vector<Axis>&, bool,
                                const std::string&);

  void check_opset() {
    bool found = false;
    for (const pb::OperatorSetIdProto& o : model_.opset_import()) {
      if (!o.domain().empty() && o.domain() != "ai.onnx") continue;  // used by no node Loom reads
      if (o.version() < kOldestOpset || o.version() > kNewestOpset)
        throw DataError(detail::concat(file_, ": ONNX opset ", o.version(), " is not supported (",
                                       "Loom reads opsets ", kOldestOpset, " to ", kNewestOpset,
                                       ")"));
      opset_ = o.version();
      found = true;
    }
    if (!found) throw DataError(file_ + ": not an ONNX model (it imports no opset of ONNX's ops)");
  }

  void add_input(const pb::ValueInfoProto& in) {
    const std::string where = file_ + ": graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) throw DataError(where + " is not a tensor");
    const pb::TypeProto::Tensor& t = in.type().tensor_type();
    // A size the file gives must be one Loom can hold (dim_param and no size stay symbolic).
    for (int k = 0; k < t.shape().dim_size(); ++k)
      if (const pb::TensorShapeProto::Dimension& d = t.shape().dim(k);
          d.has_dim_value() && (d.dim_value() <= 0 || d.dim_value() > kMaxDim))
        throw DataError(detail::concat(where, ": axis ", k, " has size ", d.dim_value(),
                                       "; Loom reads sizes 1 to 2^31 (or a dim_param)"));
    // A scalar has no axis 0 to be the batch axis: it is read as static ones are.
    if (!t.has_shape() || (t.shape().dim_size() == 0 && options_.fixed_axis0_is_batch))
      throw DataError(where + " has no shape; Loom needs [batch, sample axes...]");
    auto fixed = [&](int k) {
      const pb::TensorShapeProto::Dimension& d = t.shape().dim(k);
      return d.has_dim_value();
    };
    // A vector of int32 over the batch: the sequences' lengths for the recurrent ops, which
    // Loom's sequences carry themselves.
    if (t.elem_type() == pb::TensorProto::INT32 && t.shape().dim_size() == 1 &&
        (options_.fixed_axis0_is_batch || !fixed(0))) {
      lengths_.insert(in.name());
      return;
    }
    // A boolean input is read as 0/1 values (Loom's comparisons and logic ops give them), an
    // integer one as float values (the caller gives them so).
    const DataType dtype = data_type(t.elem_type(), where);
    // [T, N, sample...]: a batch of sequences (ONNX's recurrent ops take them so); a fixed
    // axis 0 is the batch axis, or a static one (OnnxImportOptions).
    const int rank = t.shape().dim_size();
    const int dynamic = rank >= 2 && !fixed(0) && !fixed(1)                         ? 2
                        : (rank == 0 || fixed(0)) && !options_.fixed_axis0_is_batch ? 0
                                                                                    : 1;
    std::vector<size_t> dims;
    uint64_t total = 1;
    for (int k = dynamic; k < rank; ++k) {
      if (!fixed(k))
        throw DataError(detail::concat(where, ": axis ", k, " has no fixed size; Loom needs ",
                                       "the sample shape (every axis but the batch axis 0, or ",
                                       "the sequence and batch axes 0 and 1)"));
      dims.push_back(size_t(t.shape().dim(k).dim_value()));
      total *= uint64_t(dims.back());
      if (total > kMaxElements) throw DataError(where + " has too many elements per sample");
    }
    InputOptions options{.dtype = dtype, .name = in.name()};
    if (dynamic == 0) options.dynamic_axes = {};
    values_[in.name()] = {dynamic == 2 ? sequence::input_variable(NDShape(dims), options)
                                       : input_variable(NDShape(dims), options),
                          size_t(dynamic), is_integer_type(t.elem_type())};
  }

  // The Loom type of an ONNX element type: float and double as they are, float16 and bfloat16
  // as float32 (exactly), booleans (0/1) and integers as the graph's float type
  // (integer_dtype_).
  DataType data_type(int32_t t, const std::string& where) const {
    if (t == pb::TensorProto::FLOAT || t == pb::TensorProto::FLOAT16 ||
        t == pb::TensorProto::BFLOAT16)
      return DataType::Float32;
    if (t == pb::TensorProto::DOUBLE) return DataType::Float64;
    if (t == pb::TensorProto::BOOL || is_integer_type(t)) return integer_dtype_;
    throw DataError(detail::concat(
        where, " has ONNX element type ", t, " (", pb::TensorProto::DataType_Name(t),
        "); Loom reads float, double, float16 and bfloat16 (as float), bool and the integer ",
        "types int8 to int64 and uint8 to uint64 (strings and complex numbers are not read)"));
  }

  // ---- constants (initializers and Constant nodes) ----

  const pb::TensorProto& constant_tensor(const std::string& name) {
    auto it = constants_.find(name);
    if (it == constants_.end()) fail("input '", name, "' must be a constant (an initializer)");
    return *it->second;
  }

  static NDShape tensor_shape(const pb::TensorProto& t) {
    std::vector<size_t> dims;
    uint64_t total = 1;
    for (int64_t d : t.dims()) {
      if (d < 0 || d > kMaxDim) fail("tensor '", t.name(), "' has a dimension of ", d);
      total *= uint64_t(d);
      if (total > kMaxElements) fail("tensor '", t.name(), "' is too large");
      dims.push_back(size_t(d));
    }
    return NDShape(dims);
  }

  // The elements of t as T (its raw bytes, or its typed field).
  template <typename T, typename Field>
  static std::vector<T> elements(const pb::TensorProto& t, const Field& field) {
    if (t.data_location() == pb::TensorProto::EXTERNAL)
      fail("tensor '", t.name(), "' keeps its data in an external file, which Loom does not read");
    const size_t n = tensor_shape(t).total_size();
    std::vector<T> v;
    if (t.has_raw_data()) {
      if (t.raw_data().size() != n * sizeof(T))
        fail("tensor '", t.name(), "' has ", t.raw_data().size(), " bytes of data for ", n,
             " elements of ", sizeof(T), " bytes");
      v.resize(n);
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      if (size_t(field.size()) != n)
        fail("tensor '", t.name(), "' has ", field.size(), " values for ", n, " elements");
      v.assign(field.begin(), field.end());
    }
    return v;
  }

  // The values of t, a tensor of a type data_type reads, as doubles. Integers that dtype (the
  // type they become) cannot hold exactly, beyond 2^24 for float32 and 2^53 for float64, are an
  // error: Loom holds integer tensors as float values and never rounds them.
  std::vector<double> numbers(const pb::TensorProto& t, DataType dtype) const {
    const std::string what = "tensor '" + t.name() + "'";
    data_type(t.data_type(), what);
    return tensor_values(t, [&]<typename T>(const auto& field) {
      const std::vector<T> v = elements<T>(t, field);
      const double limit = dtype == DataType::Float32 ? 0x1p24 : 0x1p53;
      std::vector<double> d;
      d.reserve(v.size());
      for (T x : v) {
        if constexpr (std::is_integral_v<T> && sizeof(T) >= 4)
          if (x > T(limit) || (std::is_signed_v<T> && x < -T(limit)))
            fail(what, " holds the integer ", x, ", which ", to_string(dtype),
                 " values do not hold exactly (Loom reads integer tensors as ", to_string(dtype),
                 " values of magnitude up to 2^", dtype == DataType::Float32 ? 24 : 53, ")");
        d.push_back(double(x));
      }
      return d;
    });
  }

  // A constant of integers (shapes, axes, slice bounds).
  std::vector<int64_t> ints(const std::string& name) {
    const pb::TensorProto& t = constant_tensor(name);
    if (t.data_type() == pb::TensorProto::INT64) return elements<int64_t>(t, t.int64_data());
    if (t.data_type() == pb::TensorProto::INT32) {
      const auto v = elements<int32_t>(t, t.int32_data());
      return {v.begin(), v.end()};
    }
    fail("input '", name, "' must hold int64 values");
  }

  // Initializer `name` as a Loom parameter (or constant) of the given shape (default: its own).
  Variable leaf(const std::string& name, bool is_constant, std::optional<NDShape> shape = {}) {
    const pb::TensorProto& t = constant_tensor(name);
    const NDShape own = tensor_shape(t);
    const NDShape want = shape.value_or(own);
    const auto key = std::make_tuple(name, is_constant, want.dims());
    auto it = leaves_.find(key);
    if (it != leaves_.end()) return it->second;
    const DataType dtype = data_type(t.data_type(), "tensor '" + name + "'");
    const NDArrayView data = array_of(want, numbers(t, dtype), dtype);
    Variable v = is_constant ? Variable(constant(data, name)) : Variable(parameter(data, name));
    return leaves_[key] = v;
  }

  // A graph output that is a constant tensor, as a Loom constant.
  Variable constant_output(const std::string& name) {
    try {
      return leaf(name, true);
    } catch (const NodeError& e) {
      throw DataError(file_ + ": graph output '" + name + "': " + e.what());
    }
  }

  // ---- values ----

  size_t inputs() const { return size_t(node_->input_size()); }
  bool has_input(size_t i) const { return i < inputs() && !node_->input(int(i)).empty(); }

  // Input i: a computed value, or an initializer as a parameter without a batch axis.
  Val in(size_t i) {
    if (!has_input(i)) fail("input ", i, " is missing");
    const std::string& name = node_->input(int(i));
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    if (constants_.count(name))
      return {leaf(name, false), 0, is_integer_type(constants_.at(name)->data_type())};
    if (const std::string why = unavailable(name); !why.empty())
      fail("input '", name, "' is ", why);
    if (lengths_.count(name))
      fail("input '", name, "' is an int32 vector, which Loom reads as the sequences' lengths ",
           "for the recurrent ops only");
    fail("input '", name, "' is computed by no earlier node and is not an initializer");
  }
  // Why the value `name` cannot be read (a recurrent op's output, a node's second output), or
  // empty.
  std::string unavailable(const std::string& name) const {
    if (states_.count(name))
      return "a state of every sample [1, N, size], which Loom reads only as a recurrent op's "
             "initial state";
    if (recurrences_.count(name))
      return "a recurrent op's output with its direction axis, which Loom imports only through "
             "a Squeeze of that axis";
    auto it = second_outputs_.find(name);
    return it == second_outputs_.end() ? "" : it->second + ", which Loom does not support";
  }
  // v with another shape (Loom's: behind the batch axis); initializers get the shape directly.
  Val reshaped(const Val& v, const NDShape& shape) {
    if (v.var.shape() == shape) return v;
    if (!v.dynamic && v.var.is_parameter() && v.var.shape().total_size() == shape.total_size())
      return {leaf(v.var.name(), false, shape), 0, v.integer};
    return {reshape(v.var, shape, out_name()), v.dynamic, v.integer};
  }
  // Input i, a constant of integers.
  std::vector<int64_t> input_ints(size_t i) {
    if (!has_input(i)) fail("input ", i, " is missing");
    return ints(node_->input(int(i)));
  }
  std::string out_name() const { return node_->output_size() ? node_->output(0) : ""; }

  // The ops imported by code of their own, each making the value of the node's first output.
  // (The table's ops mapped with `generic` import from the table: generic_schema.)
  static const std::map<std::string, Importing>& importings() {
    static const std::map<std::string, Importing> ops = {
        {"Identity", [](Importer& m) { return m.in(0); }},
        {"Dropout", &Importer::dropout},
        {"MatMul", &Importer::matmul},
        {"Gemm", &Importer::gemm},
        {"Conv", &Importer::conv},
        {"ConvTranspose", &Importer::conv_transpose},
        {"MaxPool", pool(PoolingType::Max)},
        {"AveragePool", pool(PoolingType::Average)},
        {"GlobalMaxPool", global_pool(PoolingType::Max)},
        {"GlobalAveragePool", global_pool(PoolingType::Average)},
        {"BatchNormalization", &Importer::batch_norm},
        {"Softmax", softmax_like(softmax)},
        {"LogSoftmax", softmax_like(log_softmax)},
        {"Reshape", &Importer::reshape_node},
        {"Flatten", &Importer::flatten},
        {"Unsqueeze", &Importer::unsqueeze},
        {"Squeeze", &Importer::squeeze},
        {"Slice", &Importer::slice_node},
        {"Concat", &Importer::concat},
        {"Transpose", &Importer::transpose_node},
        {"ReduceSum", reduce(static_cast<ReduceFn>(reduce_sum))},
        {"ReduceMean", reduce(static_cast<ReduceFn>(reduce_mean))},
        {"ReduceMax", reduce(static_cast<ReduceFn>(reduce_max))},
        {"ReduceMin", reduce(static_cast<ReduceFn>(reduce_min))},
        {"ReduceProd", reduce(static_cast<ReduceFn>(reduce_prod))},
        {"ReduceLogSumExp", reduce(static_cast<ReduceFn>(reduce_log_sum_exp))},
        {"ReduceL1", reduce(static_cast<ReduceFn>(reduce_l1))},
        {"ReduceL2", reduce(static_cast<ReduceFn>(reduce_l2))},
        {"ReduceSumSquare", reduce(static_cast<ReduceFn>(reduce_sum_square))},
        {"Equal", table_op("Equal")},
        {"Less", table_op("Less")},
        {"LessOrEqual", table_op("LessEqual")},
        {"Greater", table_op("Greater")},
        {"GreaterOrEqual", table_op("GreaterEqual")},
        {"And", table_op("And")},
        {"Or", table_op("Or")},
        {"Xor", table_op("Xor")},
        {"Not", table_op("Not")},
        {"Where", table_op("Select", {}, 1)},
        {"PRelu", table_op("PReLU", {1, 0})},
        {"Softplus", table_op("Softplus")},
        {"Clip", &Importer::clip_node},
        {"Round", &Importer::round_half_even},
        {"Cast", &Importer::cast_node},
        {"ArgMax", arg_reduce(argmax, static_cast<ReduceAxisFn>(reduce_max))},
        {"ArgMin", arg_reduce(argmin, static_cast<ReduceAxisFn>(reduce_min))},
        {"Pad", &Importer::pad_node},
        {"LRN", &Importer::lrn},
        {"OneHot", &Importer::one_hot_node},
        {"Gather", &Importer::gather_node},
        {"Hardmax", &Importer::hardmax_node},
        {"Sum", table_op("Plus")},
        {"Mean", &Importer::mean_node},
        {"Upsample", &Importer::upsample},
        {"Resize", &Importer::resize_node},
        {"MaxUnpool", &Importer::max_unpool},
    };
    return ops;
  }
  // Nodes that make no value: a Constant's tensor joins the constants, and a recurrent op's
  // outputs are read through the Squeeze that follows it (squeezed).
  static const std::map<std::string, void (Importer::*)()>& recordings() {
    static const std::map<std::string, void (Importer::*)()> ops = {
        {"Constant", &Importer::constant_node}, {"LSTM", &Importer::recurrent},
        {"GRU", &Importer::recurrent},          {"RNN", &Importer::recurrent},
        {"TopK", &Importer::top_k_node},        {"Split", &Importer::split_node},
    };
    return ops;
  }

  // Whether the model's opset precedes the change of node_'s op at `opset` (opset_changes).
  bool earlier_form(int64_t opset) const {
    const bool listed = std::any_of(
        opset_changes().begin(), opset_changes().end(),
        [&](const OpsetChange& c) { return c.op_type == node_->op_type() && c.opset == opset; });
    LOOM_CHECK(listed, StateError, "ONNX import: opset_changes lists no change of ",
               node_->op_type(), " at opset ", opset);
    return opset_ < opset;
  }

  // node_ read in its latest form: where its op's form at the model's opset has attributes that
  // are inputs later (opset_changes), a copy with them as constant inputs.
  void read_in_latest_form() {
    for (const OpsetChange& c : opset_changes()) {
      if (c.op_type != node_->op_type() || opset_ >= c.opset || c.inputs.empty()) continue;
      pb::NodeProto& n = latest_forms_.emplace_back(*node_);
      n.clear_attribute();
      for (const pb::AttributeProto& a : node_->attribute())
        if (std::none_of(c.inputs.begin(), c.inputs.end(),
                         [&](const auto& moved) { return a.name() == moved.first; }))
          *n.add_attribute() = a;
      for (const auto& [attribute, input] : c.inputs) {
        while (n.input_size() <= input) n.add_input("");
        const pb::AttributeProto* a = find_attribute(*node_, attribute);
        n.set_input(input, a ? attribute_input(*a) : "");
      }
      while (n.input_size() > 0 && n.input(n.input_size() - 1).empty())
        n.mutable_input()->RemoveLast();
      node_ = &n;
    }
  }
  // The constant (attribute_inputs_) holding attribute a of node_, as the input that the op's
  // later form has: ints as an int64 vector, an int as a vector of one, a float as a scalar of
  // input 0's type, floats as a float vector; its name.
  std::string attribute_input(const pb::AttributeProto& a) {
    pb::TensorProto& t = attribute_inputs_.emplace_back();
    std::string name = out_name() + "." + a.name();
    while (names_.count(name) || constants_.count(name)) name += "_";
    t.set_name(name);
    if (a.type() == pb::AttributeProto::INTS || a.type() == pb::AttributeProto::INT) {
      t.set_data_type(pb::TensorProto::INT64);
      if (a.type() == pb::AttributeProto::INT) t.add_int64_data(a.i());
      for (int64_t v : a.ints()) t.add_int64_data(v);
      t.add_dims(t.int64_data_size());
    } else if (a.type() == pb::AttributeProto::FLOAT) {
      if (in(0).var.dtype() == DataType::Float64) {
        t.set_data_type(pb::TensorProto::DOUBLE);
        t.add_double_data(a.f());
      } else {
        t.set_data_type(pb::TensorProto::FLOAT);
        t.add_float_data(a.f());
      }
    } else if (a.type() == pb::AttributeProto::FLOATS) {
      t.set_data_type(pb::TensorProto::FLOAT);
      for (float v : a.floats()) t.add_float_data(v);
      t.add_dims(t.float_data_size());
    } else {
      fail("the attribute ", a.name(), " of ", node_->op_type(), " at opset ", opset_,
           " must be an int, ints, a float or floats");
    }
    constants_[name] = &t;
    return name;
  }

  void import_node() {
    for (const std::string& o : node_->output())
      if (!o.empty() && !names_.insert(o).second)
        fail("output '", o, "' is already a graph input, an initializer or an earlier node's ",
             "output (ONNX names each value once)");
    if (!node_->domain().empty() && node_->domain() != "ai.onnx")
      fail("ops of domain '", node_->domain(), "' are not imported");
    if (auto since = opset_introduced().find(node_->op_type());
        since != opset_introduced().end() && since->second > opset_)
      fail("ONNX's ", node_->op_type(), " is defined from opset ", since->second,
           "; the model imports opset ", opset_);
    read_in_latest_form();
    const pb::NodeProto& n = *node_;
    if (auto r = recordings().find(n.op_type()); r != recordings().end()) {
      (this->*r->second)();
      return;
    }
    if (sequence_shape_node()) return;
    auto it = importings().find(n.op_type());
    const OpSchema* generic_op = it == importings().end() ? generic_schema(n.op_type()) : nullptr;
    if (it == importings().end() && !generic_op)
      fail("Loom has no import of the ONNX op ", n.op_type());
    if (n.output_size() < 1) fail("the node has no output");
    // Dropout's mask, MaxPool's indices, batch normalization's training statistics: an error
    // where they are read.
    for (int i = 1; i < n.output_size(); ++i)
      if (!n.output(i).empty())
        second_outputs_[n.output(i)] =
            detail::concat("output ", i, " of ", n.op_type(), " node '", n.name(), "'");
    values_[n.output(0)] = generic_op ? generic(*generic_op) : it->second(*this);
  }

  // ---- ops over sequences ----
  // Loom's exporter writes an op that ONNX takes as [N, ...] over sequences [T, N, ...] between
  // a Reshape to [-1, sample...] and a Reshape back to Concat(Slice(Shape(x), 0, 2), shape).
  // The merged value is a Val of one dynamic axis over a variable of two (Loom's ops take
  // sequences as they are); the Shape's first two entries stand for T and N.
  static constexpr int64_t kSteps = -2, kSamples = -3;

  // Whether x is a sequence tensor seen as [T * N, ...].
  static bool merged(const Val& x) { return x.var.dynamic_axes().size() > x.dynamic; }

  // Shape (of sequences, or of a batch [N, ...]: MaxUnpool's output shape), Slice, Gather,
  // Unsqueeze and Concat of such shapes, the Reshape that splits T and N again, and the
  // per-sample states of a shape [1, N, size] (Expand, ConstantOfShape: a
  // recurrent op's initial states); false for any other node.
  bool sequence_shape_node() {
    const pb::NodeProto& n = *node_;
    auto symbolic = [&](size_t i) {
      return has_input(i) ? shapes_.find(n.input(int(i))) : shapes_.end();
    };
    if (n.op_type() == "Shape") {
      const Val x = in(0);
      if (x.dynamic == 0 || merged(x) || find_attribute(n, "start") || find_attribute(n, "end"))
        fail("Loom imports Shape of a batch [N, ...] or of a tensor of sequences [T, N, ...] ",
             "only");
      std::vector<int64_t> dims{kSteps, kSamples};
      if (x.dynamic == 1) dims.erase(dims.begin());
      for (size_t d : x.var.shape().dims()) dims.push_back(int64_t(d));
      shapes_[out_name()] = dims;
      return true;
    }
    if (n.op_type() == "Slice" && symbolic(0) != shapes_.end()) {
      const std::vector<int64_t> dims = symbolic(0)->second;
      const auto starts = input_ints(1), ends = input_ints(2);
      if (starts.size() != 1 || ends.size() != 1 ||
          (has_input(3) && input_ints(3) != std::vector<int64_t>{0}) ||
          (has_input(4) && input_ints(4) != std::vector<int64_t>{1}))
        fail("Loom slices a shape along its one axis with step 1");
      const int64_t size = int64_t(dims.size());
      auto clamp = [&](int64_t k) { return std::clamp(k < 0 ? k + size : k, int64_t{0}, size); };
      const int64_t begin = clamp(starts[0]), end = std::max(begin, clamp(ends[0]));
      shapes_[out_name()] = {dims.begin() + begin, dims.begin() + end};
      return true;
    }
    // Entries of a shape: a scalar index gives one entry (held as a shape of one entry, which
    // Unsqueeze along axis 0 leaves as it is).
    if (n.op_type() == "Gather" && symbolic(0) != shapes_.end()) {
      const std::vector<int64_t> dims = symbolic(0)->second;
      if (int_attribute(n, "axis", 0) != 0) fail("Loom gathers entries of a shape along axis 0");
      std::vector<int64_t> picked;
      const int64_t size = int64_t(dims.size());
      for (int64_t k : input_ints(1)) {
        const int64_t i = k < 0 ? k + size : k;
        if (i < 0 || i >= size)
          fail("index ", k, " is out of range for a shape of ", size, " entries");
        picked.push_back(dims[size_t(i)]);
      }
      shapes_[out_name()] = picked;
      return true;
    }
    if (n.op_type() == "Unsqueeze" && symbolic(0) != shapes_.end()) {
      if (symbolic(0)->second.size() != 1 || input_ints(1) != std::vector<int64_t>{0})
        fail("Loom unsqueezes one entry of a shape along axis 0 only");
      shapes_[out_name()] = symbolic(0)->second;
      return true;
    }
    if ((n.op_type() == "Expand" || n.op_type() == "ConstantOfShape") &&
        symbolic(n.op_type() == "Expand" ? 1 : 0) != shapes_.end()) {
      per_sample_state();
      return true;
    }
    if (n.op_type() == "Concat") {
      bool any = false;
      for (size_t i = 0; i < inputs(); ++i) any = any || symbolic(i) != shapes_.end();
      if (!any) return false;
      std::vector<int64_t> dims;
      for (size_t i = 0; i < inputs(); ++i) {
        const auto part = symbolic(i) != shapes_.end() ? symbolic(i)->second : input_ints(i);
        dims.insert(dims.end(), part.begin(), part.end());
      }
      shapes_[out_name()] = dims;
      return true;
    }
    if (n.op_type() == "Reshape" && symbolic(1) != shapes_.end()) {
      const Val x = in(0);
      const std::vector<int64_t>& target = symbolic(1)->second;
      if (!merged(x) || target.size() < 2 || target[0] != kSteps || target[1] != kSamples)
        fail(
            "Loom reads a computed shape only where it splits the sequence and batch axes of "
            "merged sequences again ([T, N, ...] from Shape of the sequences)");
      std::vector<size_t> dims;
      for (size_t k = 2; k < target.size(); ++k) {
        if (target[k] < 1 || target[k] > kMaxDim) fail("target shape entry ", target[k]);
        dims.push_back(size_t(target[k]));
      }
      values_[out_name()] = {reshaped(x, NDShape(dims)).var, 2};
      return true;
    }
    return false;
  }

  // A value of shape [1, N, size] that is the same for every sample: the Expand of a value
  // without dynamic axes, or ConstantOfShape, to Concat(1, N from Shape of sequences, size).
  // It is read as the state (of shape [size] or [1]) of states_, which a recurrent op takes as
  // its initial state (the state of size 1 broadcast as ONNX broadcasts it).
  void per_sample_state() {
    const pb::NodeProto& n = *node_;
    const bool expand = n.op_type() == "Expand";
    const std::vector<int64_t> target = shapes_.at(n.input(expand ? 1 : 0));
    if (target.size() != 3 || target[0] != 1 || target[1] != kSamples || target[2] < 1 ||
        target[2] > kMaxDim)
      fail("Loom reads a computed shape here only as a recurrent op's initial state [1, N, size] ",
           "(N from Shape of the sequences)");
    Variable state;
    if (expand) {
      // An initializer stays a constant (as the initial state Loom exported was one).
      const std::string& name = n.input(0);
      const bool initializer = constants_.count(name) > 0;
      const Val x = initializer ? Val{} : in(0);
      const std::vector<size_t> dims =
          initializer ? tensor_shape(constant_tensor(name)).dims() : x.var.shape().dims();
      if (x.dynamic || dims.size() > 3 ||
          std::any_of(dims.begin(), dims.end() - (dims.empty() ? 0 : 1),
                      [](size_t d) { return d != 1; }) ||
          (!dims.empty() && dims.back() != 1 && dims.back() != size_t(target[2])))
        fail("Loom expands to [1, N, size] only a value without dynamic axes of shape [size] or ",
             "[1] (with leading axes of 1)");
      const NDShape shape{dims.empty() ? 1 : dims.back()};
      state = initializer ? leaf(name, true, shape) : reshaped(x, shape).var;
    } else {
      const pb::AttributeProto* value = find_attribute(n, "value");
      if (value && (!value->has_t() || tensor_shape(value->t()).total_size() != 1))
        fail("the value must be a tensor of one element");
      const DataType dtype =
          value ? data_type(value->t().data_type(), "the value") : DataType::Float32;
      const double v = value ? numbers(value->t(), dtype)[0] : 0.0;
      state = constant(v, dtype, out_name());
    }
    states_[out_name()] = {state, size_t(target[2])};
  }

  void constant_node() {
    const pb::AttributeProto* value = find_attribute(*node_, "value");
    if (!value || !value->has_t() || node_->output_size() != 1)
      fail("only a Constant with a tensor 'value' is imported");
    constants_[node_->output(0)] = &value->t();
  }

  // The op of the table mapped to ONNX's op_type node for node (OnnxMapping::generic), or null.
  static const OpSchema* generic_schema(const std::string& op_type) {
    for (const OpSchema& s : op_table())
      if (s.onnx.generic && op_type == s.onnx.op_type) return &s;
    return nullptr;
  }

  // A node of the table's op `loom_op` whose inputs are the node's in `order` (empty: the
  // node's order), with its attributes' defaults. ONNX's booleans are Loom's 0/1 values, which
  // Loom's logic ops (x > 0 is true) and element_select (flag != 0) read as ONNX reads them. The
  // result is an integer tensor where input `integer_from` is one (none: a boolean or float).
  static Importing table_op(const char* loom_op, std::vector<size_t> order = {},
                            std::optional<size_t> integer_from = {}) {
    return [loom_op, order, integer_from](Importer& m) {
      const OpSchema* s = find_schema(loom_op);
      LOOM_CHECK(s, StateError, "ONNX import: Loom has no op ", loom_op);
      Val y = m.generic(*s, order);
      y.integer = integer_from && m.in(*integer_from).integer;
      return y;
    };
  }

  // A node of one op of the table with the same inputs (or those in `order`); several broadcast
  // as ONNX does. The result is named `name` (default: the node's output).
  Val generic(const OpSchema& s, std::vector<size_t> order = {},
              std::optional<std::string> name = {}) {
    // ONNX's Max and Min take any number of inputs: Loom's binary op (associative) folds them.
    const size_t least = s.associative ? 1 : s.min_inputs;
    const size_t most = s.associative ? SIZE_MAX : s.max_inputs;
    if (inputs() < least || inputs() > most)
      fail("Loom imports this op with ", least,
           most == SIZE_MAX ? " or more" : " to " + std::to_string(most), " inputs, not ",
           inputs());
    if (order.empty())
      for (size_t i = 0; i < inputs(); ++i) order.push_back(i);
    std::vector<Val> args;
    size_t rank = 0, dynamic = 0;
    for (size_t i : order) {
      args.push_back(in(i));
      if (args.back().dynamic && dynamic && args.back().dynamic != dynamic)
        fail("an operand over sequences meets one over samples");
      rank = std::max(rank, args.back().rank());
      dynamic = std::max(dynamic, args.back().dynamic);
    }
    std::vector<Variable> vars;
    for (const Val& v : args)
      vars.push_back(args.size() == 1 ? v.var : broadcast(v, rank, dynamic).var);
    Dictionary attributes;
    for (const OnnxAttribute& a : s.onnx.attributes)
      attributes[a.key] = double(float_attribute(*node_, a.onnx, float(a.onnx_default)));
    // ONNX's ops of integers give integers (Pow those of its base's type); Div of integers
    // rounds toward zero.
    const bool integer = args[0].integer;
    const std::string y_name = name.value_or(out_name());
    if (node_->op_type() == "Div" && integer && args[1].integer)
      return {truncated(s.apply(std::move(vars), attributes), y_name), dynamic, true};
    if (!s.associative || vars.size() == 2)
      return Val{s.apply(std::move(vars), attributes, y_name), dynamic, integer};
    Variable y = vars[0];
    for (size_t i = 1; i < vars.size(); ++i)
      y = s.apply({y, vars[i]}, attributes, i + 1 == vars.size() ? y_name : "");
    return {y, dynamic, integer};
  }

  // ONNX right-aligns whole tensors, Loom the samples behind the dynamic axes: values with
  // dynamic axes must have the output's rank, and an initializer of that rank loses its leading
  // axes of 1 (those facing the dynamic axes).
  Val broadcast(const Val& v, size_t rank, size_t dynamic) {
    if (!dynamic || v.rank() < rank) {
      if (v.dynamic) fail("an operand with dynamic axes has rank ", v.rank(), " < ", rank);
      return v;
    }
    if (v.dynamic) return v;
    for (size_t k = 0; k < dynamic; ++k)
      if (v.var.shape()[k] != 1)
        fail("an operand of shape ", v.var.shape().to_string(),
             " would broadcast along a dynamic axis");
    return reshaped(v, v.var.shape().sub_shape(dynamic));
  }

  // ONNX's Clip: min and max are optional scalar inputs (from opset 11); Loom's clip takes both.
  Val clip_node() {
    const Val x = in(0);
    const double inf = std::numeric_limits<double>::infinity();
    auto bound = [&](size_t i, double missing) {
      if (!has_input(i)) return Variable(constant(missing, x.var.dtype()));
      const Val b = in(i);
      if (b.dynamic) fail("input ", i, " (a bound) must be a scalar without a batch axis");
      return b.var;
    };
    return {clip(x.var, bound(1, -inf), bound(2, inf), out_name()), x.dynamic, x.integer};
  }

  // ONNX's Round takes halves to even: floor(x + 0.5) (Loom's round, CNTK's), less 1 where x
  // was a half (r - x = 0.5) and r is odd (r - 2 floor(r / 2) = 1).
  Val round_half_even() {
    const Val x = in(0);
    const DataType t = x.var.dtype();
    const Variable r = floor(plus(x.var, constant(0.5, t)));
    const Variable tie = equal(minus(r, x.var), constant(0.5, t));
    const Variable odd =
        minus(r, element_times(constant(2.0, t), floor(element_times(r, constant(0.5, t)))));
    return {minus(r, element_times(tie, odd), out_name()), x.dynamic};
  }

  // Cast to float or double (Loom's cast; a boolean is a 0/1 value already), to bool (x != 0,
  // held as 0/1), to float16 (rounded to its values, held as float32), or to an integer type
  // (rounded toward zero; of a value outside the type's range, which ONNX leaves undefined, the
  // rounded value).
  Val cast_node() {
    const Val x = in(0);
    const int64_t to = int_attribute(*node_, "to", 0);
    if (to == pb::TensorProto::BOOL)
      return {not_equal(x.var, constant(0.0, x.var.dtype()), out_name()), x.dynamic};
    if (to == pb::TensorProto::FLOAT16) {
      if (x.var.dtype() == DataType::Float32)
        return {rounded_to_float16(x.var, out_name()), x.dynamic};
      return {cast(rounded_to_float16(x.var), DataType::Float32, out_name()), x.dynamic};
    }
    if (to == pb::TensorProto::BFLOAT16)
      fail("Cast to BFLOAT16 would round to its precision, which Loom does not (it computes in ",
           "float32 and float64)");
    const DataType t = data_type(int32_t(to), "the type 'to'");
    const bool integer = is_integer_type(int32_t(to));
    const Variable y =
        t == x.var.dtype() ? x.var : Variable(cast(x.var, t, integer ? "" : out_name()));
    if (integer) return {x.integer ? y : truncated(y, out_name()), x.dynamic, true};
    return {y, x.dynamic};
  }

  // x rounded to the nearest float16 (ties to even), in x's type. Where float16 is normal,
  // Veltkamp's split: g - (g - x), g = (2^s + 1) x, rounds x to 11 significant bits, s the bits
  // x's type has beyond them (each op rounding to nearest, as Loom's float kernels do); below
  // 2^-14 (float16's subnormals) x + 2^-24 2^m - 2^-24 2^m rounds x to a multiple of 2^-24, m
  // the type's mantissa bits; from 65520 (the largest float16 and half its spacing) it is
  // infinity of x's sign.
  static Variable rounded_to_float16(const Variable& x, const std::string& name = "") {
    const DataType t = x.dtype();
    const int mantissa = t == DataType::Float64 ? 52 : 23;
    const Variable g = element_times(x, constant(std::ldexp(1.0, mantissa + 1 - 11) + 1, t));
    const Variable normal = minus(g, minus(g, x));
    const Variable shift = constant(std::ldexp(1.0, mantissa - 24), t);
    const Variable subnormal = minus(plus(x, shift), shift);
    const Variable magnitude = abs(x);
    const Variable finite =
        element_select(less(magnitude, constant(std::ldexp(1.0, -14), t)), subnormal, normal);
    return element_select(less(magnitude, constant(65520.0, t)), finite,
                          element_times(x, constant(std::numeric_limits<double>::infinity(), t)),
                          name);
  }

  // The identity at inference, and in training mode (training_mode a constant true) with a
  // constant ratio of 0; its mask (output 1) then all true (ones). Training mode with another
  // ratio (random) is refused rather than read as inference.
  Val dropout() {
    if (has_input(2)) {
      const pb::TensorProto& t = constant_tensor(node_->input(2));
      if (t.data_type() != pb::TensorProto::BOOL || tensor_shape(t).total_size() != 1)
        fail("training_mode must be a constant boolean scalar");
      const bool training = elements<uint8_t>(t, t.int32_data()) != std::vector<uint8_t>{0};
      if (training && (!has_input(1) || numbers(constant_tensor(node_->input(1)),
                                                DataType::Float64) != std::vector<double>{0}))
        fail("training_mode must be a constant false, or true with a constant ratio of 0 (Loom ",
             "imports Dropout at inference)");
    }
    const Val x = in(0);
    if (node_->output_size() > 1 && !node_->output(1).empty())
      values_[node_->output(1)] = {ones_like(x.var, node_->output(1)), x.dynamic};
    return x;
  }

  // A [.., K] times B [K, O]: Loom's times contracts the last axis of A. A stack of matrices B
  // [.., K, O] (Loom's times has no batched product): A [.., M, K, 1] times B [.., 1, K, O]
  // elementwise, broadcast as ONNX broadcasts the stacks, summed over K.
  Val matmul() {
    const Val a = in(0), b = in(1);
    if (!b.dynamic && b.rank() > 2 && a.rank() > 1) {
      const NDShape& bs = b.var.shape();
      const Val a1{reshape(a.var, a.var.shape().append(1)), a.dynamic};
      const Val b1{
          reshape(b.var,
                  bs.sub_shape(0, bs.rank() - 2).append(1).append(bs.sub_shape(bs.rank() - 2))),
          0};
      const size_t rank = std::max(a1.rank(), b1.rank()), dynamic = a.dynamic;
      const Variable products =
          element_times(broadcast(a1, rank, dynamic).var, broadcast(b1, rank, dynamic).var);
      return {reduce_sum(products, Axis(int(rank - dynamic - 2)), false, out_name()), dynamic};
    }
    if (b.dynamic || b.rank() != 2)
      fail("Loom imports MatMul with a constant right operand of rank 2 or more");
    if (a.var.shape().rank() < 1) fail("the left operand has no axis besides the dynamic axes");
    return {times(a.var, b.var, 1, -1, out_name()), a.dynamic};
  }

  // alpha A B + beta C, A and B transposed first where transA and transB say.
  Val gemm() {
    const Val a = in(0), b = in(1);
    if (b.dynamic || b.rank() != 2) fail("Loom imports Gemm with a 2-D B without a batch axis");
    if (a.dynamic > 1 || a.rank() != 2) fail("A must be a matrix [M, K] or a batch [batch, K]");
    const bool trans_a = int_attribute(*node_, "transA", 0) != 0;
    if (trans_a && a.dynamic) fail("transA would move the batch axis");
    const double alpha = float_attribute(*node_, "alpha", 1),
                 beta = float_attribute(*node_, "beta", 1);
    const bool scaled = alpha != 1, biased = has_input(2);
    const DataType dtype = a.var.dtype();
    const Variable w = int_attribute(*node_, "transB", 0) ? Variable(transpose(b.var)) : b.var;
    Variable y = times(trans_a ? Variable(transpose(a.var)) : a.var, w, 1, -1,
                       scaled || biased ? "" : out_name());
    if (scaled) y = element_times(y, constant(alpha, dtype), biased ? "" : out_name());
    if (!biased) return {y, a.dynamic};
    Variable c = broadcast(in(2), 2, a.dynamic).var;
    if (beta != 1) c = element_times(c, constant(beta, dtype));
    return {plus(y, c, out_name()), a.dynamic};
  }

  // A window op (convolution, pooling) over input 0, [N, C, spatial...]: op applied to the
  // samples [C, spatial...]. N is the batch axis, or a static axis of 1 (a tensor imported
  // without a batch axis: OnnxImportOptions), which the result gets back.
  Val windows(const std::function<Variable(const Variable& samples)>& op) {
    const Val x = in(0);
    if (x.rank() < 3 || x.rank() > 5) fail("Loom imports windows over [N, C, 1 to 3 axes]");
    if (x.dynamic == 1) return {op(x.var), 1};
    if (x.dynamic == 2 || x.var.shape()[0] != 1)
      fail("input 0 must have the batch axis (and no sequence axis), or be one sample [1, C, ...]");
    const Variable y = op(reshape(x.var, x.var.shape().sub_shape(1)));
    return {reshape(y, y.shape().prepend(1), out_name()), 0};
  }
  // The pads [before..., after...] of a window op over samples [C, spatial...]: the attribute,
  // or auto_pad's (SAME_UPPER and SAME_LOWER: ceil(input / stride) outputs, an odd pad's extra
  // element after or before; VALID: none).
  std::vector<int64_t> pads(const NDShape& samples, const std::vector<size_t>& kernel,
                            const std::vector<size_t>& strides,
                            const std::vector<size_t>& dilations) {
    const size_t rank = kernel.size();
    const std::string auto_pad = string_attribute(*node_, "auto_pad", "NOTSET");
    std::vector<int64_t> p(2 * rank, 0);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (size_t i = 0; i < rank; ++i) {
        const int64_t in = int64_t(samples[1 + i]), s = int64_t(strides[i]),
                      k = int64_t((kernel[i] - 1) * dilations[i] + 1);
        const int64_t total = std::max<int64_t>(((in + s - 1) / s - 1) * s + k - in, 0);
        p[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        p[rank + i] = total - p[i];
      }
      return p;
    }
    if (auto_pad == "VALID") return p;
    if (auto_pad != "NOTSET") fail("auto_pad ", auto_pad, " is not one of ONNX's");
    p = ints_attribute(*node_, "pads", p);
    if (p.size() != 2 * rank) fail("pads ", list(p), " must have ", 2 * rank, " values");
    return p;
  }
  std::vector<size_t> per_axis(const char* name, size_t rank) {
    const auto v = to_sizes(ints_attribute(*node_, name, std::vector<int64_t>(rank, 1)), name);
    if (v.size() != rank) fail(name, " must have ", rank, " values");
    if (std::find(v.begin(), v.end(), 0) != v.end()) fail(name, " must be positive");
    return v;
  }

  Val conv() {
    const Val w = in(1);
    return windows([&](const Variable& x) {
      const size_t rank = x.shape().rank() - 1;
      if (w.dynamic || w.rank() != rank + 2)
        fail("W must be [O, C / group, kernel...] without a batch axis");
      const std::vector<size_t> kernel = w.var.shape().sub_shape(2).dims();
      const std::vector<int64_t> given(kernel.begin(), kernel.end());
      if (ints_attribute(*node_, "kernel_shape", given) != given)
        fail("kernel_shape ", list(ints_attribute(*node_, "kernel_shape", {})),
             " contradicts W's kernel ", list(given));
      const int64_t group = int_attribute(*node_, "group", 1);
      if (group < 1 || group > int64_t(x.shape()[0]))
        fail("group ", group, " must be 1 to the ", x.shape()[0], " channels");
      ConvolutionOptions o{.strides = per_axis("strides", rank),
                           .auto_padding = {false},
                           .dilation = per_axis("dilations", rank),
                           .groups = size_t(group),
                           .name = out_name()};
      const auto p = to_sizes(pads(x.shape(), kernel, o.strides, o.dilation), "pads");
      // The sizes bound the output by the input: a pad at most the input's extent, windows
      // (dilated) that fit the padded input.
      for (size_t i = 0; i < rank; ++i) {
        const size_t extent = x.shape()[1 + i];
        if (p[i] > extent || p[rank + i] > extent)
          fail("pads ", list({p.begin(), p.end()}), " exceed the input's extent ", extent,
               " along spatial axis ", i, " (Loom reads pads up to the extent)");
        if ((kernel[i] - 1) * o.dilation[i] + 1 > extent + p[i] + p[rank + i])
          fail("the window of spatial axis ", i, " (kernel ", kernel[i], ", dilation ",
               o.dilation[i], ") is larger than the padded input (", extent + p[i] + p[rank + i],
               ")");
      }
      o.lower_pad.assign(p.begin(), p.begin() + long(rank));
      o.upper_pad.assign(p.begin() + long(rank), p.end());
      if (has_input(2)) o.bias = in(2).var;
      return Variable(convolution(w.var, x, o));
    });
  }

  // ConvTranspose as Loom's convolution_transpose (W [C, O, kernel...] alike) with explicit pads
  // and the output extents ONNX computes from them (ONNX's formulas: the output extent is
  // stride (input - 1) + output_padding + dilated kernel - pads); B added per output channel.
  Val conv_transpose() {
    const Val w = in(1);
    return windows([&](const Variable& x) {
      const size_t rank = x.shape().rank() - 1;
      if (w.dynamic || w.rank() != rank + 2 || w.var.shape()[0] != x.shape()[0])
        fail("W must be [C, O, kernel...] without a batch axis, C the input's ", x.shape()[0],
             " channels");
      if (int_attribute(*node_, "group", 1) != 1) fail("group must be 1");
      const std::vector<size_t> kernel = w.var.shape().sub_shape(2).dims();
      const std::vector<int64_t> given(kernel.begin(), kernel.end());
      if (ints_attribute(*node_, "kernel_shape", given) != given)
        fail("kernel_shape ", list(ints_attribute(*node_, "kernel_shape", {})),
             " contradicts W's kernel ", list(given));
      ConvolutionTransposeOptions o{.strides = per_axis("strides", rank),
                                    .auto_padding = {false},
                                    .dilation = per_axis("dilations", rank)};
      const auto extra =
          to_sizes(ints_attribute(*node_, "output_padding", std::vector<int64_t>(rank, 0)),
                   "output_padding");
      if (extra.size() != rank) fail("output_padding must have ", rank, " values");
      // The pads: given, or (from output_shape, or auto_pad SAME_*'s input * stride) the
      // total the output's extents leave, its odd element after (SAME_UPPER) or before.
      const std::string auto_pad = string_attribute(*node_, "auto_pad", "NOTSET");
      if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
          auto_pad != "SAME_LOWER")
        fail("auto_pad ", auto_pad, " is not one of ONNX's");
      const bool same = auto_pad.starts_with("SAME"),
                 shaped = find_attribute(*node_, "output_shape");
      std::vector<int64_t> pads = ints_attribute(*node_, "pads", std::vector<int64_t>(2 * rank, 0));
      if (auto_pad == "VALID") pads.assign(2 * rank, 0);
      if (pads.size() != 2 * rank) fail("pads must have ", 2 * rank, " values");
      const std::vector<int64_t> target =
          shaped ? ints_attribute(*node_, "output_shape", {}) : std::vector<int64_t>{};
      if (shaped && target.size() != rank)
        fail("output_shape must give the ", rank, " spatial extents");
      std::vector<size_t> extents;
      for (size_t i = 0; i < rank; ++i) {
        const size_t s = o.strides[i], extent = (kernel[i] - 1) * o.dilation[i] + 1;
        if (extra[i] >= s) fail("output_padding ", extra[i], " must be less than the stride ", s);
        const int64_t full = int64_t(s * (x.shape()[1 + i] - 1) + extra[i] + extent);
        if (shaped || same) {
          const int64_t total = full - (shaped ? target[i] : int64_t(x.shape()[1 + i] * s));
          // Halves rounded down (a negative total: the output longer by zeros at its end).
          const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
          pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
          pads[rank + i] = total - pads[i];
        }
        // The output is bounded by the input: pads at most the window's extent (an end pad
        // down to 1 - stride: zeros after the last window, as Loom's output_shape adds them).
        if (pads[i] < 0 || pads[rank + i] <= -int64_t(s) || pads[i] > int64_t(extent) ||
            pads[rank + i] > int64_t(extent))
          fail("pads ", list(pads), " must be 0 to the window's extent ", extent,
               " along spatial axis ", i);
        const int64_t e = full - pads[i] - pads[rank + i];
        if (e < 1) fail("the pads leave no output along spatial axis ", i);
        extents.push_back(size_t(e));
        o.lower_pad.push_back(size_t(pads[i]));
        o.upper_pad.push_back(size_t(std::max<int64_t>(pads[rank + i], 0)));
      }
      o.output_shape = NDShape(extents);
      o.name = has_input(2) ? "" : out_name();
      const Variable y = convolution_transpose(w.var, x, o);
      if (!has_input(2)) return y;
      std::vector<size_t> per_channel(rank + 1, 1);
      per_channel[0] = y.shape()[0];
      return Variable(plus(y, reshaped(in(2), NDShape(per_channel)).var, out_name()));
    });
  }

  // Loom pools without padding, with CNTK's automatic padding, or unpadded with ceil_out_dim's
  // last window overhanging the end: where the windows ONNX places from the pads (and
  // ceil_mode) are those of one of them, the node is that pooling. Windows that reach past the
  // input are cut at its end in both; average pooling counts the padding where
  // count_include_pad (so there an overhanging window must end within ONNX's pads, as Loom
  // counts all of it). Other explicit pads (each less than the window, the windows within the
  // padded input) are a Pad then unpadded pooling (explicit_pads).
  static Importing pool(PoolingType type) {
    return [type](Importer& m) {
      if (type == PoolingType::Max && m.output_read(1)) return m.max_pool_with_indices();
      return m.windows([&](const Variable& x) {
        const size_t rank = x.shape().rank() - 1;
        const pb::NodeProto& n = *m.node_;
        const bool ceil_mode = int_attribute(n, "ceil_mode", 0) != 0;
        const auto [kernel, strides, dilations] = m.pool_windows(rank);
        if (dilations != std::vector<size_t>(rank, 1)) {
          if (type != PoolingType::Max) fail("dilated pooling is imported for MaxPool");
          return m.max_pool_by_gathers(x, kernel, strides, dilations).first;
        }
        const auto p = m.pads(x.shape(), kernel, strides, dilations);
        const bool include_pad = int_attribute(n, "count_include_pad", 0) != 0;
        std::vector<bool> auto_pad;
        // Whether an axis needs ceil_out_dim (an overhanging last window), or must not have it.
        bool ceil = false, floor = false, explicit_pads = true;
        std::string loom_windows;  // why an axis has none of Loom's windows
        for (size_t i = 0; i < rank; ++i) {
          const int64_t in = int64_t(x.shape()[1 + i]), k = int64_t(kernel[i]),
                        s = int64_t(strides[i]), span = in + p[i] + p[rank + i] - k;
          if (span < 0) fail("the window of axis ", i, " is larger than the padded input");
          const int64_t outputs = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
          const OnnxWindowAxis a =
              onnx_window_axis(size_t(in), kernel[i], strides[i], 1, true, 0, 0);
          const bool from_0 = p[i] == 0 && in >= k, cut = (in - k) % s != 0;
          const bool unpadded = from_0 && outputs == (in - k) / s + 1;
          const bool overhang = from_0 && cut && outputs == (in - k) / s + 2 &&
                                (outputs - 1) * s < in &&
                                (!include_pad || (outputs - 1) * s + k <= in + p[rank + i]);
          explicit_pads = explicit_pads && p[i] >= 0 && p[rank + i] >= 0 && p[i] < k &&
                          p[rank + i] < k && outputs == span / s + 1;
          if (!unpadded && !overhang && (p[i] != a.before || outputs != int64_t(a.output)) &&
              loom_windows.empty())
            loom_windows = detail::concat(
                "pads ", list(p), ceil_mode ? " with ceil_mode" : "", " give ", outputs,
                " windows from ", -p[i], " along spatial axis ", i, ": Loom pools unpadded (",
                in >= k ? (in - k) / s + 1 : 0, " windows from 0, or ",
                in >= k ? (in - k + s - 1) / s + 1 : 0,
                " with the last one overhanging) or padded as CNTK's auto padding does (", a.output,
                " windows from ", -a.before,
                "), and other pads only where each is less than the window and the windows "
                "stay within them");
          ceil = ceil || overhang;
          floor = floor || (unpadded && cut);
          auto_pad.push_back(!unpadded && !overhang);
        }
        if (!loom_windows.empty() || (ceil && floor)) {
          if (explicit_pads) return m.padded_pool(x, type, kernel, strides, p, include_pad);
          if (!loom_windows.empty()) fail(loom_windows);
          fail("pads ", list(p), " overhang the input's end on one spatial axis and not on ",
               "another where a window would (Loom's ceil_out_dim applies to all unpadded axes)");
        }
        return Variable(pooling(x, type, NDShape(kernel),
                                {.strides = strides,
                                 .auto_padding = auto_pad,
                                 .include_pad = include_pad,
                                 .ceil_out_dim = ceil,
                                 .name = m.out_name()}));
      });
    };
  }
  // A pooling node's windows over `rank` spatial axes: kernel_shape, strides and dilations.
  struct PoolWindows {
    std::vector<size_t> kernel, strides, dilations;
  };
  PoolWindows pool_windows(size_t rank) {
    PoolWindows w{to_sizes(ints_attribute(*node_, "kernel_shape", {}), "kernel_shape"),
                  per_axis("strides", rank), per_axis("dilations", rank)};
    if (w.kernel.size() != rank) fail("kernel_shape must have ", rank, " values");
    return w;
  }
  // Whether the node's output i is read by a node or is a graph output.
  bool output_read(int i) const {
    return node_->output_size() > i && !node_->output(i).empty() && read_.count(node_->output(i));
  }

  // MaxPool with its indices (output 1) read, over a batch [N, C, spatial...] or one sample
  // [1, C, spatial...] without a batch axis: the maxima, and the position in x of each window's
  // first maximum (in row-major order) as ONNX numbers x's elements, n C S + c S + the spatial
  // position row-major (storage_order 0) or column-major (1), S the spatial extent, n the
  // sample's position in the batch (batch_position); both by gathers along each axis
  // (max_pool_by_gathers).
  Val max_pool_with_indices() {
    const Val x = in(0);
    if (x.dynamic > 1 || x.rank() < 3 || x.rank() > 5 || (!x.dynamic && x.var.shape()[0] != 1))
      fail("MaxPool's indices (output 1) are imported over a batch [N, C, 1 to 3 axes] or one ",
           "sample [1, C, 1 to 3 axes] without a batch axis");
    const int64_t storage_order = int_attribute(*node_, "storage_order", 0);
    if (storage_order != 0 && storage_order != 1)
      fail("storage_order ", storage_order, " must be 0 (row-major) or 1 (column-major)");
    const NDShape shape = x.var.shape().sub_shape(1 - x.dynamic);
    const size_t rank = shape.rank() - 1, count = shape.total_size(), spatial = count / shape[0];
    if (count > kMaxPositions)
      fail("MaxPool's indices need a constant of the input's ", count,
           " positions (Loom makes at most 2^24)");
    std::vector<double> at(count);
    for (size_t e = 0; e < count; ++e) {
      size_t position = e % spatial;
      if (storage_order == 1) {
        // The spatial coordinates (the last axis fastest) weighted column-major.
        size_t rest = position, weight = spatial;
        position = 0;
        for (size_t i = rank; i-- > 0;) {
          weight /= shape[1 + i];
          position += rest % shape[1 + i] * weight;
          rest /= shape[1 + i];
        }
      }
      at[e] = double(e - e % spatial + position);
    }
    const auto [kernel, strides, dilations] = pool_windows(rank);
    const DataType t = x.var.dtype();
    const Variable samples = x.dynamic ? x.var : Variable(reshape(x.var, shape));
    const auto [y, where] =
        max_pool_by_gathers(samples, kernel, strides, dilations, constant(array_of(shape, at, t)));
    const std::string& indices = node_->output(1);
    max_pools_[indices] = {x, node_};
    if (x.dynamic) {
      values_[indices] = {
          plus(where, element_times(batch_position(x.var), constant(double(count), t)), indices), 1,
          true};
      return {y, 1};
    }
    values_[indices] = {reshape(where, where.shape().prepend(1), indices), 0, true};
    return reshaped({y, 0}, y.shape().prepend(1));
  }

  // The position of each sample of x (which has the batch axis only) in its minibatch, 0 to
  // N - 1, a scalar per sample: the batch unpacked into one sequence of N steps, whose steps
  // sequence::where numbers, and those numbers packed back into the batch.
  static Variable batch_position(const Variable& x) {
    std::vector<Axis> all;
    for (size_t k = 0; k < x.shape().rank(); ++k) all.emplace_back(int(k));
    const Variable ones = ones_like(reduce_sum(x, all, false));           // [] per sample
    const Variable row = transpose(expand_dims(unpack_batch(ones), -1));  // [1, N]
    const Variable steps = sequence::where(to_sequence(to_batch(row)));   // 0 to N - 1
    const Variable column = transpose(unpack_batch(sequence::unpack(steps, 0.0, true)));  // [N, 1]
    return reconcile_dynamic_axes(reduce_sum(to_batch(column), std::vector<Axis>{Axis(0)}, false),
                                  x);
  }

  // MaxUnpool of X at the indices of a MaxPool node over x with the same kernel_shape, strides
  // and pads (how Loom and CNTK export unpooling) as Loom's unpooling of X by x, which finds the
  // same maxima: each window's first (row-major), the later window's value kept where two choose
  // one position, as ONNX's MaxUnpool writes X in order. The windows must be the unpadded ones or
  // CNTK's automatic padding's. Other indices are data (max_unpool_at).
  Val max_unpool() {
    if (!has_input(1)) fail("I (input 1) is missing");
    const auto pool = max_pools_.find(node_->input(1));
    if (pool == max_pools_.end()) return max_unpool_at(in(1));
    const auto& [input, pool_node] = pool->second;
    const Val x = in(0);
    const size_t rank = input.rank() - 2;
    for (const auto& [attribute, fallback] : {std::pair{"kernel_shape", std::vector<int64_t>{}},
                                              std::pair{"strides", std::vector<int64_t>(rank, 1)},
                                              std::pair{"pads", std::vector<int64_t>(2 * rank, 0)}})
      if (ints_attribute(*node_, attribute, fallback) !=
          ints_attribute(*pool_node, attribute, fallback))
        fail(attribute, " ", list(ints_attribute(*node_, attribute, fallback)),
             " differs from that of the MaxPool node '", pool_node->name(), "' of I, ",
             list(ints_attribute(*pool_node, attribute, fallback)));
    if (int_attribute(*pool_node, "ceil_mode", 0) != 0 ||
        int_attribute(*pool_node, "storage_order", 0) != 0 ||
        ints_attribute(*pool_node, "dilations", std::vector<int64_t>(rank, 1)) !=
            std::vector<int64_t>(rank, 1))
      fail("the MaxPool node '", pool_node->name(), "' of I must have ceil_mode 0, ",
           "storage_order 0 and no dilations (Loom's unpooling reverses undilated windows)");
    if (x.dynamic != input.dynamic || x.rank() != input.rank())
      fail("X must have the rank and dynamic axes of the MaxPool's input");
    const NDShape samples = input.var.shape().sub_shape(1 - input.dynamic);
    const auto [kernel, strides, dilations] = pool_windows(rank);
    const std::vector<int64_t> p = pads(samples, kernel, strides, dilations);
    std::vector<bool> auto_padding;
    for (size_t i = 0; i < rank; ++i) {
      const size_t in = samples[1 + i];
      const OnnxWindowAxis a = onnx_window_axis(in, kernel[i], strides[i], 1, true, 0, 0);
      const bool unpadded = p[i] == 0 && p[rank + i] == 0 && in >= kernel[i];
      if (!unpadded && p[i] != a.before)
        fail("pads ", list(p), " place windows along spatial axis ", i, " that Loom's unpooling ",
             "does not (unpadded, or CNTK's automatic padding: ", a.before, " before)");
      auto_padding.push_back(!unpadded);
    }
    // output_shape: x's (its Shape, or a constant whose batch entry may be any: CNTK wrote 1).
    if (has_input(2)) {
      const auto symbolic = shapes_.find(node_->input(2));
      const std::vector<int64_t> given =
          symbolic != shapes_.end() ? symbolic->second : input_ints(2);
      if (given.size() != samples.rank() + 1 || (!input.dynamic && given[0] != 1) ||
          !std::equal(samples.dims().begin(), samples.dims().end(), given.begin() + 1,
                      [](size_t d, int64_t g) { return int64_t(d) == g; }))
        fail("output_shape ", list(given), " must be the shape of the MaxPool's input");
    }
    const PoolingOptions o{.strides = strides, .auto_padding = auto_padding, .name = out_name()};
    if (input.dynamic)
      return {unpooling(x.var, input.var, PoolingType::Max, NDShape(kernel), o), 1};
    if (input.var.shape()[0] != 1 || x.var.shape()[0] != 1)
      fail("X and the MaxPool's input must have the batch axis, or be one sample [1, C, ...]");
    const Variable y = unpooling(reshape(x.var, x.var.shape().sub_shape(1)),
                                 reshape(input.var, samples), PoolingType::Max, NDShape(kernel),
                                 {.strides = strides, .auto_padding = auto_padding});
    return {reshape(y, y.shape().prepend(1), out_name()), 0};
  }

  // MaxUnpool at indices I given as data: element j of each output sample [C, spatial...]
  // (flattened) is X's element i for the last i with I[i] = j (ONNX's MaxUnpool writes X in
  // order), else 0; over a batch I numbers the elements of every sample (batch_position). Loom
  // has no scatter: every index is compared with every output position, M S values per sample
  // (M of X's, S of the output's; at most 2^24). The output's shape: output_shape, or the
  // windows' (extent - 1) stride + kernel - pads.
  Val max_unpool_at(const Val& indices) {
    const Val x = in(0);
    if (x.dynamic > 1 || x.rank() < 3 || indices.dynamic != x.dynamic ||
        indices.var.shape() != x.var.shape() || (!x.dynamic && x.var.shape()[0] != 1))
      fail("X and I must be one shape [N, C, spatial...] (with the batch axis, or N 1 without)");
    const size_t rank = x.rank() - 2;
    const NDShape pooled = x.var.shape().sub_shape(1 - x.dynamic);
    const auto [kernel, strides, dilations] = pool_windows(rank);
    const std::vector<int64_t> p =
        ints_attribute(*node_, "pads", std::vector<int64_t>(2 * rank, 0));
    if (p.size() != 2 * rank) fail("pads ", list(p), " must have ", 2 * rank, " values");
    std::vector<size_t> dims{pooled[0]};
    for (size_t i = 0; i < rank; ++i) {
      const int64_t extent =
          int64_t((pooled[1 + i] - 1) * strides[i] + kernel[i]) - p[i] - p[rank + i];
      if (extent < 1) fail("pads ", list(p), " leave no output along spatial axis ", i);
      dims.push_back(size_t(extent));
    }
    if (has_input(2)) {
      const std::vector<int64_t> given = input_ints(2);
      if (given.size() != rank + 2 || given[1] != int64_t(pooled[0]) ||
          std::any_of(given.begin() + 2, given.end(),
                      [](int64_t d) { return d < 1 || d > kMaxDim; }))
        fail("output_shape ", list(given), " must be [N, ", pooled[0], ", spatial extents]");
      dims.assign(given.begin() + 1, given.end());
    }
    const size_t m = pooled.total_size(), s = NDShape(dims).total_size();
    if (double(m) * double(s) > double(kMaxPositions))
      fail("MaxUnpool at indices given as data compares each of X's ", m,
           " elements with each of the ", s, " output positions, more than Loom makes (2^24)");
    const DataType t = x.var.dtype();
    Variable at = reshape(indices.var, NDShape{m, 1});
    if (x.dynamic) at = minus(at, element_times(batch_position(x.var), constant(double(s), t)));
    const Variable hit = equal(at, positions(0, 1, s, {1, s}, t));              // [M, S]
    const Variable ranked = element_times(hit, positions(1, 1, m, {m, 1}, t));  // i + 1 or 0
    const Variable last = equal(ranked, reduce_max(ranked, Axis(0), true));     // the last i
    const Variable y =
        reduce_sum(element_times(element_times(hit, last), reshape(x.var, NDShape{m, 1})),
                   std::vector<Axis>{Axis(0)}, false);
    if (x.dynamic) return {reshape(y, NDShape(dims), out_name()), 1};
    return {reshape(y, NDShape(dims).prepend(1), out_name()), 0};
  }

  // Pooling of samples x [C, spatial...] whose windows start at -pads[i] and lie within the
  // padded input: x padded (max: with -infinity, which no window picks; average: with 0) and
  // pooled unpadded; average pooling that does not count the padding divided by the share of
  // each window that is input (the same pooling of ones).
  Variable padded_pool(const Variable& x, PoolingType type, const std::vector<size_t>& kernel,
                       const std::vector<size_t>& strides, const std::vector<int64_t>& pads,
                       bool include_pad) {
    const size_t rank = kernel.size();
    std::vector<std::pair<size_t, size_t>> pattern{{0, 0}};
    for (size_t i = 0; i < rank; ++i) pattern.emplace_back(pads[i], pads[rank + i]);
    const bool max = type == PoolingType::Max, counted = max || include_pad;
    const Variable padded =
        pad(x, pattern,
            {.mode = kConstantPad,
             .constant_value = max ? -std::numeric_limits<double>::infinity() : 0.0});
    const Variable y = pooling(padded, type, NDShape(kernel),
                               {.strides = strides, .name = counted ? out_name() : ""});
    if (counted) return y;
    // Over the input elements alone: divided by the same pooling of ones (of one channel).
    const Variable ones = pad(ones_like(slice(x, Axis(0), 0, 1)), pattern, {.mode = kConstantPad});
    return element_divide(y, pooling(ones, type, NDShape(kernel), {.strides = strides}),
                          out_name());
  }
  // Max pooling of samples x [C, spatial...] whose windows may be dilated (Loom's pooling has no
  // dilation): x padded with -infinity (which no window picks), then, as a maximum over a box
  // is the maximum along each of its axes in turn, along each spatial axis (the last first) the
  // elementwise maximum of the kernel's gathers of the positions o s + j d that output o's
  // window reads. With ceil_mode, one more window where the last would overhang the padded
  // input (and starts before its upper pad), the overhang padded with -infinity too. With `where`
  // (a value for each element of x: its position), also the `where` of each window's first maximum
  // in row-major order (along each axis, that of the first gather equal to the maximum).
  std::pair<Variable, Variable> max_pool_by_gathers(const Variable& x,
                                                    const std::vector<size_t>& kernel,
                                                    const std::vector<size_t>& strides,
                                                    const std::vector<size_t>& dilations,
                                                    std::optional<Variable> where = {}) {
    const size_t rank = kernel.size();
    // The sizes bound the output by the input: pads at most the input's extent, windows within
    // the padded input (checked before ONNX's formulas multiply kernel and dilation).
    for (size_t i = 0; i < rank; ++i)
      if (kernel[i] - 1 > 3 * x.shape()[1 + i] / dilations[i])
        fail("the dilated window of spatial axis ", i, " is larger than the padded input");
    const auto p = pads(x.shape(), kernel, strides, dilations);
    const bool ceil_mode = int_attribute(*node_, "ceil_mode", 0) != 0;
    std::vector<std::pair<size_t, size_t>> pattern{{0, 0}};
    for (size_t i = 0; i < rank; ++i) {
      const int64_t in = int64_t(x.shape()[1 + i]);
      if (std::min(p[i], p[rank + i]) < 0 || std::max(p[i], p[rank + i]) > in)
        fail("pads ", list(p), " must be 0 to the input's extent along spatial axis ", i);
      const int64_t s = int64_t(strides[i]), window = int64_t((kernel[i] - 1) * dilations[i] + 1),
                    span = in + p[i] + p[rank + i] - window;
      int64_t overhang = 0;
      if (ceil_mode && span >= 0 && span % s != 0 && (span / s + 1) * s < in + p[i])
        overhang = s - span % s;
      pattern.emplace_back(p[i], p[rank + i] + overhang);
    }
    Variable y =
        pad(x, pattern,
            {.mode = kConstantPad, .constant_value = -std::numeric_limits<double>::infinity()});
    if (where) where = pad(*where, pattern, {.mode = kConstantPad});
    for (size_t i = rank; i-- > 0;) {
      const size_t extent = y.shape()[1 + i], window = (kernel[i] - 1) * dilations[i] + 1;
      if (window > extent)
        fail("the dilated window of spatial axis ", i, " is larger than the padded input");
      const size_t outputs = (extent - window) / strides[i] + 1;
      const bool last_axis = i == 0;
      const Axis axis(int(1 + i));
      std::vector<Variable> gathered, gathered_where;
      Variable m;
      for (size_t j = 0; j < kernel[i]; ++j) {
        const Variable at = positions(int64_t(j * dilations[i]), int64_t(strides[i]), outputs,
                                      {outputs}, y.dtype());
        gathered.push_back(gather(y, at, axis, last_axis && kernel[i] == 1 ? out_name() : ""));
        if (where) gathered_where.push_back(gather(*where, at, axis));
        m = j == 0 ? gathered[0]
                   : Variable(element_max(m, gathered[j],
                                          last_axis && j + 1 == kernel[i] ? out_name() : ""));
      }
      if (where) {
        where = gathered_where.back();
        for (size_t j = kernel[i] - 1; j-- > 0;)
          where = element_select(equal(gathered[j], m), gathered_where[j], *where);
      }
      y = m;
    }
    return {y, where.value_or(Variable())};
  }
  static Importing global_pool(PoolingType type) {
    return [type](Importer& m) {
      return m.windows(
          [&](const Variable& x) { return Variable(global_pooling(x, type, m.out_name())); });
    };
  }

  // OneHot(indices, depth, values): Loom's one_hot along the output's axis, scaled and shifted
  // where the values are not (0, 1). (Loom's one_hot gives zeros for an index outside
  // [0, depth), where ONNX counts a negative one from the end.)
  Val one_hot_node() {
    const Val x = in(0);
    // depth: one number of any numeric type.
    if (!has_input(1)) fail("input 1 (depth) is missing");
    std::vector<int64_t> depth;
    for (double v : weights(1, tensor_shape(constant_tensor(node_->input(1))).dims(), "depth"))
      depth.push_back(v >= 1 && v <= double(kMaxDim) ? int64_t(v) : -1);
    if (depth.size() != 1 || depth[0] < 1 || depth[0] > kMaxDim)
      fail("depth must be one number from 1 to 2^31");
    const std::vector<double> values = weights(2, {2}, "values");
    const size_t axis = onnx_axis(int_attribute(*node_, "axis", -1), x.rank() + 1);
    if (axis < x.dynamic) fail("the new axis ", axis, " is before the batch axis");
    const bool zero_one = values == std::vector<double>{0, 1};
    // A negative index counts from the end (Loom's one_hot gives zeros for it).
    const DataType t = x.var.dtype();
    const Variable indices =
        plus(x.var, element_times(less(x.var, constant(0.0, t)), constant(double(depth[0]), t)));
    const Variable y = one_hot(indices, size_t(depth[0]), false, Axis(int(axis - x.dynamic)),
                               zero_one ? out_name() : "");
    if (zero_one) return {y, x.dynamic};
    return {plus(element_times(y, constant(values[1] - values[0], t)), constant(values[0], t),
                 out_name()),
            x.dynamic};
  }

  // Gather as Loom's gather: along a static axis of data, or, with indices that have dynamic
  // axes, along axis 0 of data without any (the output's dynamic axes in front). A negative
  // index counts from the end.
  Val gather_node() {
    const Val data = in(0), indices = in(1);
    const int64_t given = int_attribute(*node_, "axis", 0);
    if (data.dynamic && indices.dynamic)
      fail("data and indices both have dynamic axes (Loom's gather of each sample's own data is ",
           "not ONNX's Gather)");
    if (indices.dynamic && onnx_axis(given, data.rank()) != 0)
      fail("indices with dynamic axes gather along axis 0 of data only (the output's dynamic ",
           "axes in front)");
    const Axis axis = static_axis(data, given);
    const DataType t = indices.var.dtype();
    const double n = double(data.var.shape()[size_t(axis.static_index())]);
    const Variable from_start =
        plus(indices.var, element_times(less(indices.var, constant(0.0, t)), constant(n, t)));
    return {gather(data.var, from_start, axis, out_name()), std::max(data.dynamic, indices.dynamic),
            data.integer};
  }

  // Hardmax: 1 at the first largest entry along one static axis, as the one-hot of Loom's
  // argmax there.
  Val hardmax_node() {
    return along_axis([](const Variable& x, const Axis& axis, const std::string& name) {
      const int k = axis.static_index();
      const Variable positions = loom::squeeze(argmax(x, axis), std::vector<int>{k});
      return Variable(one_hot(positions, x.shape()[size_t(k)], false, axis, name));
    });
  }

  // Mean: the Sum of the inputs (broadcast as ONNX broadcasts them) divided by their count.
  Val mean_node() {
    const OpSchema* plus_schema = find_schema("Plus");
    LOOM_CHECK(plus_schema, StateError, "ONNX import: Loom has no op Plus");
    const Val sum = generic(*plus_schema, {}, "");
    return {element_divide(sum.var, constant(double(inputs()), sum.var.dtype()), out_name()),
            sum.dynamic};
  }

  // Split: x's consecutive slices along a static axis, of the sizes `split` gives (an input from
  // opset 13, an attribute before), or of equal sizes (the axis's extent divided by the number of
  // outputs).
  void split_node() {
    const Val x = in(0);
    const Axis axis = static_axis(x, int_attribute(*node_, "axis", 0));
    const int64_t extent = int64_t(x.var.shape()[size_t(axis.static_index())]);
    const int64_t parts = node_->output_size();
    if (parts < 1) fail("the node has no output");
    if (!has_input(1) && extent % parts != 0)
      fail("the axis's extent ", extent, " does not split into ", parts, " equal parts");
    const std::vector<int64_t> sizes =
        has_input(1) ? input_ints(1) : std::vector<int64_t>(size_t(parts), extent / parts);
    int64_t total = 0;
    for (int64_t size : sizes) total += std::clamp<int64_t>(size, 0, extent + 1);
    if (int64_t(sizes.size()) != parts || total != extent ||
        std::any_of(sizes.begin(), sizes.end(), [](int64_t size) { return size < 1; }))
      fail("split ", list(sizes), " must be ", parts, " positive sizes (one per output) adding ",
           "up to the axis's extent ", extent, " (Loom has no empty tensors)");
    int64_t begin = 0;
    for (int k = 0; k < parts; ++k) {
      const int64_t end = begin + sizes[size_t(k)];
      if (const std::string& name = node_->output(k); !name.empty())
        values_[name] = {slice(x.var, axis, int(begin), end == extent ? 0 : int(end), name),
                         x.dynamic, x.integer};
      begin = end;
    }
  }

  // The scales of Upsample and of Resize at opset 10 (input 1, which they require).
  std::vector<double> first_form_scales(size_t rank) {
    std::vector<double> scales = resize_values(1, "scales", rank);
    if (scales.empty()) fail("scales (input 1) is missing");
    return scales;
  }

  // Upsample (opsets 7 to 9; Resize replaced it at 10): Resize's first form, asymmetric
  // coordinates and nearest's floor, at scales of 1 or more.
  Val upsample() {
    if (opset_ >= 10)
      fail("ONNX deprecated Upsample at opset 10 (Resize replaces it); the model imports opset ",
           opset_, " and Loom imports Upsample at opsets 7 to 9");
    const std::string mode = string_attribute(*node_, "mode", "nearest");
    if (mode != "nearest" && mode != "linear")
      fail("mode ", mode, " is not one of Upsample's (nearest, linear)");
    const Val x = in(0);
    const std::vector<double> scales = first_form_scales(x.rank());
    for (size_t k = 0; k < scales.size(); ++k)
      if (!(scales[k] >= 1)) fail("scale ", scales[k], " of axis ", k, " must be 1 or more");
    return resized(x, scales, {}, {}, {.mode = mode});
  }

  // Resize: from opset 11 with roi, scales or sizes and the attributes of how positions map
  // (coordinate_transformation_mode), round (nearest_mode) and weigh (cubic_coeff_a,
  // exclude_outside, extrapolation_value); at opset 10 X and scales alone (opset_changes).
  Val resize_node() {
    const Val x = in(0);
    const size_t rank = x.rank();
    Interpolation how{.mode = string_attribute(*node_, "mode", "nearest")};
    const bool first_form = earlier_form(11);
    if (how.mode != "nearest" && how.mode != "linear" && (first_form || how.mode != "cubic"))
      fail("mode ", how.mode, " is not one of Resize's at opset ", opset_,
           first_form ? " (nearest, linear)" : " (nearest, linear, cubic)");
    if (first_form) return resized(x, first_form_scales(rank), {}, {}, how);
    how.coordinates = string_attribute(*node_, "coordinate_transformation_mode", "half_pixel");
    static const std::set<std::string> coordinates = {"half_pixel",           "pytorch_half_pixel",
                                                      "align_corners",        "asymmetric",
                                                      "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    if (!coordinates.count(how.coordinates))
      fail("coordinate_transformation_mode ", how.coordinates, " is not one of ONNX's ",
           "(half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, ",
           "tf_crop_and_resize)");
    how.nearest = string_attribute(*node_, "nearest_mode", "round_prefer_floor");
    if (how.nearest != "round_prefer_floor" && how.nearest != "round_prefer_ceil" &&
        how.nearest != "floor" && how.nearest != "ceil")
      fail("nearest_mode ", how.nearest, " is not one of ONNX's (round_prefer_floor, ",
           "round_prefer_ceil, floor, ceil)");
    how.cubic_a = float_attribute(*node_, "cubic_coeff_a", -0.75f);
    how.exclude_outside = int_attribute(*node_, "exclude_outside", 0) != 0;
    how.extrapolation = float_attribute(*node_, "extrapolation_value", 0.f);
    const std::vector<double> scales = resize_values(2, "scales", rank);
    const std::vector<double> sizes = resize_values(3, "sizes", rank);
    if (scales.empty() == sizes.empty())
      fail("one of scales (input 2) and sizes (input 3) must be given; ",
           scales.empty() ? "neither is" : "both are");
    std::vector<double> roi;
    if (how.coordinates == "tf_crop_and_resize") {
      roi = resize_values(1, "roi", 2 * rank);
      if (roi.empty())
        fail("coordinate_transformation_mode tf_crop_and_resize needs roi (input 1)");
    }
    return resized(x, scales, sizes, roi, how);
  }

  // Input i of Resize or Upsample (roi, scales, sizes): its `count` values, none where the node
  // leaves it out (no name, or an empty tensor as before opset 13). It must be a constant, since
  // Loom's ops have fixed shapes.
  std::vector<double> resize_values(size_t i, const char* what, size_t count) {
    if (!has_input(i)) return {};
    const std::string& name = node_->input(int(i));
    if (!constants_.count(name))
      fail(what, " (input ", i, ", '", name, "') is computed when the model runs; Loom imports ",
           node_->op_type(), " with constant ", what, " (an initializer or a Constant node's ",
           "output), since its ops' shapes are fixed when the model is imported");
    if (tensor_shape(constant_tensor(name)).total_size() == 0) return {};
    return weights(i, {count}, what);
  }

  // x resized by `scales` (floor(extent scale) elements) or to `sizes`, along each axis in turn,
  // the last first (so that tf_crop_and_resize's extrapolated values enter the interpolation
  // along earlier axes, as in ONNX's reference): output i the weighted sum of gathers that
  // resize_axis gives. An axis whose resizing is the identity is left as it is; a dynamic axis
  // (its extent unknown here) only where scale 1 keeps every extent as it is.
  Val resized(const Val& x, const std::vector<double>& scales, const std::vector<double>& sizes,
              const std::vector<double>& roi, const Interpolation& how) {
    if (x.integer && how.mode != "nearest")
      fail("mode ", how.mode, " of an integer tensor is not imported (ONNX does not say how ",
           "the interpolated values round)");
    const size_t rank = x.rank();
    static const std::set<std::string> keep_at_scale_1 = {"half_pixel", "pytorch_half_pixel",
                                                          "align_corners", "asymmetric"};
    std::vector<std::optional<AxisResize>> axes(rank);  // none: the axis stays as it is
    for (size_t k = 0; k < rank; ++k) {
      if (k < x.dynamic && sizes.empty() && scales[k] == 1 &&
          keep_at_scale_1.count(how.coordinates))
        continue;
      const size_t n = x.var.shape()[size_t(static_axis(x, int64_t(k)).static_index())];
      const double scale = sizes.empty() ? scales[k] : sizes[k] / double(n);
      const double length = sizes.empty() ? double(n) * scale : sizes[k];
      const double m = std::floor(length);
      if (!(scale > 0 && m >= 1 && m <= double(kMaxPositions)))
        fail(node_->op_type(), " would make ", m, " elements of axis ", k, " (extent ", n,
             ", scale ", scale, "); Loom makes 1 to 2^24 (it has no empty tensors)");
      AxisResize r = resize_axis(how, n, size_t(m), scale, length, roi.empty() ? 0 : roi[k],
                                 roi.empty() ? 1 : roi[rank + k]);
      if (!is_identity(r, n)) axes[k] = std::move(r);
    }
    const DataType dtype = x.var.dtype();
    size_t left = size_t(
        std::count_if(axes.begin(), axes.end(), [](const auto& r) { return r.has_value(); }));
    Variable y = x.var;
    for (size_t k = rank; k-- > 0;) {
      if (!axes[k]) continue;
      const AxisResize& r = *axes[k];
      const std::string name = --left == 0 ? out_name() : "";
      const Axis axis = static_axis(x, int64_t(k));
      const size_t m = r.outside.size();
      // The weights [m, 1...] broadcast over the axes behind this one.
      std::vector<size_t> dims(y.shape().rank() - size_t(axis.static_index()), 1);
      dims[0] = m;
      auto all = [](const std::vector<double>& v, double value) {
        return std::all_of(v.begin(), v.end(), [&](double e) { return e == value; });
      };
      // The taps that weigh some element (at least one, for the output's shape), and the
      // extrapolation value where positions are outside.
      std::vector<size_t> taps;
      for (size_t t = 0; t < r.index.size(); ++t)
        if (!all(r.weight[t], 0)) taps.push_back(t);
      if (taps.empty()) taps.push_back(0);
      const bool extrapolates = how.extrapolation != 0 && !all(r.outside, 0);
      const bool one_term = taps.size() == 1 && !extrapolates;
      std::vector<Variable> terms;
      for (size_t t : taps) {
        const bool ones = all(r.weight[t], 1);
        const Variable at = gather(y, constant(array_of(NDShape{m}, r.index[t], dtype)), axis,
                                   one_term && ones ? name : "");
        terms.push_back(
            ones ? at
                 : Variable(element_times(at, constant(array_of(NDShape(dims), r.weight[t], dtype)),
                                          one_term ? name : "")));
      }
      if (extrapolates) {
        std::vector<double> value(r.outside);
        for (double& v : value) v *= how.extrapolation;
        terms.push_back(constant(array_of(NDShape(dims), value, dtype)));
      }
      y = terms[0];
      for (size_t i = 1; i < terms.size(); ++i)
        y = plus(y, terms[i], i + 1 == terms.size() ? name : "");
    }
    return {y, x.dynamic, x.integer};
  }

  // LRN over [N, C, ...] with an odd size (Loom's window is 2 depth_radius + 1 channels); a
  // tensor without a batch axis has its channels moved in front for Loom's op, then back.
  Val lrn() {
    const int64_t size = int_attribute(*node_, "size", 0);
    if (size < 1 || size % 2 == 0 || size > kMaxDim)
      fail("size ", size, " must be odd and positive (Loom's window is 2 depth_radius + 1)");
    const Val x = in(0);
    if (x.rank() < 2 || x.dynamic > 1) fail("X must be [N, C, ...] without a sequence axis");
    auto normalized = [&](const Variable& v, const std::string& name) {
      return Variable(local_response_normalization(
          v, size_t(size / 2), float_attribute(*node_, "bias", 1),
          float_attribute(*node_, "alpha", 1e-4f), float_attribute(*node_, "beta", 0.75f), name));
    };
    if (x.dynamic) return {normalized(x.var, out_name()), 1};
    const SwapAxesOptions channels_first{.axis1 = 0, .axis2 = 1};
    return {swapaxes(normalized(swapaxes(x.var, channels_first), ""), channels_first, out_name()),
            0};
  }

  // Batch normalization at inference; in training mode (of a tensor without a batch axis) with
  // the statistics of x over every axis but the channels' (the variance the population's), and
  // the running statistics (outputs 1 and 2) input_mean momentum + mean (1 - momentum), the same
  // of the variances; before opset 14 also saved_mean (output 3), the batch's mean, and
  // saved_var (output 4), as onnxruntime gives it, 1 / sqrt(var + epsilon) of the batch's
  // variance. spatial 0 (opsets 7 and 8): statistics per element of the sample [C, D...], over
  // the samples alone.
  Val batch_norm() {
    // Before opset 14 the node is in training mode where it has outputs beside Y.
    const bool training = earlier_form(14)
                              ? std::any_of(node_->output().begin() + 1, node_->output().end(),
                                            [](const std::string& o) { return !o.empty(); })
                              : int_attribute(*node_, "training_mode", 0) != 0;
    const bool spatial = !earlier_form(9) || int_attribute(*node_, "spatial", 1) != 0;
    const Val x = in(0);
    if (training && x.dynamic)
      fail("training mode is imported for a tensor without a batch axis (Loom's batch ",
           "normalization over a batch updates its own statistics as it trains)");
    if (x.dynamic > 1 || x.rank() < 2) fail("X must be [N, C, ...] without a sequence axis");
    const NDShape sample = x.var.shape().sub_shape(1 - x.dynamic);
    const NDShape stats = spatial ? NDShape{sample[0]} : sample;
    // Of the statistics' shape, or (spatial) [C, 1...] to broadcast over a tensor without a
    // batch axis.
    auto stat_of = [&](size_t i, bool is_constant, const NDShape& shape) {
      if (!has_input(i) || tensor_shape(constant_tensor(node_->input(int(i)))) != stats)
        fail("input ", i, " must be an initializer of shape ", stats.to_string(),
             spatial ? "" : " (spatial 0: the sample's shape)");
      return leaf(node_->input(int(i)), is_constant, shape);
    };
    const float epsilon = float_attribute(*node_, "epsilon", 1e-5f);
    if (!x.dynamic) {
      // Loom's batch normalization needs a batch axis; at inference it is this arithmetic.
      std::vector<size_t> per_channel(sample.rank(), 1);
      per_channel[0] = stats[0];
      const NDShape c = spatial ? NDShape(per_channel) : sample;
      const DataType t = x.var.dtype();
      Variable mean = stat_of(3, true, c), var = stat_of(4, true, c);
      if (training) {
        std::vector<Axis> axes{Axis(0)};
        for (size_t k = 2; spatial && k < x.rank(); ++k) axes.emplace_back(int(k));
        const Variable batch_mean = reduce_mean(x.var, axes, false);  // the statistics' shape
        const Variable batch_var =
            reduce_mean(square(minus(x.var, reshape(batch_mean, c))), axes, false);
        const double momentum = float_attribute(*node_, "momentum", 0.9f);
        auto output = [&](int i, const std::function<Variable(const std::string&)>& value) {
          if (node_->output_size() > i && !node_->output(i).empty())
            values_[node_->output(i)] = {value(node_->output(i)), 0};
        };
        auto running = [&](size_t input, const Variable& batch) {
          return [&, input, batch](const std::string& name) {
            return Variable(plus(element_times(stat_of(input, true, stats), constant(momentum, t)),
                                 element_times(batch, constant(1 - momentum, t)), name));
          };
        };
        output(1, running(3, batch_mean));
        output(2, running(4, batch_var));
        if (earlier_form(14)) {
          output(3, [&](const std::string& name) { return Variable(alias(batch_mean, name)); });
          output(4, [&](const std::string& name) {
            return Variable(element_divide(constant(1.0, t),
                                           sqrt(plus(batch_var, constant(epsilon, t))), name));
          });
        }
        mean = reshape(batch_mean, c);
        var = reshape(batch_var, c);
      }
      const Variable scale =
          element_divide(stat_of(1, false, c), sqrt(plus(var, constant(epsilon, t))));
      return {plus(element_times(minus(x.var, mean), scale), stat_of(2, false, c), out_name()), 0};
    }
    auto stat = [&](size_t i, bool is_constant) { return stat_of(i, is_constant, stats); };
    const Variable count = constant(1.0, x.var.dtype(), out_name() + ".count");
    return {batch_normalization(x.var, stat(1, false), stat(2, false), stat(3, true), stat(4, true),
                                count, spatial && sample.rank() > 1, 5000, 0, epsilon, out_name()),
            1};
  }

  using AxisOp = std::function<Variable(const Variable&, const Axis&, const std::string&)>;
  static Importing softmax_like(Function (*op)(const Variable&, const Axis&, const std::string&)) {
    return [op](Importer& m) {
      return m.along_axis([op](const Variable& x, const Axis& axis, const std::string& name) {
        return Variable(op(x, axis, name));
      });
    };
  }
  // op of x along the node's axis (Softmax, LogSoftmax, Hardmax); before opset 13 along x
  // flattened to 2-D at the axis (default 1): the axes from it on merged into one, op along it,
  // and the result reshaped back.
  Val along_axis(const AxisOp& op) {
    const Val x = in(0);
    if (!earlier_form(13))
      return {op(x.var, static_axis(x, int_attribute(*node_, "axis", -1)), out_name()), x.dynamic};
    const size_t axis = onnx_axis(int_attribute(*node_, "axis", 1), x.rank());
    if (axis < x.dynamic)
      fail("axis ", axis, " of ", node_->op_type(), " at opset ", opset_, " (x flattened to 2-D ",
           "there) would merge the batch axis into the axis it works along");
    const NDShape& shape = x.var.shape();
    const size_t k = axis - x.dynamic;
    if (k + 1 == shape.rank()) return {op(x.var, Axis(int(k)), out_name()), x.dynamic};
    const Variable flat =
        reshape(x.var, shape.sub_shape(0, k).append(shape.sub_shape(k).total_size()));
    return reshaped({op(flat, Axis(int(k)), ""), x.dynamic}, shape);
  }

  // The Loom shape for ONNX's target shape of x (0 copies x's dimension, -1 is inferred).
  Val reshape_to(const Val& x, const std::vector<int64_t>& target) {
    // [-1, sample...] of sequences [T, N, ...]: T and N merged (see sequence_shape_node).
    if (x.dynamic == 2 && !merged(x) && !target.empty() && target[0] == -1) {
      std::vector<size_t> sample;
      for (size_t k = 1; k < target.size(); ++k) {
        if (target[k] < 1 || target[k] > kMaxDim)
          fail("target shape ", list(target),
               " merges the sequence and batch axes with a sample "
               "shape of sizes other than 1 to 2^31");
        sample.push_back(size_t(target[k]));
      }
      return {reshaped(x, NDShape(sample)).var, 1};
    }
    std::vector<size_t> dims;
    uint64_t total = 1;
    const NDShape& s = x.var.shape();
    for (size_t k = 0; k < target.size(); ++k) {
      const int64_t d = target[k];
      if (k < x.dynamic) {
        if (d != 0 && (d != -1 || x.dynamic != 1))
          fail("the target shape ", list(target), " changes a dynamic axis");
        continue;
      }
      if (d == 0) {
        if (k >= x.rank()) fail("target shape ", list(target), " copies a missing axis");
        dims.push_back(s[k - x.dynamic]);
      } else if (d == -1) {
        if (x.dynamic && target[0] == -1) fail("target shape ", list(target), " infers two axes");
        dims.push_back(NDShape::kInferred);
      } else {
        if (d < 0 || d > kMaxDim) fail("target shape ", list(target), " is out of range");
        dims.push_back(size_t(d));
        total *= uint64_t(d);
        if (total > kMaxElements) fail("target shape ", list(target), " has too many elements");
      }
    }
    return reshaped(x, NDShape(dims));
  }
  Val reshape_node() {
    if (int_attribute(*node_, "allowzero", 0) != 0) fail("allowzero must be 0");
    return reshape_to(in(0), input_ints(1));
  }
  Val flatten() {
    const Val x = in(0);
    // Axis r (the rank) flattens to [all, 1]; a negative axis counts from r.
    const int64_t given = int_attribute(*node_, "axis", 1);
    const size_t axis = given < 0 ? onnx_axis(given, x.rank()) : onnx_axis(given, x.rank() + 1);
    if (x.dynamic > 1) fail("Flatten would merge the sequence and batch axes");
    if (x.dynamic && axis != 1) fail("Loom flattens behind the batch axis only (axis 1)");
    const NDShape& s = x.var.shape();
    if (x.dynamic) return reshaped(x, NDShape{s.total_size()});
    return reshaped(x, NDShape{s.sub_shape(0, axis).total_size(), s.sub_shape(axis).total_size()});
  }
  // Unsqueeze and Squeeze as reshapes of the sample.
  Val unsqueeze() {
    const Val x = in(0);
    const auto axes = input_ints(1);
    const size_t rank = x.rank() + axes.size();
    std::vector<bool> added(rank, false);
    for (int64_t a : axes) {
      const size_t k = onnx_axis(a, rank);
      if (added[k]) fail("axis ", a, " is named twice");
      added[k] = true;
    }
    for (size_t k = 0; k < x.dynamic; ++k)
      if (added[k]) fail("an axis in front of a dynamic axis");
    std::vector<size_t> dims;
    size_t next = 0;
    for (size_t k = x.dynamic; k < rank; ++k) dims.push_back(added[k] ? 1 : x.var.shape()[next++]);
    return reshaped(x, NDShape(dims));
  }
  Val squeeze() {
    auto r = has_input(0) ? recurrences_.find(node_->input(0)) : recurrences_.end();
    if (r != recurrences_.end()) return squeezed(r->second);
    const Val x = in(0);
    std::vector<bool> removed(x.rank(), false);
    if (has_input(1)) {
      for (int64_t a : input_ints(1)) removed[onnx_axis(a, x.rank())] = true;
    } else {
      for (size_t k = x.dynamic; k < x.rank(); ++k) removed[k] = x.var.shape()[k - x.dynamic] == 1;
    }
    for (size_t k = 0; k < x.dynamic; ++k)
      if (removed[k]) fail("a dynamic axis cannot be squeezed");
    std::vector<size_t> dims;
    for (size_t k = x.dynamic; k < x.rank(); ++k) {
      const size_t d = x.var.shape()[k - x.dynamic];
      if (removed[k] && d != 1) fail("axis ", k, " of extent ", d, " cannot be squeezed");
      if (!removed[k]) dims.push_back(d);
    }
    return reshaped(x, NDShape(dims));
  }

  // Pad in constant or reflect mode, or edge mode (which Loom's pad has not) as each axis's first
  // and last slices spliced on; of the static axes only, a pad at most the axis's extent, so
  // that the sizes bound the output by the input.
  Val pad_node() {
    const Val x = in(0);
    const std::string mode = string_attribute(*node_, "mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      fail("mode ", mode, " is not one of ONNX's (constant, reflect, edge)");
    const std::vector<int64_t> pads = input_ints(1);
    const size_t rank = x.rank();
    if (pads.size() != 2 * rank) fail("pads ", list(pads), " must have ", 2 * rank, " values");
    std::vector<std::pair<size_t, size_t>> pattern;
    for (size_t k = 0; k < rank; ++k) {
      const int64_t before = pads[k], after = pads[rank + k];
      if (k < x.dynamic) {
        if (before || after) fail("pads ", list(pads), " pad a dynamic axis");
        continue;
      }
      const int64_t extent = int64_t(x.var.shape()[k - x.dynamic]);
      if (before < 0 || after < 0) fail("negative pads (cropping) are not imported");
      if (before > extent || after > extent)
        fail("pads ", list(pads), " exceed the extent ", extent, " of axis ", k,
             " (Loom reads pads up to the extent)");
      pattern.emplace_back(size_t(before), size_t(after));
    }
    if (mode == "edge") {
      Variable y = x.var;
      for (size_t k = 0; k < pattern.size(); ++k) {
        const auto [before, after] = pattern[k];
        if (!before && !after) continue;
        const Axis axis{int(k)};
        std::vector<Variable> parts;
        if (before) parts.push_back(repeated(slice(y, axis, 0, 1), before, axis));
        parts.push_back(y);
        if (after) parts.push_back(repeated(slice(y, axis, int(y.shape()[k]) - 1, 0), after, axis));
        y = splice(parts, axis);
      }
      return {y, x.dynamic, x.integer};
    }
    const double value = has_input(2) ? weights(2, {}, "constant_value")[0] : 0.0;
    return {pad(x.var, pattern,
                {.mode = mode == "constant" ? kConstantPad : kReflectPad, .constant_value = value},
                out_name()),
            x.dynamic, x.integer};
  }

  // The constant first, first + step, ... (count values, of shape dims) of type t: positions
  // along an axis, for the ops the importer composes. At most 2^24, so that no file's sizes make
  // the importer allocate without bound.
  static Variable positions(int64_t first, int64_t step, size_t count,
                            const std::vector<size_t>& dims, DataType t) {
    if (count > kMaxPositions)
      fail("the op would need a constant of ", count,
           " positions along an axis (Loom makes at most 2^24)");
    std::vector<double> at(count);
    for (size_t i = 0; i < count; ++i) at[i] = double(first + int64_t(i) * step);
    return constant(array_of(NDShape(dims), at, t));
  }

  // x (of extent 1 along axis) repeated count times along it, by doubling (a node per doubling).
  static Variable repeated(const Variable& x, size_t count, const Axis& axis) {
    Variable y = x;
    size_t have = 1;
    for (; have < count; have *= 2) y = splice({y, y}, axis);
    return have == count ? y : Variable(slice(y, axis, 0, int(count)));
  }

  // Slice along static axes; steps other than 1 as a gather of the positions they visit.
  Val slice_node() {
    Val x = in(0);
    const auto starts = input_ints(1), ends = input_ints(2);
    std::vector<int64_t> axes(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
    if (has_input(3)) axes = input_ints(3);
    const std::vector<int64_t> steps =
        has_input(4) ? input_ints(4) : std::vector<int64_t>(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size())
      fail("starts, ends, axes and steps differ in length");
    for (size_t i = 0; i < starts.size(); ++i) {
      const Axis axis = static_axis(x, axes[i]);
      const int64_t dim = int64_t(x.var.shape()[size_t(axis.static_index())]), step = steps[i];
      if (step == 0) fail("a step of 0");
      // ONNX's clamping: to [0, dim] going forward, to [-1, dim - 1] going backward.
      auto clamp = [&](int64_t v) {
        return std::clamp(v < 0 ? v + dim : v, step > 0 ? int64_t(0) : int64_t(-1),
                          step > 0 ? dim : dim - 1);
      };
      const int64_t begin = clamp(starts[i]), end = clamp(ends[i]);
      if (step > 0 ? end <= begin : end >= begin)
        fail("the slice [", starts[i], ", ", ends[i], ") of axis ", axes[i], " with step ", step,
             " is empty");
      if (step == 1) {
        x = {slice(x.var, axis, int(begin), end == dim ? 0 : int(end), out_name()), x.dynamic,
             x.integer};
        continue;
      }
      const int64_t count =
          step > 0 ? (end - begin + step - 1) / step : (begin - end - step - 1) / -step;
      x = {gather(x.var, positions(begin, step, size_t(count), {size_t(count)}, x.var.dtype()),
                  axis, out_name()),
           x.dynamic, x.integer};
    }
    return x;
  }

  Val concat() {
    std::vector<Variable> vars;
    const Val first = in(0);
    for (size_t i = 0; i < inputs(); ++i) {
      const Val v = in(i);
      if (v.dynamic != first.dynamic) fail("inputs with different dynamic axes");
      vars.push_back(v.var);
    }
    return {splice(vars, static_axis(first, int_attribute(*node_, "axis", 0)), out_name()),
            first.dynamic, first.integer};
  }

  Val transpose_node() {
    const Val x = in(0);
    std::vector<int64_t> perm = ints_attribute(*node_, "perm", {});
    if (perm.empty())
      for (size_t k = 0; k < x.rank(); ++k) perm.push_back(int64_t(x.rank() - 1 - k));
    if (perm.size() != x.rank()) fail("perm ", list(perm), " does not fit rank ", x.rank());
    for (size_t k = 0; k < x.dynamic; ++k)
      if (perm[k] != int64_t(k)) fail("perm ", list(perm), " moves a dynamic axis");
    std::vector<int> loom_perm;
    for (size_t k = x.dynamic; k < perm.size(); ++k)
      loom_perm.push_back(int(onnx_axis(perm[k], x.rank())) - int(x.dynamic));
    return {transpose(x.var, loom_perm, out_name()), x.dynamic, x.integer};
  }

  static Importing reduce(ReduceFn op) {
    return [op](Importer& m) {
      const Val x = m.in(0);
      const pb::NodeProto& n = *m.node_;
      const bool axes_input = n.op_type() == "ReduceSum";  // an attribute in the others
      std::vector<int64_t> given =
          axes_input ? std::vector<int64_t>{} : ints_attribute(n, "axes", {});
      if (axes_input && m.has_input(1)) given = m.ints(n.input(1));
      if (given.empty()) {
        if (int_attribute(n, "noop_with_empty_axes", 0)) return x;
        for (size_t k = 0; k < x.rank(); ++k) given.push_back(int64_t(k));
      }
      // Axis 0 of a batch (not of sequences) is Loom's batch axis: the result has no dynamic
      // axes, and keepdims gives it ONNX's leading axis of 1.
      std::vector<Axis> axes;
      bool batch = false;
      for (int64_t a : given) {
        if (x.dynamic == 1 && onnx_axis(a, x.rank()) == 0)
          batch = true;
        else
          axes.push_back(static_axis(x, a));
      }
      const bool keep = int_attribute(n, "keepdims", 1) != 0;
      // Of integers, the mean, L2 norm and log-sum-exp are rounded toward zero (as ONNX's
      // integer results are).
      const bool rounded = x.integer && (n.op_type() == "ReduceMean" || n.op_type() == "ReduceL2" ||
                                         n.op_type() == "ReduceLogSumExp");
      const std::string name = rounded ? "" : m.out_name();
      if (batch) axes.insert(axes.begin(), Axis::default_batch_axis());
      Variable y = op(x.var, axes, keep, batch && keep ? "" : name);
      if (batch && keep) y = reshape(y, y.shape().prepend(1), name);
      return Val{rounded ? truncated(y, m.out_name()) : y, batch ? 0 : x.dynamic, x.integer};
    };
  }

  // ArgMax and ArgMin: Loom's keep the axis (keepdims 0 reshapes it away) and take the first
  // extreme; their positions are values of x's type (ONNX's int64). select_last_index 1: the
  // largest position where x equals its extreme (extreme: reduce_max or reduce_min).
  using ReduceAxisFn = Function (*)(const Variable&, const Axis&, bool, const std::string&);
  static Importing arg_reduce(Function (*op)(const Variable&, const Axis&, const std::string&),
                              ReduceAxisFn extreme) {
    return [op, extreme](Importer& m) {
      const Val x = m.in(0);
      const Axis axis = static_axis(x, int_attribute(*m.node_, "axis", 0));
      const bool keep = int_attribute(*m.node_, "keepdims", 1) != 0;
      const std::string name = m.out_name();
      if (int_attribute(*m.node_, "select_last_index", 0) != 0) {
        // The positions along the axis, [n, 1...] to broadcast against the axes behind it.
        const size_t k = size_t(axis.static_index()), n = x.var.shape()[k];
        std::vector<size_t> dims(x.var.shape().rank() - k, 1);
        dims[0] = n;
        const Variable hit = equal(x.var, extreme(x.var, axis, true, ""));
        return Val{reduce_max(element_times(hit, positions(0, 1, n, dims, x.var.dtype())), axis,
                              keep, name),
                   x.dynamic, true};
      }
      if (keep) return Val{op(x.var, axis, name), x.dynamic, true};
      std::vector<size_t> dims = x.var.shape().dims();
      dims.erase(dims.begin() + axis.static_index());
      return Val{reshape(op(x.var, axis, ""), NDShape(dims), name), x.dynamic, true};
    };
  }

  // TopK's values and positions (int64 in ONNX: values of x's type), the k largest along one
  // static axis in decreasing order (which ONNX's sorted 0 leaves open); largest 0: the k
  // smallest in increasing order, as the negated top k of -x.
  void top_k_node() {
    const bool largest = int_attribute(*node_, "largest", 1) != 0;
    Val x = in(0);
    if (!largest) x.var = negate(x.var);
    const Axis axis = static_axis(x, int_attribute(*node_, "axis", -1));
    const std::vector<int64_t> k = input_ints(1);
    const size_t extent = x.var.shape()[size_t(axis.static_index())];
    if (k.size() != 1 || k[0] < 1 || k[0] > int64_t(extent))
      fail("K ", list(k), " must be one number from 1 to the axis's extent ", extent);
    const std::string& name = node_->output(0);
    const Function top = top_k(x.var, size_t(k[0]), axis, largest ? name : "");
    if (!name.empty())
      values_[name] = {largest ? top.outputs()[0] : Variable(negate(top.outputs()[0], name)),
                       x.dynamic, x.integer};
    if (node_->output_size() > 1 && !node_->output(1).empty())
      values_[node_->output(1)] = {top.outputs()[1], x.dynamic, true};
  }

  // ---- recurrent ops ----

  // An output of an imported recurrent op: Y [T, 1, N, c] (all steps) or Y_h [1, N, c] (the
  // state after each sequence's last step in the op's direction).
  struct Recurrence {
    Variable steps;  // the fused recurrence
    bool final_state = false;
    bool backwards = false;
  };

  // The values of a constant input of the node (of any type data_type reads), of the given
  // shape.
  std::vector<double> weights(size_t i, const std::vector<size_t>& shape, const char* what) {
    if (!has_input(i)) fail(what, " (input ", i, ") is missing");
    const pb::TensorProto& t = constant_tensor(node_->input(int(i)));
    if (tensor_shape(t) != NDShape(shape))
      fail(what, " has shape ", tensor_shape(t).to_string(), ", not ", NDShape(shape).to_string());
    return numbers(t, DataType::Float64);
  }

  Variable weight_parameter(const std::vector<double>& v, const NDShape& shape, DataType dtype,
                            const std::string& name) {
    return parameter(array_of(shape, v, dtype), name);
  }

  // Input i of a recurrent op, an initial state: zero where it is missing, else the same state
  // [size] or [1] for every sample (per_sample_state), or, over an X of fixed sizes (`samples`
  // N), a constant [1, N, size] of N equal states.
  Variable initial_state(size_t i, size_t size, size_t samples, DataType dtype,
                         const std::string& name) {
    if (!has_input(i)) return constant(0.0, dtype, name);
    if (samples && constants_.count(node_->input(int(i)))) {
      const std::vector<double> v = weights(i, {1, samples, size}, "an initial state");
      for (size_t k = size; k < v.size(); ++k)
        if (v[k] != v[k % size])
          fail("input ", i, " (an initial state) must be the same state for every sample (Loom's ",
               "recurrence starts each sequence from one state)");
      return constant(array_of(NDShape{size}, {v.begin(), v.begin() + long(size)}, dtype), name);
    }
    auto it = states_.find(node_->input(int(i)));
    if (it == states_.end())
      fail("input ", i, " (an initial state) must be one state for every sample: the Expand of ",
           "a value without dynamic axes to [1, N, ", size, "] (N from Shape of the sequences), ",
           "or ConstantOfShape of that shape");
    const auto& [s, expanded] = it->second;
    if (s.dtype() != dtype) fail("input ", i, " (an initial state) is not of X's type");
    if (expanded != size)
      fail("input ", i, " (an initial state) has shape [1, N, ", expanded, "], not [1, N, ", size,
           "]");
    return s;
  }

  // LSTM, GRU and RNN over [T, N, I] in one direction as Loom's fused recurrence: ONNX's gate
  // blocks (LSTM i, o, f, c; GRU z, r, h) in Loom's order, the recurrent bias added to the input
  // bias (Loom has one), the initial states one per op (initial_state); the export's inverse
  // (docs/onnx.md).
  void recurrent() {
    const pb::NodeProto& n = *node_;
    const std::string op = n.op_type();
    const bool lstm = op == "LSTM", gru = op == "GRU";
    const Val x = in(0);
    // X of fixed sizes [T, N, input] ([N, T, input] in layout 1): its samples made sequences.
    const bool tensor = x.dynamic == 0 && x.var.shape().rank() == 3;
    if (!tensor && (x.dynamic != 2 || x.var.shape().rank() != 1))
      fail("X must be a batch of sequences of vectors [T, N, input] (a graph input whose axes ",
           "0 and 1 have no fixed size) or a tensor [T, N, input] of fixed sizes");
    const int64_t layout = int_attribute(n, "layout", 0);
    if (layout != 0 && (layout != 1 || !tensor))
      fail("layout must be 0, or 1 for an X of fixed sizes");
    const std::string direction = string_attribute(n, "direction", "forward");
    if (direction != "forward" && direction != "reverse")
      fail("direction ", direction, " is not imported (a Loom recurrence runs one way)");
    for (const char* a : {"clip", "activation_alpha", "activation_beta"})
      if (find_attribute(n, a)) fail("the attribute ", a, " is not imported");
    for (const char* a : {"input_forget", "linear_before_reset"})
      if (int_attribute(n, a, 0) != 0) fail("the attribute ", a, " must be 0");
    const size_t G = lstm ? 4 : gru ? 3 : 1;
    std::vector<std::string> functions;
    if (const pb::AttributeProto* a = find_attribute(n, "activations"))
      functions.assign(a->strings().begin(), a->strings().end());
    else
      functions = lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                  : gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                        : std::vector<std::string>{"Tanh"};
    // Loom's cells: the gates sigmoid, one activation f for the rest.
    const bool rnn = op == "RNN";
    const bool loom_form = functions.size() == (lstm  ? 3
                                                : gru ? 2
                                                      : 1) &&
                           (rnn || functions[0] == "Sigmoid") &&
                           (!lstm || functions[1] == functions[2]);
    static const std::map<std::string, std::string> activations = {
        {"Tanh", "Tanh"}, {"Sigmoid", "Sigmoid"}, {"Relu", "ReLU"}};
    auto act = loom_form ? activations.find(functions[rnn ? 0 : 1]) : activations.end();
    if (act == activations.end())
      fail("activations must be ",
           lstm  ? "[Sigmoid, f, f]"
           : gru ? "[Sigmoid, f]"
                 : "[f]",
           " with f Tanh, Sigmoid or Relu (Loom's cells)");
    if (has_input(4) && !tensor && !lengths_.count(n.input(4)))
      fail("sequence_lens must be the graph's int32 input of the sequences' lengths");
    const int64_t hidden = int_attribute(n, "hidden_size", 0);
    if (hidden <= 0 || hidden > kMaxDim) fail("hidden_size must be given and positive");
    const size_t c = size_t(hidden), I = x.var.shape()[tensor ? 2 : 0], GH = gru ? 2 : G;
    const std::vector<double> W = weights(1, {1, G * c, I}, "W"),
                              R = weights(2, {1, G * c, c}, "R");
    const std::vector<double> B =
        has_input(3) ? weights(3, {1, 2 * G * c}, "B") : std::vector<double>(2 * G * c, 0.0);
    // ONNX's gate block k is Loom's block order[k].
    const std::vector<size_t> order = lstm  ? std::vector<size_t>{0, 3, 2, 1}
                                      : gru ? std::vector<size_t>{0, 1, 2}
                                            : std::vector<size_t>{0};
    std::vector<double> w(I * G * c), b(G * c), h(c * GH * c), h1(gru ? c * c : 0);
    for (size_t k = 0; k < G; ++k)
      for (size_t j = 0; j < c; ++j) {
        const size_t from = k * c + j, to = order[k] * c + j;
        for (size_t i = 0; i < I; ++i) w[i * G * c + to] = W[from * I + i];
        b[to] = B[from] + B[G * c + from];
        for (size_t i = 0; i < c; ++i) {
          if (order[k] < GH)
            h[i * GH * c + to] = R[from * c + i];
          else
            h1[i * c + j] = R[from * c + i];
        }
      }
    const DataType dtype = x.var.dtype();
    const std::string name = n.name().empty() ? out_name() : n.name();
    const size_t samples = tensor ? x.var.shape()[layout ? 0 : 1] : 0;
    FusedRecurrenceInputs r{.cell = lstm  ? "LSTM"
                                    : gru ? "GRU"
                                          : "RNNStep",
                            .activation = act->second,
                            .go_backwards = direction == "reverse",
                            .b = weight_parameter(b, NDShape{G * c}, dtype, name + ".b"),
                            .W = weight_parameter(w, NDShape{I, G * c}, dtype, name + ".W"),
                            .H = weight_parameter(h, NDShape{c, GH * c}, dtype, name + ".H"),
                            .h0 = initial_state(5, c, samples, dtype, name + ".h0")};
    if (gru) r.H1 = weight_parameter(h1, NDShape{c, c}, dtype, name + ".H1");
    if (lstm) r.c0 = initial_state(6, c, samples, dtype, name + ".c0");
    if (lstm && has_input(7)) {
      const std::vector<double> p = weights(7, {1, 3 * c}, "P");
      auto part = [&](size_t k, const char* suffix) {
        return weight_parameter({p.begin() + long(k * c), p.begin() + long((k + 1) * c)},
                                NDShape{c}, dtype, name + suffix);
      };
      r.Ci = part(0, ".Ci");
      r.Co = part(1, ".Co");
      r.Cf = part(2, ".Cf");
    }
    if (tensor) return recurrent_over_tensor(x.var, layout != 0, r, name);
    const Variable steps = fused_recurrence(x.var, r, name);
    if (n.output_size() > 0 && !n.output(0).empty())
      recurrences_[n.output(0)] = {steps, false, r.go_backwards};
    if (n.output_size() > 1 && !n.output(1).empty())
      recurrences_[n.output(1)] = {steps, true, r.go_backwards};
  }

  // The recurrence r over X [T, N, input] ([N, T, input] with batch_first: layout 1) of fixed
  // sizes: each of the N samples a sequence (of the lengths sequence_lens gives, a constant),
  // and the outputs made tensors of ONNX's shapes again: Y [T, 1, N, c] ([N, T, 1, c]), each
  // sequence's steps padded with zeros, and Y_h [1, N, c] ([N, 1, c]).
  void recurrent_over_tensor(const Variable& x, bool batch_first, const FusedRecurrenceInputs& r,
                             const std::string& name) {
    const pb::NodeProto& n = *node_;
    const size_t T = x.shape()[batch_first ? 1 : 0], N = x.shape()[batch_first ? 0 : 1];
    const Variable samples = to_batch(batch_first ? x : Variable(transpose(x, {1, 0, 2})));
    std::vector<double> lengths(N, double(T));
    if (has_input(4)) {
      const std::vector<int64_t> given = input_ints(4);
      if (given.size() != N) fail("sequence_lens must hold ", N, " lengths");
      for (int64_t l : given)
        if (l < 1 || l > int64_t(T)) fail("sequence_lens ", list(given), " must be 1 to ", T);
      lengths.assign(given.begin(), given.end());
    }
    const Variable steps = fused_recurrence(
        to_sequence(samples, to_batch(constant(array_of(NDShape{N}, lengths, x.dtype())))), r,
        name);
    // Unpacked, the sequences' steps are a tensor [N, T, c]; each sequence's final states one
    // [N, c].
    if (n.output_size() > 0 && !n.output(0).empty()) {
      const Variable y = unpack_batch(sequence::unpack(steps, 0.0, true));
      values_[n.output(0)] = {expand_dims(batch_first ? y : Variable(transpose(y, {1, 0, 2})),
                                          batch_first ? 1 : 0, n.output(0)),
                              0};
    }
    if (n.output_size() > 1 && !n.output(1).empty()) {
      const Variable last =
          r.go_backwards ? Variable(sequence::first(steps)) : Variable(sequence::last(steps));
      values_[n.output(1)] = {expand_dims(unpack_batch(last), batch_first ? 0 : -3, n.output(1)),
                              0};
    }
  }

  // Y without its direction axis (axis 1) is the sequence of states; Y_h without its (axis 0)
  // each sequence's final state: its last step, or its first for a reverse recurrence.
  Val squeezed(const Recurrence& r) {
    const std::vector<int64_t> axes = has_input(1) ? input_ints(1) : std::vector<int64_t>{};
    const int64_t axis = r.final_state ? 0 : 1;
    if (axes != std::vector<int64_t>{axis})
      fail("Loom imports ", r.final_state ? "Y_h" : "Y", " squeezed along axis ", axis, " only");
    if (!r.final_state) return {r.steps, 2};
    return {
        r.backwards ? sequence::first(r.steps, out_name()) : sequence::last(r.steps, out_name()),
        1};
  }

  const std::string file_;
  const OnnxImportOptions options_;
  pb::ModelProto model_;
  // The type of integer and boolean tensors: float64 where the graph's inputs, outputs or
  // initializers include a double tensor.
  DataType integer_dtype_ = DataType::Float32;
  int64_t opset_ = 0;  // of the default domain
  const pb::NodeProto* node_ = nullptr;
  // Nodes of an earlier form read as the later (in_latest_form) and the constants made of their
  // attributes: deques, as node_ and constants_ point into them.
  std::deque<pb::NodeProto> latest_forms_;
  std::deque<pb::TensorProto> attribute_inputs_;
  std::unordered_map<std::string, const pb::TensorProto*> constants_;
  std::unordered_map<std::string, Val> values_;
  // Shapes of sequences and their parts (kSteps, kSamples for T and N: sequence_shape_node).
  std::unordered_map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::tuple<std::string, bool, std::vector<size_t>>, Variable> leaves_;
  std::unordered_set<std::string> lengths_;                  // the int32 inputs of lengths
  std::unordered_map<std::string, Recurrence> recurrences_;  // outputs of recurrent ops
  // Per-sample states (per_sample_state) and the size of the shape they were given.
  std::unordered_map<std::string, std::pair<Variable, size_t>> states_;
  // MaxPool nodes' indices (output 1): the pooling's input and the node, for MaxUnpool.
  std::unordered_map<std::string, std::pair<Val, const pb::NodeProto*>> max_pools_;
  // Outputs other than the first of the ops that make one value, and which they are.
  std::unordered_map<std::string, std::string> second_outputs_;
  std::unordered_set<std::string> names_;  // the graph's inputs, initializers and node outputs
  std::unordered_set<std::string> read_;   // the values nodes read and the graph's outputs
};

}  // namespace

Function load_onnx_from_bytes(std::span<const uint8_t> bytes, const std::string& name,
                              const OnnxImportOptions& options) {
  // Every exception leaving the importer is a loom Error naming the file (the nodes' name the
  // node too: Importer::import).
  try {
    return Importer(bytes, name, options).import();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(name + ": " + e.what());
  }
}

std::vector<std::string> onnx_imported_op_types() {
  return Importer::op_types();
}

Function load_model(const std::string& path, ModelFormat format) {
  if (format == ModelFormat::Loom) return load_model(path);
  return load_onnx_from_bytes(read_file_bytes(path), path);
}

}  // namespace loom
