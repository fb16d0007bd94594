#include "loom/ops/indexing.h"

#include "loom/graph/op.h"
#include "loom/kernels/indexing.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

// Attribute keys: CNTK's Python parameter names, as the op table writes them.
constexpr const char* kNumClasses = "num_classes";
constexpr const char* kSparseOutput = "sparse_output";
constexpr const char* kAxis = "axis";
constexpr const char* kK = "k";

size_t product(const NDShape& shape, size_t begin, size_t end) {
  size_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

// The index of the static axis an attribute names, of a shape of rank `rank` (described by
// `what` in errors); all static axes (Python's None) is `none_means`, or a ShapeError when that
// is SIZE_MAX.
size_t axis_index(const char* op, const DictionaryValue& attribute, size_t rank,
                  const std::string& what, size_t none_means = SIZE_MAX) {
  const Axis axis = attribute_axis(attribute);
  if (axis.is_all_static() && none_means != SIZE_MAX) return none_means;
  LOOM_CHECK(axis.is_static(), ShapeError, op, ": axis ", axis.to_string(),
             " is not a static axis; ", op, " works along one static axis of ", what);
  const int64_t r = int64_t(rank), i = axis.static_index();
  LOOM_CHECK(i >= -r && i < r, ShapeError, op, ": axis ", i, " is out of range for ", what,
             " of rank ", r);
  return op_util::static_axis_index(i, rank);
}

// k as the attributes hold it, checked against the extent it selects from.
size_t top_k_count(const Dictionary& a, size_t extent, size_t axis, const Variable& x) {
  const int64_t k = a.get<int64_t>(kK);
  LOOM_CHECK(k >= 1, ArgumentError, "top_k: k must be at least 1, not ", k);
  LOOM_CHECK(size_t(k) <= extent, ArgumentError, "top_k: k ", k, " is larger than the extent ",
             extent, " of axis ", axis, " of input ", x.type_string());
  return size_t(k);
}

// A tensor as [outer, n, inner] around static axis `axis` of its samples, its rows in outer.
struct AroundAxis {
  size_t outer, n, inner;
};
AroundAxis around(const Tensor& t, size_t axis) {
  const size_t first = t.dynamic() ? 1 : 0, rank = op_util::sample_rank(t);
  return {t.rows() * product(t.shape, first, first + axis), t.shape[first + axis],
          product(t.shape, first + axis + 1, first + rank)};
}

class OneHotOp : public OpDef {
 public:
  const char* name() const override { return "OneHot"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    const int64_t n = a.get<int64_t>(kNumClasses);
    LOOM_CHECK(n >= 1, ArgumentError, "one_hot: num_classes must be at least 1, not ", n);
    LOOM_CHECK(!a.get<bool>(kSparseOutput), ArgumentError,
               "one_hot: sparse_output=True is not supported: Loom's ops write dense outputs "
               "(give sparse_output=False; the values are the same)");
    const size_t rank = x.shape().rank();
    const size_t axis = axis_index("one_hot", a.at(kAxis), rank + 1,
                                   "the output (input " + x.type_string() + " and the new axis)");
    std::vector<size_t> dims = x.shape().dims();
    dims.insert(dims.begin() + ptrdiff_t(axis), size_t(n));
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const Tensor& y = *call.output;
    // y is [outer, num_classes, inner] around the new axis; x is [outer, inner].
    const AroundAxis shape = around(y, new_axis(call));
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::one_hot(shape.outer, shape.inner, shape.n, x.ptr<T>(), y.ptr<T>(), "one_hot");
    });
  }

  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(),
            .backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false};
  }

  void backward(OpCall&, size_t, Tensor&, bool) const override {
    throw StateError("OneHot has no gradient");
  }

 private:
  static size_t new_axis(const OpCall& call) {
    const size_t rank = op_util::sample_rank(*call.output);
    const int64_t i = attribute_axis(call.attributes.at(kAxis)).static_index();
    return op_util::static_axis_index(i, rank);
  }
};

