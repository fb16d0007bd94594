#include "loom/ops/losses.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "loom/core/random.h"
#include "loom/graph/initializer.h"
#include "loom/graph/op.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"
#include "loom/kernels/loss.h"
#include "loom/kernels/nce.h"
#include "loom/kernels/random.h"
#include "loom/kernels/softmax.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"
#include "loom/ops/reduction.h"
#include "loom/ops/shape_ops.h"
#include "loom/ops/softmax.h"

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
      width_ = t.sparse->csr_cols();
    } else {
      values_ = t.ptr<T>();
    }
  }
  // Calls f(column, value) for the nonzero entries of row r: a sparse sample of rank 2 or more
  // is cols_ / width_ CSR rows, one for each row of its last axis.
  template <typename F>
  void for_each(size_t r, F&& f) const {
    if (offsets_) {
      const size_t per_sample = cols_ / width_, first = (t_.dynamic() ? r : 0) * per_sample;
      for (size_t q = 0; q < per_sample; ++q)
        for (int32_t k = offsets_[first + q]; k < offsets_[first + q + 1]; ++k)
          f(q * width_ + size_t(columns_[k]), values_[k]);
    } else {
      const T* row = dense_row(r);
      for (size_t c = 0; c < cols_; ++c)
        if (row[c] != T(0)) f(c, row[c]);
    }
  }
  // Row r's values when the targets are dense, else nullptr.
  const T* dense_row(size_t r) const {
    return offsets_ ? nullptr : values_ + row_start(t_, r, cols_);
  }
  // (Σ_c t[r, c] x[c], Σ_c t[r, c]).
  std::pair<T, T> dot(size_t r, const T* x) const {
    T d = 0, mass = 0;
    if (const T* row = dense_row(r)) {
#pragma omp simd reduction(+ : d, mass)
      for (size_t c = 0; c < cols_; ++c) d += row[c] * x[c], mass += row[c];
    } else {
      for_each(r, [&](size_t c, T v) { d += v * x[c], mass += v; });
    }
    return {d, mass};
  }

 private:
  const Tensor& t_;
  size_t cols_, width_ = 1;
  const int32_t* offsets_ = nullptr;
  const int32_t* columns_ = nullptr;
  const T* values_ = nullptr;
};

// dx (+)= scale (e^(x - shift) - t) over a run of n entries: t a dense run of targets, or none
// (Dense false; the caller subtracts sparse targets); scale and shift one for each entry (Each: a
// run across slices, entry c in slice c) or one for the run. Each case its own loop: with the
// choices inside, the loop did not vectorize. Flattened: in this large file the compiler stopped
// inlining fast_exp's body here (its unit growth limit), and the loop called it per element.
template <bool Add, bool Dense, bool Each, typename T>
[[gnu::flatten]] void softmax_gradient_run(size_t n, const T* x, const T* shift, const T* t,
                                           const T* scale, T* dx) {
  const T shift0 = shift[0], scale0 = scale[0];
#pragma omp simd
  for (size_t c = 0; c < n; ++c) {
    const T e = kernels::fast_exp(x[c] - (Each ? shift[c] : shift0));
    const T v = (Each ? scale[c] : scale0) * (e - (Dense ? t[c] : T(0)));
    dx[c] = Add ? dx[c] + v : v;
  }
}

// dx (+)= -scale x over a run of n entries, scale as in softmax_gradient_run.
template <bool Add, bool Each, typename T>
void negated_product_run(size_t n, const T* x, const T* scale, T* dx) {
  const T scale0 = scale[0];
#pragma omp simd
  for (size_t c = 0; c < n; ++c) {
    const T v = -(Each ? scale[c] : scale0) * x[c];
    dx[c] = Add ? dx[c] + v : v;
  }
}

// A static axis's index (negative from the end); an ArgumentError naming fn for another axis.
int static_index(const char* fn, const Axis& axis) {
  LOOM_CHECK(axis.is_static(), ArgumentError, fn, ": axis ", axis.to_string(),
             " is not a static axis; only an axis of the sample is supported");
  return axis.static_index();
}

// The static axis `axis` of z's sample as an index from the front; an ArgumentError naming fn
// for a dynamic axis or one out of range.
size_t sample_axis(const char* fn, const Variable& z, const Axis& axis) {
  const int rank = int(z.shape().rank());
  const int i = static_index(fn, axis);
  LOOM_CHECK(i >= -rank && i < rank, ArgumentError, fn, ": axis ", i,
             " is out of range for a sample of shape ", z.shape().to_string());
  return size_t(i < 0 ? i + rank : i);
}

// exp() costs several simple operations (as the softmax kernels count it): a loop of them splits
// over threads from fewer entries.
constexpr size_t kExpCost = 8;
// The columns of a block (below) whose running values a loop keeps on the stack.
constexpr size_t kColumns = 64;

// cross_entropy_with_softmax and classification_error along one static axis of a sample of rank
// 2 or more (their "axis" attribute, CNTK's axis argument): the sample seen as [outer, n, inner],
// n the axis; each (outer, inner) position j = o inner + i is a slice of n entries, entry c of
// it at e = (o n + c) inner + i. Block o of a sample is its n x inner entries at o, contiguous:
// its columns are slices, which loops walk a row of n (c) at a time, vectorized along the inner
// columns (i), or along c where inner is 1 (each block a slice).
struct AxisSlices {
  size_t outer = 1, n = 1, inner = 1;
  size_t count() const { return outer * inner; }
  size_t block() const { return n * inner; }
  // Calls f(u, r, o) for the blocks u = r outer + o of `rows` samples (r the sample), split over
  // threads above the kernels' grain (`cost` simple operations an entry); cost 0 keeps them on
  // the calling thread (blocks that add to one output).
  template <typename F>
  void for_each_block(size_t rows, size_t cost, F&& f) const {
    const size_t blocks = rows * outer;
    kernels::detail::parallel_for(blocks, blocks * block() * cost, [&](size_t begin, size_t end) {
      for (size_t u = begin; u < end; ++u) f(u, u / outer, u % outer);
    });
  }
  // top[i] = the largest of column i < w (<= kColumns) of the block at x (NaN passed over).
  template <typename T>
  void column_max(const T* x, size_t w, T* top) const {
    std::fill_n(top, w, -std::numeric_limits<T>::infinity());
    for (size_t c = 0; c < n; ++c, x += inner) {
#pragma omp simd
      for (size_t i = 0; i < w; ++i) top[i] = std::max(top[i], x[i]);
    }
  }
};

// The entries of a sparse target made dense (room for dense_targets): its rows of n, one for a
// target without dynamic axes; none for a dense target.
size_t dense_room(const Tensor& t, size_t rows, size_t n) {
  return t.is_sparse() ? (t.dynamic() ? rows : 1) * n : 0;
}

// The rows of n entries of target t as dense values: t's own, or a sparse t's written into room
// (dense_room of them). Read at row_start(t, r, n).
template <typename T>
const T* dense_targets(const Tensor& t, size_t rows, size_t n, T* room) {
  if (!t.is_sparse()) return t.ptr<T>();
  std::fill_n(room, dense_room(t, rows, n), T(0));
  const TargetRows<T> targets(t, n);
  for (size_t r = 0; r < (t.dynamic() ? rows : 1); ++r)
    targets.for_each(r, [&](size_t c, T v) { room[r * n + c] = v; });
  return room;
}

// The slices of an op along its "axis" attribute over a sample of extents `sample`, or none: no
// attribute, or a vector sample (along its only axis: the op over the whole sample).
std::optional<AxisSlices> axis_slices(const Dictionary& a, std::span<const size_t> sample) {
  if (!a.contains("axis") || sample.size() <= 1) return std::nullopt;
  const size_t k =
      op_util::static_axis_index(attribute_axis(a.at("axis")).static_index(), sample.size());
  AxisSlices s;
  for (size_t i = 0; i < k; ++i) s.outer *= sample[i];
  s.n = sample[k];
  for (size_t i = k + 1; i < sample.size(); ++i) s.inner *= sample[i];
  return s;
}

// The slices of a call's operand z (its sample's extents read in place: no allocation per call).
std::optional<AxisSlices> axis_slices(const OpCall& call, const Tensor& z) {
  return axis_slices(call.attributes, std::span(z.shape.dims()).subspan(z.dynamic() ? 1 : 0));
}

// Shape inference of cross_entropy_with_softmax and classification_error (fn): per_sample_loss,
// and along the "axis" attribute (which it checks) of a sample of rank 2 or more the sample's
// shape with that axis 1, or with every axis 1 (all_axes: classification_error's mean over the
// slices).
std::vector<OutputSpec> loss_along_axis(const char* op, const char* fn,
                                        const std::vector<Variable>& in, const Dictionary& a,
                                        bool all_axes) {
  if (!a.contains("axis")) return per_sample_loss(op, in);
  std::vector<OutputSpec> out = per_sample_loss(fn, in);
  const size_t k = sample_axis(fn, in[0], attribute_axis(a.at("axis")));
  if (in[0].shape().rank() > 1) {
    out[0].shape = in[0].shape();
    for (size_t i = 0; i < out[0].shape.rank(); ++i)
      if (all_axes || i == k) out[0].shape[i] = 1;
  }
  return out;
}

