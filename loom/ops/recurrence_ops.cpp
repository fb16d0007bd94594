#include "loom/ops/recurrence_ops.h"

#include <algorithm>
#include <cstdlib>

#include "loom/graph/op.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"

namespace loom::sequence {

namespace {

// Which rows of step t read the operand: the first `rows` ranks of the step read the rows of
// step t - shift that start at `from` (sorted lengths make them a prefix and a contiguous block);
// the other ranks of step t are at a sequence boundary and read the initial state.
struct Source {
  size_t rows = 0;
  size_t from = 0;
};

Source source(const SequenceLayout& l, size_t t, int64_t shift) {
  if (shift > 0)
    return size_t(shift) <= t ? Source{l.active(t), l.step_offsets[t - size_t(shift)]} : Source{};
  const size_t u = t + size_t(-shift);
  return u < l.max_length() ? Source{l.active(u), l.step_offsets[u]} : Source{};
}

// Attribute: "offset" (int64, >= 1), as CNTK's PastValue/FutureValue.
class DelayOp : public OpDef {
 public:
  constexpr DelayOp(const char* name, int64_t direction) : name_(name), direction_(direction) {}
  const char* name() const override { return name_; }
  int64_t time_shift(const Dictionary& a) const { return direction_ * a.get<int64_t>("offset"); }
  OpTraits traits(const Dictionary& a) const override { return {.time_shift = time_shift(a)}; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    LOOM_CHECK(in.size() == 2, ArgumentError, name_,
               " takes 2 inputs, the operand and the initial state, not ", in.size());
    const Variable &x = in[0], &s = in[1];
    LOOM_CHECK(a.get<int64_t>("offset") >= 1, ShapeError, name_, ": time_step ",
               a.get<int64_t>("offset"), " must be at least 1 (delay(x, s, 0) is x itself)");
    LOOM_CHECK(x.dynamic_axes().size() == 2, ShapeError, name_, ": operand ", x.describe(),
               " must have a batch and a sequence axis");
    const DataType dtype = common_dtype(name_, in);
    if (s.has_batch_axis()) {
      LOOM_CHECK(s.shape() == x.shape() && s.dynamic_axes()[0] == x.dynamic_axes()[0], ShapeError,
                 name_, ": per-sequence initial state ", s.describe(), " must have operand ",
                 x.describe(), "'s sample shape and batch axis");
    } else {
      LOOM_CHECK(broadcast_shapes(name_, in) == x.shape(), ShapeError, name_, ": initial state ",
                 s.describe(), " does not broadcast to operand ", x.describe(), "'s shape");
    }
    return {{x.shape(), dtype, x.dynamic_axes(), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache&) const override {
    return in[0]->layout;
  }

  void forward(OpCall& call) const override {
    for (size_t t = 0, T = call.inputs[0]->layout->max_length(); t < T; ++t) forward_step(call, t);
  }

  void forward_step(OpCall& call, size_t t) const override {
    const Tensor &x = *call.inputs[0], &s = *call.inputs[1];
    Tensor& y = *call.output;
    const SequenceLayout& l = *x.layout;
    check_initial_state(s, l);
    const size_t n = op_util::sample_size(y), row0 = l.step_offsets[t];
    const Source src = source(l, t, time_shift(call.attributes));
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = y.ptr<T>() + row0 * n;
      op_util::copy_or_add(src.rows * n, x.ptr<T>() + src.from * n, out, false);
      if (src.rows == l.active(t)) return;
      const T* init = s.ptr<T>();
      if (!s.dynamic() && s.size() != n) {  // broadcast the state to one sample
        T* b = static_cast<T*>(call.scratch->ensure(n * sizeof(T)));
        kernels::reduce_backward(kernels::ReduceOp::Sum, sample_dims(0, y),
                                 static_cast<const T*>(nullptr),
                                 op_util::aligned_dims(1, s, op_util::sample_rank(y), false),
                                 static_cast<const T*>(nullptr), init, b, false);
        init = b;
      }
      for (size_t r = src.rows; r < l.active(t); ++r) {
        const size_t c = carried_row(call, l, r, t);
        const T* row = c != kNone    ? call.carried->ptr<T>() + c * n
                       : s.dynamic() ? init + state_row(*s.layout, l, r, t, call.attributes) * n
                                     : init;
        op_util::copy_or_add(n, row, out + r * n, false);
      }
    });
  }

