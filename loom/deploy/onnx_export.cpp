// ONNX export: each primitive of the graph becomes one ONNX node or a few (docs/onnx.md).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "loom/core/atomic_file.h"
#include "loom/deploy/onnx.h"
#include "loom/deploy/onnx.pb.h"
#include "loom/deploy/onnx_common.h"
#include "loom/graph/graph_impl.h"
#include "loom/ops/convolution.h"
#include "loom/ops/fused_rnn.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"
#include "loom/ops/pooling.h"
#include "loom/ops/reduction.h"
#include "loom/ops/shape_ops.h"
#include "loom/serialize/model_file.h"

namespace loom {

namespace {

using namespace onnx_detail;
namespace pb = onnx_proto;

// A value of the ONNX graph: its name and Loom's shape, which is the sample shape behind the
// leading dynamic axes (a batch: [N, sample...]; a batch of sequences: [T, N, sample...]) or,
// without them, the whole tensor.
struct Val {
  std::string name;
  size_t dynamic = 0;  // leading dynamic axes: 0, 1 (N) or 2 (T, N)
  NDShape shape;
  DataType dtype = DataType::Float32;
  const VariableImpl* leaf = nullptr;  // a parameter or constant (an initializer)
};

int32_t onnx_type(DataType t) {
  return t == DataType::Float64 ? pb::TensorProto::DOUBLE : pb::TensorProto::FLOAT;
}

std::vector<int64_t> to_int64(const std::vector<size_t>& v) {
  return {v.begin(), v.end()};
}

size_t product(const std::vector<size_t>& v) {
  size_t n = 1;
  for (size_t d : v) n *= d;
  return n;
}

NDShape ones_then(size_t ones, const NDShape& s) {
  std::vector<size_t> d(ones, 1);
  d.insert(d.end(), s.dims().begin(), s.dims().end());
  return NDShape(d);
}

void set_int(pb::NodeProto& n, const char* name, int64_t v) {
  pb::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(pb::AttributeProto::INT);
  a.set_i(v);
}
void set_ints(pb::NodeProto& n, const char* name, const std::vector<int64_t>& v) {
  pb::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(pb::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}
void set_string(pb::NodeProto& n, const char* name, const std::string& v) {
  pb::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(pb::AttributeProto::STRING);
  a.set_s(v);
}
void set_float(pb::NodeProto& n, const char* name, float v) {
  pb::AttributeProto& a = *n.add_attribute();
  a.set_name(name);
  a.set_type(pb::AttributeProto::FLOAT);
  a.set_f(v);
}

class Exporter {
 public:
  explicit Exporter(const Function& f) : graph_(*model_.mutable_graph()) {
    model_.set_ir_version(7);  // the IR of opset 13
    model_.set_producer_name("Loom");
    model_.set_producer_version("0.1.0");
    model_.add_opset_import()->set_version(kOpset);
    graph_.set_name(f.name().empty() ? "loom" : f.name());
    const std::vector<Parameter> params = f.parameters();
    const std::vector<std::string> paths = f.parameter_paths();
    for (size_t i = 0; i < params.size(); ++i) leaf_names_[params[i].impl().get()] = paths[i];
    for (const Variable& a : f.arguments()) add_input(a);
    for (const auto& fn : topological_order(f.outputs())) export_function(*fn);
    for (const Variable& o : f.outputs()) add_output(o);
  }
  const pb::ModelProto& model() const { return model_; }

 private:
  // A new name of the graph, `want` if it is free.
  std::string fresh(const std::string& want) {
    std::string name = want.empty() ? "value" : want;
    for (size_t k = 1; names_.count(name); ++k) name = want + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  void set_type(pb::ValueInfoProto& info, const Val& v) {
    info.set_name(v.name);
    pb::TypeProto::Tensor& t = *info.mutable_type()->mutable_tensor_type();
    t.set_elem_type(onnx_type(v.dtype));
    pb::TensorShapeProto& s = *t.mutable_shape();
    if (v.dynamic == 2) s.add_dim()->set_dim_param("T");
    if (v.dynamic >= 1) s.add_dim()->set_dim_param("N");
    for (size_t d : v.shape.dims()) s.add_dim()->set_dim_value(int64_t(d));
  }

  void add_input(const Variable& a) {
    LOOM_CHECK(!a.is_placeholder(), ArgumentError, "ONNX export: the model has the unbound ",
               "placeholder ", a.describe(), "; call the model on an input first (model(x))");
    Val v{fresh(a.name().empty() ? a.uid() : a.name()), a.dynamic_axes().size(), a.shape(),
          a.dtype()};
    set_type(*graph_.add_input(), v);
    if (a.has_sequence_axis()) add_sequence_lengths(a);
    values_[a.impl().get()] = v;
  }

  void add_output(const Variable& o) {
    Val v = value(o);
    // A graph output is a node's own output: an input, an initializer or a value already given
    // as an output gets a node of its own.
    if (v.leaf || !produced_.count(v.name) || outputs_.count(v.name)) {
      const std::string name = fresh(o.name().empty() ? o.uid() : o.name());
      node("Identity", {use(v)}, name);
      v.name = name;
    }
    outputs_.insert(v.name);
    set_type(*graph_.add_output(), v);
  }

  Val value(const Variable& v) {
    auto it = values_.find(v.impl().get());
    if (it != values_.end()) return it->second;
    // Only parameters and constants are met here for the first time (inputs came first and
    // outputs are produced before they are used).
    LOOM_CHECK(v.is_parameter() || v.is_constant(), StateError, "ONNX export: ", v.describe(),
               " is used before it is computed");
    auto named = leaf_names_.find(v.impl().get());
    Val val{fresh(named != leaf_names_.end() ? named->second
                  : v.name().empty()         ? v.uid()
                                             : v.name()),
            false, v.shape(), v.dtype(), v.impl().get()};
    return values_[v.impl().get()] = val;  // its initializers are written where used (reshaped)
  }

  void add_initializer(const std::string& name, const NDArrayView& data, const NDShape& shape) {
    pb::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx_type(data.dtype()));
    for (size_t d : shape.dims()) t.add_dims(int64_t(d));
    const NDArrayView dense = data.is_sparse() ? data.to_dense() : data;
    t.set_raw_data(dense.raw_data(), dense.size() * size_of(dense.dtype()));
  }

  // An int64 initializer (shapes, axes, slice bounds), one per distinct value.
  std::string ints(const std::vector<int64_t>& v) {
    auto it = int_tensors_.find(v);
    if (it != int_tensors_.end()) return it->second;
    std::string name = "ints";
    for (int64_t x : v) name += "_" + (x < 0 ? "m" + std::to_string(-x) : std::to_string(x));
    name = fresh(name);
    pb::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(pb::TensorProto::INT64);
    t.add_dims(int64_t(v.size()));
    for (int64_t x : v) t.add_int64_data(x);
    return int_tensors_[v] = name;
  }

  pb::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                      const std::string& output) {
    pb::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(output);
    for (const std::string& i : inputs) n.add_input(i);
    n.add_output(output);
    produced_.insert(output);
    return n;
  }

  // The name of v as a node's input.
  std::string use(const Val& v) { return reshaped(v, v.shape); }

  // v with another Loom shape of the same elements: a parameter or constant as an initializer
  // of that shape (no node: not every runtime folds constants), anything else through a
  // Reshape node.
  std::string reshaped(const Val& v, const NDShape& shape) {
    if (v.leaf) {
      auto it = views_.find({v.leaf, shape.dims()});
      if (it != views_.end()) return it->second;
      // The first initializer of a leaf has its name, others (rarely needed) a suffix.
      const bool first = std::none_of(views_.begin(), views_.end(),
                                      [&](const auto& view) { return view.first.first == v.leaf; });
      const std::string name =
          first ? v.name : fresh(v.name + "_" + std::to_string(shape.rank()) + "d");
      add_initializer(name, *v.leaf->value, shape);
      return views_[{v.leaf, shape.dims()}] = name;
    }
    if (shape == v.shape) return v.name;
    std::vector<int64_t> dims = to_int64(shape.dims());
    dims.insert(dims.begin(), v.dynamic, 0);  // 0: the input's own extent
    const std::string name = fresh(v.name + "_reshaped");
    node("Reshape", {v.name, ints(dims)}, name);
    return name;
  }

  // How one op is exported: the ONNX value of its output (out has the output's type).
  using Exporting = std::function<Val(Exporter&, const FunctionImpl&, const Val&)>;

  void export_function(const FunctionImpl& f) {
    static const std::map<std::string, Exporting> ops = {
        {"Square", &Exporter::square},
        {"Times", &Exporter::times},
        {"Convolution", &Exporter::convolution},
        {"ConvolutionTranspose", &Exporter::convolution_transpose},
        {"Pooling", &Exporter::pooling},
        {"Unpooling", &Exporter::unpooling},
        {"BatchNormalization", &Exporter::batch_normalization},
        {"LayerNormalization", &Exporter::layer_normalization},
        {"Dropout", identity},  // at inference
        {"StopGradient", identity},
        {"Softmax", softmax("Softmax")},
        {"LogSoftmax", softmax("LogSoftmax")},
        {"Reshape", reshape},
        {"Squeeze", reshape},
        {"ExpandDims", reshape},
        {"Flatten", reshape},
        {"TransposeAxes", &Exporter::swap_axes},
        {"Pad", &Exporter::pad},
        {"Cast",
         [](Exporter& e, const FunctionImpl& f, const Val& out) {
           return e.cast_to(out, e.output_name(f), e.use(e.value(f.inputs[0])));
         }},
        {"CustomProxyOp",  // a node of the type it stands for, over its operands
         [](Exporter& e, const FunctionImpl& f, const Val& out) {
           std::vector<std::string> inputs;
           for (const Variable& in : f.inputs) inputs.push_back(e.use(e.value(in)));
           return e.single(f, out, f.attributes.get<std::string>("custom_op"), inputs);
         }},
        {"Slice", &Exporter::slice},
        {"Splice", &Exporter::splice},
        {"Transpose", &Exporter::transpose},
        {"ReduceSum", reduce("ReduceSum")},
        {"ReduceMean", reduce("ReduceMean")},
        {"ReduceMax", reduce("ReduceMax")},
        {"ReduceMin", reduce("ReduceMin")},
        {"ReduceProd", reduce("ReduceProd")},
        {"ReduceLogSumExp", reduce("ReduceLogSumExp")},
        {"ReduceL1", reduce("ReduceL1")},
        {"ReduceL2", reduce("ReduceL2")},
        {"ReduceSumSquare", reduce("ReduceSumSquare")},
        {"FusedRecurrence", &Exporter::fused_recurrence},
        {"SequenceLast", &Exporter::sequence_end},
        {"SequenceFirst", &Exporter::sequence_end},
        {"Equal", comparison("Equal")},
        {"NotEqual", comparison("Equal", true)},
        {"Less", comparison("Less")},
        {"LessEqual", comparison("LessOrEqual")},
        {"Greater", comparison("Greater")},
        {"GreaterEqual", comparison("GreaterOrEqual")},
        {"And", logic("And")},
        {"Or", logic("Or")},
        {"Xor", logic("Xor")},
        {"Not", logic("Not")},
        {"Select", &Exporter::select},
        {"Clip", &Exporter::clip},
        {"PReLU", &Exporter::prelu},
        {"Round", &Exporter::round},
        {"LogPlus", &Exporter::log_plus},
        {"Softplus", &Exporter::softplus},
        {"Crop", &Exporter::crop},
        {"LocalResponseNormalization", &Exporter::local_response_normalization},
        {"TopK", &Exporter::top_k},
        {"OneHot", &Exporter::one_hot},
        {"Gather", &Exporter::gather},
        {"SquaredError", &Exporter::loss},
        {"CrossEntropyWithSoftmax", &Exporter::loss},
        {"BinaryCrossEntropy", &Exporter::loss},
        {"ClassificationError", &Exporter::loss},
        {"Argmax", arg_reduce("ArgMax")},
        {"Argmin", arg_reduce("ArgMin")},
    };
    const std::string op = f.op->name();
    const VariableImpl& o = *f.outputs[0];
    Val out{"", o.dynamic_axes.size(), o.shape, o.dtype};
    if (const OpSchema* s = find_schema(op); s && s->onnx.generic) {
      values_[&o] = generic(*s, f, out);
      return;
    }
    auto it = ops.find(op);
    LOOM_CHECK(it != ops.end(), ArgumentError, "ONNX export: the op ", op, " of ",
               function_label(f), " has no ONNX mapping (docs/onnx.md lists the ops Loom exports)");
    static const std::set<std::string> batch_only = {
        "Convolution", "Pooling", "Unpooling", "BatchNormalization", "LocalResponseNormalization"};
    values_[&o] =
        batch_only.count(op) ? over_sequences(f, out, it->second) : it->second(*this, f, out);
  }

  // An op whose ONNX op takes [N, ...], over sequences: the sequence and batch axes merged into
  // one around it (a Reshape to [-1, sample...]) and split again after it (a Reshape to
  // Concat(Slice(Shape(x), 0, 2), the output's sample shape)), as the importer reads back.
  Val over_sequences(const FunctionImpl& f, const Val& out, const Exporting& exporting) {
    std::vector<std::pair<const VariableImpl*, Val>> sequences;
    for (const Variable& v : f.inputs) {
      const Val x = value(v);
      if (x.dynamic != 2) continue;
      Val flat = x;
      flat.dynamic = 1;
      flat.name = fresh(x.name + "_flat");
      std::vector<int64_t> dims = to_int64(x.shape.dims());
      dims.insert(dims.begin(), -1);
      node("Reshape", {use(x), ints(dims)}, flat.name);
      sequences.emplace_back(v.impl().get(), x);
      values_[v.impl().get()] = flat;
    }
    if (sequences.empty()) return exporting(*this, f, out);
    Val flat_out = out;
    flat_out.dynamic = 1;
    const Val y = exporting(*this, f, flat_out);
    for (const auto& [v, x] : sequences) values_[v] = x;
    const std::string base = y.name, source = sequences.front().second.name;
    const std::string shape = fresh(base + "_shape"), steps = fresh(base + "_steps"),
                      target = fresh(base + "_target"), name = fresh(base + "_sequences");
    node("Shape", {source}, shape);
    node("Slice", {shape, ints({0}), ints({2})}, steps);
    set_int(node("Concat", {steps, ints(to_int64(out.shape.dims()))}, target), "axis", 0);
    node("Reshape", {use(y), target}, name);
    return named(out, name);
  }

  // out named `name` (the node computing it is made).
  static Val named(Val out, const std::string& name) {
    out.name = name;
    return out;
  }
  std::string output_name(const FunctionImpl& f) {
    const VariableImpl& o = *f.outputs[0];
    return fresh(!f.name.empty() ? f.name : o.name.empty() ? o.uid : o.name);
  }
  Val single(const FunctionImpl& f, const Val& out, const std::string& op,
             const std::vector<std::string>& inputs) {
    const std::string name = output_name(f);
    node(op, inputs, name);
    return named(out, name);
  }
  // An op the table maps to one ONNX node of the same inputs (OnnxMapping::generic).
  Val generic(const OpSchema& s, const FunctionImpl& f, const Val& out) {
    const Val v = (f.inputs.size() == 1 ? unary : binary)(s.onnx.op_type)(*this, f, out);
    pb::NodeProto& n = *graph_.mutable_node(graph_.node_size() - 1);
    for (const OnnxAttribute& a : s.onnx.attributes)
      set_float(n, a.onnx, float(f.attributes.get<double>(a.key)));
    return v;
  }
  static Val identity(Exporter& e, const FunctionImpl& f, const Val&) {
    return e.value(f.inputs[0]);
  }
  // The ops that keep the elements in order (reshape, squeeze, expand_dims, flatten): a Reshape
  // to the output's shape.
  static Val reshape(Exporter& e, const FunctionImpl& f, const Val& out) {
    return named(out, e.reshaped(e.value(f.inputs[0]), out.shape));
  }
  static Exporting unary(const char* op);
  static Exporting binary(const char* op);
  static Exporting comparison(const char* op, bool negated = false);
  static Exporting logic(const char* op);
  static Exporting softmax(const char* op);
  static Exporting reduce(const char* op);

  // A reduction over axes into `name` (ReduceSum takes them as an input, the others as an
  // attribute).
  void reduce_node(const std::string& op, const std::string& x, const std::vector<int64_t>& axes,
                   bool keepdims, const std::string& name) {
    const bool axes_input = op == "ReduceSum";
    pb::NodeProto& n = node(op, axes_input ? std::vector{x, ints(axes)} : std::vector{x}, name);
    if (!axes_input) set_ints(n, "axes", axes);
    set_int(n, "keepdims", keepdims);
  }

  // The scalar initializer v of type dtype, one per value and type.
  std::string scalar(double v, DataType dtype) {
    auto it = scalars_.find({v, dtype});
    if (it != scalars_.end()) return it->second;
    return scalars_[{v, dtype}] = add_tensor("scalar", dtype, {v}, {});
  }

  // The inputs of f, those with dynamic axes reshaped to the output's rank: Loom broadcasts the
  // sample shapes right-aligned behind the dynamic axes, ONNX whole tensors.
  std::vector<std::string> broadcast_inputs(const FunctionImpl& f, const Val& out) {
    std::vector<std::string> inputs;
    for (const Variable& v : f.inputs) {
      const Val x = value(v);
      inputs.push_back(
          x.dynamic ? reshaped(x, ones_then(out.shape.rank() - x.shape.rank(), x.shape)) : use(x));
    }
    return inputs;
  }

  // out as the Cast named `base` of `from` (ONNX's booleans, Loom's 0/1, or int64 positions)
  // to out's type.
  Val cast_to(const Val& out, const std::string& base, const std::string& from) {
    set_int(node("Cast", {from}, base), "to", onnx_type(out.dtype));
    return named(out, base);
  }

  // argmax/argmin along one static axis, or over all of them (the sample flattened), keeping
  // the axis: ONNX's int64 positions cast to out's type.
  static Exporting arg_reduce(const char* op) {
    return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
      const Val x = e.value(f.inputs[0]);
      const std::vector<size_t> axes = reduced_static_axes(f.attributes, x.shape.rank());
      const bool flat = axes.size() != 1;
      const NDShape shape = flat ? NDShape{x.shape.total_size()} : x.shape;
      const std::string base = e.output_name(f), positions = e.fresh(base + "_positions"),
                        cast = flat ? e.fresh(base + "_flat") : base;
      pb::NodeProto& n = e.node(op, {e.reshaped(x, shape)}, positions);
      set_int(n, "axis", int64_t((flat ? 0 : axes[0]) + x.dynamic));
      set_int(n, "keepdims", 1);
      Val y = e.cast_to(out, cast, positions);
      y.shape = flat ? NDShape{1} : out.shape;
      return named(out, e.reshaped(y, out.shape));
    };
  }