// A loss that sums a per-element term of output and target over the sample
// (kernels::row_loss). A target without dynamic axes (a constant) is one row every sample uses.
class ElementSumLossOp : public OpDef {
 public:
  constexpr ElementSumLossOp(const char* name, kernels::RowLoss loss) : name_(name), loss_(loss) {}
  const char* name() const override { return name_; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return per_sample_loss(name(), in);
  }
  void forward(OpCall& call) const override {
    const Tensor &o = *call.inputs[0], &t = *call.inputs[1];
    dispatch(o.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::row_loss(loss_, call.output->rows(), o.sample_size(), operand<const T>(o),
                        operand<const T>(t), call.output->ptr<T>());
    });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &o = *call.inputs[0], &t = *call.inputs[1];
    dispatch(o.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::row_loss_backward(loss_, index, call.output->rows(), o.sample_size(),
                                 operand<const T>(o), operand<const T>(t),
                                 call.output_gradient->ptr<T>(), operand<T>(g), accumulate);
    });
  }

 private:
  template <typename T>
  static kernels::LossOperand<T> operand(const Tensor& x) {
    return {x.ptr<std::remove_const_t<T>>(), !x.dynamic()};
  }
  const char* name_;
  kernels::RowLoss loss_;
};

class CrossEntropyWithSoftmaxOp : public OpDef {
 public:
  const char* name() const override { return "CrossEntropyWithSoftmax"; }
  OpTraits traits(const Dictionary&) const override {
    return {.accepts_sparse = InputSet::only(1)};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    return loss_along_axis(name(), "cross_entropy_with_softmax", in, a, false);
  }
  // CNTK's formula: logsumexp(z) − t·z (its CrossEntropyWithSoftmax block), whatever the targets
  // sum to; the gradients are softmax(z) − t and −z. Forward keeps log_softmax(z) in the scratch
  // area; backward reads it instead of recomputing: softmax(z) = exp(log_softmax(z)). The
  // scratch area has room for softmax(z) after it, which backward computes in one flat pass.
  template <typename T>
  static T* scratch(OpCall& call, const Tensor& z) {  // log_softmax(z), for backward
    return static_cast<T*>(call.scratch->ensure(z.rows() * z.sample_size() * sizeof(T)));
  }
  // Along an axis: logsumexp(z) of the m slices of each of the output's rows, for backward,
  // then the room of a sparse target made dense (of samples of n entries).
  template <typename T>
  static T* scratch(OpCall& call, const Tensor& t, size_t m, size_t n) {
    const size_t rows = call.output->rows();
    return static_cast<T*>(call.scratch->ensure((rows * m + dense_room(t, rows, n)) * sizeof(T)));
  }
  void forward(OpCall& call) const override {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    if (const auto slices = axis_slices(call, z)) {
      forward_along(call, *slices);
      return;
    }
    size_t rows = call.output->rows(), n = z.sample_size();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* ls = scratch<T>(call, z);
      kernels::log_softmax<T>(z.rows(), n, z.ptr<T>(), ls);
      T* y = call.output->ptr<T>();
      const TargetRows<T> targets(t, n);
      for (size_t r = 0; r < rows; ++r) {
        const T* lr = ls + row_start(z, r, n);
        // −t·log_softmax(z) is (Σt) logsumexp(z) − t·z: add (1 − Σt) logsumexp(z), where
        // logsumexp(z) = z_0 − log_softmax(z)_0.
        const auto [dot, mass] = targets.dot(r, lr);
        const T lse = z.ptr<T>()[row_start(z, r, n)] - lr[0];
        y[r] = -dot + (1 - mass) * lse;
      }
    });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    if (const auto slices = axis_slices(call, z)) {
      backward_along(call, *slices, index, g, accumulate);
      return;
    }
    size_t rows = call.output->rows(), n = z.sample_size();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* ls = scratch<T>(call, z);
      const T* dy = call.output_gradient->ptr<T>();
      const bool add = prepare_gradient<T>(g, accumulate);
      const TargetRows<T> targets(t, n);
      for (size_t r = 0; r < rows; ++r) {
        T* dx = g.ptr<T>() + row_start(g, r, n);
        if (index == 0) {  // dz = dy · (softmax(z) − t), softmax(z) = e^log_softmax(z)
          const T* lr = ls + row_start(z, r, n);
          const T* tr = targets.dense_row(r);
          const T* scale = dy + r;
          const T none = 0;  // log_softmax(z) is z shifted already
          if (add) {
            tr ? softmax_gradient_run<true, true, false>(n, lr, &none, tr, scale, dx)
               : softmax_gradient_run<true, false, false>(n, lr, &none, tr, scale, dx);
          } else {
            tr ? softmax_gradient_run<false, true, false>(n, lr, &none, tr, scale, dx)
               : softmax_gradient_run<false, false, false>(n, lr, &none, tr, scale, dx);
          }
          if (!tr) targets.for_each(r, [&](size_t c, T v) { dx[c] -= *scale * v; });
        } else {  // dt = −dy · z
          const T* zr = z.ptr<T>() + row_start(z, r, n);
          add ? negated_product_run<true, false>(n, zr, dy + r, dx)
              : negated_product_run<false, false>(n, zr, dy + r, dx);
        }
      }
    });
  }

 private:
  // Along an axis (CNTK's composite logsumexp(z, axis) − Σ_axis t·z), per slice: the same
  // formula and gradients (dz = dy (softmax(z) − t), dt = −dy z) slice by slice, block by block
  // (AxisSlices). Forward keeps logsumexp(z) of each slice in the scratch area for backward.
  static void forward_along(OpCall& call, const AxisSlices& s) {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    const size_t rows = call.output->rows(), size = z.sample_size(), m = s.count();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* lse = scratch<T>(call, t, m, size);
      const T* targets = dense_targets(t, rows, size, lse + rows * m);
      s.for_each_block(rows, kExpCost, [&](size_t u, size_t r, size_t o) {
        const T* zb = z.ptr<T>() + row_start(z, r, size) + o * s.block();
        const T* tb = targets + row_start(t, r, size) + o * s.block();
        T *lb = lse + u * s.inner, *y = call.output->ptr<T>() + u * s.inner;
        if (s.inner == 1) {  // the block is one slice
          kernels::logsumexp(1, s.n, zb, lb);
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (size_t c = 0; c < s.n; ++c) dot += tb[c] * zb[c];
          y[0] = lb[0] - dot;
          return;
        }
        for (size_t i0 = 0; i0 < s.inner; i0 += kColumns) {
          const size_t w = std::min(kColumns, s.inner - i0);
          // Shifted by the max, by 0 where it is not finite (a slice of -inf gives -inf).
          T shift[kColumns], sum[kColumns] = {}, dot[kColumns] = {};
          s.column_max(zb + i0, w, shift);
          for (size_t i = 0; i < w; ++i)
            if (!std::isfinite(shift[i])) shift[i] = 0;
          for (size_t c = 0; c < s.n; ++c) {
            const T *zc = zb + c * s.inner + i0, *tc = tb + c * s.inner + i0;
#pragma omp simd
            for (size_t i = 0; i < w; ++i) {
              sum[i] += kernels::fast_exp(zc[i] - shift[i]);
              dot[i] += tc[i] * zc[i];
            }
          }
          for (size_t i = 0; i < w; ++i) {
            lb[i0 + i] = shift[i] + std::log(sum[i]);
            y[i0 + i] = lb[i0 + i] - dot[i];
          }
        }
      });
    });
  }
  static void backward_along(OpCall& call, const AxisSlices& s, size_t index, Tensor& g,
                             bool accumulate) {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    const size_t rows = call.output->rows(), size = z.sample_size(), m = s.count();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* lse = scratch<T>(call, t, m, size);
      const T* targets = index == 0 ? dense_targets(t, rows, size, lse + rows * m) : nullptr;
      const bool add = prepare_gradient<T>(g, accumulate);
      kernels::detail::with_accumulate(add, [&](auto a) {
        constexpr bool A = decltype(a)::value;
        // A gradient without dynamic axes sums the rows' blocks: on one thread.
        s.for_each_block(rows, g.dynamic() ? kExpCost : 0, [&](size_t u, size_t r, size_t o) {
          const T* zb = z.ptr<T>() + row_start(z, r, size) + o * s.block();
          T* dx = g.ptr<T>() + row_start(g, r, size) + o * s.block();
          const T *lb = lse + u * s.inner, *dy = call.output_gradient->ptr<T>() + u * s.inner;
          if (index == 1) {
            if (s.inner == 1) return negated_product_run<A, false>(s.n, zb, dy, dx);
            for (size_t c = 0; c < s.n; ++c)
              negated_product_run<A, true>(s.inner, zb + c * s.inner, dy, dx + c * s.inner);
            return;
          }
          const T* tb = targets + row_start(t, r, size) + o * s.block();
          if (s.inner == 1) return softmax_gradient_run<A, true, false>(s.n, zb, lb, tb, dy, dx);
          for (size_t c = 0; c < s.n; ++c) {
            const size_t at = c * s.inner;
            softmax_gradient_run<A, true, true>(s.inner, zb + at, lb, tb + at, dy, dx + at);
          }
        });
      });
    });
  }
};

