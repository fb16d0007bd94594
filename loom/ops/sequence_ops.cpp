#include "loom/ops/sequence_ops.h"

#include <algorithm>

#include "loom/graph/op.h"
#include "loom/ops/op_defs.h"
#include "loom/ops/op_util.h"

namespace loom::sequence {

namespace {

enum class Pick { First, Last, Sum };

class SequenceReduceOp : public OpDef {
 public:
  constexpr SequenceReduceOp(const char* name, Pick pick) : name_(name), pick_(pick) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable& x = in[0];
    LOOM_CHECK(x.has_sequence_axis(), ShapeError, name_, ": input ", x.type_string(),
               (x.name().empty() ? "" : " '" + x.name() + "'"),
               " has no sequence axis (dynamic axes must be {batch, sequence axis})");
    return {{x.shape(), x.dtype(), {x.dynamic_axes()[0]}, false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache& layouts) const override {
    return layouts.batch(in[0]->layout->num_sequences());
  }

  // Output row b is sequence b (the minibatch's order), gathered from the packed rows.
  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    const SequenceLayout& l = *x.layout;
    const size_t n = op_util::sample_size(x);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* src = x.ptr<T>();
      for (size_t b = 0; b < l.num_sequences(); ++b) {
        T* dst = y.ptr<T>() + b * n;
        const size_t len = l.lengths[b];
        if (len == 0) {
          std::fill_n(dst, n, T(0));
          continue;
        }
        for_each_step(l, b, [&](size_t t, size_t k) {
          op_util::copy_or_add(n, src + l.row(b, t) * n, dst, k > 0);
        });
      }
    });
  }

  // The reverse: dy of sequence b goes to the packed rows it was gathered from.
  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const SequenceLayout& l = *call.inputs[0]->layout;
    const size_t n = op_util::sample_size(dx);
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      // First and last leave the other rows without gradient; reduce_sum reaches every row.
      const bool fill = !accumulate && pick_ != Pick::Sum;
      if (fill) std::fill_n(dx.ptr<T>(), dx.size(), T(0));
      const T* dy = call.output_gradient->ptr<T>();
      for (size_t b = 0; b < l.num_sequences(); ++b)
        for_each_step(l, b, [&](size_t t, size_t) {
          op_util::copy_or_add(n, dy + b * n, dx.ptr<T>() + l.row(b, t) * n, accumulate || fill);
        });
    });
  }

 private:
  // Calls f(t, k) for the k-th step t of sequence b that the op reads.
  template <class F>
  void for_each_step(const SequenceLayout& l, size_t b, F&& f) const {
    const size_t len = l.lengths[b];
    if (len == 0) return;
    switch (pick_) {
      case Pick::First:
        f(size_t{0}, size_t{0});
        break;
      case Pick::Last:
        f(len - 1, size_t{0});
        break;
      case Pick::Sum:
        for (size_t t = 0; t < len; ++t) f(t, t);
        break;
    }
  }

  const char* name_;
  Pick pick_;
};

const SequenceReduceOp kFirst("SequenceFirst", Pick::First);
const SequenceReduceOp kLast("SequenceLast", Pick::Last);
const SequenceReduceOp kReduceSum("SequenceReduceSum", Pick::Sum);

}  // namespace

const OpDef& first_op() {
  return kFirst;
}
const OpDef& last_op() {
  return kLast;
}
const OpDef& reduce_sum_op() {
  return kReduceSum;
}

Function first(const Variable& x, const std::string& name) {
  return make_primitive(kFirst, {x}, {}, name);
}
Function last(const Variable& x, const std::string& name) {
  return make_primitive(kLast, {x}, {}, name);
}
Function reduce_sum(const Variable& x, const std::string& name) {
  return make_primitive(kReduceSum, {x}, {}, name);
}

}  // namespace loom::sequence