  // element_select(flag, a, b): Where over the flag cast to bool (flag != 0).
  Val select(const FunctionImpl& f, const Val& out) {
    std::vector<std::string> inputs = broadcast_inputs(f, out);
    const std::string base = output_name(f), flag = fresh(base + "_flag");
    set_int(node("Cast", {inputs[0]}, flag), "to", pb::TensorProto::BOOL);
    inputs[0] = flag;
    node("Where", inputs, base);
    return named(out, base);
  }

  // clip(x, min, max) with bounds of any shape as Max(Min(x, max), min) (ONNX's Clip takes
  // scalar bounds).
  Val clip(const FunctionImpl& f, const Val& out) {
    const std::vector<std::string> inputs = broadcast_inputs(f, out);
    const std::string base = output_name(f), below = fresh(base + "_below_max");
    node("Min", {inputs[0], inputs[2]}, below);
    node("Max", {below, inputs[1]}, base);
    return named(out, base);
  }

  // param_relu(alpha, x): ONNX's PRelu(x, alpha), which broadcasts the slope to x only; where
  // x is broadcast to the slope's shape, Where(x >= 0, x, alpha x).
  Val prelu(const FunctionImpl& f, const Val& out) {
    const std::vector<std::string> inputs = broadcast_inputs(f, out);  // alpha, x
    const Val x = value(f.inputs[1]);
    if (x.dynamic == out.dynamic && x.shape.total_size() == out.shape.total_size())
      return single(f, out, "PRelu", {inputs[1], inputs[0]});
    const std::string base = output_name(f), positive = fresh(base + "_positive"),
                      scaled = fresh(base + "_scaled");
    node("GreaterOrEqual", {inputs[1], scalar(0, out.dtype)}, positive);
    node("Mul", inputs, scaled);
    node("Where", {positive, inputs[1], scaled}, base);
    return named(out, base);
  }