class ClassificationErrorOp : public OpDef {
 public:
  const char* name() const override { return "ClassificationError"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .accepts_sparse = InputSet::only(1)};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const char* fn = "classification_error";
    std::vector<OutputSpec> out = loss_along_axis(name(), fn, in, a, true);
    const int64_t top_n = a.get<int64_t>("top_n");
    LOOM_CHECK(top_n == 1 || !axis_slices(a, in[0].shape().dims()), ArgumentError, fn, ": topN ",
               top_n, " is not supported along an axis of a sample of rank ", in[0].shape().rank(),
               " (CNTK neither): give topN=1, or a vector sample");
    return out;
  }
  void forward(OpCall& call) const override {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    if (const auto slices = axis_slices(call, z)) {
      forward_along(call, *slices);
      return;
    }
    size_t rows = call.output->rows(), n = z.sample_size();
    size_t top_n = size_t(call.attributes.get<int64_t>("top_n"));
    const bool by_argmax =
        call.attributes.contains("argmax_target") && call.attributes.get<bool>("argmax_target");
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = call.output->ptr<T>();
      const TargetRows<T> targets(t, n);
      if (top_n == 1 && !by_argmax) {
        // CNTK's top-1 error, 1 - t . hardmax(z) (hardmax: the first largest score), which a
        // target that is not one-hot makes fractional.
        auto* predicted = static_cast<size_t*>(call.scratch->ensure(rows * sizeof(size_t)));
        kernels::row_argmax(z.dynamic() ? rows : std::min<size_t>(rows, 1), n, z.ptr<T>(),
                            predicted);
        for (size_t r = 0; r < rows; ++r) {
          const size_t p = predicted[z.dynamic() ? r : 0];
          T hit = 0;
          if (const T* row = n ? targets.dense_row(r) : nullptr) {
            hit = row[p];
          } else {
            targets.for_each(r, [&](size_t c, T v) {
              if (c == p) hit = v;
            });
          }
          y[r] = T(1) - hit;
        }
        return;
      }
      for (size_t r = 0; r < rows; ++r) {
        const T* row = z.ptr<T>() + row_start(z, r, n);
        // CNTK's top-N error (its ClassificationError node): whether the target's largest entry
        // is outside the N largest scores: entries ranked before it are larger scores, and
        // equal ones earlier in the row.
        size_t label = 0;
        T best = -std::numeric_limits<T>::infinity();
        targets.for_each(r, [&](size_t c, T v) {
          if (v > best) best = v, label = c;
        });
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

 private:
  // Along an axis (CNTK's composite, top 1): a slice is wrong where the target differs from
  // (z == the slice's largest z) anywhere, and the value is the fraction of wrong slices (NaN
  // scores passed over, as the largest). Threads split the rows.
  static void forward_along(OpCall& call, const AxisSlices& s) {
    const Tensor &z = *call.inputs[0], &t = *call.inputs[1];
    const size_t rows = call.output->rows(), size = z.sample_size();
    dispatch(z.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* room = static_cast<T*>(call.scratch->ensure(dense_room(t, rows, size) * sizeof(T)));
      const T* targets = dense_targets(t, rows, size, room);
      kernels::detail::parallel_for(rows, rows * size, [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          size_t wrong = 0;
          for (size_t o = 0; o < s.outer; ++o)
            wrong += wrong_slices(s, z.ptr<T>() + row_start(z, r, size) + o * s.block(),
                                  targets + row_start(t, r, size) + o * s.block());
          call.output->ptr<T>()[r] = T(wrong) / T(s.count());
        }
      });
    });
  }
  // The wrong slices of a block of scores z and targets t.
  template <typename T>
  static size_t wrong_slices(const AxisSlices& s, const T* z, const T* t) {
    if (s.inner == 1) {  // the block is one slice
      size_t at = 0;
      kernels::row_argmax(1, s.n, z, &at);
      const T top = s.n ? z[at] : T(0);
      int wrong = 0;
#pragma omp simd reduction(| : wrong)
      for (size_t c = 0; c < s.n; ++c) wrong |= t[c] != (z[c] == top ? T(1) : T(0));
      return size_t(wrong);
    }
    size_t count = 0;
    for (size_t i0 = 0; i0 < s.inner; i0 += kColumns) {
      const size_t w = std::min(kColumns, s.inner - i0);
      T top[kColumns], wrong[kColumns] = {};
      s.column_max(z + i0, w, top);
      for (size_t c = 0; c < s.n; ++c) {
        const T *zc = z + c * s.inner + i0, *tc = t + c * s.inner + i0;
#pragma omp simd
        for (size_t i = 0; i < w; ++i)
          if (tc[i] != (zc[i] == top[i] ? T(1) : T(0))) wrong[i] = 1;
      }
      count += size_t(std::accumulate(wrong, wrong + w, T(0)));
    }
    return count;
  }
};

// ---- cosine distance ---------------------------------------------------------------------------

// 1 / |v|, with CNTK's floor on the norm (EPS_IN_INVERSE).
inline double inverse_norm(double squared) {
  const double norm = std::sqrt(squared);
  return norm < 1e-30 ? 1e30 : 1 / norm;
}

template <typename T>
double dot(const T* a, const T* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Both operands of the cosine ops have the same sample shape.
void check_same_shapes(const char* fn, const Variable& a, const Variable& b) {
  LOOM_CHECK(a.shape() == b.shape(), ShapeError, fn, ": operand shapes ", a.shape().to_string(),
             " and ", b.shape().to_string(), " differ");
}

class CosDistanceOp : public OpDef {
 public:
  const char* name() const override { return "CosDistance"; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    check_same_shapes("cosine_distance", in[0], in[1]);
    return {{NDShape{}, common_dtype("cosine_distance", in),
             common_dynamic_axes("cosine_distance", in), false}};
  }
  void forward(OpCall& call) const override {
    const Tensor &x = *call.inputs[0], &y = *call.inputs[1];
    const size_t rows = call.output->rows(), n = x.sample_size();
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = call.output->ptr<T>();
      for (size_t r = 0; r < rows; ++r) {
        const T *a = x.ptr<T>() + row_start(x, r, n), *b = y.ptr<T>() + row_start(y, r, n);
        out[r] = T(dot(a, b, n) * inverse_norm(dot(a, a, n)) * inverse_norm(dot(b, b, n)));
      }
    });
  }
  // d cos / dx = y / (|x| |y|) − cos · x / |x|² (and the same with x and y swapped).
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &x = *call.inputs[index], &y = *call.inputs[1 - index];
    const size_t rows = call.output->rows(), n = x.sample_size();
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      const bool add = prepare_gradient<T>(g, accumulate);
      for (size_t r = 0; r < rows; ++r) {
        const T *a = x.ptr<T>() + row_start(x, r, n), *b = y.ptr<T>() + row_start(y, r, n);
        const double ia = inverse_norm(dot(a, a, n)), ib = inverse_norm(dot(b, b, n));
        const double cos = dot(a, b, n) * ia * ib, d = double(dy[r]);
        T* dx = g.ptr<T>() + row_start(g, r, n);
        for (size_t i = 0; i < n; ++i) {
          const T v = T(d * (b[i] * ia * ib - cos * a[i] * ia * ia));
          dx[i] = add ? dx[i] + v : v;
        }
      }
    });
  }
};

// Output row j, entry m: the cosine of x_j with y_{partner(j, m)}.
size_t negative_partner(size_t j, size_t m, size_t shift, size_t rows) {
  return m == 0 ? j : (j + shift + m - 1) % rows;
}