class GatherOp : public OpDef {
 public:
  const char* name() const override { return "Gather"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable &ref = in[0], &idx = in[1];
    LOOM_CHECK(ref.shape().rank() >= 1, ShapeError,
               "gather: the reference must have a static axis to gather along, not ",
               ref.type_string());
    const size_t axis = reference_axis(a, ref);
    const std::vector<size_t>& r = ref.shape().dims();
    std::vector<size_t> dims(r.begin(), r.begin() + ptrdiff_t(axis));
    dims.insert(dims.end(), idx.shape().dims().begin(), idx.shape().dims().end());
    dims.insert(dims.end(), r.begin() + ptrdiff_t(axis) + 1, r.end());
    return {{NDShape(std::move(dims)), ref.dtype(), common_dynamic_axes("gather", in), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor &ref = *call.inputs[0], &idx = *call.inputs[1];
    const Tensor& y = *call.output;
    const Layout l = layout(call);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      dispatch(idx.dtype, [&](auto index_zero) {
        using I = decltype(index_zero);
        for (size_t row = 0; row < y.rows(); ++row)
          kernels::gather(l.outer, l.n, l.inner, ref.ptr<T>() + (ref.dynamic() ? row : 0) * l.ref,
                          l.m, idx.ptr<I>() + (idx.dynamic() ? row : 0) * l.m,
                          y.ptr<T>() + row * l.out, "gather");
      });
    });
  }

  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(0),
            .backward_reads_inputs = InputSet::only(1),
            .backward_reads_output = false};
  }

  void backward(OpCall& call, size_t index, Tensor& dref, bool accumulate) const override {
    LOOM_CHECK(index == 0, StateError, "Gather has no gradient for its indices");
    const Tensor& idx = *call.inputs[1];
    const Tensor& dy = *call.output_gradient;
    const Layout l = layout(call);
    dispatch(dy.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (!accumulate) std::fill(dref.ptr<T>(), dref.ptr<T>() + dref.size(), T(0));
      dispatch(idx.dtype, [&](auto index_zero) {
        using I = decltype(index_zero);
        for (size_t row = 0; row < dy.rows(); ++row)
          kernels::gather_backward(l.outer, l.n, l.inner, l.m,
                                   idx.ptr<I>() + (idx.dynamic() ? row : 0) * l.m,
                                   dy.ptr<T>() + row * l.out,
                                   dref.ptr<T>() + (dref.dynamic() ? row : 0) * l.ref, "gather");
      });
    });
  }

 private:
  static size_t reference_axis(const Dictionary& a, const Variable& ref) {
    return axis_index("gather", a.at(kAxis), ref.shape().rank(),
                      "the reference " + ref.type_string(), 0);
  }

  // One sample of each operand: the reference [outer, n, inner] (ref elements), m indices, and
  // the output [outer, m, inner] (out elements).
  struct Layout {
    size_t outer, n, inner, m, ref, out;
  };
  static Layout layout(const OpCall& call) {
    const Tensor &ref = *call.inputs[0], &idx = *call.inputs[1];
    const size_t first = ref.dynamic() ? 1 : 0, rank = op_util::sample_rank(ref);
    const Axis axis = attribute_axis(call.attributes.at(kAxis));
    const size_t a =
        axis.is_all_static() ? 0 : op_util::static_axis_index(axis.static_index(), rank);
    Layout l{product(ref.shape, first, first + a),
             ref.shape[first + a],
             product(ref.shape, first + a + 1, first + rank),
             op_util::sample_size(idx),
             0,
             0};
    l.ref = l.outer * l.n * l.inner;
    l.out = l.outer * l.m * l.inner;
    return l;
  }
};

// CNTK's TopK: the k largest values of x along a static axis in decreasing order (output 0) and
// their positions along it (output 1, in x's dtype). The positions, as size_t, stay in scratch
// for backward, which sends the values' gradient to them (none flows through the positions).
class TopKOp : public OpDef {
 public:
  const char* name() const override { return "TopK"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    const size_t axis =
        axis_index("top_k", a.at(kAxis), x.shape().rank(), "input " + x.type_string());
    std::vector<size_t> dims = x.shape().dims();
    dims[axis] = top_k_count(a, dims[axis], axis, x);
    const OutputSpec values{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false};
    return {values, values};
  }
  std::vector<OutputSpec> infer_unbound(const std::vector<Variable>&,
                                        const Dictionary&) const override {
    return std::vector<OutputSpec>(2);
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const Tensor &values = *call.outputs[0], &indices = *call.outputs[1];
    const size_t a = axis(call.attributes, x);
    const AroundAxis s = around(x, a);
    const size_t k = values.shape[(values.dynamic() ? 1 : 0) + a];
    auto* positions =
        static_cast<size_t*>(call.scratch->ensure(values.size() * sizeof(size_t) + 1));
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::top_k(s.outer, s.n, s.inner, k, x.ptr<T>(), values.ptr<T>(), indices.ptr<T>(),
                     positions);
    });
  }

  // Both outputs come from one call (an op of several outputs runs whole, not one step of a
  // recurrent loop at a time).
  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .runs_step_by_step = false};
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const Tensor& dy = *call.output_gradient;  // the values'
    const size_t a = axis(call.attributes, dx);
    const AroundAxis s = around(dx, a);
    const size_t k = dy.shape[(dy.dynamic() ? 1 : 0) + a];
    auto* positions = static_cast<size_t*>(call.scratch->ensure(dy.size() * sizeof(size_t) + 1));
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (!accumulate) std::fill(dx.ptr<T>(), dx.ptr<T>() + dx.size(), T(0));
      kernels::top_k_backward(s.outer, s.n, s.inner, k, positions, dy.ptr<T>(), dx.ptr<T>());
    });
  }

 private:
  // The axis of x (or its gradient) the attributes name, as shape inference checked it.
  static size_t axis(const Dictionary& a, const Tensor& x) {
    const int64_t i = attribute_axis(a.at(kAxis)).static_index();
    return op_util::static_axis_index(i, op_util::sample_rank(x));
  }
};

const OneHotOp kOneHot;
const GatherOp kGather;
const TopKOp kTopK;