  // CNTK's round takes halves up: Floor(x + 0.5) (ONNX's Round takes them to even).
  Val round(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const std::string base = output_name(f), shifted = fresh(base + "_plus_half");
    node("Add", {use(x), scalar(0.5, x.dtype)}, shifted);
    node("Floor", {shifted}, base);
    return named(out, base);
  }

  // log(e^a + e^b) = max(a, b) + Softplus(-|a - b|), which does not overflow.
  Val log_plus(const FunctionImpl& f, const Val& out) {
    const std::vector<std::string> inputs = broadcast_inputs(f, out);
    const std::string base = output_name(f), difference = fresh(base + "_difference"),
                      distance = fresh(base + "_distance"), negated = fresh(base + "_negated"),
                      excess = fresh(base + "_excess"), larger = fresh(base + "_max");
    node("Sub", inputs, difference);
    node("Abs", {difference}, distance);
    node("Neg", {distance}, negated);
    node("Softplus", {negated}, excess);
    node("Max", inputs, larger);
    node("Add", {larger, excess}, base);
    return named(out, base);
  }

  // softplus with CNTK's steepness s: Softplus(s x) / s (ONNX's Softplus has s = 1).
  Val softplus(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const double s = f.attributes.get<double>("steepness");
    if (s == 1) return single(f, out, "Softplus", {use(x)});
    const std::string base = output_name(f), scaled = fresh(base + "_scaled"),
                      unscaled = fresh(base + "_unscaled");
    node("Mul", {use(x), scalar(s, x.dtype)}, scaled);
    node("Softplus", {scaled}, unscaled);
    node("Div", {unscaled, scalar(s, x.dtype)}, base);
    return named(out, base);
  }

  Val square(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    return single(f, out, "Mul", {use(x), use(x)});
  }