class CosDistanceWithNegativeSamplesOp : public OpDef {
 public:
  const char* name() const override { return "CosDistanceWithNegativeSamples"; }
  OpTraits traits(const Dictionary&) const override { return {.runs_step_by_step = false}; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const char* fn = "cosine_distance_with_negative_samples";
    check_same_shapes(fn, in[0], in[1]);
    LOOM_CHECK(!in[0].dynamic_axes().empty() && !in[1].dynamic_axes().empty(), ShapeError, fn,
               ": both operands need dynamic axes (the negatives are other samples of y), not ",
               in[0].type_string(), " and ", in[1].type_string());
    const int64_t shift = a.get<int64_t>("shift"), k = a.get<int64_t>("num_negative_samples");
    LOOM_CHECK(shift >= 1, ArgumentError, fn, ": shift must be at least 1, not ", shift);
    LOOM_CHECK(k >= 1, ArgumentError, fn, ": num_negative_samples must be at least 1, not ", k);
    return {{NDShape{size_t(k) + 1}, common_dtype(fn, in), common_dynamic_axes(fn, in), false}};
  }
  void forward(OpCall& call) const override {
    const Tensor &x = *call.inputs[0], &y = *call.inputs[1];
    const size_t rows = x.rows(), n = x.sample_size(), m_count = call.output->sample_size();
    const size_t shift = size_t(call.attributes.get<int64_t>("shift"));
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = call.output->ptr<T>();
      std::vector<double> ib(rows);
      for (size_t r = 0; r < rows; ++r) {
        const T* b = y.ptr<T>() + r * n;
        ib[r] = inverse_norm(dot(b, b, n));
      }
      for (size_t j = 0; j < rows; ++j) {
        const T* a = x.ptr<T>() + j * n;
        const double ia = inverse_norm(dot(a, a, n));
        for (size_t m = 0; m < m_count; ++m) {
          const size_t p = negative_partner(j, m, shift, rows);
          out[j * m_count + m] = T(dot(a, y.ptr<T>() + p * n, n) * ia * ib[p]);
        }
      }
    });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &x = *call.inputs[0], &y = *call.inputs[1];
    const size_t rows = x.rows(), n = x.sample_size(), m_count = call.output->sample_size();
    const size_t shift = size_t(call.attributes.get<int64_t>("shift"));
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      std::vector<double> ia(rows), ib(rows), grad(rows * n, 0.0);
      for (size_t r = 0; r < rows; ++r) {
        const T *a = x.ptr<T>() + r * n, *b = y.ptr<T>() + r * n;
        ia[r] = inverse_norm(dot(a, a, n));
        ib[r] = inverse_norm(dot(b, b, n));
      }
      for (size_t j = 0; j < rows; ++j) {
        const T* a = x.ptr<T>() + j * n;
        for (size_t m = 0; m < m_count; ++m) {
          const size_t p = negative_partner(j, m, shift, rows);
          const T* b = y.ptr<T>() + p * n;
          const double d = dy[j * m_count + m];
          const double cos = dot(a, b, n) * ia[j] * ib[p];
          if (index == 0) {  // into x_j
            double* gx = grad.data() + j * n;
            for (size_t i = 0; i < n; ++i)
              gx[i] += d * (b[i] * ia[j] * ib[p] - cos * a[i] * ia[j] * ia[j]);
          } else {  // into y_p
            double* gy = grad.data() + p * n;
            for (size_t i = 0; i < n; ++i)
              gy[i] += d * (a[i] * ia[j] * ib[p] - cos * b[i] * ib[p] * ib[p]);
          }
        }
      }
      T* dx = g.ptr<T>();
      for (size_t i = 0; i < rows * n; ++i) dx[i] = accumulate ? dx[i] + T(grad[i]) : T(grad[i]);
    });
  }
};

// ---- weighted binary cross entropy (CNTK's Logistic with weights) ------------------------------

class WeightedLogisticOp : public OpDef {
 public:
  const char* name() const override { return "Logistic"; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const char* fn = "weighted_binary_cross_entropy";
    check_same_shapes(fn, in[0], in[1]);
    check_same_shapes(fn, in[0], in[2]);
    return {{NDShape{1}, common_dtype(fn, in), common_dynamic_axes(fn, in), false}};
  }
  // ℓ = −w log r, r = t p + (1 − t)(1 − p): ∂ℓ/∂p = −w (2t − 1) / r, ∂ℓ/∂t = −w (2p − 1) / r,
  // ∂ℓ/∂w = −log r.
  void forward(OpCall& call) const override {
    const Tensor &p = *call.inputs[0], &t = *call.inputs[1], &w = *call.inputs[2];
    const size_t rows = call.output->rows(), n = p.sample_size();
    dispatch(p.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = call.output->ptr<T>();
      for (size_t r = 0; r < rows; ++r) {
        const T* pr = p.ptr<T>() + row_start(p, r, n);
        const T* tr = t.ptr<T>() + row_start(t, r, n);
        const T* wr = w.ptr<T>() + row_start(w, r, n);
        T s = 0;
        for (size_t i = 0; i < n; ++i)
          s -= wr[i] * std::log(tr[i] * pr[i] + (1 - tr[i]) * (1 - pr[i]));
        out[r] = s;
      }
    });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    const Tensor &p = *call.inputs[0], &t = *call.inputs[1], &w = *call.inputs[2];
    const size_t rows = call.output->rows(), n = p.sample_size();
    dispatch(p.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>();
      const bool add = prepare_gradient<T>(g, accumulate);
      for (size_t r = 0; r < rows; ++r) {
        const T* pr = p.ptr<T>() + row_start(p, r, n);
        const T* tr = t.ptr<T>() + row_start(t, r, n);
        const T* wr = w.ptr<T>() + row_start(w, r, n);
        T* dx = g.ptr<T>() + row_start(g, r, n);
        for (size_t i = 0; i < n; ++i) {
          const T q = tr[i] * pr[i] + (1 - tr[i]) * (1 - pr[i]);
          const T d = index == 0   ? -wr[i] * (2 * tr[i] - 1) / q
                      : index == 1 ? -wr[i] * (2 * pr[i] - 1) / q
                                   : -std::log(q);
          dx[i] = add ? dx[i] + dy[r] * d : dy[r] * d;
        }
      }
    });
  }
};

// ---- the minibatch-level criteria: ranking and edit distance -----------------------------------

// The rows of a minibatch in its logical order: sequences one after another, each in step order
// (a batch: its samples in order).
std::vector<size_t> rows_in_order(const Tensor& t) {
  const SequenceLayout& l = *t.layout;
  std::vector<size_t> rows;
  rows.reserve(l.rows());
  for (size_t b = 0; b < l.num_sequences(); ++b)
    for (size_t s = 0; s < l.lengths[b]; ++s) rows.push_back(l.row(b, s));
  return rows;
}

using op_util::MinibatchCriterionOp;

// The three operands of lambda_rank and ndcg_at_1: one number per sample, with dynamic axes.
// The value is CNTK's one number for the minibatch: a scalar without dynamic axes.
std::vector<OutputSpec> infer_ranking(const char* fn, const std::vector<Variable>& in) {
  const char* roles[] = {"output", "gain", "group"};
  for (size_t i = 0; i < 3; ++i) {
    LOOM_CHECK(in[i].shape().total_size() == 1, ShapeError, fn, ": ", roles[i], " ",
               in[i].type_string(), " must hold one number per sample");
    LOOM_CHECK(!in[i].dynamic_axes().empty(), ShapeError, fn, ": ", roles[i], " ",
               in[i].type_string(), " needs dynamic axes (the samples to rank)");
  }
  return MinibatchCriterionOp::scalar_output(fn, in);
}

// One sample of a group to rank.
struct RankedSample {
  size_t row;
  double score, gain;
  size_t rank = 0;  // by score within its group
};

// The groups of the minibatch (runs of equal group id, in the logical order), each ranked.
std::vector<std::vector<RankedSample>> ranked_groups(const OpCall& call) {
  const Tensor &s = *call.inputs[0], &gain = *call.inputs[1], &group = *call.inputs[2];
  std::vector<std::vector<RankedSample>> groups;
  dispatch(s.dtype, [&](auto zero) {
    using T = decltype(zero);
    int64_t previous = 0;
    for (size_t r : rows_in_order(s)) {
      const int64_t id = int64_t(group.ptr<T>()[r]);  // CNTK casts the id to an int
      if (groups.empty() || id != previous) groups.emplace_back();
      previous = id;
      groups.back().push_back({r, double(s.ptr<T>()[r]), double(gain.ptr<T>()[r])});
    }
  });
  for (auto& g : groups) {
    std::vector<size_t> order(g.size());
    std::iota(order.begin(), order.end(), size_t{0});
    // CNTK's Url ordering: the larger score first; equal scores (or NaN): the smaller gain.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const double sa = g[a].score, sb = g[b].score;
      if (sa == sb || std::isnan(sa) || std::isnan(sb)) return g[a].gain < g[b].gain;
      return sa > sb;
    });
    for (size_t k = 0; k < order.size(); ++k) g[order[k]].rank = k;
  }
  return groups;
}

// Σ gain / ln(2 + position), in the listed order (ideal) and by rank.
std::pair<double, double> dcg(const std::vector<RankedSample>& g) {
  double ideal = 0, actual = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    ideal += g[k].gain / std::log(2.0 + double(k));
    actual += g[k].gain / std::log(2.0 + double(g[k].rank));
  }
  return {ideal, actual};
}

