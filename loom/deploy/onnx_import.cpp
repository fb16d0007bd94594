// ONNX import: each node becomes Loom ops (docs/onnx.md). Axis 0 of a graph input is the batch
// axis, or axes 0 and 1 (both without a fixed size) the sequence and batch axes of a batch of
// sequences; initializers become parameters (batch normalization's statistics constants).
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "loom/deploy/onnx.h"
#include "loom/deploy/onnx.pb.h"
#include "loom/deploy/onnx_common.h"
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

// A value of the graph: a Loom variable and how many of ONNX's leading axes are its dynamic
// axes (0; 1: the batch axis; 2: the sequence and batch axes), so that ONNX's axis k is the
// variable's static axis k - dynamic.
struct Val {
  Variable var;
  size_t dynamic = 0;
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
         " axis, which Loom cannot");
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

class Importer {
 public:
  Importer(std::span<const uint8_t> bytes, const std::string& name) : file_(name) {
    if (bytes.size() > size_t(INT32_MAX) || !model_.ParseFromArray(bytes.data(), int(bytes.size())))
      throw DataError(file_ + ": not an ONNX model (the bytes are not an ONNX ModelProto)");
    if (!model_.has_graph() || model_.graph().output_size() == 0)
      throw DataError(file_ + ": not an ONNX model (it has no graph with outputs)");
    check_opset();
  }

  Function import() {
    const pb::GraphProto& g = model_.graph();
    for (const pb::TensorProto& t : g.initializer()) constants_[t.name()] = &t;
    for (const pb::ValueInfoProto& in : g.input())
      if (!constants_.count(in.name())) add_input(in);
    for (int i = 0; i < g.node_size(); ++i) {
      node_ = &g.node(i);
      try {
        import_node();
      } catch (const Error& e) {
        throw DataError(detail::concat(file_, ": node ", i, " '", node_->name(), "' (",
                                       node_->op_type(), "): ", e.what()));
      }
    }
    std::vector<Variable> outputs;
    for (const pb::ValueInfoProto& o : g.output()) {
      auto it = values_.find(o.name());
      if (it == values_.end())
        throw DataError(file_ + ": the graph output '" + o.name() + "' is computed by no node");
      outputs.push_back(it->second.var);
    }
    return outputs.size() == 1 ? Function(outputs[0]) : combine(outputs);
  }

 private:
  // How one op is imported: the Loom value of the node's first output.
  using Importing = std::function<Val(Importer&)>;

  void check_opset() {
    bool found = false;
    for (const pb::OperatorSetIdProto& o : model_.opset_import()) {
      if (!o.domain().empty() && o.domain() != "ai.onnx") continue;  // used by no node Loom reads
      if (o.version() < kOpset || o.version() > kNewestOpset)
        throw DataError(detail::concat(file_, ": ONNX opset ", o.version(), " is not supported (",
                                       "Loom reads opsets ", kOpset, " to ", kNewestOpset, ")"));
      found = true;
    }
    if (!found) throw DataError(file_ + ": not an ONNX model (it imports no opset of ONNX's ops)");
  }

  void add_input(const pb::ValueInfoProto& in) {
    const std::string where = file_ + ": graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) throw DataError(where + " is not a tensor");
    const pb::TypeProto::Tensor& t = in.type().tensor_type();
    if (!t.has_shape() || t.shape().dim_size() == 0)
      throw DataError(where + " has no shape; Loom needs [batch, sample axes...]");
    // A vector of int32: the sequences' lengths for the recurrent ops, which Loom's sequences
    // carry themselves.
    if (t.elem_type() == pb::TensorProto::INT32 && t.shape().dim_size() == 1) {
      lengths_.insert(in.name());
      return;
    }
    const DataType dtype = data_type(t.elem_type(), where);
    auto fixed = [&](int k) {
      const pb::TensorShapeProto::Dimension& d = t.shape().dim(k);
      return d.has_dim_value() && d.dim_value() > 0 && d.dim_value() <= kMaxDim;
    };
    // [T, N, sample...]: a batch of sequences (ONNX's recurrent ops take them so).
    const int dynamic = t.shape().dim_size() >= 2 && !fixed(0) && !fixed(1) ? 2 : 1;
    std::vector<size_t> dims;
    uint64_t total = 1;
    for (int k = dynamic; k < t.shape().dim_size(); ++k) {
      if (!fixed(k))
        throw DataError(detail::concat(where, ": axis ", k, " has no fixed size; Loom needs ",
                                       "the sample shape (every axis but the batch axis 0, or ",
                                       "the sequence and batch axes 0 and 1)"));
      dims.push_back(size_t(t.shape().dim(k).dim_value()));
      total *= uint64_t(dims.back());
      if (total > kMaxElements) throw DataError(where + " has too many elements per sample");
    }
    const InputOptions options{.dtype = dtype, .name = in.name()};
    values_[in.name()] = {dynamic == 2 ? sequence::input_variable(NDShape(dims), options)
                                       : input_variable(NDShape(dims), options),
                          size_t(dynamic)};
  }

