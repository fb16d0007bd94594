#include "loom/ops/reduction.h"

#include <algorithm>
#include <optional>

#include "loom/graph/op.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

using kernels::ReduceOp;

// A reduction's attributes come in two forms:
// - CNTK's parameters, as the op table and the C++ builders write them: "axis", an axis attribute
//   (axis_attribute(): a static index, or the name of all static axes, all axes or the batch
//   axis) or a list of them, and "keepdims" (absent for Argmax and Argmin, which keep the axis);
// - the keys ReduceSum, ReduceMean and ReduceMax have in model files from before the op table:
//   "axes" (static indices), "all_static_axes" and "keep_dims". Such files load as they are.
constexpr const char* kAllStaticAxes = "all_static_axes";  // the key of the second form

// Calls visit(v) for each axis attribute v that the attributes name; null for the second form's
// all static axes.
template <class Visit>
void for_each_axis(const Dictionary& a, Visit&& visit) {
  if (a.contains(kAllStaticAxes)) {
    if (a.get<bool>(kAllStaticAxes)) return visit(nullptr);
    for (const DictionaryValue& v : a.get<DictionaryVector>("axes")) visit(&v);
    return;
  }
  const DictionaryValue& axis = a.at("axis");
  if (!axis.is<DictionaryVector>()) return visit(&axis);
  for (const DictionaryValue& v : axis.get<DictionaryVector>()) visit(&v);
}

// Whether an axis attribute names the axis `axis`, compared in place: forward and backward ask
// this of every minibatch, and building an Axis copies its name.
bool names(const DictionaryValue& v, const Axis& axis) {
  return v.is<std::string>() && v.get<std::string>() == axis.name();
}
const Axis& batch_axis() {
  static const Axis batch = Axis::default_batch_axis();
  return batch;
}
const Axis& all_axes() {
  static const Axis all = Axis::all_axes();
  return all;
}

// Calls f(i) for each static axis i, of a sample of rank `rank`, that the attributes reduce, once
// shape inference has checked them; allocates nothing (forward and backward call it).
template <class F>
void for_each_reduced_axis(const Dictionary& a, size_t rank, F&& f) {
  for_each_axis(a, [&](const DictionaryValue* v) {
    if (v && v->is<int64_t>()) return f(op_util::static_axis_index(v->get<int64_t>(), rank));
    if (v && names(*v, batch_axis())) return;
    for (size_t i = 0; i < rank; ++i) f(i);  // all static axes, or all axes
  });
}