class LambdaRankOp : public MinibatchCriterionOp {
 public:
  const char* name() const override { return "LambdaRank"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(0),
            .backward_reads_output = false,
            .runs_step_by_step = false};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return infer_ranking("lambda_rank", in);
  }
  void forward(OpCall& call) const override {
    const auto groups = ranked_groups(call);
    double sum = 0;
    for (const auto& g : groups) {
      const auto [ideal, actual] = dcg(g);
      if (ideal != 0) sum += actual / ideal;
    }
    // CNTK's (1 - mean NDCG) · 100 · #samples.
    const double samples = double(call.inputs[0]->rows());
    set_scalar(*call.output,
               groups.empty() ? 0 : (1 - sum / double(groups.size())) * 100 * samples);
  }
  void backward(OpCall& call, size_t, Tensor& g, bool accumulate) const override {
    const auto groups = ranked_groups(call);
    dispatch(g.dtype, [&](auto zero) {
      using T = decltype(zero);
      const size_t rows = g.rows();
      const double scale = double(*call.output_gradient->ptr<T>());
      std::vector<double> lambda(rows, 0.0);
      for (const auto& grp : groups) {
        const double ideal = dcg(grp).first;
        const double least = grp.back().gain;  // CNTK takes the last listed as the least
        for (size_t i = 0; i < grp.size(); ++i) {
          if (!(grp[i].gain > least)) continue;
          const double di = std::log(2.0 + double(grp[i].rank));
          for (size_t j = i + 1; j < grp.size(); ++j) {
            if (std::abs(grp[i].gain - grp[j].gain) < 1e-7) continue;
            const double dj = std::log(2.0 + double(grp[j].rank));
            const double delta = (grp[i].gain - grp[j].gain) * (di - dj) / (di * dj);
            const double size = ideal == 0 ? 0 : std::abs(delta / ideal);
            const double l = -size / (1 + std::exp(grp[i].score - grp[j].score));
            lambda[grp[i].row] += l;
            lambda[grp[j].row] -= l;
          }
        }
      }
      T* dx = g.ptr<T>();
      for (size_t r = 0; r < rows; ++r) {
        const T v = T(scale * lambda[r]);
        dx[r] = accumulate ? dx[r] + v : v;
      }
    });
  }
};

class NdcgAt1Op : public MinibatchCriterionOp {
 public:
  const char* name() const override { return "NDCG"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .runs_step_by_step = false};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return infer_ranking("ndcg_at_1", in);
  }
  void forward(OpCall& call) const override {
    const auto groups = ranked_groups(call);
    double sum = 0;
    for (const auto& g : groups) {
      if (g.front().gain == 0) continue;
      for (const RankedSample& s : g)
        if (s.rank == 0) sum += s.gain / g.front().gain;
    }
    // CNTK's mean NDCG@1 · 100 · #samples.
    const double samples = double(call.inputs[0]->rows());
    set_scalar(*call.output, groups.empty() ? 0 : sum / double(groups.size()) * 100 * samples);
  }
  void backward(OpCall&, size_t, Tensor&, bool) const override {
    throw StateError("ndcg_at_1 has no gradient");
  }
};

// The label sequence of each sequence of t (each step's first largest entry), squashed and
// filtered as CNTK's ExtractSampleSequence: runs of a label merge first, then the ignored labels
// drop out.
template <typename T>
std::vector<std::vector<size_t>> label_sequences(const Tensor& t, bool squash,
                                                 const std::vector<size_t>& ignore) {
  const SequenceLayout& l = *t.layout;
  const size_t n = t.sample_size();
  std::vector<std::vector<size_t>> out(l.num_sequences());
  for (size_t b = 0; b < l.num_sequences(); ++b) {
    size_t last = 0;
    for (size_t s = 0; s < l.lengths[b]; ++s) {
      const T* row = t.ptr<T>() + l.row(b, s) * n;
      const size_t label = size_t(std::max_element(row, row + n) - row);
      const bool repeat = squash && s > 0 && label == last;
      last = label;
      if (repeat || std::find(ignore.begin(), ignore.end(), label) != ignore.end()) continue;
      out[b].push_back(label);
    }
  }
  return out;
}

// CNTK's count of errors between a and b: the path of least penalized cost (ties: substitution,
// then deletion unless insertion is strictly cheaper), its edits counted one each.
size_t edit_errors(const std::vector<size_t>& a, const std::vector<size_t>& b, double sub,
                   double del, double ins) {
  struct Cell {
    double cost;
    size_t edits;
  };
  const size_t m = a.size(), n = b.size();
  std::vector<Cell> grid((m + 1) * (n + 1));
  auto at = [&](size_t i, size_t j) -> Cell& { return grid[i * (n + 1) + j]; };
  for (size_t i = 0; i <= m; ++i) at(i, 0) = {double(i) * del, i};
  for (size_t j = 0; j <= n; ++j) at(0, j) = {double(j) * ins, j};
  for (size_t i = 1; i <= m; ++i)
    for (size_t j = 1; j <= n; ++j) {
      if (a[i - 1] == b[j - 1]) {
        at(i, j) = at(i - 1, j - 1);
        continue;
      }
      const double d = at(i - 1, j).cost + del, in = at(i, j - 1).cost + ins,
                   s = at(i - 1, j - 1).cost + sub;
      if (s <= d && s <= in) {
        at(i, j) = {s, at(i - 1, j - 1).edits + 1};
      } else if (d < in) {
        at(i, j) = {d, at(i - 1, j).edits + 1};
      } else {
        at(i, j) = {in, at(i, j - 1).edits + 1};
      }
    }
  return at(m, n).edits;
}

// The labels to ignore: a list of label indices (ParamType::Ints). Files written before the
// table had a list type hold the all-static-axes name for the default [].
std::vector<size_t> tokens_to_ignore(const Dictionary& a) {
  const DictionaryValue& v = a.at("tokensToIgnore");
  std::vector<size_t> tokens;
  if (v.is<std::string>() && v.get<std::string>() == Axis::all_static_axes().name()) return tokens;
  for (int64_t t : attribute_ints(v)) {
    LOOM_CHECK(t >= 0, ArgumentError,
               "edit_distance_error: tokensToIgnore must hold label indices (ints >= 0), not ", t);
    tokens.push_back(size_t(t));
  }
  return tokens;
}

class EditDistanceErrorOp : public MinibatchCriterionOp {
 public:
  const char* name() const override { return "EditDistanceError"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .runs_step_by_step = false};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const char* fn = "edit_distance_error";
    check_same_shapes(fn, in[0], in[1]);
    for (const Variable& v : in)
      LOOM_CHECK(!v.dynamic_axes().empty(), ShapeError, fn, ": operand ", v.type_string(),
                 " needs dynamic axes (the sequences to compare)");
    tokens_to_ignore(a);  // an ArgumentError for anything but label indices
    for (const char* pen : {"subPen", "delPen", "insPen"})
      LOOM_CHECK(a.get<double>(pen) >= 0, ArgumentError, fn, ": ", pen,
                 " must not be negative, not ", a.get<double>(pen));
    return scalar_output(fn, in);
  }
  void forward(OpCall& call) const override {
    const Tensor &x = *call.inputs[0], &y = *call.inputs[1];
    const Dictionary& a = call.attributes;
    const bool squash = a.get<bool>("squashInputs");
    const std::vector<size_t> ignore = tokens_to_ignore(a);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const auto as = label_sequences<T>(x, squash, ignore);
      const auto bs = label_sequences<T>(y, squash, ignore);
      size_t errors = 0, reference = 0;
      for (size_t b = 0; b < as.size(); ++b) {
        if (x.layout->lengths[b] == 0) continue;
        errors += edit_errors(as[b], bs[b], a.get<double>("subPen"), a.get<double>("delPen"),
                              a.get<double>("insPen"));
        reference += bs[b].size();
      }
      // CNTK's errors · #steps / reference (a reference of no labels at all counts as one).
      set_scalar(*call.output,
                 double(errors) * double(x.rows()) / double(std::max<size_t>(reference, 1)));
    });
  }
  void backward(OpCall&, size_t, Tensor&, bool) const override {
    throw StateError("edit_distance_error has no gradient");
  }
};

// ---- nce_loss ----------------------------------------------------------------------------------