  DataType data_type(int32_t t, const std::string& where) {
    if (t == pb::TensorProto::FLOAT) return DataType::Float32;
    if (t == pb::TensorProto::DOUBLE) return DataType::Float64;
    throw DataError(detail::concat(where, " has ONNX element type ", t,
                                   "; Loom reads float (1) and double (11)"));
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
    const NDArrayView data =
        data_type(t.data_type(), "tensor '" + name + "'") == DataType::Float32
            ? NDArrayView::from_vector(want, elements<float>(t, t.float_data()))
            : NDArrayView::from_vector(want, elements<double>(t, t.double_data()));
    Variable v = is_constant ? Variable(constant(data, name)) : Variable(parameter(data, name));
    return leaves_[key] = v;
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
    if (constants_.count(name)) return {leaf(name, false), 0};
    if (recurrences_.count(name))
      fail("input '", name, "' is a recurrent op's output with its direction axis; Loom imports ",
           "it through a Squeeze of that axis only");
    fail("input '", name, "' is computed by no earlier node and is not an initializer");
  }
  Val batched(size_t i) {
    Val v = in(i);
    if (v.dynamic != 1)
      fail("input ", i, " must have the batch axis and no sequence axis (",
           v.dynamic ? "it is a sequence" : "it is a constant", ")");
    return v;
  }
  // v with another shape (Loom's: behind the batch axis); initializers get the shape directly.
  Val reshaped(const Val& v, const NDShape& shape) {
    if (v.var.shape() == shape) return v;
    if (!v.dynamic && v.var.is_parameter() && v.var.shape().total_size() == shape.total_size())
      return {leaf(v.var.name(), false, shape), 0};
    return {reshape(v.var, shape, out_name()), v.dynamic};
  }
  // Input i, a constant of integers.
  std::vector<int64_t> input_ints(size_t i) {
    if (!has_input(i)) fail("input ", i, " is missing");
    return ints(node_->input(int(i)));
  }
  std::string out_name() const { return node_->output_size() ? node_->output(0) : ""; }

  void import_node() {
    static const std::map<std::string, Importing> ops = {
        {"Identity", [](Importer& m) { return m.in(0); }},
        {"Dropout", [](Importer& m) { return m.in(0); }},  // the identity at inference
        {"MatMul", &Importer::matmul},
        {"Gemm", &Importer::gemm},
        {"Conv", &Importer::conv},
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
    };
    const pb::NodeProto& n = *node_;
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      fail("ops of domain '", n.domain(), "' are not imported");
    if (n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN") {
      recurrent();
      return;
    }
    if (n.op_type() == "Constant") {
      const pb::AttributeProto* value = find_attribute(n, "value");
      if (!value || !value->has_t() || n.output_size() != 1)
        fail("only a Constant with a tensor 'value' is imported");
      constants_[n.output(0)] = &value->t();
      return;
    }
    auto it = ops.find(n.op_type());
    const OpSchema* generic_op = it == ops.end() ? generic_schema(n.op_type()) : nullptr;
    if (it == ops.end() && !generic_op) fail("Loom has no import of the ONNX op ", n.op_type());
    if (n.output_size() < 1) fail("the node has no output");
    values_[n.output(0)] = generic_op ? generic(*generic_op) : it->second(*this);
  }

  using ReduceFn = Function (*)(const Variable&, const std::vector<Axis>&, bool,
                                const std::string&);

  // The op of the table mapped to ONNX's op_type node for node (OnnxMapping::generic), or null.
  static const OpSchema* generic_schema(const std::string& op_type) {
    for (const OpSchema& s : op_table())
      if (s.onnx.generic && op_type == s.onnx.op_type) return &s;
    return nullptr;
  }

