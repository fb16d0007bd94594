#include "loom/ops/losses.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/graph/op.h"
#include "loom/kernels/fast_math.h"
#include "loom/kernels/softmax.h"
#include "loom/ops/op_schema.h"

namespace loom {

namespace {

// Shape inference shared by the losses: both operands have the same sample shape and one
// [1]-shaped value comes out per sample.
std::vector<OutputSpec> per_sample_loss(const char* op, const std::vector<Variable>& in) {
  LOOM_CHECK(in[0].shape() == in[1].shape(), ShapeError, op, ": operand shapes ",
             in[0].shape().to_string(), " and ", in[1].shape().to_string(), " differ");
  return {{NDShape{1}, common_dtype(op, in), common_dynamic_axes(op, in), false}};
}

// Where row r of an operand starts. An operand without dynamic axes (a constant or parameter
// target) has a single row that every sample of the other operand uses.
size_t row_start(const Tensor& t, size_t r, size_t n) {
  return t.dynamic() ? r * n : 0;
}

// The gradient of an operand without dynamic axes sums the contributions of all rows, so it is
// cleared first (unless accumulating) and then added to. Returns whether to add.
template <typename T>
bool prepare_gradient(Tensor& g, bool accumulate) {
  if (g.dynamic() || accumulate) return accumulate;
  std::fill_n(g.ptr<T>(), g.size(), T(0));
  return true;
}

// The entries of the rows of a dense or sparse target, its arrays looked up once per op call.
template <typename T>
class TargetRows {
 public:
  TargetRows(const Tensor& t, size_t cols) : t_(t), cols_(cols) {
    if (t.is_sparse()) {
      offsets_ = t.sparse->csr_row_offsets().data();
      columns_ = t.sparse->csr_col_indices().data();
      values_ = t.sparse->csr_values<T>();
    } else {
      values_ = t.ptr<T>();
    }
  }
  // Calls f(column, value) for the nonzero entries of row r.
  template <typename F>
  void for_each(size_t r, F&& f) const {
    if (offsets_) {
      const size_t row = t_.dynamic() ? r : 0;
      for (int32_t k = offsets_[row]; k < offsets_[row + 1]; ++k)
        f(size_t(columns_[k]), values_[k]);
    } else {
      const T* row = values_ + row_start(t_, r, cols_);
      for (size_t c = 0; c < cols_; ++c)
        if (row[c] != T(0)) f(c, row[c]);
    }
  }

 private:
  const Tensor& t_;
  size_t cols_;
  const int32_t* offsets_ = nullptr;
  const int32_t* columns_ = nullptr;
  const T* values_ = nullptr;
};

// A loss that sums a per-element term f(output, target) over the sample. Formula gives
// f, ∂f/∂output and ∂f/∂target.
template <typename Formula>
class ElementSumLossOp : public OpDef {
 public:
  const char* name() const override { return Formula::kName; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return per_sample_loss(name(), in);
  }
  void forward(OpCall& call) const override {
    const Tensor &o = *call.inputs[0], &t = *call.inputs[1];
    size_t rows = call.output->rows(), n = o.sample_size();
    dispatch(o.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = call.output->ptr<T>();
      for (size_t r = 0; r < rows; ++r) {
        const T *a = o.ptr<T>() + row_start(o, r, n), *b = t.ptr<T>() + row_start(t, r, n);
        T s = 0;
        for (size_t i = 0; i < n; ++i) s += Formula::value(a[i], b[i]);
        y[r] = s;
      }
    });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &o = *call.inputs[0], &t = *call.inputs[1];
    size_t rows = call.output->rows(), n = o.sample_size();
    dispatch(o.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      const bool add = prepare_gradient<T>(g, accumulate);
      for (size_t r = 0; r < rows; ++r) {
        const T *a = o.ptr<T>() + row_start(o, r, n), *b = t.ptr<T>() + row_start(t, r, n);
        T* dx = g.ptr<T>() + row_start(g, r, n);
        for (size_t i = 0; i < n; ++i) {
          T v =
              dy[r] * (index == 0 ? Formula::d_output(a[i], b[i]) : Formula::d_target(a[i], b[i]));
          dx[i] = add ? dx[i] + v : v;
        }
      }
    });
  }
};

struct SquaredErrorFormula {
  static constexpr const char* kName = "SquaredError";
  template <typename T>
  static T value(T o, T t) {
    return (o - t) * (o - t);
  }
  template <typename T>
  static T d_output(T o, T t) {
    return 2 * (o - t);
  }
  template <typename T>
  static T d_target(T o, T t) {
    return 2 * (t - o);
  }
};

struct BinaryCrossEntropyFormula {
  static constexpr const char* kName = "BinaryCrossEntropy";
  template <typename T>
  static T value(T o, T t) {
    return -(t * std::log(o) + (1 - t) * std::log(1 - o));
  }
  template <typename T>
  static T d_output(T o, T t) {
    return (1 - t) / (1 - o) - t / o;
  }
  template <typename T>
  static T d_target(T o, T /*t*/) {
    return std::log(1 - o) - std::log(o);
  }
};

