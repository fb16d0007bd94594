#include "loom/ops/softmax.h"

#include <algorithm>

#include "loom/graph/op.h"
#include "loom/kernels/softmax.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

// A packed tensor seen as [outer, n, inner]: n is the normalized axis, outer holds the rows
// and the axes before it, inner the axes after it.
struct Geometry {
  size_t outer = 1, n = 1, inner = 1;
};

Geometry geometry(const Tensor& t, const Dictionary& a) {
  const size_t first = t.dynamic() ? 1 : 0;
  Geometry g;
  if (a.get<bool>("all_static_axes")) {
    g.outer = t.rows();
    g.n = op_util::sample_size(t);
    return g;
  }
  const size_t axis =
      first + op_util::static_axis_index(a.get<int64_t>("axis"), op_util::sample_rank(t));
  for (size_t i = 0; i < axis; ++i) g.outer *= t.shape[i];
  g.n = t.shape[axis];
  for (size_t i = axis + 1; i < t.shape.rank(); ++i) g.inner *= t.shape[i];
  return g;
}

// dst[o, j, i] = src[o, i, j] (or +=) for src [outer, a, b]: swaps the last two axes, which
// brings the normalized axis last for the row kernels and back again.
template <typename T>
void swap_last_axes(size_t outer, size_t a, size_t b, const T* src, T* dst, bool accumulate) {
  for (size_t o = 0; o < outer; ++o) {
    const T* s = src + o * a * b;
    T* d = dst + o * a * b;
    for (size_t i = 0; i < a; ++i)
      for (size_t j = 0; j < b; ++j) {
        const T v = s[i * b + j];
        d[j * a + i] = accumulate ? d[j * a + i] + v : v;
      }
  }
}

enum class Kind { Softmax, LogSoftmax };

// Attributes: "axis" (a static axis index as given, possibly negative) and "all_static_axes".
// The kernels normalize along the last axis of a row-major matrix; for another axis the op
// transposes into call.scratch (grow-only, so a steady loop does not allocate), runs the
// kernel there and transposes back.
class SoftmaxOp : public OpDef {
 public:
  constexpr SoftmaxOp(const char* name, Kind kind) : name_(name), kind_(kind) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    if (!a.get<bool>("all_static_axes"))
      op_util::static_axis_index(name_, Axis(int(a.get<int64_t>("axis"))), x);
    return {{x.shape(), x.dtype(), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const Geometry g = geometry(x, call.attributes);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = call.output->ptr<T>();
      if (g.inner == 1) {
        run(g.outer, g.n, x.ptr<T>(), y);
        return;
      }
      const size_t size = x.size();
      T* xt = static_cast<T*>(call.scratch->ensure(2 * size * sizeof(T)));
      T* yt = xt + size;
      swap_last_axes(g.outer, g.n, g.inner, x.ptr<T>(), xt, false);
      run(g.outer * g.inner, g.n, xt, yt);
      swap_last_axes(g.outer, g.inner, g.n, yt, y, false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const Tensor& y = *call.output;
    const Geometry g = geometry(*call.inputs[0], call.attributes);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      if (g.inner == 1) {
        run_backward(g.outer, g.n, y.ptr<T>(), dy, dx.ptr<T>(), accumulate);
        return;
      }
      const size_t size = y.size();
      T* yt = static_cast<T*>(call.scratch->ensure(3 * size * sizeof(T)));
      T* dyt = yt + size;
      T* dxt = dyt + size;
      swap_last_axes(g.outer, g.n, g.inner, y.ptr<T>(), yt, false);
      swap_last_axes(g.outer, g.n, g.inner, dy, dyt, false);
      run_backward(g.outer * g.inner, g.n, yt, dyt, dxt, false);
      swap_last_axes(g.outer, g.inner, g.n, dxt, dx.ptr<T>(), accumulate);
    });
  }

 private:
  template <typename T>
  void run(size_t rows, size_t cols, const T* x, T* y) const {
    if (kind_ == Kind::Softmax) {
      kernels::softmax(rows, cols, x, y);
    } else {
      kernels::log_softmax(rows, cols, x, y);
    }
  }
  template <typename T>
  void run_backward(size_t rows, size_t cols, const T* y, const T* dy, T* dx,
                    bool accumulate) const {
    if (kind_ == Kind::Softmax) {
      kernels::softmax_backward(rows, cols, y, dy, dx, accumulate);
    } else {
      kernels::log_softmax_backward(rows, cols, y, dy, dx, accumulate);
    }
  }