class ReduceOpDef : public OpDef {
 public:
  constexpr ReduceOpDef(const char* name, ReduceOp op) : name_(name), op_(op) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    std::vector<bool> reduced(x.shape().rank(), false);
    auto mark = [&](size_t i, int64_t given) {
      LOOM_CHECK(!reduced[i], ShapeError, name_, ": static axis ", given, " of input ",
                 x.type_string(), " is named twice");
      reduced[i] = true;
    };
    bool rows = false;  // the batch axis or all axes: the output has no dynamic axes
    for_each_axis(a, [&](const DictionaryValue* v) {
      if (v && v->is<int64_t>()) {
        const int64_t given = v->get<int64_t>();
        return mark(op_util::static_axis_index(name_, Axis(int(given)), x), given);
      }
      const Axis axis = v ? attribute_axis(*v) : Axis::all_static_axes();
      check_dynamic_axis(axis, x);
      rows = rows || axis.is_batch() || axis.is_all();
      if (axis.is_batch()) return;
      for (size_t i = 0; i < reduced.size(); ++i) mark(i, int64_t(i));
    });
    std::vector<size_t> dims;
    for (size_t i = 0; i < reduced.size(); ++i) {
      if (!reduced[i]) {
        dims.push_back(x.shape()[i]);
      } else if (reduction_keeps_dims(a)) {
        dims.push_back(1);
      }
    }
    return {{NDShape(std::move(dims)), x.dtype(), rows ? std::vector<Axis>{} : x.dynamic_axes(),
             false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary& a,
                                      LayoutCache& layouts) const override {
    return reduction_reduces_rows(a) ? nullptr : OpDef::output_layout(in, a, layouts);
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::reduce(op_, x.shape.dims(), x.ptr<T>(), reduced_dims(call), y.ptr<T>(), false);
    });
  }

  OpTraits traits(const Dictionary&) const override {
    switch (op_) {
      case ReduceOp::Sum:
      case ReduceOp::Mean:
        return {.backward_reads_inputs = InputSet::none(), .backward_reads_output = false};
      case ReduceOp::SumSquare:
      case ReduceOp::L1:
      case ReduceOp::Prod:
        return {.backward_reads_output = false};
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin:
        return {.differentiable = InputSet::none(),
                .backward_reads_inputs = InputSet::none(),
                .backward_reads_output = false};
      case ReduceOp::Max:
      case ReduceOp::Min:
      case ReduceOp::L2:
      case ReduceOp::LogSumExp:
        break;
    }
    return {};
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const Tensor& x = *call.inputs[0];
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::reduce_backward(op_, x.shape.dims(), x.ptr<T>(), reduced_dims(call),
                               call.output->ptr<T>(), call.output_gradient->ptr<T>(), dx.ptr<T>(),
                               accumulate);
    });
  }

 private:
  // The output as the kernels see it: the input's dims with each reduced axis at 1 (the
  // output's own shape may have dropped them; the element order is the same).
  static const kernels::Dims& reduced_dims(const OpCall& call) {
    const Tensor& x = *call.inputs[0];
    const size_t first = x.dynamic() ? 1 : 0, rank = op_util::sample_rank(x);
    kernels::Dims& d = op_util::dims_buffer(0);
    d = x.shape.dims();
    for_each_reduced_axis(call.attributes, rank, [&](size_t i) { d[first + i] = 1; });
    if (first == 1 && reduction_reduces_rows(call.attributes)) d[0] = 1;
    return d;
  }

  // Axes other than static ones: all static axes; the batch axis of a batch (CNTK: "the input
  // must not be a sequence"), where every reduction but argmax/argmin reduces the minibatch's
  // samples; all axes, everything. A sequence axis is for sequence.reduce_sum/reduce_max.
  void check_dynamic_axis(const Axis& axis, const Variable& x) const {
    if (axis.is_all_static()) return;
    const bool arg = op_ == ReduceOp::ArgMax || op_ == ReduceOp::ArgMin;
    LOOM_CHECK((axis.is_batch() || axis.is_all()) && !arg, ArgumentError, name_,
               ": reducing over axis ", axis.to_string(), " is not supported; ", name_,
               arg ? " takes a static axis or all static axes"
                   : " takes static axes, Axis.all_static_axes(), Axis.all_axes() or "
                     "Axis.default_batch_axis() (sequence.reduce_sum and sequence.reduce_max "
                     "reduce a sequence)");
    LOOM_CHECK(!axis.is_batch() || x.dynamic_axes() == default_batch_axes(), ShapeError, name_,
               ": reducing over the batch axis of ", x.describe(),
               x.dynamic_axes().empty()
                   ? ", which has no dynamic axes"
                   : ", a sequence: reduce each sequence first (sequence.reduce_sum)");
  }

  const char* name_;
  ReduceOp op_;
};

const ReduceOpDef kReduceSum("ReduceSum", ReduceOp::Sum);
const ReduceOpDef kReduceMean("ReduceMean", ReduceOp::Mean);
const ReduceOpDef kReduceMax("ReduceMax", ReduceOp::Max);
const ReduceOpDef kReduceMin("ReduceMin", ReduceOp::Min);
const ReduceOpDef kReduceProd("ReduceProd", ReduceOp::Prod);
const ReduceOpDef kReduceLogSumExp("ReduceLogSumExp", ReduceOp::LogSumExp);
const ReduceOpDef kReduceL1("ReduceL1", ReduceOp::L1);
const ReduceOpDef kReduceL2("ReduceL2", ReduceOp::L2);
const ReduceOpDef kReduceSumSquare("ReduceSumSquare", ReduceOp::SumSquare);
const ReduceOpDef kArgmax("Argmax", ReduceOp::ArgMax);
const ReduceOpDef kArgmin("Argmin", ReduceOp::ArgMin);

