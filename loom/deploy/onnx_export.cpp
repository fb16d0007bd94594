// ONNX export: each primitive of the graph becomes one ONNX node or a few (docs/onnx.md).
#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "loom/core/atomic_file.h"
#include "loom/deploy/onnx.h"
#include "loom/deploy/onnx.pb.h"
#include "loom/deploy/onnx_common.h"
#include "loom/graph/graph_impl.h"
#include "loom/ops/convolution.h"
#include "loom/ops/op_util.h"
#include "loom/ops/pooling.h"
#include "loom/serialize/model_file.h"

namespace loom {

namespace {

using namespace onnx_detail;
namespace pb = onnx_proto;

// A value of the ONNX graph: its name and Loom's shape, which is the sample shape behind a
// batch axis (ONNX's axis 0) or, without one, the whole tensor.
struct Val {
  std::string name;
  bool batch = false;
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
    if (v.batch) s.add_dim()->set_dim_param("N");
    for (size_t d : v.shape.dims()) s.add_dim()->set_dim_value(int64_t(d));
  }

  void add_input(const Variable& a) {
    LOOM_CHECK(!a.is_placeholder(), ArgumentError, "ONNX export: the model has the unbound ",
               "placeholder ", a.describe(), "; call the model on an input first (model(x))");
    LOOM_CHECK(!a.has_sequence_axis(), ArgumentError, "ONNX export: the input ", a.describe(),
               " is a sequence; Loom exports models over batches of samples only (no recurrence)");
    Val v{fresh(a.name().empty() ? a.uid() : a.name()), a.has_batch_axis(), a.shape(), a.dtype()};
    set_type(*graph_.add_input(), v);
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
    if (v.batch) dims.insert(dims.begin(), -1);
    const std::string name = fresh(v.name + "_reshaped");
    node("Reshape", {v.name, ints(dims)}, name);
    return name;
  }

  // How one op is exported: the ONNX value of its output (out has the output's type).
  using Exporting = std::function<Val(Exporter&, const FunctionImpl&, const Val&)>;