// CNTK's NCE block (Function.cpp, NCELoss) as one op. With q the normalized noise distribution,
// k = num_samples and log P_c = log(k q_c): k classes s_i drawn from q (shared by the
// minibatch's samples; without duplicates by rejection, as CNTK's RandomSample), importance
// weights w_c = q_c / (expected count of c in the draw: k q_c, or without duplicates
// 1 − (1 − q_c)^T with T the mean number of draws of 10 trial samplings, as CNTK's
// RandomSampleInclusionFrequency), and H = Σ_c k q_c log(k q_c). For a sample x with label y
// (one-hot or soft), z_c = W_c·x + b_c and z+ = Σ_c y_c z_c:
//   loss = logaddexp(z+, Σ_c y_c log P_c) − z+ + k Σ_i w_{s_i} logaddexp(z_{s_i}, log P_{s_i}) − H.
// Inputs: weights [classes, dim], biases [classes, 1], inputs [dim], labels [classes],
// noise_distribution [classes] (weights >= 0, not all 0). Attributes: num_samples,
// allow_duplicates and, as every random op's, an optional seed (uint64) for the function's
// generator, which draws the classes: a seed repeats the same sequence of draws; without it
// (auto_select) the generator comes from the global seed sequence. Older files hold
// random_seed (int64, -1 for auto_select), which the op ignores (docs/decisions.md).
class NceOp : public OpDef {
 public:
  const char* name() const override { return "NCE"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(0) | InputSet::only(1) | InputSet::only(2),
            .accepts_sparse = InputSet::only(3),
            .runs_step_by_step = false,
            .is_random = true};
  }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const char* fn = "nce_loss";
    const Variable &W = in[0], &b = in[1], &x = in[2], &y = in[3], &q = in[4];
    LOOM_CHECK(q.shape().rank() == 1 && q.dynamic_axes().empty(), ShapeError, fn,
               ": noise_distribution must be a vector without dynamic axes, not ", q.type_string());
    const size_t classes = q.shape()[0];
    LOOM_CHECK(x.shape().rank() == 1 && !x.dynamic_axes().empty(), ShapeError, fn,
               ": inputs must be a vector per sample, not ", x.type_string());
    LOOM_CHECK(y.shape() == NDShape{classes}, ShapeError, fn, ": labels ", y.type_string(),
               " must have the noise distribution's ", classes, " classes");
    LOOM_CHECK(W.dynamic_axes().empty() && b.dynamic_axes().empty(), ShapeError, fn,
               ": weights and biases must not have dynamic axes");
    LOOM_CHECK(W.shape().rank() == 2 && W.shape()[0] == classes, ShapeError, fn, ": weights ",
               W.shape().to_string(), " must be [", classes, ", input dimension]");
    if (W.shape()[1] == NDShape::kInferred) {
      LOOM_CHECK(W.is_parameter(), ShapeError, fn, ": only a parameter can have inferred axes");
      resolve_parameter_shape(W, NDShape{classes, x.shape()[0]});
    }
    LOOM_CHECK(W.shape()[1] == x.shape()[0], ShapeError, fn, ": weights ", W.shape().to_string(),
               " do not match inputs of dimension ", x.shape()[0]);
    LOOM_CHECK(b.shape() == (NDShape{classes, 1}), ShapeError, fn, ": biases ",
               b.shape().to_string(), " must be [", classes, ", 1]");
    const int64_t k = a.get<int64_t>("num_samples");
    LOOM_CHECK(k >= 1, ArgumentError, fn, ": num_samples must be at least 1, not ", k);
    LOOM_CHECK(a.get<bool>("allow_duplicates") || size_t(k) <= classes, ArgumentError, fn,
               ": cannot draw ", k, " distinct classes of ", classes);
    return {{NDShape{1}, common_dtype(fn, in), x.dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    dispatch(call.output->dtype, [&](auto zero) { forward_as<decltype(zero)>(call); });
  }
  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    dispatch(g.dtype, [&](auto zero) {
      using T = decltype(zero);
      const Minibatch<T> m(call);
      const T* dy = call.output_gradient->ptr<T>();
      if (index == 0)
        kernels::nce_backward_weights(m.batch, m.kept, dy, g.ptr<T>(), accumulate, m.work);
      else if (index == 1)
        kernels::nce_backward_biases(m.batch, m.kept, dy, g.ptr<T>(), accumulate);
      else
        kernels::nce_backward_inputs(m.batch, m.kept, dy, g.ptr<T>(), accumulate, m.work);
    });
  }

 private:
  // The op's arrays for the kernels (kernels/nce.h): the inputs, the labels as CSR rows from 0
  // (a sparse tensor's own arrays, else the nonzeros of its rows: dense labels, or one row that
  // every sample uses) and the scratch area: the noise sampler's tables, then what forward fills
  // and backward reads: the k classes drawn, then in T their log priors and k times their
  // importance weights, the labels' log priors, what forward keeps and backward's work.
  template <typename T>
  struct Minibatch {
    kernels::NceBatch<T> batch;
    kernels::NceKept<T> kept;
    double* sampler_tables;
    size_t* noise;
    T *noise_log_prior, *noise_weight, *label_log_prior, *work;
    std::vector<int32_t> offsets, classes;
    std::vector<T> values;

    explicit Minibatch(const OpCall& call) {
      const Tensor &W = *call.inputs[0], &x = *call.inputs[2], &y = *call.inputs[3];
      kernels::NceBatch<T>& b = batch;
      b.rows = x.rows();
      b.dim = x.sample_size();
      b.classes = W.shape[0];
      b.k = size_t(call.attributes.get<int64_t>("num_samples"));
      b.x = x.ptr<T>();
      b.weights = W.ptr<T>();
      b.biases = call.inputs[1]->ptr<T>();
      if (y.is_sparse() && y.dynamic() && y.sparse->csr_row_offsets()[0] == 0) {
        b.label_offsets = y.sparse->csr_row_offsets().data();
        b.label_classes = y.sparse->csr_col_indices().data();
        b.label_values = y.sparse->csr_values<T>();
      } else {
        const TargetRows<T> rows(y, b.classes);
        offsets.push_back(0);
        for (size_t r = 0; r < b.rows; ++r) {
          rows.for_each(r, [&](size_t c, T v) {
            classes.push_back(int32_t(c));
            values.push_back(v);
          });
          offsets.push_back(int32_t(classes.size()));
        }
        b.label_offsets = offsets.data();
        b.label_classes = classes.data();
        b.label_values = values.data();
      }
      const size_t k = b.k, rows = b.rows;
      const size_t tables = kernels::ClassSampler::table_size(b.classes);
      const size_t elements =
          2 * k + rows + k * b.dim + rows * k + rows + kernels::nce_work_size(b);
      auto* s = static_cast<char*>(call.scratch->ensure(tables * sizeof(double) +
                                                        k * sizeof(size_t) + elements * sizeof(T)));
      sampler_tables = reinterpret_cast<double*>(s);
      noise = reinterpret_cast<size_t*>(sampler_tables + tables);
      b.noise = noise;
      noise_log_prior = reinterpret_cast<T*>(noise + k);
      noise_weight = noise_log_prior + k;
      label_log_prior = noise_weight + k;
      kept.noise_weights = label_log_prior + rows;
      kept.dz_noise = kept.noise_weights + k * b.dim;
      kept.dz_label = kept.dz_noise + rows * k;
      work = kept.dz_label + rows;
    }
  };

  // Draws the classes, as CNTK's block: the draw, then (without duplicates) the trial draws of
  // the inclusion frequencies, from the function's generator.
  template <typename T>
  static void forward_as(OpCall& call) {
    Minibatch<T> m(call);
    const size_t k = m.batch.k;
    const kernels::ClassSampler sampler(call.inputs[4]->ptr<T>(), m.batch.classes, "nce_loss",
                                        "noise_distribution", m.sampler_tables);
    // log P_c = log(k q_c), −inf for a class of no noise.
    auto log_prior = [&](size_t c) {
      const double u = double(k) * sampler.probability(c);
      return u > 0 ? std::log(u) : -std::numeric_limits<double>::infinity();
    };
    const bool duplicates = call.attributes.get<bool>("allow_duplicates");
    const std::vector<size_t> drawn = sampler.draw(k, duplicates, *call.random);
    const std::vector<double> expected =
        sampler.inclusion_frequencies(k, duplicates, *call.random, drawn);
    for (size_t i = 0; i < k; ++i) {
      m.noise[i] = drawn[i];
      m.noise_log_prior[i] = T(log_prior(drawn[i]));
      m.noise_weight[i] = T(double(k) * sampler.probability(drawn[i]) / expected[i]);
    }
    const kernels::NceBatch<T>& b = m.batch;
    for (size_t r = 0; r < b.rows; ++r) {
      double l = 0;
      for (int32_t e = b.label_offsets[r]; e < b.label_offsets[r + 1]; ++e)
        l += double(b.label_values[e]) * log_prior(size_t(b.label_classes[e]));
      m.label_log_prior[r] = T(l);
    }
    kernels::nce_forward(b, m.label_log_prior, m.noise_log_prior, m.noise_weight,
                         kernels::nce_entropy(b.classes, call.inputs[4]->ptr<T>(), k),
                         call.output->ptr<T>(), m.kept);
  }
};

const ElementSumLossOp kSquaredError("SquaredError", kernels::RowLoss::SquaredError);
const CrossEntropyWithSoftmaxOp kCrossEntropyWithSoftmax;
const ElementSumLossOp kBinaryCrossEntropy("BinaryCrossEntropy",
                                           kernels::RowLoss::BinaryCrossEntropy);
const ClassificationErrorOp kClassificationError;
const CosDistanceOp kCosDistance;
const CosDistanceWithNegativeSamplesOp kCosDistanceWithNegativeSamples;
const WeightedLogisticOp kWeightedLogistic;
const LambdaRankOp kLambdaRank;
const NdcgAt1Op kNdcgAt1;
const EditDistanceErrorOp kEditDistanceError;
const NceOp kNce;

}  // namespace

namespace {

Dictionary edit_distance_attributes(const EditDistanceOptions& o) {
  DictionaryVector tokens;
  for (size_t token : o.tokens_to_ignore) tokens.push_back(int64_t(token));
  return Dictionary({{"subPen", o.sub_pen},
                     {"delPen", o.del_pen},
                     {"insPen", o.ins_pen},
                     {"squashInputs", o.squash_inputs},
                     {"tokensToIgnore", tokens}});
}

Dictionary negatives(size_t shift, size_t count) {
  return Dictionary({{"shift", int64_t(shift)}, {"num_negative_samples", int64_t(count)}});
}

}  // namespace