  void backward(OpCall& call, size_t index, Tensor& g, bool accumulate) const override {
    if (!accumulate)
      dispatch(g.dtype, [&](auto zero) { std::fill_n(g.ptr<decltype(zero)>(), g.size(), zero); });
    for (size_t t = 0, T = call.inputs[0]->layout->max_length(); t < T; ++t)
      backward_step(call, index, g, t);
  }

  void backward_step(OpCall& call, size_t index, Tensor& g, size_t t) const override {
    const Tensor& s = *call.inputs[1];
    const SequenceLayout& l = *call.inputs[0]->layout;
    const size_t n = op_util::sample_size(*call.output), row0 = l.step_offsets[t];
    const Source src = source(l, t, time_shift(call.attributes));
    dispatch(g.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = call.output_gradient->ptr<T>() + row0 * n;
      if (index == 0) {
        op_util::copy_or_add(src.rows * n, dy, g.ptr<T>() + src.from * n, true);
        return;
      }
      if (src.rows == l.active(t)) return;
      if (s.dynamic() || s.size() == n) {
        for (size_t r = src.rows; r < l.active(t); ++r)
          if (carried_row(call, l, r, t) == kNone)
            op_util::copy_or_add(
                n, dy + r * n,
                g.ptr<T>() + (s.dynamic() ? state_row(*s.layout, l, r, t, call.attributes) * n : 0),
                true);
        return;
      }
      // Sum the boundary rows, then over the axes the state was broadcast along.
      T* sum = static_cast<T*>(call.scratch->ensure(n * sizeof(T)));
      bool first = true;
      for (size_t r = src.rows; r < l.active(t); ++r)
        if (carried_row(call, l, r, t) == kNone) {
          op_util::copy_or_add(n, dy + r * n, sum, !first);
          first = false;
        }
      if (first) return;  // every boundary row read the previous minibatch
      kernels::reduce(kernels::ReduceOp::Sum, sample_dims(0, *call.output), sum,
                      op_util::aligned_dims(1, s, op_util::sample_rank(*call.output), false),
                      g.ptr<T>(), true);
    });
  }

 private:
  // The dims of one sample of the packed tensor t.
  static const kernels::Dims& sample_dims(size_t slot, const Tensor& t) {
    kernels::Dims& d = op_util::dims_buffer(slot);
    d.assign(t.shape.dims().begin() + 1, t.shape.dims().end());
    return d;
  }

  void check_initial_state(const Tensor& s, const SequenceLayout& l) const {
    LOOM_CHECK(!s.dynamic() || s.layout->num_sequences() == l.num_sequences(), ShapeError, name_,
               ": the per-sequence initial state has ", s.layout->num_sequences(),
               " sequences (samples) for ", l.num_sequences(), " sequences of the operand");
  }

  static constexpr size_t kNone = size_t(-1);

  // The row of call.carried, the previous minibatch's operand, that rank r of step t of
  // past_value reads when its sequence continues one of the previous minibatch; kNone where the
  // sequence begins in this minibatch, or began fewer than time_step steps before it (then the
  // initial state).
  size_t carried_row(const OpCall& call, const SequenceLayout& l, size_t r, size_t t) const {
    const size_t seq = l.order[r];
    const int64_t shift = time_shift(call.attributes);
    if (shift < 0 || l.begins[seq]) return kNone;
    LOOM_CHECK(call.carried && seq < call.carried->layout->num_sequences(), StateError, name_,
               ": sequence ", seq,
               " continues one of the previous minibatch, which had no sequence ", seq,
               " (a continued sequence keeps its place in the minibatch)");
    const SequenceLayout& c = *call.carried->layout;
    const size_t kept = c.lengths[seq], k = size_t(shift);
    return kept + t >= k ? c.row(seq, kept + t - k) : kNone;
  }

  // The row of the per-sequence initial state (layout sl: one sample or a sequence per operand
  // sequence) that rank r of step t reads: the sample, or of a sequence the last k steps for
  // past_value, the first k for future_value (one step serves all k).
  size_t state_row(const SequenceLayout& sl, const SequenceLayout& l, size_t r, size_t t,
                   const Dictionary& attributes) const {
    const size_t seq = l.order[r], len = sl.lengths[seq];
    const int64_t shift = time_shift(attributes);
    const size_t k = size_t(std::abs(shift));
    LOOM_CHECK(len == 1 || len >= k, ShapeError, name_, ": the initial state of sequence ", seq,
               " has ", len, " steps; it needs 1 or at least time_step (", k, ")");
    if (len == 1) return sl.row(seq, 0);
    const size_t j = shift > 0 ? t : t + k - l.lengths[seq];  // which of the k boundary steps
    return sl.row(seq, shift > 0 ? len - k + j : j);
  }