// A reduction with the op table's attributes; Argmax and Argmin take no keepdims.
Function build_reduction(const ReduceOpDef& op, const Variable& x, const std::vector<Axis>& axes,
                         std::optional<bool> keepdims, const std::string& name) {
  Dictionary a;
  if (axes.size() == 1) {
    a["axis"] = axis_attribute(axes[0]);
  } else {
    DictionaryVector list;
    for (const Axis& axis : axes) list.push_back(axis_attribute(axis));
    a["axis"] = std::move(list);
  }
  if (keepdims) a["keepdims"] = *keepdims;
  return make_primitive(op, {x}, std::move(a), name);
}

// Conformance inputs: samples [3, 4] reduced over all static axes, the last (dropping it) and
// the first (the kernels' two layouts), and a parameter [3, 4] that no sample has.
std::vector<ConformanceCase> reduction_cases(bool keepdims_param) {
  auto attributes = [keepdims_param](int64_t axis, bool keepdims) {
    Dictionary a({{"axis", axis}});
    if (keepdims_param) a["keepdims"] = keepdims;
    return a;
  };
  const ConformanceInput sample{NDShape{3, 4}}, shared{NDShape{3, 4}, false};
  ConformanceCase parameter{{shared}, attributes(0, true)};
  parameter.sequences = false;  // the same graph as over a batch
  std::vector<ConformanceCase> cases = {
      {{sample}}, {{sample}, attributes(-1, false)}, {{sample}, attributes(0, true)}, parameter};
  if (!keepdims_param) return cases;  // argmax and argmin take static axes only
  // Over the minibatch's samples (with a static axis, and all axes at once): one result for the
  // minibatch, so sequences one at a time would give other numbers (reduction_test.cpp has them).
  for (Dictionary a :
       {Dictionary(
            {{"axis", DictionaryVector{axis_attribute(Axis::default_batch_axis()), int64_t{1}}},
             {"keepdims", false}}),
        Dictionary({{"axis", axis_attribute(Axis::all_axes())}, {"keepdims", true}})}) {
    ConformanceCase c{{sample}, std::move(a)};
    c.sequences = false;
    cases.push_back(std::move(c));
  }
  return cases;
}

OpSchema reduction(const ReduceOpDef& op, const char* python, const char* doc, OnnxMapping onnx) {
  return {&op,
          1,
          1,
          python,
          "ops",
          {{"x"},
           {"axis", ParamType::Axis, axis_attribute(Axis::all_static_axes())},
           {"keepdims", ParamType::Bool, true}},
          false,
          doc,
          std::move(onnx),
          reduction_cases(true)};
}

OpSchema arg_reduction(const ReduceOpDef& op, const char* python, const char* onnx_type,
                       const char* doc) {
  return {&op,
          1,
          1,
          python,
          "ops",
          {{"x"}, {"axis", ParamType::Axis, axis_attribute(Axis::all_static_axes())}},
          false,
          doc,
          {onnx_type} /* int64 positions, cast to the input's type */,
          reduction_cases(false)};
}

}  // namespace

std::vector<size_t> reduced_static_axes(const Dictionary& attributes, size_t rank) {
  std::vector<bool> reduced(rank, false);
  for_each_reduced_axis(attributes, rank, [&](size_t i) { reduced[i] = true; });
  std::vector<size_t> axes;
  for (size_t i = 0; i < rank; ++i)
    if (reduced[i]) axes.push_back(i);
  return axes;
}

bool reduction_reduces_rows(const Dictionary& attributes) {
  bool rows = false;
  for_each_axis(attributes, [&](const DictionaryValue* v) {
    rows = rows || (v && (names(*v, batch_axis()) || names(*v, all_axes())));
  });
  return rows;
}

bool reduction_keeps_dims(const Dictionary& attributes) {
  if (attributes.contains(kAllStaticAxes)) return attributes.get<bool>("keep_dims");
  return !attributes.contains("keepdims") || attributes.get<bool>("keepdims");
}