  const char* name_;
  Kind kind_;
};

// 1 at the first largest element of each sample (all its static axes together; NaN is never
// the largest), 0 elsewhere; a gradient of 0, as the derivative of a step is.
class HardmaxOp : public OpDef {
 public:
  const char* name() const override { return "Hardmax"; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return {{in[0].shape(), in[0].dtype(), in[0].dynamic_axes(), false}};
  }
  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(), .backward_reads_output = false};
  }
  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const size_t n = op_util::sample_size(x), rows = n ? x.size() / n : 0;
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::hardmax(rows, n, x.ptr<T>(), call.output->ptr<T>());
    });
  }
  void backward(OpCall&, size_t, Tensor& dx, bool accumulate) const override {
    op_util::zero_gradient(dx, accumulate);
  }
};

const SoftmaxOp kSoftmax("Softmax", Kind::Softmax);
const HardmaxOp kHardmax;
const SoftmaxOp kLogSoftmax("LogSoftmax", Kind::LogSoftmax);

Function make(const SoftmaxOp& op, const Variable& x, const Axis& axis, const std::string& name) {
  LOOM_CHECK(axis.is_static() || axis.is_all_static(), ShapeError, op.name(), ": axis ",
             axis.to_string(), " is not a static axis; ", op.name(),
             " normalizes along a static axis of each sample");
  Dictionary a;
  a["axis"] = int64_t{axis.is_static() ? axis.static_index() : 0};
  a["all_static_axes"] = axis.is_all_static();
  return make_primitive(op, {x}, std::move(a), name);
}

}  // namespace

std::vector<OpSchema> softmax_schemas() {
  // Python's axis is one attribute, an axis (None: all static axes); the op stores it as two,
  // "axis" (an index) and "all_static_axes", which model files keep: build converts.
  const ConformanceInput x{NDShape{3, 4}};
  return {
      {.op = &kSoftmax,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "softmax",
       .params = {{"x"}, {"axis", ParamType::Axis, axis_attribute(Axis::all_static_axes())}},
       .doc = "exp(x) normalized to sum 1 along static axis axis (None: over all static axes)",
       .onnx = {.op_type = "Softmax"},  // loom/deploy's own code exports and imports it
       .conformance = {{{x}, Dictionary({{"axis", int64_t{-1}}})},
                       {{x}, Dictionary({{"axis", axis_attribute(Axis::all_static_axes())}})}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             return softmax(in[0], attribute_axis(a.at("axis")), name);
           }},
      // None is the last static axis here (CNTK's C++ default Axis(0), the last in Python's
      // order).
      {.op = &kLogSoftmax,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "log_softmax",
       .params = {{"x"}, {"axis", ParamType::Axis, axis_attribute(Axis::all_static_axes())}},
       .doc = "x - log(sum(exp(x))) along static axis axis (None: the last)",
       .onnx = {.op_type = "LogSoftmax"},  // loom/deploy's own code exports and imports it
       .conformance = {{{x}}, {{x}, Dictionary({{"axis", int64_t{0}}})}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             const Axis axis = attribute_axis(a.at("axis"));
             return log_softmax(in[0], axis.is_all_static() ? Axis(-1) : axis, name);
           }},
      {&kHardmax,
       1,
       1,
       "hardmax",
       "ops",
       {{"x"}},
       false,
       "1 at the first largest element of each sample (all static axes), 0 elsewhere",
       {.none_because = "ONNX's Hardmax works along one axis (a flattening is not written yet)"},
       {{{{NDShape{3, 4}}}}}}};
}

Function softmax(const Variable& x, const Axis& axis, const std::string& name) {
  return make(kSoftmax, x, axis, name);
}

Function log_softmax(const Variable& x, const Axis& axis, const std::string& name) {
  return make(kLogSoftmax, x, axis, name);
}

Function hardmax(const Variable& x, const std::string& name) {
  return make_primitive(kHardmax, {x}, {}, name);
}

}  // namespace loom