  // times(x, W): x [A..., K...] as [A..., K] (one axis) times W as [K, O], then [A..., O...].
  Val times(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]), W = value(f.inputs[1]);
    LOOM_CHECK(W.dynamic == 0, ArgumentError, "ONNX export: ", function_label(f),
               " (Times) has a "
               "right operand with a batch axis");
    const size_t output_rank = size_t(f.attributes.get<int64_t>("output_rank"));
    const size_t k_rank = W.shape.rank() - output_rank;
    const NDShape A = x.shape.sub_shape(0, x.shape.rank() - k_rank);
    const size_t K = product(W.shape.sub_shape(0, k_rank).dims()),
                 O = product(W.shape.sub_shape(k_rank).dims());
    const std::string product_name = output_name(f);
    node("MatMul", {reshaped(x, A.append(NDShape{K})), reshaped(W, NDShape{K, O})}, product_name);
    Val y = named(out, product_name);
    y.shape = A.append(NDShape{O});
    return named(out, reshaped(y, out.shape));
  }

  // The per-axis window options of a convolution or pooling, for n spatial axes.
  static std::vector<size_t> per_axis(const FunctionImpl& f, const char* option, size_t n) {
    return conv_detail::per_axis(f.op->name(), option, f.attributes.get<NDShape>(option).dims(), n);
  }
  // Sets kernel_shape, strides, pads (and dilations where given) of a window node over the
  // spatial extents `input`, checking that ONNX computes Loom's output extents.
  void set_window(pb::NodeProto& n, const FunctionImpl& f, const std::vector<size_t>& input,
                  const std::vector<size_t>& kernel, const std::vector<size_t>& output,
                  bool convolution) {
    const size_t rank = input.size();
    const auto one = std::vector<size_t>(rank, 1), zero = std::vector<size_t>(rank, 0);
    const auto strides = per_axis(f, "strides", rank), auto_pad = per_axis(f, "auto_padding", rank);
    const auto dilation = convolution ? per_axis(f, "dilation", rank) : one,
               lower = convolution ? per_axis(f, "lower_pad", rank) : zero,
               upper = convolution ? per_axis(f, "upper_pad", rank) : zero;
    // Pooling's ceil_out_dim: the last window's overhang is an explicit upper pad (unpooling has
    // none).
    const bool ceil_out_dim = !convolution && f.attributes.contains("ceil_out_dim") &&
                              f.attributes.get<bool>("ceil_out_dim");
    std::vector<int64_t> before, after;
    for (size_t i = 0; i < rank; ++i) {
      const OnnxWindowAxis a = onnx_window_axis(input[i], kernel[i], strides[i], dilation[i],
                                                auto_pad[i] != 0, lower[i], upper[i], ceil_out_dim);
      LOOM_CHECK(a.before >= 0 && a.output == output[i], ArgumentError,
                 "ONNX export: ", function_label(f), " (", f.op->name(),
                 ") places its windows along spatial axis ", i, " (extent ", input[i], ", kernel ",
                 kernel[i], ", stride ", strides[i], ") where ONNX's explicit pads cannot");
      before.push_back(a.before);
      after.push_back(a.after);
    }
    before.insert(before.end(), after.begin(), after.end());
    set_ints(n, "kernel_shape", to_int64(kernel));
    set_ints(n, "strides", to_int64(strides));
    set_ints(n, "pads", before);
    if (convolution) set_ints(n, "dilations", to_int64(dilation));
  }

  void require_batch(const FunctionImpl& f, const Val& x) {
    LOOM_CHECK(x.dynamic == 1, ArgumentError, "ONNX export: ", function_label(f), " (",
               f.op->name(), ") needs an operand with a batch axis (and no sequence axis), ",
               "which its ONNX op takes as [N, ...]");
  }

  // convolution(W, x[, b]): Conv over [N, C, spatial...]; with reduction rank 0 the operand
  // gets a channel axis of 1 and W [O, kernel...] the shape [O, 1, kernel...].
  Val convolution(const FunctionImpl& f, const Val& out) {
    const Val W = value(f.inputs[0]), x = value(f.inputs[1]);
    require_batch(f, x);
    const bool channels = f.attributes.get<int64_t>("reduction_rank") != 0;
    const size_t n = x.shape.rank() - (channels ? 1 : 0);
    const std::vector<size_t> spatial = x.shape.sub_shape(channels ? 1 : 0).dims(),
                              kernel = W.shape.sub_shape(W.shape.rank() - n).dims();
    const size_t O = W.shape[0], C = channels ? W.shape[1] : 1;
    std::vector<std::string> inputs{reshaped(x, channels ? x.shape : ones_then(1, x.shape)),
                                    reshaped(W, NDShape{O, C}.append(NDShape(kernel)))};
    if (f.inputs.size() > 2) inputs.push_back(reshaped(value(f.inputs[2]), NDShape{O}));
    const std::string name = output_name(f);
    pb::NodeProto& conv = node("Conv", inputs, name);
    set_window(conv, f, spatial, kernel, out.shape.sub_shape(1).dims(), true);
    set_int(conv, "group", f.attributes.get<int64_t>("groups"));
    return named(out, name);
  }

  // convolution_transpose(W, x): ConvTranspose over [N, C, spatial...] with W [C, O, kernel...]
  // as it is. Its windows are those of the convolution from the output back to x: their lower
  // pads, and upper pads that give the output's extents (output_padding where the convolution
  // leaves the output's last elements out of every window).
  Val convolution_transpose(const FunctionImpl& f, const Val& out) {
    const Val W = value(f.inputs[0]), x = value(f.inputs[1]);
    require_batch(f, x);
    LOOM_CHECK(f.attributes.get<int64_t>("reduction_rank") == 1 &&
                   f.attributes.get<int64_t>("groups") == 1 && W.shape.rank() == x.shape.rank() + 1,
               ArgumentError, "ONNX export: ", function_label(f),
               " (ConvolutionTranspose) needs a channel axis (reduction rank 1), one group and ",
               "a kernel [C, O, spatial...]");
    const size_t n = x.shape.rank() - 1;
    const std::vector<size_t> input = x.shape.sub_shape(1).dims(),
                              output = out.shape.sub_shape(1).dims(),
                              kernel = W.shape.sub_shape(2).dims();
    const auto strides = per_axis(f, "strides", n), dilation = per_axis(f, "dilation", n),
               auto_pad = per_axis(f, "auto_padding", n), lower = per_axis(f, "lower_pad", n),
               upper = per_axis(f, "upper_pad", n);
    std::vector<int64_t> pads, after, output_padding;
    for (size_t i = 0; i < n; ++i) {
      const kernels::SpatialAxis a =
          conv_detail::window_axis("ONNX", output[i], kernel[i], strides[i], dilation[i],
                                   auto_pad[i] != 0, lower[i], upper[i]);
      // ONNX's output extent: stride (in - 1) + output_padding + extent - pads.
      const int64_t upper_pad =
          int64_t((input[i] - 1) * strides[i] + (kernel[i] - 1) * dilation[i] + 1) -
          int64_t(output[i]) - a.pad_lower;
      LOOM_CHECK(a.pad_lower >= 0 && upper_pad > -int64_t(strides[i]), ArgumentError,
                 "ONNX export: ", function_label(f),
                 " (ConvolutionTranspose) places its windows along spatial axis ", i,
                 " where ONNX's pads cannot");
      pads.push_back(a.pad_lower);
      after.push_back(std::max<int64_t>(upper_pad, 0));
      output_padding.push_back(std::max<int64_t>(-upper_pad, 0));
    }
    pads.insert(pads.end(), after.begin(), after.end());
    const std::string name = output_name(f);
    pb::NodeProto& t = node("ConvTranspose", {use(x), use(W)}, name);
    set_ints(t, "kernel_shape", to_int64(kernel));
    set_ints(t, "strides", to_int64(strides));
    set_ints(t, "dilations", to_int64(dilation));
    set_ints(t, "pads", pads);
    set_ints(t, "output_padding", output_padding);
    return named(out, name);
  }

  // pooling(x): the leading (channel) axes of x as ONNX's one channel axis.
  Val pooling(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    require_batch(f, x);
    const bool global = f.attributes.get<bool>("global");
    const size_t rank = x.shape.rank(), n = global ? (rank > 1 ? rank - 1 : rank)
                                                   : f.attributes.get<NDShape>("window").rank();
    const size_t C = product(x.shape.sub_shape(0, rank - n).dims());
    const NDShape spatial = x.shape.sub_shape(rank - n);
    const bool max = PoolingType(f.attributes.get<int64_t>("pooling_type")) == PoolingType::Max;
    const std::string name = output_name(f);
    pb::NodeProto& pool =
        node(std::string(global ? "Global" : "") + (max ? "MaxPool" : "AveragePool"),
             {reshaped(x, NDShape{C}.append(spatial))}, name);
    if (!global) {
      set_window(pool, f, spatial.dims(), f.attributes.get<NDShape>("window").dims(),
                 out.shape.sub_shape(rank - n).dims(), false);
      if (!max) set_int(pool, "count_include_pad", f.attributes.get<bool>("include_pad"));
    }
    Val y = named(out, name);
    y.shape = NDShape{C}.append(out.shape.sub_shape(rank - n));
    return named(out, reshaped(y, out.shape));
  }

  // unpooling(operand, pooling_input) (max): ONNX's MaxUnpool of the operand at the Indices of a
  // MaxPool of pooling_input with the same windows (as CNTK's exporter writes it), of
  // pooling_input's shape (its Shape); the leading (channel) axes as ONNX's one channel axis.
  // Both place the first maximum of each window (row-major) and, where two windows choose one
  // position, keep the later window's value.
  Val unpooling(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]), input = value(f.inputs[1]);
    require_batch(f, x);
    require_batch(f, input);
    const size_t rank = input.shape.rank(), n = f.attributes.get<NDShape>("window").rank();
    const NDShape channels{product(input.shape.sub_shape(0, rank - n).dims())};
    const NDShape spatial = input.shape.sub_shape(rank - n), pooled = x.shape.sub_shape(rank - n);
    const std::string name = output_name(f), pool_input = reshaped(input, channels.append(spatial)),
                      indices = fresh(name + "_indices"), shape = fresh(name + "_shape");
    pb::NodeProto& pool = node("MaxPool", {pool_input}, fresh(name + "_pooled"));
    pool.add_output(indices);
    produced_.insert(indices);
    set_window(pool, f, spatial.dims(), f.attributes.get<NDShape>("window").dims(), pooled.dims(),
               false);
    node("Shape", {pool_input}, shape);
    pb::NodeProto& unpool =
        node("MaxUnpool", {reshaped(x, channels.append(pooled)), indices, shape}, name);
    *unpool.mutable_attribute() = pool.attribute();
    Val y = named(out, name);
    y.shape = channels.append(spatial);
    return named(out, reshaped(y, out.shape));
  }

  // batch_normalization in inference form; statistics per element become ONNX's per channel
  // of the flattened sample.
  Val batch_normalization(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    require_batch(f, x);
    const bool spatial = f.attributes.get<bool>("spatial") || x.shape.rank() == 1;
    const NDShape stats{spatial ? x.shape[0] : x.shape.total_size()};
    std::vector<std::string> inputs{reshaped(x, spatial ? x.shape : stats)};
    for (size_t i = 1; i < 5; ++i) inputs.push_back(reshaped(value(f.inputs[i]), stats));
    const std::string name = output_name(f);
    set_float(node("BatchNormalization", inputs, name), "epsilon",
              float(f.attributes.get<double>("epsilon")));
    Val y = named(out, name);
    y.shape = spatial ? x.shape : stats;
    return named(out, reshaped(y, out.shape));
  }

  // layer_normalization(x, scale, bias) over each sample's static axes, as CNTK computes it:
  // (x - mean) / (std + epsilon) scale + bias, std the population one (ONNX's
  // LayerNormalization divides by sqrt(var + epsilon)).
  Val layer_normalization(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    std::vector<int64_t> axes;
    for (size_t k = 0; k < x.shape.rank(); ++k) axes.push_back(int64_t(k + x.dynamic));
    const std::string base = output_name(f), mean = fresh(base + "_mean"),
                      centred = fresh(base + "_centred"), squares = fresh(base + "_squares"),
                      variance = fresh(base + "_variance"), deviation = fresh(base + "_std"),
                      divisor = fresh(base + "_divisor"), normalized = fresh(base + "_normalized"),
                      scaled = fresh(base + "_scaled");
    reduce_node("ReduceMean", use(x), axes, true, mean);
    node("Sub", {use(x), mean}, centred);
    node("Mul", {centred, centred}, squares);
    reduce_node("ReduceMean", squares, axes, true, variance);
    node("Sqrt", {variance}, deviation);
    node("Add", {deviation, scalar(f.attributes.get<double>("epsilon"), x.dtype)}, divisor);
    node("Div", {centred, divisor}, normalized);
    node("Mul", {normalized, use(value(f.inputs[1]))}, scaled);
    node("Add", {scaled, use(value(f.inputs[2]))}, base);
    return named(out, base);
  }

  Val slice(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const size_t axis =
        op_util::static_axis_index(f.attributes.get<int64_t>("axis"), x.shape.rank());
    const int64_t dim = int64_t(x.shape[axis]), b = f.attributes.get<int64_t>("begin");
    const int64_t begin = b < 0 ? b + dim : b, end = begin + int64_t(out.shape[axis]);
    return single(f, out, "Slice",
                  {use(x), ints({begin}), ints({end}), ints({int64_t(axis + x.dynamic)})});
  }

  // crop_manual(x, referent): a Slice of x's two trailing axes at the offsets, as long as the
  // referent's height and width (the output's).
  Val crop(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const size_t r = x.shape.rank();
    const int64_t y = f.attributes.get<int64_t>("offset_y"),
                  x0 = f.attributes.get<int64_t>("offset_x");
    return single(f, out, "Slice",
                  {use(x), ints({y, x0}),
                   ints({y + int64_t(out.shape[r - 2]), x0 + int64_t(out.shape[r - 1])}),
                   ints({int64_t(r - 2 + x.dynamic), int64_t(r - 1 + x.dynamic)})});
  }

  // TopK's values and positions (int64 in ONNX, cast to output 1's type): ONNX's TopK, k given
  // as an input, along one static axis.
  Val top_k(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const size_t axis =
        op_util::static_axis_index(f.attributes.get<int64_t>("axis"), x.shape.rank());
    const std::string base = output_name(f), indices = fresh(base + "_positions");
    pb::NodeProto& n = node("TopK", {use(x), ints({f.attributes.get<int64_t>("k")})}, base);
    n.add_output(indices);
    produced_.insert(indices);
    set_int(n, "axis", int64_t(axis + x.dynamic));
    const VariableImpl& p = *f.outputs[1];
    values_[&p] =
        cast_to({"", p.dynamic_axes.size(), p.shape, p.dtype}, fresh(base + "_indices"), indices);
    return named(out, base);
  }

  // The per-sample losses, summed over the sample's static axes (keepdims 0):
  // squared_error as ReduceSumSquare(a - b), cross_entropy_with_softmax as ReduceLogSumExp(z) -
  // ReduceSum(t z), binary_cross_entropy as -ReduceSum(t log p + (1 - t) log(1 - p)), and
  // classification_error (a vector sample) at top 1 as 1 - ReduceSum(t Hardmax(z)), or CNTK's
  // node's Cast(Not(Equal(ArgMax(z), ArgMax(t)))), at top N as 1 - ReduceMax(Cast(Equal(TopK's
  // positions, ArgMax(t)))).
  Val loss(const FunctionImpl& f, const Val& out) {
    const Val a = value(f.inputs[0]), b = value(f.inputs[1]);
    const std::string op = f.op->name();
    LOOM_CHECK(a.shape == b.shape && a.dynamic == b.dynamic, ArgumentError,
               "ONNX export: ", function_label(f), " (", op, ") has operands of types ",
               f.inputs[0].type_string(), " and ", f.inputs[1].type_string(),
               "; the export takes two of one type");
    std::vector<int64_t> axes;
    for (size_t k = 0; k < a.shape.rank(); ++k) axes.push_back(int64_t(k + a.dynamic));
    // cross_entropy_with_softmax and classification_error along an axis of a sample of rank 2 or
    // more: the cross entropy sums along that axis alone; the classification error below.
    std::vector<int64_t> along;
    if (f.attributes.contains("axis") && a.shape.rank() > 1)
      along = {
          int64_t(op_util::static_axis_index(f.attributes.get<int64_t>("axis"), a.shape.rank()) +
                  a.dynamic)};
    if (op == "CrossEntropyWithSoftmax" && !along.empty()) axes = along;
    const std::string base = output_name(f);
    auto step = [&](const std::string& what) { return fresh(base + "_" + what); };
    // A number per sample, reshaped to the output's sample shape where it has one ([1]: CNTK's
    // v1 criteria).
    const std::string result = out.shape.rank() == 0 ? base : step("value");
    auto sum = [&](const char* reduce, const std::string& x, const std::string& name) {
      reduce_node(reduce, x, axes, false, name);
      return name;
    };
    auto binary_node = [&](const char* o, const std::string& x, const std::string& y) {
      const std::string name = step(o);
      node(o, {x, y}, name);
      return name;
    };
    const std::string x = use(a), t = use(b);
    if (op == "SquaredError") {
      sum("ReduceSumSquare", binary_node("Sub", x, t), result);
    } else if (op == "CrossEntropyWithSoftmax") {
      node("Sub",
           {sum("ReduceLogSumExp", x, step("logsumexp")),
            sum("ReduceSum", binary_node("Mul", t, x), step("dot"))},
           result);
    } else if (op == "BinaryCrossEntropy") {
      const std::string one = scalar(1, out.dtype), log_p = step("log"), log_q = step("log1m");
      node("Log", {x}, log_p);
      node("Log", {binary_node("Sub", one, x)}, log_q);
      const std::string terms = binary_node("Add", binary_node("Mul", t, log_p),
                                            binary_node("Mul", binary_node("Sub", one, t), log_q));
      node("Neg", {sum("ReduceSum", terms, step("sum"))}, result);
    } else if (!along.empty()) {
      // classification_error along an axis: the mean over the slices of whether t differs
      // anywhere from (z == the slice's largest z).
      const std::string top = step("max"), predicted = step("predicted"), differ = step("differ"),
                        differs = step("differs"), wrong = step("wrong");
      reduce_node("ReduceMax", x, along, true, top);
      set_int(node("Cast", {binary_node("Equal", x, top)}, predicted), "to", onnx_type(out.dtype));
      node("Not", {binary_node("Equal", t, predicted)}, differ);
      set_int(node("Cast", {differ}, differs), "to", onnx_type(out.dtype));
      reduce_node("ReduceMax", differs, along, true, wrong);
      reduce_node("ReduceMean", wrong, axes, false, result);
    } else {  // ClassificationError
      const int64_t top_n = f.attributes.get<int64_t>("top_n");
      LOOM_CHECK(a.shape.rank() == 1, ArgumentError, "ONNX export: ", function_label(f),
                 " (ClassificationError) is exported for a vector sample, not ",
                 f.inputs[0].type_string());
      const int64_t axis = int64_t(a.dynamic);
      auto argmax = [&](const std::string& v, int64_t keepdims) {
        const std::string name = step("argmax");
        pb::NodeProto& n = node("ArgMax", {v}, name);
        set_int(n, "axis", axis);
        set_int(n, "keepdims", keepdims);
        return name;
      };
      if (top_n > 1) {
        // Whether t's class is among the top_n scores (ties: the earlier entry first, as ONNX's
        // TopK orders them).
        const std::string values = step("top_values"), positions = step("top_positions"),
                          among = step("among"), hit = step("hit");
        pb::NodeProto& top =
            node("TopK", {x, ints({std::min(top_n, int64_t(a.shape[0]))})}, values);
        top.add_output(positions);
        produced_.insert(positions);
        set_int(top, "axis", axis);
        set_int(node("Cast", {binary_node("Equal", positions, argmax(t, 1))}, among), "to",
                onnx_type(out.dtype));
        reduce_node("ReduceMax", among, {axis}, false, hit);
        node("Sub", {scalar(1, out.dtype), hit}, result);
      } else if (f.attributes.contains("argmax_target") &&
                 f.attributes.get<bool>("argmax_target")) {
        const std::string differ = step("differ");
        node("Not", {binary_node("Equal", argmax(x, 0), argmax(t, 0))}, differ);
        set_int(node("Cast", {differ}, result), "to", onnx_type(out.dtype));
      } else {
        const std::string hard = step("hardmax");
        set_int(node("Hardmax", {x}, hard), "axis", axis);
        node("Sub",
             {scalar(1, out.dtype), sum("ReduceSum", binary_node("Mul", t, hard), step("hit"))},
             result);
      }
    }
    if (result != base) {
      std::vector<int64_t> dims = to_int64(out.shape.dims());
      dims.insert(dims.begin(), out.dynamic, 0);
      node("Reshape", {result, ints(dims)}, base);
    }
    return named(out, base);
  }

  // one_hot: ONNX's OneHot with depth num_classes and values (0, 1) of the output's type, its
  // axis counted in the output with the dynamic axes in front.
  Val one_hot(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const size_t axis =
        op_util::static_axis_index(f.attributes.get<int64_t>("axis"), out.shape.rank());
    const std::string name = output_name(f);
    pb::NodeProto& n = node("OneHot",
                            {use(x), ints({f.attributes.get<int64_t>("num_classes")}),
                             add_tensor("off_on", out.dtype, {0, 1}, {2})},
                            name);
    set_int(n, "axis", int64_t(axis + x.dynamic));
    return named(out, name);
  }

  // gather(reference, indices) along static axis a: ONNX's Gather of the indices cast to int64
  // (truncated, as Loom reads them). A batched reference gathers along a + 1; batched indices
  // from a shared reference gather along axis 0 of the reference with axis a moved in front,
  // then a Transpose puts the indices' axes in a's place (the batch axis stays in front). Both
  // batched (each sample's own reference) would need GatherND: an ArgumentError.
  Val gather(const FunctionImpl& f, const Val& out) {
    const Val ref = value(f.inputs[0]), idx = value(f.inputs[1]);
    LOOM_CHECK(!ref.dynamic || !idx.dynamic, ArgumentError, "ONNX export: ", function_label(f),
               " (Gather) gathers from each sample's own reference (both operands have dynamic ",
               "axes), which needs ONNX's GatherND (not written)");
    const Axis given = attribute_axis(f.attributes.at("axis"));
    const size_t r = ref.shape.rank(),
                 a = given.is_all_static() ? 0
                                           : op_util::static_axis_index(given.static_index(), r);
    const std::string base = output_name(f), positions = fresh(base + "_positions");
    set_int(node("Cast", {use(idx)}, positions), "to", pb::TensorProto::INT64);
    if (!idx.dynamic || a == 0) {
      set_int(node("Gather", {use(ref), positions}, base), "axis", int64_t(a + ref.dynamic));
      return named(out, base);
    }
    std::vector<int64_t> front{int64_t(a)};
    for (size_t k = 0; k < r; ++k)
      if (k != a) front.push_back(int64_t(k));
    const std::string moved = fresh(base + "_axis_in_front"), gathered = fresh(base + "_gathered");
    set_ints(node("Transpose", {use(ref)}, moved), "perm", front);
    set_int(node("Gather", {moved, positions}, gathered), "axis", 0);
    // [dynamic (d), indices (m), ref[:a], ref[a+1:]] -> [dynamic, ref[:a], indices, ref[a+1:]].
    const int64_t d = int64_t(idx.dynamic), m = int64_t(idx.shape.rank()),
                  rank = d + m + int64_t(r) - 1;
    std::vector<int64_t> perm;
    for (int64_t k = 0; k < d; ++k) perm.push_back(k);
    for (int64_t k = 0; k < int64_t(a); ++k) perm.push_back(d + m + k);
    for (int64_t k = 0; k < m; ++k) perm.push_back(d + k);
    for (int64_t k = d + m + int64_t(a); k < rank; ++k) perm.push_back(k);
    set_ints(node("Transpose", {gathered}, base), "perm", perm);
    return named(out, base);
  }

  // local_response_normalization: ONNX's LRN over [N, C, ...] with size 2 depth_radius + 1
  // (both divide alpha by the window's size).
  Val local_response_normalization(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    require_batch(f, x);
    const std::string name = output_name(f);
    pb::NodeProto& n = node("LRN", {use(x)}, name);
    set_int(n, "size", 2 * f.attributes.get<int64_t>("depth_radius") + 1);
    for (const char* a : {"alpha", "beta", "bias"})
      set_float(n, a, float(f.attributes.get<double>(a)));
    return named(out, name);
  }

  Val splice(const FunctionImpl& f, const Val& out) {
    std::vector<std::string> inputs;
    for (const Variable& v : f.inputs) inputs.push_back(use(value(v)));
    const size_t axis =
        op_util::static_axis_index(f.attributes.get<int64_t>("axis"), out.shape.rank());
    const std::string name = output_name(f);
    set_int(node("Concat", inputs, name), "axis", int64_t(axis + out.dynamic));
    return named(out, name);
  }

  Val transpose(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const DictionaryVector& given = f.attributes.get<DictionaryVector>("perm");
    const size_t rank = x.shape.rank();
    std::vector<size_t> perm;
    for (size_t k = 0; k < rank; ++k)
      perm.push_back(given.empty() ? rank - 1 - k
                                   : op_util::static_axis_index(given[k].get<int64_t>(), rank));
    return permuted(f, out, x, perm);
  }
  // swapaxes(x, axis1, axis2): the Transpose that exchanges them.
  Val swap_axes(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const size_t rank = x.shape.rank();
    std::vector<size_t> perm(rank);
    for (size_t k = 0; k < rank; ++k) perm[k] = k;
    std::swap(perm[op_util::static_axis_index(f.attributes.get<int64_t>("axis1"), rank)],
              perm[op_util::static_axis_index(f.attributes.get<int64_t>("axis2"), rank)]);
    return permuted(f, out, x, perm);
  }
  // A Transpose of x's static axes by perm (output axis k is input axis perm[k]).
  Val permuted(const FunctionImpl& f, const Val& out, const Val& x,
               const std::vector<size_t>& perm) {
    std::vector<int64_t> all;
    for (size_t k = 0; k < x.dynamic; ++k) all.push_back(int64_t(k));
    for (size_t p : perm) all.push_back(int64_t(p + x.dynamic));
    const std::string name = output_name(f);
    set_ints(node("Transpose", {use(x)}, name), "perm", all);
    return named(out, name);
  }

  // pad(x, pattern): ONNX's Pad (pads and the constant as inputs from opset 11) in constant or
  // reflect mode; ONNX has no symmetric mode (its "edge" repeats the edge element).
  Val pad(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const int64_t mode = f.attributes.get<int64_t>("mode");
    LOOM_CHECK(mode != kSymmetricPad, ArgumentError, "ONNX export: ", function_label(f),
               " (Pad) pads symmetrically (mirroring the edge too), which ONNX's Pad cannot ",
               "(its modes are constant, reflect and edge)");
    const std::vector<int64_t> pattern = attribute_ints(f.attributes.at("pattern"));
    const size_t rank = x.dynamic + x.shape.rank();
    std::vector<int64_t> pads(2 * rank, 0);
    for (size_t k = 0; k < x.shape.rank(); ++k) {
      pads[x.dynamic + k] = pattern[2 * k];
      pads[rank + x.dynamic + k] = pattern[2 * k + 1];
    }
    std::vector<std::string> inputs{use(x), ints(pads)};
    if (mode == kConstantPad)
      inputs.push_back(scalar(f.attributes.get<double>("constant_value"), x.dtype));
    const std::string name = output_name(f);
    set_string(node("Pad", inputs, name), "mode", mode == kConstantPad ? "constant" : "reflect");
    return named(out, name);
  }

  // The graph input `sequence_lens` (int32 [N]: each sequence's length) for the inputs on a
  // sequence axis, which are [T, N, sample...] padded to the longest; one sequence axis only.
  void add_sequence_lengths(const Variable& a) {
    const Axis& axis = a.dynamic_axes()[0].is_batch() ? a.dynamic_axes()[1] : a.dynamic_axes()[0];
    if (!sequence_axis_.empty()) {
      LOOM_CHECK(axis.name() == sequence_axis_, ArgumentError, "ONNX export: the input ",
                 a.describe(), " is a sequence along axis '", axis.name(), "' and another input ",
                 "along '", sequence_axis_, "'; Loom exports models over one sequence axis");
      return;
    }
    sequence_axis_ = axis.name();
    lengths_ = fresh("sequence_lens");
    pb::ValueInfoProto& info = *graph_.add_input();
    info.set_name(lengths_);
    pb::TypeProto::Tensor& t = *info.mutable_type()->mutable_tensor_type();
    t.set_elem_type(pb::TensorProto::INT32);
    t.mutable_shape()->add_dim()->set_dim_param("N");
  }

  // A new initializer holding `data` (float32 or float64 as dtype) of the given dimensions.
  std::string add_tensor(const std::string& want, DataType dtype, const std::vector<double>& data,
                         const std::vector<size_t>& dims) {
    const std::string name = fresh(want);
    pb::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx_type(dtype));
    for (size_t d : dims) t.add_dims(int64_t(d));
    for (double x : data) {
      if (dtype == DataType::Float64)
        t.add_double_data(x);
      else
        t.add_float_data(float(x));
    }
    return name;
  }

  // The value of a parameter or constant of an op that ONNX takes rearranged.
  std::vector<double> leaf_values(const FunctionImpl& f, const Variable& v) {
    LOOM_CHECK(v.is_parameter() || v.is_constant(), ArgumentError,
               "ONNX export: ", function_label(f), " (", f.op->name(), ") takes ", v.describe(),
               " computed by the model; ONNX needs its weights as constants");
    const NDArrayView& data = *value(v).leaf->value;
    if (data.dtype() == DataType::Float64) return data.to_vector<double>();
    const std::vector<float> floats = data.to_vector<float>();
    return {floats.begin(), floats.end()};
  }

  // Recurrence(LSTM | GRU | RNNStep), fused: ONNX's LSTM, GRU or RNN over [T, N, I] in one
  // direction ("reverse" for go_backwards, each sequence reversed within its length). Loom's
  // gate blocks (LSTM i, c~, f, o; GRU z, r, c~) become ONNX's (LSTM i, o, f, c; GRU z, r, h),
  // W [I, G·c] and H [n, G'·c] (with GRU's H1) ONNX's W [1, G·c, I] and R [1, G·c, n], Loom's
  // one bias ONNX's input bias (the recurrent bias zero), the peepholes P [1, 3c] (i, o, f). The
  // initial states are broadcast to [1, N, n]; zero ones are left to ONNX's default. The
  // self-stabilizers' factors of LSTM and RNNStep (constants of the model) fold into the weights
  // they scale: the previous output's into R, the previous cell's into the i and f peepholes,
  // the cell's into o's (GRU's blend carries the stabilized state itself: refused).
  Val fused_recurrence(const FunctionImpl& f, const Val& out) {
    const FusedRecurrenceInputs r = fused_recurrence_inputs(f.inputs, f.attributes);
    const Val x = value(f.inputs[0]);
    LOOM_CHECK(x.dynamic == 2, ArgumentError, "ONNX export: ", function_label(f),
               " (FusedRecurrence) runs over an operand without a sequence axis");
    LOOM_CHECK(!r.P.valid(), ArgumentError, "ONNX export: ", function_label(f), " (", r.cell,
               ") has a projection (cell_shape), which ONNX's ",
               r.cell == "RNNStep" ? "RNN" : r.cell, " op cannot express");
    LOOM_CHECK(r.cell != "GRU" || !r.alpha_dh.valid(), ArgumentError,
               "ONNX export: ", function_label(f),
               " (GRU) has self-stabilization, whose stabilized state enters GRU's blend, which "
               "ONNX's GRU op cannot express");
    auto factor = [&](const Variable& alpha) {
      return alpha.valid() ? stabilizer_factor(leaf_values(f, alpha).at(0), r.steepness) : 1.0;
    };
    const double s_dh = factor(r.alpha_dh), s_dc = factor(r.alpha_dc), s_c = factor(r.alpha_c);
    static const std::map<std::string, std::string> activations = {
        {"Tanh", "Tanh"}, {"Sigmoid", "Sigmoid"}, {"ReLU", "Relu"}};
    auto act = activations.find(r.activation);
    LOOM_CHECK(act != activations.end(), ArgumentError, "ONNX export: ", function_label(f), " (",
               r.cell, ") has no activation, which ONNX's recurrent ops cannot express");
    const bool lstm = r.cell == "LSTM", gru = r.cell == "GRU";
    // ONNX's gate block k is Loom's block order[k].
    const std::vector<size_t> order = lstm  ? std::vector<size_t>{0, 3, 2, 1}
                                      : gru ? std::vector<size_t>{0, 1, 2}
                                            : std::vector<size_t>{0};
    const size_t G = order.size(), I = x.shape.total_size(), n = r.H.shape()[0],
                 c = r.b.shape()[0] / G;
    const DataType dtype = x.dtype;
    const std::vector<double> b = leaf_values(f, r.b), W = leaf_values(f, r.W),
                              H = leaf_values(f, r.H);
    const size_t GH = r.H.shape()[1] / c;  // H's gate blocks (GRU: z, r; H1 has the third)
    std::vector<double> w(G * c * I), rec(G * c * n), bias(2 * G * c, 0.0);
    for (size_t k = 0; k < G; ++k)
      for (size_t j = 0; j < c; ++j) {
        const size_t from = order[k] * c + j, to = k * c + j;
        for (size_t i = 0; i < I; ++i) w[to * I + i] = W[i * G * c + from];
        bias[to] = b[from];
      }
    const std::vector<double> H1 = gru ? leaf_values(f, r.H1) : std::vector<double>{};
    for (size_t k = 0; k < G; ++k)
      for (size_t j = 0; j < c; ++j)
        for (size_t i = 0; i < n; ++i)
          rec[(k * c + j) * n + i] =
              s_dh * (order[k] < GH ? H[i * GH * c + order[k] * c + j] : H1[i * c + j]);
    const std::string base = output_name(f);
    std::vector<std::string> inputs{reshaped(x, NDShape{I}),
                                    add_tensor(base + "_W", dtype, w, {1, G * c, I}),
                                    add_tensor(base + "_R", dtype, rec, {1, G * c, n}),
                                    add_tensor(base + "_B", dtype, bias, {1, 2 * G * c}),
                                    lengths_,
                                    initial_state(f, r.h0, n, x, base + "_h0")};
    if (lstm) inputs.push_back(initial_state(f, r.c0, c, x, base + "_c0"));
    if (r.Ci.valid()) {
      std::vector<double> p;
      for (const auto& [v, scale] : {std::pair{r.Ci, s_dc}, {r.Co, s_c}, {r.Cf, s_dc}})
        for (double e : leaf_values(f, v)) p.push_back(scale * e);
      inputs.push_back(add_tensor(base + "_P", dtype, p, {1, 3 * c}));
    }
    while (inputs.back().empty()) inputs.pop_back();
    const std::string y = fresh(base + "_Y"), y_h = fresh(base + "_Y_h");
    pb::NodeProto& rnn = *graph_.add_node();
    rnn.set_op_type(lstm ? "LSTM" : gru ? "GRU" : "RNN");
    rnn.set_name(fresh(base + "_" + rnn.op_type()));
    for (const std::string& i : inputs) rnn.add_input(i);
    rnn.add_output(y);
    rnn.add_output(y_h);
    produced_.insert(y);
    produced_.insert(y_h);
    set_int(rnn, "hidden_size", int64_t(c));
    set_string(rnn, "direction", r.go_backwards ? "reverse" : "forward");
    pb::AttributeProto& functions = *rnn.add_attribute();
    functions.set_name("activations");
    functions.set_type(pb::AttributeProto::STRINGS);
    if (!r.cell.starts_with("RNN")) functions.add_strings("Sigmoid");
    for (size_t k = 0; k < (lstm ? 2 : 1); ++k) functions.add_strings(act->second);
    // Y [T, 1, N, n] without its direction axis; Y_h [1, N, n] is the state after each
    // sequence's last step in the direction of the recurrence.
    node("Squeeze", {y, ints({1})}, base);
    last_states_[f.outputs[0].get()] = {y_h, r.go_backwards};
    return named(out, base);
  }

  // An initial state [], [1] or [size] as ONNX's [1, N, size] (empty when it is zero).
  std::string initial_state(const FunctionImpl& f, const Variable& s, size_t size, const Val& x,
                            const std::string& want) {
    if (s.is_constant() || s.is_parameter()) {
      const std::vector<double> v = leaf_values(f, s);
      if (std::all_of(v.begin(), v.end(), [](double e) { return e == 0; })) return "";
    }
    const Val state = value(s);
    if (batch_shape_.empty()) {
      const std::string shape = fresh("input_shape");
      node("Shape", {x.name}, shape);
      batch_shape_ = fresh("state_batch");
      pb::NodeProto& n = node("Gather", {shape, ints({1})}, batch_shape_);
      set_int(n, "axis", 0);
    }
    const std::string target = fresh(want + "_shape");
    set_int(node("Concat", {ints({1}), batch_shape_, ints({int64_t(size)})}, target), "axis", 0);
    const std::string name = fresh(want);
    node("Expand", {reshaped(state, NDShape{1, 1, state.shape.total_size()}), target}, name);
    return name;
  }

  // sequence::last and sequence::first: the state ONNX's recurrent op gives for it where the
  // operand is a fused recurrence's output in the matching direction, else the step at index
  // 0 (first) or at each sequence's length - 1 (last).
  Val sequence_end(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    LOOM_CHECK(x.dynamic == 2, ArgumentError, "ONNX export: ", function_label(f), " (",
               f.op->name(), ") takes an operand without a sequence axis");
    const bool last = f.op->name() == std::string("SequenceLast");
    auto state = last_states_.find(f.inputs[0].impl().get());
    if (state != last_states_.end() && state->second.second != last)
      return single(f, out, "Squeeze", {state->second.first, ints({0})});
    if (!last) {
      const std::string step = fresh(output_name(f) + "_step");
      set_int(node("Gather", {use(x), ints({0})}, step), "axis", 0);
      return single(f, out, "Squeeze", {step, ints({0})});
    }
    // Steps [N, T, ...] and each sequence's last index [N, 1], gathered per sequence.
    std::vector<int64_t> perm{1, 0};
    for (size_t k = 0; k < x.shape.rank(); ++k) perm.push_back(int64_t(k + 2));
    const std::string base = output_name(f), steps = fresh(base + "_by_sequence"),
                      lengths = fresh(base + "_lengths"), index = fresh(base + "_index"),
                      indices = fresh(base + "_indices");
    set_ints(node("Transpose", {use(x)}, steps), "perm", perm);
    set_int(node("Cast", {lengths_}, lengths), "to", pb::TensorProto::INT64);
    node("Sub", {lengths, ints({1})}, index);
    node("Unsqueeze", {index, ints({1})}, indices);
    set_int(node("GatherND", {steps, indices}, base), "batch_dims", 1);
    return named(out, base);
  }

  pb::ModelProto model_;
  pb::GraphProto& graph_;
  std::unordered_map<const VariableImpl*, Val> values_;
  std::unordered_map<const VariableImpl*, std::string> leaf_names_;
  std::unordered_set<std::string> names_, produced_, outputs_;
  std::map<std::pair<const VariableImpl*, std::vector<size_t>>, std::string> views_;
  std::map<std::vector<int64_t>, std::string> int_tensors_;
  std::map<std::pair<double, DataType>, std::string> scalars_;
  std::string sequence_axis_;  // the name of the inputs' sequence axis, once one is met
  std::string lengths_;        // the graph input of the sequences' lengths
  std::string batch_shape_;    // [N] as an int64 tensor, once an initial state needs it
  // Of each fused recurrence's output: its op's Y_h and whether it runs backwards.
  std::unordered_map<const VariableImpl*, std::pair<std::string, bool>> last_states_;
};