std::vector<OpSchema> reduction_schemas() {
  return {
      reduction(kReduceSum, "reduce_sum", "the sum over axis (None: all static axes)",
                {"ReduceSum", false}),
      reduction(kReduceMean, "reduce_mean", "the mean over axis (None: all static axes)",
                {"ReduceMean", false}),
      reduction(kReduceMax, "reduce_max", "the max over axis (None: all static axes)",
                {"ReduceMax", false}),
      reduction(kReduceMin, "reduce_min", "the min over axis (None: all static axes)",
                {"ReduceMin", false}),
      reduction(kReduceProd, "reduce_prod", "the product over axis (None: all static axes)",
                {"ReduceProd", false}),
      reduction(kReduceLogSumExp, "reduce_log_sum_exp",
                "log(sum(exp(x))) over axis (None: all static axes), computed stably",
                {"ReduceLogSumExp", false}),
      reduction(kReduceL1, "reduce_l1", "sum(|x|) over axis (None: all static axes)",
                {"ReduceL1", false}),
      reduction(kReduceL2, "reduce_l2", "sqrt(sum(x^2)) over axis (None: all static axes)",
                {"ReduceL2", false}),
      reduction(kReduceSumSquare, "reduce_sum_square", "sum(x^2) over axis (None: all static axes)",
                {"ReduceSumSquare", false}),
      arg_reduction(kArgmax, "argmax", "ArgMax",
                    "the position of the first max along axis, kept as extent 1 (None: the flat "
                    "position in the sample)"),
      arg_reduction(kArgmin, "argmin", "ArgMin",
                    "the position of the first min along axis, kept as extent 1 (None: the flat "
                    "position in the sample)"),
  };
}

Function reduce_sum(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceSum, x, {axis}, keep_dims, name);
}
Function reduce_sum(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                    const std::string& name) {
  return build_reduction(kReduceSum, x, axes, keep_dims, name);
}
Function reduce_mean(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceMean, x, {axis}, keep_dims, name);
}
Function reduce_mean(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                     const std::string& name) {
  return build_reduction(kReduceMean, x, axes, keep_dims, name);
}
Function reduce_max(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceMax, x, {axis}, keep_dims, name);
}
Function reduce_max(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                    const std::string& name) {
  return build_reduction(kReduceMax, x, axes, keep_dims, name);
}
Function reduce_min(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceMin, x, {axis}, keep_dims, name);
}
Function reduce_min(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                    const std::string& name) {
  return build_reduction(kReduceMin, x, axes, keep_dims, name);
}
Function reduce_prod(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceProd, x, {axis}, keep_dims, name);
}
Function reduce_prod(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                     const std::string& name) {
  return build_reduction(kReduceProd, x, axes, keep_dims, name);
}
Function reduce_log_sum_exp(const Variable& x, const Axis& axis, bool keep_dims,
                            const std::string& name) {
  return build_reduction(kReduceLogSumExp, x, {axis}, keep_dims, name);
}
Function reduce_log_sum_exp(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                            const std::string& name) {
  return build_reduction(kReduceLogSumExp, x, axes, keep_dims, name);
}
Function reduce_l1(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceL1, x, {axis}, keep_dims, name);
}
Function reduce_l1(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                   const std::string& name) {
  return build_reduction(kReduceL1, x, axes, keep_dims, name);
}
Function reduce_l2(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return build_reduction(kReduceL2, x, {axis}, keep_dims, name);
}
Function reduce_l2(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                   const std::string& name) {
  return build_reduction(kReduceL2, x, axes, keep_dims, name);
}
Function reduce_sum_square(const Variable& x, const Axis& axis, bool keep_dims,
                           const std::string& name) {
  return build_reduction(kReduceSumSquare, x, {axis}, keep_dims, name);
}
Function reduce_sum_square(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                           const std::string& name) {
  return build_reduction(kReduceSumSquare, x, axes, keep_dims, name);
}
Function argmax(const Variable& x, const Axis& axis, const std::string& name) {
  return build_reduction(kArgmax, x, {axis}, std::nullopt, name);
}
Function argmin(const Variable& x, const Axis& axis, const std::string& name) {
  return build_reduction(kArgmin, x, {axis}, std::nullopt, name);
}

}  // namespace loom