  // A node of one op of the table with the same inputs; several broadcast as ONNX does.
  Val generic(const OpSchema& s) {
    if (inputs() < s.min_inputs || inputs() > s.max_inputs)
      fail("Loom imports this op with ", s.min_inputs, " to ", s.max_inputs, " inputs, not ",
           inputs());
    std::vector<Val> args;
    size_t rank = 0, dynamic = 0;
    for (size_t i = 0; i < inputs(); ++i) {
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
    return Val{s.apply(std::move(vars), attributes, out_name()), dynamic};
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

  // A [.., K] times B [K, O]: Loom's times contracts the last axis of A.
  Val matmul() {
    const Val a = in(0), b = in(1);
    if (b.dynamic || b.rank() != 2) fail("Loom imports MatMul with a constant 2-D right operand");
    if (a.var.shape().rank() < 1) fail("the left operand has no axis besides the dynamic axes");
    return {times(a.var, b.var, 1, -1, out_name()), a.dynamic};
  }

  Val gemm() {
    if (float_attribute(*node_, "alpha", 1) != 1 || float_attribute(*node_, "beta", 1) != 1 ||
        int_attribute(*node_, "transA", 0) != 0)
      fail("Loom imports Gemm with alpha 1, beta 1 and transA 0");
    const Val a = in(0), b = in(1);
    if (b.dynamic || b.rank() != 2) fail("Loom imports Gemm with a constant 2-D B");
    if (a.dynamic != 1 || a.var.shape().rank() != 1) fail("A must be [batch, K]");
    const Variable w = int_attribute(*node_, "transB", 0) ? Variable(transpose(b.var)) : b.var;
    Val y{times(a.var, w, 1, -1, has_input(2) ? "" : out_name()), 1};
    if (!has_input(2)) return y;
    const Val c = broadcast(in(2), 2, 1);
    return {plus(y.var, c.var, out_name()), 1};
  }

  // The spatial rank of a window op over x [batch, C, spatial...].
  size_t spatial_rank(const Val& x) {
    if (x.rank() < 3 || x.rank() > 5) fail("Loom imports windows over [N, C, 1 to 3 axes]");
    return x.rank() - 2;
  }
  std::vector<int64_t> pads(size_t rank) {
    const std::string auto_pad = string_attribute(*node_, "auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID")
      fail("auto_pad ", auto_pad, " is not imported (give explicit pads)");
    const auto p = ints_attribute(*node_, "pads", std::vector<int64_t>(2 * rank, 0));
    if (p.size() != 2 * rank) fail("pads ", list(p), " must have ", 2 * rank, " values");
    return p;
  }
  std::vector<size_t> per_axis(const char* name, size_t rank) {
    const auto v = to_sizes(ints_attribute(*node_, name, std::vector<int64_t>(rank, 1)), name);
    if (v.size() != rank) fail(name, " must have ", rank, " values");
    return v;
  }

  Val conv() {
    const Val x = batched(0), w = in(1);
    const size_t rank = spatial_rank(x);
    if (w.dynamic || w.rank() != rank + 2) fail("W must be a constant [O, C / group, kernel...]");
    const auto p = to_sizes(pads(rank), "pads");
    ConvolutionOptions o{.strides = per_axis("strides", rank),
                         .auto_padding = {false},
                         .lower_pad = std::vector<size_t>(p.begin(), p.begin() + long(rank)),
                         .upper_pad = std::vector<size_t>(p.begin() + long(rank), p.end()),
                         .dilation = per_axis("dilations", rank),
                         .groups = size_t(int_attribute(*node_, "group", 1)),
                         .name = out_name()};
    if (has_input(2)) o.bias = in(2).var;
    return {convolution(w.var, x.var, o), 1};
  }

  // Loom pools without padding or with CNTK's automatic padding: the pads must be one of them.
  static Importing pool(PoolingType type) {
    return [type](Importer& m) {
      const Val x = m.batched(0);
      const size_t rank = m.spatial_rank(x);
      const pb::NodeProto& n = *m.node_;
      if (int_attribute(n, "ceil_mode", 0) != 0 || int_attribute(n, "storage_order", 0) != 0)
        fail("ceil_mode and storage_order must be 0");
      if (m.per_axis("dilations", rank) != std::vector<size_t>(rank, 1))
        fail("dilated pooling is not imported");
      const auto kernel = to_sizes(ints_attribute(n, "kernel_shape", {}), "kernel_shape");
      if (kernel.size() != rank) fail("kernel_shape must have ", rank, " values");
      const auto strides = m.per_axis("strides", rank);
      const auto p = m.pads(rank);
      std::vector<bool> auto_pad;
      for (size_t i = 0; i < rank; ++i) {
        const size_t input = x.var.shape()[1 + i];
        const OnnxWindowAxis a = onnx_window_axis(input, kernel[i], strides[i], 1, true, 0, 0);
        const int64_t extent = int64_t(input) + p[i] + p[rank + i] - int64_t(kernel[i]);
        const bool none = p[i] == 0 && p[rank + i] == 0;
        if (!none &&
            (p[i] != a.before || extent < 0 || size_t(extent) / strides[i] + 1 != a.output))
          fail("pads ", list(p), " along spatial axis ", i, ": Loom pools unpadded or padded as ",
               "CNTK's auto padding does (", a.before, " before, ", a.output, " outputs)");
        auto_pad.push_back(!none);
      }
      return Val{pooling(x.var, type, NDShape(kernel),
                         {.strides = strides,
                          .auto_padding = auto_pad,
                          .include_pad = int_attribute(n, "count_include_pad", 0) != 0,
                          .name = m.out_name()}),
                 1};
    };
  }
  static Importing global_pool(PoolingType type) {
    return [type](Importer& m) {
      const Val x = m.batched(0);
      m.spatial_rank(x);
      return Val{global_pooling(x.var, type, m.out_name()), 1};
    };
  }

  Val batch_norm() {
    if (int_attribute(*node_, "training_mode", 0) != 0 || node_->output_size() > 1)
      fail("Loom imports batch normalization in inference form (one output)");
    const Val x = batched(0);
    if (x.rank() < 2) fail("X must be [N, C, ...]");
    const NDShape stats{x.var.shape()[0]};
    auto stat = [&](size_t i, bool is_constant) {
      if (!has_input(i) || tensor_shape(constant_tensor(node_->input(int(i)))) != stats)
        fail("input ", i, " must be an initializer of shape ", stats.to_string());
      return leaf(node_->input(int(i)), is_constant);
    };
    const Variable count = constant(1.0, x.var.dtype(), out_name() + ".count");
    return {batch_normalization(x.var, stat(1, false), stat(2, false), stat(3, true), stat(4, true),
                                count, x.var.shape().rank() > 1, 5000, 0,
                                float_attribute(*node_, "epsilon", 1e-5f), out_name()),
            1};
  }

  static Importing softmax_like(Function (*op)(const Variable&, const Axis&, const std::string&)) {
    return [op](Importer& m) {
      const Val x = m.in(0);
      return Val{op(x.var, static_axis(x, int_attribute(*m.node_, "axis", -1)), m.out_name()),
                 x.dynamic};
    };
  }

  // The Loom shape for ONNX's target shape of x (0 copies x's dimension, -1 is inferred).
  Val reshape_to(const Val& x, const std::vector<int64_t>& target) {
    std::vector<size_t> dims;
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
    const size_t axis = onnx_axis(int_attribute(*node_, "axis", 1), x.rank() + 1);
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

  Val slice_node() {
    Val x = in(0);
    const auto starts = input_ints(1), ends = input_ints(2);
    std::vector<int64_t> axes(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
    if (has_input(3)) axes = input_ints(3);
    if (has_input(4))
      for (int64_t s : input_ints(4))
        if (s != 1) fail("steps other than 1 are not imported");
    if (ends.size() != starts.size() || axes.size() != starts.size())
      fail("starts, ends and axes differ in length");
    for (size_t i = 0; i < starts.size(); ++i) {
      const Axis axis = static_axis(x, axes[i]);
      const int64_t dim = int64_t(x.var.shape()[size_t(axis.static_index())]);
      auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t(0), dim); };
      const int64_t begin = clamp(starts[i]), end = clamp(ends[i]);
      if (end <= begin)
        fail("the slice [", starts[i], ", ", ends[i], ") of axis ", axes[i], " is empty");
      x = {slice(x.var, axis, int(begin), end == dim ? 0 : int(end), out_name()), x.dynamic};
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
            first.dynamic};
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
    return {transpose(x.var, loom_perm, out_name()), x.dynamic};
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
      std::vector<Axis> axes;
      for (int64_t a : given) axes.push_back(static_axis(x, a));
      return Val{op(x.var, axes, int_attribute(n, "keepdims", 1) != 0, m.out_name()), x.dynamic};
    };
  }

  // ---- recurrent ops ----

  // An output of an imported recurrent op: Y [T, 1, N, c] (all steps) or Y_h [1, N, c] (the
  // state after each sequence's last step in the op's direction).
  struct Recurrence {
    Variable steps;  // the fused recurrence
    bool final_state = false;
    bool backwards = false;
  };

  // The float values of a constant input of the node, of the given shape.
  std::vector<double> weights(size_t i, const std::vector<size_t>& shape, const char* what) {
    if (!has_input(i)) fail(what, " (input ", i, ") is missing");
    const pb::TensorProto& t = constant_tensor(node_->input(int(i)));
    if (tensor_shape(t) != NDShape(shape))
      fail(what, " has shape ", tensor_shape(t).to_string(), ", not ", NDShape(shape).to_string());
    if (data_type(t.data_type(), std::string(what)) == DataType::Float64)
      return elements<double>(t, t.double_data());
    const std::vector<float> v = elements<float>(t, t.float_data());
    return {v.begin(), v.end()};
  }

  Variable weight_parameter(const std::vector<double>& v, const NDShape& shape, DataType dtype,
                            const std::string& name) {
    if (dtype == DataType::Float64) return parameter(NDArrayView::from_vector(shape, v), name);
    return parameter(NDArrayView::from_vector(shape, std::vector<float>(v.begin(), v.end())), name);
  }

  // LSTM, GRU and RNN over [T, N, I] in one direction as Loom's fused recurrence: ONNX's gate
  // blocks (LSTM i, o, f, c; GRU z, r, h) in Loom's order, the recurrent bias added to the input
  // bias (Loom has one), zero initial states; the export's inverse (docs/onnx.md).
  void recurrent() {
    const pb::NodeProto& n = *node_;
    const std::string op = n.op_type();
    const bool lstm = op == "LSTM", gru = op == "GRU";
    const Val x = in(0);
    if (x.dynamic != 2 || x.var.shape().rank() != 1)
      fail("X must be a batch of sequences of vectors [T, N, input] (a graph input whose axes ",
           "0 and 1 have no fixed size)");
    const std::string direction = string_attribute(n, "direction", "forward");
    if (direction != "forward" && direction != "reverse")
      fail("direction ", direction, " is not imported (a Loom recurrence runs one way)");
    for (const char* a : {"clip", "activation_alpha", "activation_beta"})
      if (find_attribute(n, a)) fail("the attribute ", a, " is not imported");
    for (const char* a : {"input_forget", "layout", "linear_before_reset"})
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
    if (has_input(4) && !lengths_.count(n.input(4)))
      fail("sequence_lens must be the graph's int32 input of the sequences' lengths");
    if (has_input(5) || has_input(6))
      fail("initial states are not imported (Loom imports recurrent ops that start from zero)");
    const int64_t hidden = int_attribute(n, "hidden_size", 0);
    if (hidden <= 0 || hidden > kMaxDim) fail("hidden_size must be given and positive");
    const size_t c = size_t(hidden), I = x.var.shape()[0], GH = gru ? 2 : G;
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
    FusedRecurrenceInputs r{.cell = lstm  ? "LSTM"
                                    : gru ? "GRU"
                                          : "RNNStep",
                            .activation = act->second,
                            .go_backwards = direction == "reverse",
                            .b = weight_parameter(b, NDShape{G * c}, dtype, name + ".b"),
                            .W = weight_parameter(w, NDShape{I, G * c}, dtype, name + ".W"),
                            .H = weight_parameter(h, NDShape{c, GH * c}, dtype, name + ".H"),
                            .h0 = constant(0.0, dtype, name + ".h0")};
    if (gru) r.H1 = weight_parameter(h1, NDShape{c, c}, dtype, name + ".H1");
    if (lstm) r.c0 = constant(0.0, dtype, name + ".c0");
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
    const Variable steps = fused_recurrence(x.var, r, name);
    if (n.output_size() > 0 && !n.output(0).empty())
      recurrences_[n.output(0)] = {steps, false, r.go_backwards};
    if (n.output_size() > 1 && !n.output(1).empty())
      recurrences_[n.output(1)] = {steps, true, r.go_backwards};
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
  pb::ModelProto model_;
  const pb::NodeProto* node_ = nullptr;
  std::unordered_map<std::string, const pb::TensorProto*> constants_;
  std::unordered_map<std::string, Val> values_;
  std::map<std::tuple<std::string, bool, std::vector<size_t>>, Variable> leaves_;
  std::unordered_set<std::string> lengths_;                  // the int32 inputs of lengths
  std::unordered_map<std::string, Recurrence> recurrences_;  // outputs of recurrent ops
};

}  // namespace

Function load_onnx_from_bytes(std::span<const uint8_t> bytes, const std::string& name) {
  return Importer(bytes, name).import();
}

Function load_model(const std::string& path, ModelFormat format) {
  if (format == ModelFormat::Loom) return load_model(path);
  return load_onnx_from_bytes(read_file_bytes(path), path);
}

}  // namespace loom