  const char* name_;
  int64_t direction_;
};

const DelayOp kPastValue("PastValue", 1);
const DelayOp kFutureValue("FutureValue", -1);

Function make_delay(const DelayOp& op, const Variable& x, const Variable& s, size_t time_step,
                    const std::string& name) {
  Dictionary a;
  a["offset"] = int64_t(time_step);
  return make_primitive(op, {x, s}, std::move(a), name);
}

}  // namespace

Function past_value(const Variable& x, const Variable& initial_state, size_t time_step,
                    const std::string& name) {
  return make_delay(kPastValue, x, initial_state, time_step, name);
}
Function past_value(const Variable& x, size_t time_step, const std::string& name) {
  return past_value(x, constant(0, x.dtype()), time_step, name);
}
Function future_value(const Variable& x, const Variable& initial_state, size_t time_step,
                      const std::string& name) {
  return make_delay(kFutureValue, x, initial_state, time_step, name);
}
Function future_value(const Variable& x, size_t time_step, const std::string& name) {
  return future_value(x, constant(0, x.dtype()), time_step, name);
}

Function delay(const Variable& x, const Variable& initial_state, int64_t time_step,
               const std::string& name) {
  if (time_step == 0) return name.empty() ? Function(x) : alias(x, name);
  return time_step > 0 ? past_value(x, initial_state, size_t(time_step), name)
                       : future_value(x, initial_state, size_t(-time_step), name);
}

Function delay(const Variable& x, int64_t time_step, const std::string& name) {
  return delay(x, constant(0.0, x.dtype()), time_step, name);
}

}  // namespace loom::sequence

namespace loom {

namespace {

// The parameters of past_value, future_value and delay (CNTK's): an initial_state left out
// (None) is a zero constant, not an input left out.
std::vector<OpParam> delay_params(const char* time_step_key) {
  return {{"x"},
          {"initial_state", ParamType::OptionalTensor},
          {"time_step", ParamType::Int, int64_t{sequence::kDelayTimeStep}, time_step_key}};
}

// x's initial state: the one given, or a zero constant of x's dtype.
Variable initial_state(const std::vector<Variable>& in) {
  return in.size() > 1 ? in[1] : Variable(constant(0.0, in[0].dtype()));
}

// A case without an initial state, and cases of a shared one (its own values at each sequence's
// first steps).
std::vector<ConformanceCase> delay_cases(const char* time_step_key, int64_t step) {
  return {{{{NDShape{3}}}, Dictionary({{time_step_key, step}}), false},
          {{{NDShape{3}}, {NDShape{3}, false}}, Dictionary({{time_step_key, step}}), false},
          {{{NDShape{3}}, {NDShape{3}, false}}, Dictionary({{time_step_key, 2 * step}}), false}};
}

}  // namespace

std::vector<OpSchema> recurrence_schemas() {
  using namespace sequence;
  const OnnxMapping no_onnx{.none_because = "ONNX's tensors have no sequence axis"};
  auto delay_op =
      [&](const OpDef& op, const char* python, const char* doc,
          Function (*build)(std::vector<Variable>, const Dictionary&, const std::string&)) {
        return OpSchema{.op = &op,
                        .min_inputs = 1,
                        .max_inputs = 2,
                        .python = python,
                        .module = "sequence",
                        .params = delay_params("offset"),
                        .doc = doc,
                        .onnx = no_onnx,
                        .conformance = delay_cases("offset", 1),
                        .build = build};
      };
  return {
      delay_op(kPastValue, "past_value",
               "x time_step steps earlier in its sequence; initial_state (default 0) before the "
               "sequence's start",
               [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
                 return past_value(in[0], initial_state(in), size_t(a.get<int64_t>("offset")),
                                   name);
               }),
      delay_op(kFutureValue, "future_value",
               "x time_step steps later in its sequence; initial_state (default 0) after the "
               "sequence's end",
               [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
                 return future_value(in[0], initial_state(in), size_t(a.get<int64_t>("offset")),
                                     name);
               }),
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 2,
       .python = "delay",
       .module = "sequence",
       .params = delay_params(nullptr),
       .doc = "past_value (time_step > 0), future_value (time_step < 0) or x itself (0)",
       .onnx = no_onnx,
       .conformance =
           [] {
             std::vector<ConformanceCase> cases = delay_cases("time_step", 1);
             for (ConformanceCase c : delay_cases("time_step", -1)) cases.push_back(c);
             return cases;
           }(),
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             return delay(in[0], initial_state(in), a.get<int64_t>("time_step"), name);
           }},
  };
}
}  // namespace loom
