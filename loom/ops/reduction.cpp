#include "loom/ops/reduction.h"

#include <algorithm>

#include "loom/graph/op.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

using kernels::ReduceOp;

// Attributes: "axes" (static axis indices as given, possibly negative; all static axes when
// "all_static_axes") and "keep_dims".
class ReduceStaticOp : public OpDef {
 public:
  constexpr ReduceStaticOp(const char* name, ReduceOp op) : name_(name), op_(op) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    const bool all = a.get<bool>("all_static_axes");
    std::vector<bool> reduced(x.shape().rank(), all);
    for (const DictionaryValue& v : all ? DictionaryVector{} : a.get<DictionaryVector>("axes")) {
      size_t i = op_util::static_axis_index(name_, Axis(int(v.get<int64_t>())), x);
      LOOM_CHECK(!reduced[i], ShapeError, name_, ": static axis ", v.get<int64_t>(), " of input ",
                 x.type_string(), " is named twice");
      reduced[i] = true;
    }
    std::vector<size_t> dims;
    for (size_t i = 0; i < reduced.size(); ++i) {
      if (!reduced[i]) {
        dims.push_back(x.shape()[i]);
      } else if (a.get<bool>("keep_dims")) {
        dims.push_back(1);
      }
    }
    return {{NDShape(std::move(dims)), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::reduce(op_, x.shape.dims(), x.ptr<T>(), reduced_dims(call), y.ptr<T>(), false);
    });
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
    if (call.attributes.get<bool>("all_static_axes")) {
      std::fill(d.begin() + first, d.end(), 1);
      return d;
    }
    for (const DictionaryValue& v : call.attributes.get<DictionaryVector>("axes"))
      d[first + op_util::static_axis_index(v.get<int64_t>(), rank)] = 1;
    return d;
  }

  const char* name_;
  ReduceOp op_;
};

const ReduceStaticOp kReduceSum("ReduceSum", ReduceOp::Sum);
const ReduceStaticOp kReduceMean("ReduceMean", ReduceOp::Mean);
const ReduceStaticOp kReduceMax("ReduceMax", ReduceOp::Max);

Function reduce(const ReduceStaticOp& op, const Variable& x, const std::vector<Axis>& axes,
                bool keep_dims, const std::string& name) {
  Dictionary a;
  DictionaryVector indices;
  bool all = false;
  for (const Axis& axis : axes) {
    LOOM_CHECK(axis.is_static() || axis.is_all_static(), ShapeError, op.name(), ": axis ",
               axis.to_string(), " is not a static axis; ", op.name(),
               " reduces static axes of each sample (sequence::reduce_sum reduces a sequence)");
    if (axis.is_all_static()) {
      all = true;
    } else {
      indices.emplace_back(int64_t{axis.static_index()});
    }
  }
  a["axes"] = std::move(indices);
  a["all_static_axes"] = all;
  a["keep_dims"] = keep_dims;
  return make_primitive(op, {x}, std::move(a), name);
}

}  // namespace

std::vector<OpSchema> reduction_schemas() {
  const Dictionary a(
      {{"axes", DictionaryVector{int64_t{1}}}, {"all_static_axes", false}, {"keep_dims", true}});
  const std::vector<ConformanceCase> cases = {{{{NDShape{3, 4}}}, a}};
  return {hand_bound(kReduceSum, 1, 1, cases), hand_bound(kReduceMean, 1, 1, cases),
          hand_bound(kReduceMax, 1, 1, cases)};
}

Function reduce_sum(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return reduce(kReduceSum, x, {axis}, keep_dims, name);
}
Function reduce_sum(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                    const std::string& name) {
  return reduce(kReduceSum, x, axes, keep_dims, name);
}
Function reduce_mean(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return reduce(kReduceMean, x, {axis}, keep_dims, name);
}
Function reduce_mean(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                     const std::string& name) {
  return reduce(kReduceMean, x, axes, keep_dims, name);
}
Function reduce_max(const Variable& x, const Axis& axis, bool keep_dims, const std::string& name) {
  return reduce(kReduceMax, x, {axis}, keep_dims, name);
}
Function reduce_max(const Variable& x, const std::vector<Axis>& axes, bool keep_dims,
                    const std::string& name) {
  return reduce(kReduceMax, x, axes, keep_dims, name);
}

}  // namespace loom