Exporter::Exporting Exporter::unary(const char* op) {
  return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
    return e.single(f, out, op, {e.use(e.value(f.inputs[0]))});
  };
}

// Loom broadcasts the sample shapes (right-aligned) and every sample alike; ONNX right-aligns
// whole tensors, so a sample of lower rank gets leading axes of 1 behind the batch axis.
Exporter::Exporting Exporter::binary(const char* op) {
  return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
    return e.single(f, out, op, e.broadcast_inputs(f, out));
  };
}

// A comparison: ONNX's boolean (negated: its Not) cast to Loom's 0/1.
Exporter::Exporting Exporter::comparison(const char* op, bool negated) {
  return [op, negated](Exporter& e, const FunctionImpl& f, const Val& out) {
    const std::vector<std::string> inputs = e.broadcast_inputs(f, out);
    const std::string base = e.output_name(f), flags = e.fresh(base + "_bool");
    if (negated) {
      const std::string unnegated = e.fresh(base + "_" + op);
      e.node(op, inputs, unnegated);
      e.node("Not", {unnegated}, flags);
    } else {
      e.node(op, inputs, flags);
    }
    return e.cast_to(out, base, flags);
  };
}

// A logic op over CNTK's truth values (x > 0: Greater than 0), cast back to Loom's 0/1.
Exporter::Exporting Exporter::logic(const char* op) {
  return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
    std::vector<std::string> truths;
    const std::string base = e.output_name(f);
    for (const std::string& x : e.broadcast_inputs(f, out)) {
      truths.push_back(e.fresh(base + "_truth"));
      e.node("Greater", {x, e.scalar(0, out.dtype)}, truths.back());
    }
    const std::string flags = e.fresh(base + "_bool");
    e.node(op, truths, flags);
    return e.cast_to(out, base, flags);
  };
}