// Integer indices drawn as values in [0, extent) (truncated as CNTK casts them), away from the
// integers so that float32 and float64 truncate alike.
ConformanceInput indices(NDShape shape, size_t extent, bool per_sample = true) {
  return {std::move(shape), per_sample, 0.02, double(extent) - 0.02};
}

Dictionary attributes(DictionaryMap a) {
  return Dictionary(std::move(a));
}

OpSchema schema(const OpDef& op, size_t inputs, const char* python, std::vector<OpParam> params,
                const char* doc, OnnxMapping onnx, std::vector<ConformanceCase> conformance) {
  OpSchema s{&op, inputs, inputs};
  s.python = python;
  s.params = std::move(params);
  s.doc = doc;
  s.onnx = std::move(onnx);
  s.conformance = std::move(conformance);
  return s;
}

std::vector<ConformanceCase> top_k_cases() {
  ConformanceCase parameter{{{NDShape{4, 3}, false}},
                            attributes({{kK, int64_t{2}}, {kAxis, int64_t{0}}})};
  parameter.sequences = false;  // the same graph as over a batch
  ConformanceCase last{{{NDShape{3, 5}}}, attributes({{kK, int64_t{2}}})},
      first{{{NDShape{4, 3}}}, attributes({{kK, int64_t{3}}, {kAxis, int64_t{0}}})};
  std::vector<ConformanceCase> cases{
      last,
      first,
      {{{NDShape{5}}}, attributes({{kK, int64_t{5}}, {kAxis, int64_t{-1}}})},
      parameter};
  // The positions (output 1), along either axis.
  for (ConformanceCase c : {last, first}) {
    c.output = 1;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

std::vector<OpSchema> indexing_schemas() {
  // Integer-valued parameters; the axis counts from the end by default.
  const std::vector<OpParam> top_k_params{
      {"x"}, {kK, ParamType::Int}, {kAxis, ParamType::Axis, axis_attribute(Axis(-1))}};
  const ConformanceInput sample_3x4{NDShape{3, 4}};
  ConformanceCase shared_reference{{{NDShape{5, 3}, false}, indices(NDShape{2}, 5)}};
  ConformanceCase shared_indices{{sample_3x4, indices(NDShape{2, 2}, 3, false)}};
  ConformanceCase along_last{{sample_3x4, indices(NDShape{2}, 4)},
                             attributes({{kAxis, int64_t{-1}}})};
  along_last.onnx = false;  // each sample's own reference: ONNX's GatherND (not written)
  ConformanceCase along_middle{{{NDShape{3, 4, 2}, false}, indices(NDShape{3}, 4)},
                               attributes({{kAxis, int64_t{1}}})};
  std::vector<OpSchema> schemas;
  schemas.push_back(schema(
      kOneHot, 1, "one_hot",
      {{"x"},
       {kNumClasses, ParamType::Int},
       {kSparseOutput, ParamType::Bool, false},
       {kAxis, ParamType::Axis, axis_attribute(Axis(-1))}},
      "1 at each index's class along a new axis of extent num_classes (at axis), 0 elsewhere",
      {"OneHot"} /* depth and values (0, 1) as inputs */,
      {{{indices(NDShape{3}, 4)}, attributes({{kNumClasses, int64_t{4}}})},
       {{indices(NDShape{2, 3}, 3)}, attributes({{kNumClasses, int64_t{3}}, {kAxis, int64_t{0}}})},
       {{indices(NDShape{2, 3}, 5)},
        attributes({{kNumClasses, int64_t{5}}, {kAxis, int64_t{1}}})}}));
  schemas.push_back(schema(
      kGather, 2, "gather",
      {{"reference"},
       {"indices"},
       {kAxis, ParamType::Axis, axis_attribute(Axis::all_static_axes())}},
      "the slices of reference at indices along axis (None: the first), indices' shape in place "
      "of that axis",
      {"Gather"},  // indices cast to int64; batched ones into a shared reference: Transposes
      {shared_reference, shared_indices, along_last, along_middle}));
  schemas.push_back(schema(kTopK, 1, "top_k", top_k_params,
                           "the k largest values of x along axis in decreasing order (outputs[0]) "
                           "and their positions along axis (outputs[1])",
                           {"TopK"} /* k as an input; the positions int64, cast */, top_k_cases()));
  return schemas;
}

Function one_hot(const Variable& x, size_t num_classes, bool sparse_output, const Axis& axis,
                 const std::string& name) {
  return make_primitive(kOneHot, {x},
                        Dictionary({{kNumClasses, int64_t(num_classes)},
                                    {kSparseOutput, sparse_output},
                                    {kAxis, axis_attribute(axis)}}),
                        name);
}

Function gather(const Variable& reference, const Variable& indices, const Axis& axis,
                const std::string& name) {
  return make_primitive(kGather, {reference, indices}, Dictionary({{kAxis, axis_attribute(axis)}}),
                        name);
}

Function top_k(const Variable& x, size_t k, const Axis& axis, const std::string& name) {
  return make_primitive(kTopK, {x}, Dictionary({{kK, int64_t(k)}, {kAxis, axis_attribute(axis)}}),
                        name);
}

}  // namespace loom