  void export_function(const FunctionImpl& f) {
    static const std::map<std::string, Exporting> ops = {
        {"Plus", binary("Add")},
        {"Minus", binary("Sub")},
        {"ElementTimes", binary("Mul")},
        {"ElementDivide", binary("Div")},
        {"ElementMax", binary("Max")},
        {"ElementMin", binary("Min")},
        {"Negate", unary("Neg")},
        {"Tanh", unary("Tanh")},
        {"Sigmoid", unary("Sigmoid")},
        {"ReLU", unary("Relu")},
        {"Exp", unary("Exp")},
        {"Log", unary("Log")},
        {"Sqrt", unary("Sqrt")},
        {"Abs", unary("Abs")},
        {"Square", &Exporter::square},
        {"Times", &Exporter::times},
        {"Convolution", &Exporter::convolution},
        {"Pooling", &Exporter::pooling},
        {"BatchNormalization", &Exporter::batch_normalization},
        {"Dropout",
         [](Exporter& e, const FunctionImpl& f, const Val&) {
           return e.value(f.inputs[0]);  // the identity at inference
         }},
        {"Softmax", softmax("Softmax")},
        {"LogSoftmax", softmax("LogSoftmax")},
        {"Reshape",
         [](Exporter& e, const FunctionImpl& f, const Val& out) {
           return e.named(out, e.reshaped(e.value(f.inputs[0]), out.shape));
         }},
        {"Slice", &Exporter::slice},
        {"Splice", &Exporter::splice},
        {"Transpose", &Exporter::transpose},
        {"ReduceSum", reduce("ReduceSum")},
        {"ReduceMean", reduce("ReduceMean")},
        {"ReduceMax", reduce("ReduceMax")},
    };
    const std::string op = f.op->name();
    auto it = ops.find(op);
    LOOM_CHECK(it != ops.end(), ArgumentError, "ONNX export: the op ", op, " of ",
               function_label(f), " has no ONNX mapping (docs/onnx.md lists the ops Loom exports)");
    const VariableImpl& o = *f.outputs[0];
    LOOM_CHECK(o.dynamic_axes.size() <= 1, ArgumentError, "ONNX export: ", function_label(f), " (",
               op, ") gives a sequence; Loom exports models over batches of samples only");
    Val out{"", !o.dynamic_axes.empty(), o.shape, o.dtype};
    values_[&o] = it->second(*this, f, out);
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
  static Exporting unary(const char* op);
  static Exporting binary(const char* op);
  static Exporting softmax(const char* op);
  static Exporting reduce(const char* op);

  Val square(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    return single(f, out, "Mul", {use(x), use(x)});
  }

  // times(x, W): x [A..., K...] as [A..., K] (one axis) times W as [K, O], then [A..., O...].
  Val times(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]), W = value(f.inputs[1]);
    LOOM_CHECK(!W.batch, ArgumentError, "ONNX export: ", function_label(f),
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
    std::vector<int64_t> before, after;
    for (size_t i = 0; i < rank; ++i) {
      const OnnxWindowAxis a = onnx_window_axis(input[i], kernel[i], strides[i], dilation[i],
                                                auto_pad[i] != 0, lower[i], upper[i]);
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
    LOOM_CHECK(x.batch, ArgumentError, "ONNX export: ", function_label(f), " (", f.op->name(),
               ") has an operand without a batch axis, which its ONNX op needs");
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

  Val slice(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const size_t axis =
        op_util::static_axis_index(f.attributes.get<int64_t>("axis"), x.shape.rank());
    const int64_t dim = int64_t(x.shape[axis]), b = f.attributes.get<int64_t>("begin");
    const int64_t begin = b < 0 ? b + dim : b, end = begin + int64_t(out.shape[axis]);
    return single(f, out, "Slice",
                  {use(x), ints({begin}), ints({end}), ints({int64_t(axis + x.batch)})});
  }

  Val splice(const FunctionImpl& f, const Val& out) {
    std::vector<std::string> inputs;
    for (const Variable& v : f.inputs) inputs.push_back(use(value(v)));
    const size_t axis =
        op_util::static_axis_index(f.attributes.get<int64_t>("axis"), out.shape.rank());
    const std::string name = output_name(f);
    set_int(node("Concat", inputs, name), "axis", int64_t(axis + out.batch));
    return named(out, name);
  }

  Val transpose(const FunctionImpl& f, const Val& out) {
    const Val x = value(f.inputs[0]);
    const DictionaryVector& given = f.attributes.get<DictionaryVector>("perm");
    const size_t rank = x.shape.rank();
    std::vector<int64_t> perm;
    if (x.batch) perm.push_back(0);
    for (size_t k = 0; k < rank; ++k)
      perm.push_back(int64_t(given.empty()
                                 ? rank - 1 - k
                                 : op_util::static_axis_index(given[k].get<int64_t>(), rank)) +
                     x.batch);
    const std::string name = output_name(f);
    set_ints(node("Transpose", {use(x)}, name), "perm", perm);
    return named(out, name);
  }

  pb::ModelProto model_;
  pb::GraphProto& graph_;
  std::unordered_map<const VariableImpl*, Val> values_;
  std::unordered_map<const VariableImpl*, std::string> leaf_names_;
  std::unordered_set<std::string> names_, produced_, outputs_;
  std::map<std::pair<const VariableImpl*, std::vector<size_t>>, std::string> views_;
  std::map<std::vector<int64_t>, std::string> int_tensors_;
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
    std::vector<std::string> inputs;
    for (const Variable& v : f.inputs) {
      const Val x = e.value(v);
      inputs.push_back(x.batch
                           ? e.reshaped(x, ones_then(out.shape.rank() - x.shape.rank(), x.shape))
                           : e.use(x));
    }
    return e.single(f, out, op, inputs);
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
    set_int(e.node(op, {e.reshaped(x, shape)}, name), "axis", int64_t(axis + x.batch));
    Val y = named(out, name);
    y.shape = shape;
    return named(out, e.reshaped(y, out.shape));
  };
}

Exporter::Exporting Exporter::reduce(const char* op) {
  return [op](Exporter& e, const FunctionImpl& f, const Val& out) {
    const Val x = e.value(f.inputs[0]);
    std::vector<int64_t> axes;
    if (f.attributes.get<bool>("all_static_axes")) {
      for (size_t i = 0; i < x.shape.rank(); ++i) axes.push_back(int64_t(i + x.batch));
    } else {
      for (const DictionaryValue& a : f.attributes.get<DictionaryVector>("axes"))
        axes.push_back(
            int64_t(op_util::static_axis_index(a.get<int64_t>(), x.shape.rank()) + x.batch));
    }
    const bool axes_input = std::string(op) == "ReduceSum";  // an attribute in the others
    std::vector<std::string> inputs{e.use(x)};
    if (axes_input) inputs.push_back(e.ints(axes));
    const std::string name = e.output_name(f);
    pb::NodeProto& n = e.node(op, inputs, name);
    if (!axes_input) set_ints(n, "axes", axes);
    set_int(n, "keepdims", f.attributes.get<bool>("keep_dims"));
    return named(out, name);
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