// softmax along one axis, or (all_static_axes) over the sample flattened.
Exporter::Exporting Exporter::softmax(const char* op) {
  return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
    Val x = e.value(f.inputs[0]);
    const bool all = f.attributes.get<bool>("all_static_axes");
    const size_t axis =
        all ? 0 : op_util::static_axis_index(f.attributes.get<int64_t>("axis"), x.shape.rank());
    const NDShape shape = all ? NDShape{x.shape.total_size()} : x.shape;
    const std::string name = e.output_name(f);
    set_int(e.node(op, {e.reshaped(x, shape)}, name), "axis", int64_t(axis + x.dynamic));
    Val y = named(out, name);
    y.shape = shape;
    return named(out, e.reshaped(y, out.shape));
  };
}

Exporter::Exporting Exporter::reduce(const char* op) {
  return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
    const Val x = e.value(f.inputs[0]);
    // Over the batch axis (or all axes): ONNX's axis 0 too, the result reshaped to Loom's.
    const bool rows = reduction_reduces_rows(f.attributes),
               keep = reduction_keeps_dims(f.attributes);
    LOOM_CHECK(!rows || x.dynamic == 1, ArgumentError, "ONNX export: ", function_label(f), " (",
               f.op->name(), ") reduces over the batch axis of an operand without one or with a ",
               "sequence axis, which the exporter does not write");
    std::vector<int64_t> axes;
    std::vector<size_t> dims = rows && keep ? std::vector<size_t>{1} : std::vector<size_t>{};
    const std::vector<size_t> reduced = reduced_static_axes(f.attributes, x.shape.rank());
    if (rows) axes.push_back(0);
    for (size_t k = 0; k < x.shape.rank(); ++k) {
      const bool r = std::find(reduced.begin(), reduced.end(), k) != reduced.end();
      if (r) axes.push_back(int64_t(k + x.dynamic));
      if (!r || keep) dims.push_back(r ? 1 : x.shape[k]);
    }
    const std::string name = e.output_name(f), whole = rows ? e.fresh(name + "_whole") : name;
    e.reduce_node(op, e.use(x), axes, keep, whole);
    if (!rows) return named(out, name);
    Val y = named(out, whole);
    y.shape = NDShape(dims);
    return named(out, e.reshaped(y, out.shape));
  };
}

}  // namespace

std::vector<uint8_t> save_onnx_to_bytes(const Function& f) {
  LOOM_CHECK(f.valid(), ArgumentError, "ONNX export: the function is empty");
  const std::string bytes = Exporter(f).model().SerializeAsString();
  return {bytes.begin(), bytes.end()};
}

void save_model(const Function& f, const std::string& path, ModelFormat format) {
  if (format == ModelFormat::Loom) return save_model(f, path);
  write_file_atomically(path, save_onnx_to_bytes(f));
}

}  // namespace loom