class CrossEntropyWithSoftmaxOp : public OpDef {
 public:
  const char* name() const override { return "CrossEntropyWithSoftmax"; }
  OpTraits traits(const Dictionary&) const override {
    return {.accepts_sparse = InputSet::only(1)};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return per_sample_loss(name(), in);
  }
  // Forward keeps log_softmax(z) in the scratch area; backward reads it instead of
  // recomputing: softmax(z) = exp(log_softmax(z)) and logsumexp(z) − z = −log_softmax(z).
  // The scratch area has room for softmax(z) after it, which backward computes in one flat pass.
  template <typename T>
  static T* scratch(OpCall& call, const Tensor& z) {
    return static_cast<T*>(call.scratch->ensure(2 * z.rows() * z.sample_size() * sizeof(T)));
  }
  void forward(OpCall& call) const override {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    size_t rows = call.output->rows(), n = z.sample_size();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* ls = scratch<T>(call, z);
      kernels::log_softmax<T>(z.rows(), n, z.ptr<T>(), ls);
      T* y = call.output->ptr<T>();
      const TargetRows<T> targets(t, n);
      for (size_t r = 0; r < rows; ++r) {
        const T* lr = ls + row_start(z, r, n);
        T loss = 0;
        targets.for_each(r, [&](size_t c, T v) { loss -= v * lr[c]; });
        y[r] = loss;
      }
    });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    size_t rows = call.output->rows(), n = z.sample_size();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* ls = scratch<T>(call, z);
      const T* dy = call.output_gradient->ptr<T>();
      const bool add = prepare_gradient<T>(g, accumulate);
      T* softmax = ls + z.rows() * n;
      const TargetRows<T> targets(t, n);
      if (index == 0) {
        const size_t size = z.rows() * n;
#pragma omp simd
        for (size_t i = 0; i < size; ++i) softmax[i] = kernels::fast_exp(ls[i]);
      }
      for (size_t r = 0; r < rows; ++r) {
        const T* lr = ls + row_start(z, r, n);
        T* dx = g.ptr<T>() + row_start(g, r, n);
        if (index == 0) {  // dz = dy · (Σt · softmax(z) − t)
          const T* p = softmax + row_start(z, r, n);
          T mass = 0;
          targets.for_each(r, [&](size_t, T v) { mass += v; });
          const T scale = dy[r] * mass;
          if (add) {
#pragma omp simd
            for (size_t c = 0; c < n; ++c) dx[c] += scale * p[c];
          } else {
#pragma omp simd
            for (size_t c = 0; c < n; ++c) dx[c] = scale * p[c];
          }
          targets.for_each(r, [&](size_t c, T v) { dx[c] -= dy[r] * v; });
        } else {  // dt = dy · (logsumexp(z) − z)
          for (size_t c = 0; c < n; ++c) {
            T v = -dy[r] * lr[c];
            dx[c] = add ? dx[c] + v : v;
          }
        }
      }
    });
  }
};

class ClassificationErrorOp : public OpDef {
 public:
  const char* name() const override { return "ClassificationError"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .accepts_sparse = InputSet::only(1)};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return per_sample_loss(name(), in);
  }
  void forward(OpCall& call) const override {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    size_t rows = call.output->rows(), n = z.sample_size();
    size_t top_n = size_t(call.attributes.get<int64_t>("top_n"));
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = call.output->ptr<T>();
      const TargetRows<T> targets(t, n);
      for (size_t r = 0; r < rows; ++r) {
        size_t label = 0;
        T best = -std::numeric_limits<T>::infinity();
        targets.for_each(r, [&](size_t c, T v) {
          if (v > best) best = v, label = c;
        });
        // Entries ranked before the label: larger scores, and equal ones earlier in the row.
        const T* row = z.ptr<T>() + row_start(z, r, n);
        size_t ahead = 0;
        for (size_t c = 0; c < n; ++c)
          ahead += row[c] > row[label] || (row[c] == row[label] && c < label);
        y[r] = ahead >= top_n ? T(1) : T(0);
      }
    });
  }
  void backward(OpCall&, size_t, Tensor&, bool) const override {
    throw StateError("ClassificationError has no gradient");
  }
};

const ElementSumLossOp<SquaredErrorFormula> kSquaredError;
const CrossEntropyWithSoftmaxOp kCrossEntropyWithSoftmax;
const ElementSumLossOp<BinaryCrossEntropyFormula> kBinaryCrossEntropy;
const ClassificationErrorOp kClassificationError;

}  // namespace

std::vector<OpSchema> losses_schemas() {
  const ConformanceInput z{NDShape{4}}, t{NDShape{4}, true, 0, 1};
  return {
      hand_bound(kSquaredError, 2, 2, {{{z, z}}}),
      hand_bound(kCrossEntropyWithSoftmax, 2, 2, {{{z, t}}}),
      hand_bound(kBinaryCrossEntropy, 2, 2, {{{{NDShape{4}, true, 0.1, 0.9}, t}}}),
      hand_bound(kClassificationError, 2, 2, {{{z, t}, Dictionary({{"top_n", int64_t{1}}})}}),
  };
}

Function squared_error(const Variable& output, const Variable& target, const std::string& name) {
  return make_primitive(kSquaredError, {output, target}, {}, name);
}

Function cross_entropy_with_softmax(const Variable& z, const Variable& target,
                                    const std::string& name) {
  return make_primitive(kCrossEntropyWithSoftmax, {z, target}, {}, name);
}

Function binary_cross_entropy(const Variable& output, const Variable& target,
                              const std::string& name) {
  return make_primitive(kBinaryCrossEntropy, {output, target}, {}, name);
}

Function classification_error(const Variable& z, const Variable& target, size_t top_n,
                              const std::string& name) {
  LOOM_CHECK(top_n >= 1, ArgumentError, "classification_error: top_n must be at least 1");
  Dictionary a;
  a["top_n"] = int64_t(top_n);
  return make_primitive(kClassificationError, {z, target}, std::move(a), name);
}

}  // namespace loom