namespace {
Function classification_error_op(const Variable& z, const Variable& target, size_t top_n,
                                 Dictionary a, const std::string& name) {
  LOOM_CHECK(top_n >= 1, ArgumentError, "classification_error: top_n must be at least 1");
  a["top_n"] = int64_t(top_n);
  return make_primitive(kClassificationError, {z, target}, std::move(a), name);
}

// The attributes of cross_entropy_with_softmax or classification_error (fn) along `axis`: none
// for a vector sample (the op over the whole sample, as model files have always held it), else
// the axis, which shape inference checks, also once the shapes of placeholders are known (a
// criterion made over placeholders, as @Function makes it).
Dictionary along_axis(const char* fn, const Variable& z, const Variable& target, const Axis& axis) {
  const Variable& known = z.has_known_shape() ? z : target;
  if (known.has_known_shape() && known.shape().rank() == 1) {
    sample_axis(fn, known, axis);
    return {};
  }
  static_index(fn, axis);
  return Dictionary({{"axis", axis_attribute(axis)}});
}
}  // namespace

std::vector<OpSchema> losses_schemas() {
  const ConformanceInput z{NDShape{4}}, t{NDShape{4}, true, 0, 1};
  const ConformanceInput one_hot{.shape = NDShape{4}, .sparse = true};  // sparse labels
  const ConformanceInput probability{NDShape{4}, true, 0.1, 0.9}, weight{NDShape{4}, true, 0.1, 2};
  // Along an axis of a [3, 4] sample: soft targets, and targets one-hot along axis 1 (rows) or
  // along axis 0 (columns).
  const ConformanceInput matrix{NDShape{3, 4}}, soft{NDShape{3, 4}, true, 0, 1};
  const ConformanceInput one_hot_rows{.shape = NDShape{3, 4},
                                      .values = {0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}};
  const ConformanceInput one_hot_columns{.shape = NDShape{3, 4},
                                         .values = {1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0}};
  auto along = [](int64_t axis) { return Dictionary({{"axis", axis}}); };
  // Ranking: one score, gain and group (its integer part: 0, 1 or 2) per sample.
  const ConformanceInput score{NDShape{1}, true, -3, 3}, gain{NDShape{1}, true, 0.1, 3},
      group{NDShape{1}, true, 0.1, 2.9};
  return {
      {&kSquaredError,
       2,
       2,
       "squared_error",
       "losses",
       {{"output"}, {"target"}},
       false,
       "the sum of the squared differences of output and target per sample",
       {.op_type = "ReduceSumSquare"},  // of a Sub: loom/deploy's own code exports it
       {{{z, z}}}},
      // Along an axis of a sample of rank 2 or more: the "axis" attribute (along_axis).
      {.op = &kCrossEntropyWithSoftmax,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "cross_entropy_with_softmax",
       .module = "losses",
       .params = {{"output_vector"}, {"target_vector"}, {"axis", ParamType::Axis, int64_t{-1}}},
       .doc = "-sum(target_vector * log(softmax(output_vector))) along axis, the axis kept as 1 "
              "(a vector sample: one value of shape (1,))",
       // less a ReduceSum: loom/deploy's own code exports it
       .onnx = {.op_type = "ReduceLogSumExp"},
       .conformance = {{{z, t}},
                       {{z, one_hot}},
                       {{matrix, soft}, along(0)},
                       {{matrix, soft}, along(1)},
                       {{matrix, soft}, along(-2)},
                       // The export takes operands of one type.
                       {.inputs = {matrix, {NDShape{3, 4}, false, 0, 1}},
                        .attributes = along(-1),
                        .onnx = false}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             return cross_entropy_with_softmax(in[0], in[1], attribute_axis(a.at("axis")), name);
           }},
      {&kBinaryCrossEntropy,
       2,
       2,
       "binary_cross_entropy",
       "losses",
       {{"output"}, {"target"}},
       false,
       "-(target log(output) + (1 - target) log(1 - output)) summed per sample",
       {.op_type = "ReduceSum"},  // of Logs: loom/deploy's own code exports it
       {{{{NDShape{4}, true, 0.1, 0.9}, t}}}},
      // topN is stored as "top_n", as model files have it. Along an axis of a sample of rank 2
      // or more: the "axis" attribute (along_axis); argmax_target: CNTK's node (model files).
      {.op = &kClassificationError,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "classification_error",
       .module = "metrics",
       .params = {{"output_vector"},
                  {"target_vector"},
                  {"axis", ParamType::Axis, int64_t{-1}},
                  {"topN", ParamType::Int, int64_t{kClassificationErrorTopN}, "top_n"}},
       .doc = "1 where target_vector's class (its largest entry) is not among the topN largest "
              "entries of output_vector (a vector), else 0; along an axis of a sample of rank "
              "2 or more (topN 1), the fraction of the slices along it where target_vector "
              "differs from (output_vector == its largest entry)",
       .onnx = {.op_type = "ArgMax"},  // and comparisons: loom/deploy's own code exports it
       .conformance = {{{z, t}, Dictionary({{"top_n", int64_t{1}}})},
                       {{z, t}, Dictionary({{"top_n", int64_t{2}}})},
                       {{z, t}, Dictionary({{"top_n", int64_t{1}}, {"argmax_target", true}})},
                       {{z, one_hot}, Dictionary({{"top_n", int64_t{1}}})},
                       {{matrix, one_hot_rows}, along(1)},
                       {{matrix, one_hot_rows}, along(-1)},
                       {{matrix, one_hot_columns}, along(0)},
                       {{matrix, one_hot_columns}, along(-2)}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             const int64_t top_n = a.get<int64_t>("top_n");
             LOOM_CHECK(top_n >= 1, ArgumentError,
                        "classification_error: topN must be at least 1, not ", top_n);
             if (a.contains("argmax_target") && a.get<bool>("argmax_target"))
               return classification_error_node(in[0], in[1], size_t(top_n), name);
             return classification_error(in[0], in[1], size_t(top_n), attribute_axis(a.at("axis")),
                                         name);
           }},
      {&kCosDistance,
       2,
       2,
       "cosine_distance",
       "losses",
       {{"x"}, {"y"}},
       false,
       "the cosine of the angle between x and y per sample",
       {.none_because = "ONNX has no cosine similarity node"},
       {{{z, z}}, {{z, {NDShape{4}, false}}}, {{{NDShape{2, 3}}, {NDShape{2, 3}}}}}},
      {&kCosDistanceWithNegativeSamples,
       2,
       2,
       "cosine_distance_with_negative_samples",
       "losses",
       {{"x"}, {"y"}, {"shift", ParamType::Int}, {"num_negative_samples", ParamType::Int}},
       false,
       "the cosine distance of x with y and with num_negative_samples other samples of y",
       {.none_because = "ONNX has no node that mixes the samples of a minibatch"},
       {{.inputs = {z, z}, .attributes = negatives(1, 2), .per_sequence = false},
        {.inputs = {z, z}, .attributes = negatives(2, 1), .per_sequence = false}}},
      {&kWeightedLogistic,
       3,
       3,
       "weighted_binary_cross_entropy",
       "losses",
       {{"output"}, {"target"}, {"weight"}},
       false,
       "binary cross entropy with a weight per element",
       {.none_because = "ONNX has no binary cross entropy node"},
       {{{probability, t, weight}}, {{probability, t, {NDShape{4}, false, 0.1, 2}}}}},
      {&kLambdaRank,
       3,
       3,
       "lambda_rank",
       "losses",
       {{"output"}, {"gain"}, {"group"}},
       false,
       "LambdaRank's criterion over the groups of the minibatch, 100 x (1 - mean NDCG) x #samples",
       {.none_because = "ONNX has no ranking criteria"},
       // LambdaRank's gradient is by design not the derivative of its (piecewise constant) value.
       {{{score, gain, group}, {}, true, true, false}}},
      {&kNdcgAt1,
       3,
       3,
       "ndcg_at_1",
       "metrics",
       {{"output"}, {"gain"}, {"group"}},
       false,
       "NDCG at 1 over the groups of the minibatch, as a percentage, x #samples",
       {.none_because = "ONNX has no ranking metrics"},
       {{{score, gain, group}}}},
      {&kEditDistanceError,
       2,
       2,
       "edit_distance_error",
       "metrics",
       // The penalties' defaults are ints and tokensToIgnore's a list, as CNTK shows them.
       {{"input_a"},
        {"input_b"},
        {"subPen", ParamType::Double, int64_t(EditDistanceOptions{}.sub_pen)},
        {"delPen", ParamType::Double, int64_t(EditDistanceOptions{}.del_pen)},
        {"insPen", ParamType::Double, int64_t(EditDistanceOptions{}.ins_pen)},
        {"squashInputs", ParamType::Bool, EditDistanceOptions{}.squash_inputs},
        {.name = "tokensToIgnore",
         .type = ParamType::Ints,
         .default_value = int_list_attribute({}),
         .list_default = true}},
       false,
       "the edit distance between the label sequences (argmax per step) of input_a and input_b, "
       "as CNTK's EditDistanceError counts it: the edits of the path of least penalized cost "
       "(subPen, delPen, insPen), after squashing runs of a label (squashInputs) and dropping the "
       "labels tokensToIgnore lists. The value is CNTK's one number for the minibatch (no dynamic "
       "axes): errors * #steps / (total length of input_b's label sequences), which the Trainer "
       "divides by input_a's #steps. No gradient",
       {.none_because = "ONNX has no edit distance node"},
       {{{z, z}, edit_distance_attributes(EditDistanceOptions{})},
        {{z, z},
         edit_distance_attributes({.sub_pen = 2,
                                   .del_pen = 1,
                                   .ins_pen = 0.5,
                                   .squash_inputs = true,
                                   .tokens_to_ignore = {1}})}}},
      {&kNce,
       5,
       5,
       // python/loom/losses.py's nce_loss (CNTK's signature, seed) calls this one.
       "_nce_loss",
       "losses",
       {{"weights"},
        {"biases"},
        {"inputs"},
        {"labels"},
        {"noise_distribution"},
        {"num_samples", ParamType::Int, int64_t(NceOptions{}.num_samples)},
        {"allow_duplicates", ParamType::Bool, NceOptions{}.allow_duplicates},
        {"seed", ParamType::Seed, kAutoSelectRandomSeed}},
       false,
       "noise contrastive estimation loss (CNTK's NCE)",
       {.none_because = "ONNX has no sampled loss"},
       // 4 classes of dimension 3, one-hot labels, a seeded draw of 3 with duplicates.
       {{{{NDShape{4, 3}, false},
          {NDShape{4, 1}, false},
          {NDShape{3}},
          one_hot,
          {.shape = NDShape{4}, .per_sample = false, .low = 0.1, .high = 1, .constant = true}},
         Dictionary({{"num_samples", int64_t{3}}, {"seed", uint64_t{5}}})}}},
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
  return classification_error_op(z, target, top_n, {}, name);
}

Function classification_error_node(const Variable& z, const Variable& target, size_t top_n,
                                   const std::string& name) {
  return classification_error_op(z, target, top_n, Dictionary({{"argmax_target", true}}), name);
}

Function cosine_distance(const Variable& x, const Variable& y, const std::string& name) {
  return make_primitive(kCosDistance, {x, y}, {}, name);
}

Function cosine_distance_with_negative_samples(const Variable& x, const Variable& y, size_t shift,
                                               size_t num_negative_samples,
                                               const std::string& name) {
  return make_primitive(kCosDistanceWithNegativeSamples, {x, y},
                        negatives(shift, num_negative_samples), name);
}

Function weighted_binary_cross_entropy(const Variable& output, const Variable& target,
                                       const Variable& weight, const std::string& name) {
  return make_primitive(kWeightedLogistic, {output, target, weight}, {}, name);
}

Function lambda_rank(const Variable& output, const Variable& gain, const Variable& group,
                     const std::string& name) {
  return make_primitive(kLambdaRank, {output, gain, group}, {}, name);
}

Function ndcg_at_1(const Variable& output, const Variable& gain, const Variable& group,
                   const std::string& name) {
  return make_primitive(kNdcgAt1, {output, gain, group}, {}, name);
}

Function edit_distance_error(const Variable& a, const Variable& b,
                             const EditDistanceOptions& options, const std::string& name) {
  return make_primitive(kEditDistanceError, {a, b}, edit_distance_attributes(options), name);
}

Function fmeasure(const Variable& output, const Variable& target, const FMeasureOptions& options,
                  const std::string& name) {
  const char* fn = "fmeasure";
  LOOM_CHECK(output.shape().rank() == target.shape().rank(), ShapeError, fn, ": output ",
             output.type_string(), " and target ", target.type_string(), " differ in rank");
  LOOM_CHECK(std::isfinite(options.beta), ArgumentError, fn, ": beta must be finite, not ",
             options.beta);
  // CNTK: a rank-3 sample sums over its last two axes (the first is the class axis).
  const bool per_class = output.shape().rank() == 3;
  auto sum = [per_class](const Variable& v) {
    return per_class ? reduce_sum(v, std::vector<Axis>{Axis(1), Axis(2)}) : reduce_sum(v);
  };
  const DataType dtype = output.dtype();
  const double b2 = options.beta * options.beta;
  const Function correct = sum(element_times(output, target));
  const Function precision = element_divide(correct, sum(output));
  const Function recall = element_divide(correct, sum(target));
  const Function f =
      element_divide(element_times(constant(1 + b2, dtype), element_times(precision, recall)),
                     plus(element_times(constant(b2, dtype), precision), recall));
  return minus(constant(1.0, dtype), f, name);
}

Function nce_loss(const Variable& weights, const Variable& biases, const Variable& inputs,
                  const Variable& labels, const Variable& noise_distribution,
                  const NceOptions& options, const std::string& name) {
  LOOM_CHECK(options.num_samples >= 1, ArgumentError, "nce_loss: num_samples must be at least 1");
  Dictionary a;
  a["num_samples"] = int64_t(options.num_samples);
  a["allow_duplicates"] = options.allow_duplicates;
  if (options.seed) a["seed"] = *options.seed;
  return make_primitive(kNce, {weights, biases, inputs, labels, noise_distribution}, std::move(a),
                        name);
}

Function cross_entropy_with_softmax(const Variable& z, const Variable& target, const Axis& axis,
                                    const std::string& name) {
  return make_primitive(kCrossEntropyWithSoftmax, {z, target},
                        along_axis("cross_entropy_with_softmax", z, target, axis), name);
}

Function classification_error(const Variable& z, const Variable& target, size_t top_n,
                              const Axis& axis, const std::string& name) {
  return classification_error_op(z, target, top_n,
                                 along_axis("classification_error", z, target, axis), name);
}

HierarchicalSoftmax hierarchical_softmax_layer(const Variable& input, const Variable& label_index,
                                               size_t label_dim, size_t label_classes) {
  const char* fn = "hierarchical_softmax_layer";
  LOOM_CHECK(input.shape().rank() == 1, ShapeError, fn, ": input must be a vector, not ",
             input.type_string());
  LOOM_CHECK(label_index.shape().total_size() == 1, ShapeError, fn,
             ": label_index must hold one index per sample, not ", label_index.type_string());
  LOOM_CHECK(label_dim >= 1, ArgumentError, fn, ": label_dim must be at least 1");
  if (label_classes == 0) label_classes = size_t(std::ceil(std::sqrt(double(label_dim))));
  const size_t d = input.shape()[0], c = label_classes, n = (label_dim + c - 1) / c;
  const DataType dtype = input.dtype();
  auto scalar = [dtype](double v) { return constant(v, dtype); };
  // A one-hot vector [size] of an index held as a number.
  auto one_hot = [dtype](const Variable& index, size_t size) {
    std::vector<double> range(size);
    std::iota(range.begin(), range.end(), 0.0);
    return dispatch(dtype, [&](auto zero) {
      using T = decltype(zero);
      return equal(index, constant(NDArrayView::from_vector<T>(
                              {size}, std::vector<T>(range.begin(), range.end()))));
    });
  };
  const Variable label = reshape(label_index, NDShape{1});
  const Function target_class = floor(element_divide(plus(label, scalar(0.5)), scalar(double(n))));
  const Function target_in_class =
      round(minus(label, element_times(target_class, scalar(double(n)))));

  const Parameter w1 = parameter({d, c}, glorot_normal(), dtype, "hsoftmax_w1");
  const Parameter b1 = parameter({c}, glorot_normal(), dtype, "hsoftmax_b1");
  const Parameter w2s = parameter({c, d, n}, glorot_normal(), dtype, "hsoftmax_w2s");
  const Parameter b2s = parameter({c, n}, glorot_normal(), dtype, "hsoftmax_b2s");

  HierarchicalSoftmax h;
  h.class_probs = softmax(plus(b1, times(input, w1)));
  // Every class's in-class scores at once, [c, n], then a softmax within each class.
  const Function scores = reduce_sum(element_times(reshape(input, {1, d, 1}), w2s), Axis(1));
  const Function in_classes = softmax(plus(reshape(scores, {c, n}), b2s), Axis(-1));
  const Function class_one_hot = one_hot(target_class, c);
  const Function in_class =
      reduce_sum(element_times(reshape(class_one_hot, {c, 1}), in_classes), Axis(0));
  const Function prob_in_class =
      reduce_sum(element_times(reshape(in_class, {n}), one_hot(target_in_class, n)));
  h.output_prob =
      element_times(prob_in_class, reduce_sum(element_times(class_one_hot, h.class_probs)));
  for (size_t i = 0; i < c; ++i) {
    const Function ci = one_hot(scalar(double(i)), c);
    const Function row = reduce_sum(element_times(reshape(ci, {c, 1}), in_classes), Axis(0));
    h.all_probs.push_back(
        element_times(reshape(row, {n}), reduce_sum(element_times(ci, h.class_probs))));
  }
  return h;
}

}  // namespace loom
