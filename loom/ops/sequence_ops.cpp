#include "loom/ops/sequence_ops.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "loom/graph/op.h"
#include "loom/kernels/reduce.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"
#include "loom/ops/row_map.h"

namespace loom::sequence {

namespace {

std::string quoted_name(const Variable& x) {
  return x.name().empty() ? "" : " '" + x.name() + "'";
}

// A ShapeError unless x has a sequence axis; role says which input x is ("input", "cond").
void check_sequence(const char* op, const Variable& x, const char* role) {
  LOOM_CHECK(x.has_sequence_axis(), ShapeError, op, ": ", role, " ", x.type_string(),
             quoted_name(x), " has no sequence axis (dynamic axes must be {batch, sequence axis})");
}

// A condition: a sequence of one number per step.
void check_condition(const char* op, const Variable& cond) {
  check_sequence(op, cond, "cond");
  LOOM_CHECK(cond.shape().total_size() == 1, ShapeError, op, ": cond ", cond.type_string(),
             quoted_name(cond), " must hold one number per step");
}

using row_map::kNoRow;
using row_map::RowMapOp;

// ---- first, last, slice ----------------------------------------------------------------------

// Steps [begin, end) of a sequence of length len for a Python-style range (end 0: to the end),
// clipped; begin == end when empty.
std::pair<size_t, size_t> clip_range(int64_t begin, int64_t end, size_t len) {
  const int64_t n = int64_t(len);
  const int64_t b = begin < 0 ? std::max<int64_t>(n + begin, 0) : std::min(begin, n);
  const int64_t e = end > 0 ? std::min(end, n) : end == 0 ? n : std::max<int64_t>(n + end, 0);
  return {size_t(b), size_t(std::max(b, e))};
}

// The axes of a result whose sequences are scale * length + add long for x's of length `length`,
// named as CNTK's GetDerivedDynamicAxes names them: scale 0 and add 1 (exactly one step)
// removes the sequence axis, scale 1 and add 0 keeps x's.
std::vector<Axis> derived_axes(const Variable& x, int64_t scale, int64_t add) {
  std::vector<Axis> axes{x.dynamic_axes()[0]};
  if (scale == 0 && add == 1) return axes;
  const Axis& source = x.dynamic_axes()[1];
  std::string name = source.name();
  if (scale == 1 && add == 0) {
    axes.push_back(source);
    return axes;
  }
  if (scale > 0) {
    name += "_times_" + std::to_string(scale) +
            (add > 0 ? "_plus_" + std::to_string(add) : "_minus_" + std::to_string(-add));
  } else {
    name += "_fixedSliceOf_" + std::to_string(add);
  }
  axes.push_back(Axis::dynamic_axis_named(name));
  return axes;
}

// A slice of end - begin steps is of fixed length when that is positive, else shorter than x
// by its magnitude (CNTK's Sequence::Slice).
std::vector<Axis> slice_axes(const Variable& x, int64_t begin, int64_t end) {
  const int64_t length = end - begin;
  return derived_axes(x, length > 0 ? 0 : 1, length);
}

// first and last are slices with a fixed range; slice takes it from the attributes
// "begin_index" and "end_index".
class SliceOp : public RowMapOp {
 public:
  constexpr explicit SliceOp(const char* name) : RowMapOp(Direction::Gather), name_(name) {}
  constexpr SliceOp(const char* name, int64_t begin, int64_t end)
      : RowMapOp(Direction::Gather), name_(name), fixed_{{begin, end}} {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    check_sequence(name_, x, "input");
    const auto [begin, end] = range(a);
    const bool empty =
        (begin >= 0 && end > 0 && end <= begin) || (begin < 0 && end < 0 && end <= begin);
    LOOM_CHECK(!empty, ArgumentError, "sequence::slice of ", x.describe(), ": the range [", begin,
               ", ", end, ") is empty for every sequence");
    return {{x.shape(), x.dtype(), slice_axes(x, begin, end), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary& a,
                                      LayoutCache& layouts) const override {
    const SequenceLayout& l = *in[0]->layout;
    const auto [begin, end] = range(a);
    if (end - begin == 1) return layouts.batch(l.num_sequences());
    std::vector<size_t> lengths(l.num_sequences());
    for (size_t b = 0; b < lengths.size(); ++b) {
      const auto [s, e] = clip_range(begin, end, l.lengths[b]);
      lengths[b] = e - s;
    }
    return layouts.add(SequenceLayout::from_lengths(std::move(lengths)));
  }

 protected:
  void fill_map(const OpCall& call, std::span<size_t> map) const override {
    const SequenceLayout& l = *call.inputs[0]->layout;
    const SequenceLayout& out = *call.output->layout;
    const auto [begin, end] = range(call.attributes);
    for (size_t b = 0; b < l.num_sequences(); ++b) {
      const auto [s, e] = clip_range(begin, end, l.lengths[b]);
      if (end - begin == 1) {
        map[b] = e > s ? l.row(b, s) : kNoRow;  // an empty sequence gives zeros
      } else {
        for (size_t t = s; t < e; ++t) map[out.row(b, t - s)] = l.row(b, t);
      }
    }
  }

 private:
  std::pair<int64_t, int64_t> range(const Dictionary& a) const {
    return fixed_ ? *fixed_ : std::pair{a.get<int64_t>("begin_index"), a.get<int64_t>("end_index")};
  }

  const char* name_;
  std::optional<std::pair<int64_t, int64_t>> fixed_;
};

// ---- reduce_sum, reduce_max ------------------------------------------------------------------

class SequenceReduceOp : public OpDef {
 public:
  OpTraits traits(const Dictionary&) const override { return {.runs_step_by_step = false}; }
  constexpr SequenceReduceOp(const char* name, kernels::ReduceOp reduce)
      : name_(name), reduce_(reduce) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable& x = in[0];
    check_sequence(name_, x, "input");
    return {{x.shape(), x.dtype(), {x.dynamic_axes()[0]}, false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache& layouts) const override {
    return layouts.batch(in[0]->layout->num_sequences());
  }

  // Output row b is sequence b (the minibatch's order), reduced from the packed rows.
  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::reduce_sequences(reduce_, *x.layout, op_util::sample_size(x), x.ptr<T>(),
                                y.ptr<T>());
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const Tensor& x = *call.inputs[0];
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::reduce_sequences_backward(reduce_, *x.layout, op_util::sample_size(dx), x.ptr<T>(),
                                         call.output->ptr<T>(), call.output_gradient->ptr<T>(),
                                         dx.ptr<T>(), accumulate);
    });
  }

 private:
  const char* name_;
  kernels::ReduceOp reduce_;
};

// ---- is_first, is_last -----------------------------------------------------------------------

class IsWithinOp : public OpDef {
 public:
  constexpr IsWithinOp(const char* name, bool first) : name_(name), first_(first) {}
  const char* name() const override { return name_; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .runs_step_by_step = false};
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    check_sequence(name_, in[0], "input");
    return {{NDShape{}, in[0].dtype(), in[0].dynamic_axes(), false}};
  }

  void forward(OpCall& call) const override {
    const SequenceLayout& l = *call.inputs[0]->layout;
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      std::fill_n(y.ptr<T>(), y.size(), T(0));
      for (size_t b = 0; b < l.num_sequences(); ++b)
        if (l.lengths[b] > 0) y.ptr<T>()[l.row(b, first_ ? 0 : l.lengths[b] - 1)] = T(1);
    });
  }

  void backward(OpCall&, size_t, Tensor&, bool) const override {
    throw StateError(std::string(name_) + " has no gradient");
  }

 private:
  const char* name_;
  bool first_;
};

// ---- broadcast_as ----------------------------------------------------------------------------

class BroadcastAsOp : public RowMapOp {
 public:
  constexpr BroadcastAsOp() : RowMapOp(Direction::Gather) {}
  const char* name() const override { return "SequenceBroadcastAs"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable &op = in[0], &ref = in[1];
    check_sequence(name(), ref, "ref");
    LOOM_CHECK(op.dynamic_axes().size() < 2 || op.dynamic_axes() == ref.dynamic_axes(), ShapeError,
               name(), ": op ", op.describe(), " is a sequence on another axis than ref ",
               ref.describe());
    return {{op.shape(), op.dtype(), ref.dynamic_axes(), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache&) const override {
    return row_map::broadcast_layout(name(), *in[0], "op", *in[1]->layout, "ref");
  }

 protected:
  void fill_map(const OpCall& call, std::span<size_t> map) const override {
    row_map::fill_broadcast_map(*call.inputs[0], *call.inputs[1]->layout, map);
  }
};

// ---- where, gather, scatter ------------------------------------------------------------------

// Calls emit(b, t) for each step index t that where(cond) gives for sequence b, in order: CNTK's
// WhereNode rule (ReshapingNodes.cpp), counts accumulated in double.
template <class F>
void for_each_selected(const Tensor& cond, F&& emit) {
  const SequenceLayout& l = *cond.layout;
  dispatch(cond.dtype, [&](auto zero) {
    using T = decltype(zero);
    const double margin = 1 - double(std::numeric_limits<T>::epsilon());
    const T* c = cond.ptr<T>();
    for (size_t b = 0; b < l.num_sequences(); ++b) {
      double desired = 0;
      size_t count = 0;
      for (size_t t = 0; t < l.lengths[b]; ++t) {
        desired += double(c[l.row(b, t)]);
        for (; (count == 0 && desired > 0) || double(count) < desired * margin; ++count) emit(b, t);
      }
    }
  });
}

// The layout of where(cond): one sequence per sequence of cond, as long as its selection.
const SequenceLayout* selected_layout(const Tensor& cond, LayoutCache& layouts) {
  std::vector<size_t> lengths(cond.layout->num_sequences(), 0);
  for_each_selected(cond, [&](size_t b, size_t) { ++lengths[b]; });
  return layouts.add(SequenceLayout::from_lengths(std::move(lengths)));
}

Axis where_axis(const Variable& cond) {
  return Axis::dynamic_axis_named("whereNodeDynamicAxis_conditionVar_" + cond.uid());
}

class WhereOp : public OpDef {
 public:
  const char* name() const override { return "SequenceWhere"; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::none(), .runs_step_by_step = false};
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable& cond = in[0];
    check_condition(name(), cond);
    return {{NDShape{}, cond.dtype(), {cond.dynamic_axes()[0], where_axis(cond)}, false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache& layouts) const override {
    return selected_layout(*in[0], layouts);
  }

  void forward(OpCall& call) const override {
    const SequenceLayout& out = *call.output->layout;
    std::vector<size_t> k(out.num_sequences(), 0);
    dispatch(call.output->dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = call.output->ptr<T>();
      for_each_selected(*call.inputs[0], [&](size_t b, size_t t) { y[out.row(b, k[b]++)] = T(t); });
    });
  }

  void backward(OpCall&, size_t, Tensor&, bool) const override {
    throw StateError("SequenceWhere has no gradient");
  }
};

// Attributes "axis_scale" and "axis_add" when the output is on a derived axis (CNTK's
// new_sequence_axis_typeinfo), else none: where's axis.
class GatherOp : public RowMapOp {
 public:
  constexpr GatherOp() : RowMapOp(Direction::Gather) {}
  const char* name() const override { return "SequenceGather"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable &x = in[0], &cond = in[1];
    check_sequence(name(), x, "input");
    check_condition(name(), cond);
    LOOM_CHECK(x.dynamic_axes() == cond.dynamic_axes(), ShapeError, name(), ": cond ",
               cond.describe(), " is on another sequence axis than the input ", x.describe());
    std::vector<Axis> axes =
        a.contains("axis_scale")
            ? derived_axes(x, a.get<int64_t>("axis_scale"), a.get<int64_t>("axis_add"))
            : std::vector<Axis>{x.dynamic_axes()[0], where_axis(cond)};
    return {{x.shape(), x.dtype(), std::move(axes), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary& a,
                                      LayoutCache& layouts) const override {
    LOOM_CHECK(in[0]->layout->same_shape_as(*in[1]->layout), ShapeError, name(),
               ": the sequences of cond differ in length from the input's");
    return one_step(a) ? layouts.batch(in[0]->layout->num_sequences())
                       : selected_layout(*in[1], layouts);
  }

 protected:
  void fill_map(const OpCall& call, std::span<size_t> map) const override {
    const SequenceLayout& l = *call.inputs[0]->layout;
    const SequenceLayout& out = *call.output->layout;
    std::vector<size_t> k(l.num_sequences(), 0);
    for_each_selected(*call.inputs[1], [&](size_t b, size_t t) {
      if (k[b] < out.lengths[b]) map[out.row(b, k[b])] = l.row(b, t);
      ++k[b];
    });
    for (size_t b = 0; one_step(call.attributes) && b < k.size(); ++b)
      LOOM_CHECK(k[b] == 1, ShapeError, name(), ": cond selects ", k[b], " steps of sequence ", b,
                 " but new_sequence_axis_typeinfo (0, 1) promises exactly one");
  }

 private:
  // Typeinfo (0, 1): one step per sequence, no sequence axis.
  static bool one_step(const Dictionary& a) {
    return a.contains("axis_scale") && a.get<int64_t>("axis_scale") == 0 &&
           a.get<int64_t>("axis_add") == 1;
  }
};

class ScatterOp : public RowMapOp {
 public:
  constexpr ScatterOp() : RowMapOp(Direction::Scatter) {}
  const char* name() const override { return "SequenceScatter"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable &x = in[0], &cond = in[1];
    check_sequence(name(), x, "input");
    check_condition(name(), cond);
    return {{x.shape(), x.dtype(), cond.dynamic_axes(), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache&) const override {
    return in[1]->layout;
  }

 protected:
  void fill_map(const OpCall& call, std::span<size_t> map) const override {
    const SequenceLayout &l = *call.inputs[0]->layout, &c = *call.inputs[1]->layout;
    LOOM_CHECK(l.num_sequences() == c.num_sequences(), ShapeError, name(), ": the input has ",
               l.num_sequences(), " sequences but cond has ", c.num_sequences());
    std::vector<size_t> k(l.num_sequences(), 0);
    for_each_selected(*call.inputs[1], [&](size_t b, size_t t) {
      if (k[b] < l.lengths[b]) map[l.row(b, k[b])] = c.row(b, t);
      ++k[b];
    });
    for (size_t b = 0; b < k.size(); ++b)
      LOOM_CHECK(k[b] == l.lengths[b], ShapeError, name(), ": sequence ", b, " of the input has ",
                 l.lengths[b], " steps but cond selects ", k[b]);
  }
};

// ---- unpack ----------------------------------------------------------------------------------

// The steps of each sequence as one sample [T, sample...] with no sequence axis, T the longest
// sequence of the minibatch (NDShape::kFree), the steps past a sequence's end holding the
// attribute "padding_value"; or (mask) its mask [T]: 1 where the step exists, else 0.
class UnpackOp : public OpDef {
 public:
  constexpr UnpackOp(const char* name, bool mask) : name_(name), mask_(mask) {}
  const char* name() const override { return name_; }
  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = mask_ ? InputSet::none() : InputSet::all(),
            .backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .runs_step_by_step = false};
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable& x = in[0];
    check_sequence(name_, x, "input");
    const NDShape sample = mask_ ? NDShape{} : x.shape();
    return {{sample.prepend(NDShape::kFree), x.dtype(), {x.dynamic_axes()[0]}, false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache& layouts) const override {
    return layouts.batch(in[0]->layout->num_sequences());
  }

  std::vector<NDShape> output_shapes(const std::vector<Variable>&,
                                     std::span<const Tensor* const> in,
                                     const Dictionary&) const override {
    const NDShape sample = mask_ ? NDShape{} : in[0]->sample_shape();
    return {sample.prepend(in[0]->layout->max_length())};
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const SequenceLayout& l = *x.layout;
    const size_t steps = l.max_length(), n = mask_ ? 1 : op_util::sample_size(x);
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T pad = mask_ ? T(0) : T(call.attributes.get<double>("padding_value"));
      for (size_t b = 0; b < l.num_sequences(); ++b)
        for (size_t t = 0; t < steps; ++t) {
          T* y = call.output->ptr<T>() + (b * steps + t) * n;
          if (t >= l.lengths[b]) {
            std::fill_n(y, n, pad);
          } else if (mask_) {
            *y = T(1);
          } else {
            std::copy_n(x.ptr<T>() + l.row(b, t) * n, n, y);
          }
        }
    });
  }

  // Every row of x is one step of one sequence: each gets its step's gradient, none is left.
  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    LOOM_CHECK(!mask_, StateError, name_, " has no gradient");
    const SequenceLayout& l = *call.inputs[0]->layout;
    const size_t steps = l.max_length(), n = op_util::sample_size(dx);
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      for (size_t b = 0; b < l.num_sequences(); ++b)
        for (size_t t = 0; t < l.lengths[b]; ++t)
          op_util::copy_or_add(n, call.output_gradient->ptr<T>() + (b * steps + t) * n,
                               dx.ptr<T>() + l.row(b, t) * n, accumulate);
    });
  }

 private:
  const char* name_;
  bool mask_;
};

const SliceOp kFirst("SequenceFirst", 0, 1);
const SliceOp kLast("SequenceLast", -1, 0);
const SliceOp kSlice("SequenceSlice");
const SequenceReduceOp kReduceSum("SequenceReduceSum", kernels::ReduceOp::Sum);
const SequenceReduceOp kReduceMax("SequenceReduceMax", kernels::ReduceOp::Max);
const IsWithinOp kIsFirst("SequenceIsFirst", true);
const IsWithinOp kIsLast("SequenceIsLast", false);
const BroadcastAsOp kBroadcastAs;
const WhereOp kWhere;
const GatherOp kGather;
const ScatterOp kScatter;
const UnpackOp kUnpack("UnpackSequence", false);
const UnpackOp kUnpackMask("UnpackSequenceMask", true);

}  // namespace

Function first(const Variable& x, const std::string& name) {
  return make_primitive(kFirst, {x}, {}, name);
}
Function last(const Variable& x, const std::string& name) {
  return make_primitive(kLast, {x}, {}, name);
}
Function slice(const Variable& x, int begin_index, int end_index, const std::string& name) {
  Dictionary a;
  a["begin_index"] = int64_t(begin_index);
  a["end_index"] = int64_t(end_index);
  return make_primitive(kSlice, {x}, std::move(a), name);
}
Function reduce_sum(const Variable& x, const std::string& name) {
  return make_primitive(kReduceSum, {x}, {}, name);
}
Function reduce_max(const Variable& x, const std::string& name) {
  return make_primitive(kReduceMax, {x}, {}, name);
}
Function softmax(const Variable& x, const std::string& name) {
  const Function e = exp(minus(x, broadcast_as(reduce_max(x), x)));
  return element_divide(e, broadcast_as(reduce_sum(e), x), name);
}
Function is_first(const Variable& x, const std::string& name) {
  return make_primitive(kIsFirst, {x}, {}, name);
}
Function is_last(const Variable& x, const std::string& name) {
  return make_primitive(kIsLast, {x}, {}, name);
}
Function broadcast_as(const Variable& op, const Variable& ref, const std::string& name) {
  return make_primitive(kBroadcastAs, {op, ref}, {}, name);
}
Function broadcast_as(double value, const Variable& ref, const std::string& name) {
  return broadcast_as(constant(value, ref.dtype()), ref, name);
}
Function where(const Variable& cond, const std::string& name) {
  return make_primitive(kWhere, {cond}, {}, name);
}
Function gather(const Variable& x, const Variable& cond, const std::string& name) {
  return make_primitive(kGather, {x, cond}, {}, name);
}
Function gather(const Variable& x, const Variable& cond,
                std::pair<size_t, int> new_sequence_axis_typeinfo, const std::string& name) {
  const auto [scale, add] = new_sequence_axis_typeinfo;
  LOOM_CHECK(scale > 0 || add > 0, ArgumentError, "sequence::gather of ", x.describe(),
             ": new_sequence_axis_typeinfo (", scale, ", ", add,
             ") gives sequences of no steps (CNTK: zero size dynamic axes are not allowed)");
  Dictionary a;
  a["axis_scale"] = int64_t(scale);
  a["axis_add"] = int64_t(add);
  return make_primitive(kGather, {x, cond}, std::move(a), name);
}
Function scatter(const Variable& x, const Variable& cond, const std::string& name) {
  return make_primitive(kScatter, {x, cond}, {}, name);
}

Function unpack(const Variable& x, double padding_value, bool no_mask_output,
                const std::string& name) {
  Dictionary a;
  a["padding_value"] = padding_value;
  Function data = make_primitive(kUnpack, {x}, std::move(a), no_mask_output ? name : "");
  if (no_mask_output) return data;
  return combine({data, make_primitive(kUnpackMask, {x}, {}, "")}, name);
}

}  // namespace loom::sequence

namespace loom {

namespace {

// new_sequence_axis_typeinfo's (scale, add): two ints, scale >= 0.
std::pair<int64_t, int64_t> typeinfo_of(const char* function, const Dictionary& a) {
  const std::vector<int64_t> t = attribute_ints(a.at("new_sequence_axis_typeinfo"));
  LOOM_CHECK(t.size() == 2 && t[0] >= 0, ArgumentError, "sequence.", function,
             ": new_sequence_axis_typeinfo must be (scale, add), two ints with scale >= 0");
  return {t[0], t[1]};
}

}  // namespace

std::vector<OpSchema> sequence_schemas() {
  using namespace sequence;
  const OnnxMapping kNoOnnx{.none_because = "ONNX's tensors have no sequence axis"};
  const std::vector<ConformanceCase> steps = {{{{NDShape{3}}}, {}, false}};
  const ConformanceInput condition{.shape = NDShape{}, .low = 0, .high = 1.99, .integers = true};
  // CNTK's (scale, add) of a new sequence axis, None by default (no attribute).
  const OpParam typeinfo{
      .name = "new_sequence_axis_typeinfo", .type = ParamType::Ints, .none_default = true};
  // An op of cntk.sequence's (loom.sequence) with one input, seq, and no attributes.
  auto of_seq = [&](const OpDef& op, const char* python, const char* doc) {
    return OpSchema{&op, 1, 1, python, "sequence", {{"seq"}}, false, doc, kNoOnnx, steps};
  };
  return {
      of_seq(kFirst, "first", "each sequence's first step, a sequence of one step"),
      of_seq(kLast, "last", "each sequence's last step, a sequence of one step"),
      {&kSlice,
       1,
       1,
       "slice",
       "sequence",
       {{"seq"}, {"begin_index", ParamType::Int}, {"end_index", ParamType::Int}},
       false,
       "the steps [begin_index, end_index) of each sequence (negative: from the end, 0 for "
       "end_index: to the end)",
       kNoOnnx,
       {{{{NDShape{3}}},
         Dictionary({{"begin_index", int64_t{0}}, {"end_index", int64_t{1}}}),
         false}}},
      of_seq(kReduceSum, "reduce_sum", "the sum of each sequence's steps, a sequence of one step"),
      of_seq(kReduceMax, "reduce_max",
             "the largest value of each sequence's steps, a sequence of one step"),
      of_seq(kIsFirst, "is_first", "1 at each sequence's first step, 0 at the others"),
      of_seq(kIsLast, "is_last", "1 at each sequence's last step, 0 at the others"),
      // A sample of each sequence's batch item over the sequence's steps.
      {&kBroadcastAs,
       2,
       2,
       "broadcast_as",
       "sequence",
       {{"operand"}, {"broadcast_as_operand"}},
       false,
       "operand (a sample per sequence) repeated at every step of broadcast_as_operand's sequence",
       kNoOnnx,
       {{{{.shape = NDShape{3}, .over_sequences = false}, {NDShape{2}}}, {}, false}}},
      // Conditions of 0 or 1 per step: empty sequences among where's and gather's outputs.
      {&kWhere,
       1,
       1,
       "where",
       "sequence",
       {{"condition"}},
       false,
       "the positions of condition's nonzero steps, repeated by their value, as a new sequence",
       kNoOnnx,
       {{{condition}, {}, false}}},
      {.op = &kGather,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "gather",
       .module = "sequence",
       .params = {{"seq"}, {"condition"}, typeinfo},
       .doc = "the steps of seq where condition is nonzero, as a new sequence; "
              "new_sequence_axis_typeinfo (scale, add): its axis's length is scale * seq's + add",
       .onnx = kNoOnnx,
       .conformance = {{{{NDShape{2}}, condition}, {}, false}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             if (!a.contains("new_sequence_axis_typeinfo")) return gather(in[0], in[1], name);
             const auto [scale, add] = typeinfo_of("gather", a);
             return gather(in[0], in[1], {size_t(scale), int(add)}, name);
           }},
      // Its input on where's new axis: sequence.gather(x, condition).
      {.op = &kScatter,
       .min_inputs = 2,
       .max_inputs = 2,
       .python = "scatter",
       .module = "sequence",
       .params = {{"seq"}, {"condition"}, typeinfo},
       .doc = "seq's steps placed at the steps where condition is nonzero, zeros elsewhere, on "
              "condition's sequence axis (new_sequence_axis_typeinfo: None or (1, 0))",
       .onnx = kNoOnnx,
       .conformance = {{{{.shape = NDShape{2}, .through = "SequenceGather", .through_with = 1},
                         condition},
                        {},
                        false}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             if (a.contains("new_sequence_axis_typeinfo")) {
               const auto [scale, add] = typeinfo_of("scatter", a);
               LOOM_CHECK(scale == 1 && add == 0, ArgumentError,
                          "sequence.scatter: new_sequence_axis_typeinfo (", scale, ", ", add,
                          ") is not supported; Loom's scatter gives condition's sequence axis: "
                          "give None or (1, 0)");
             }
             return scatter(in[0], in[1], name);
           }},
      // A free first axis: the minibatch's longest sequence, padded.
      internal_op(kUnpack, 1, 1,
                  {{.inputs = {{NDShape{2}}},
                    .attributes = Dictionary({{"padding_value", 0.5}}),
                    .batch = false,
                    .padding = 0.5}}),
      internal_op(kUnpackMask, 1, 1, {{.inputs = {{NDShape{2}}}, .batch = false}}),
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "softmax",
       .module = "sequence",
       .params = {{"seq"}},
       .doc = "the softmax of each sequence's steps, elementwise over the steps",
       .onnx = kNoOnnx,
       .conformance = steps,
       .build = [](std::vector<Variable> in, const Dictionary&,
                   const std::string& name) { return sequence::softmax(in[0], name); }},
      // Its data and its mask, or (no_mask_output) the data alone.
      {.op = nullptr,
       .min_inputs = 1,
       .max_inputs = 1,
       .python = "unpack",
       .module = "sequence",
       .params = {{"x"},
                  {"padding_value", ParamType::Double},
                  {"no_mask_output", ParamType::Bool, kUnpackNoMaskOutput}},
       .doc = "each sequence as a sample [longest sequence, ...] padded with padding_value, and "
              "(unless no_mask_output) the mask [longest sequence]: 1 at a step, 0 at padding",
       .onnx = kNoOnnx,
       .conformance = {{.inputs = {{NDShape{2}}},
                        .attributes = Dictionary({{"padding_value", 0.5}}),
                        .batch = false,
                        .padding = 0.5},
                       {.inputs = {{.shape = NDShape{2}, .differentiated = false}},
                        .attributes = Dictionary({{"padding_value", 0.0}}),
                        .batch = false,
                        .output = 1},
                       {.inputs = {{NDShape{2}}},
                        .attributes =
                            Dictionary({{"padding_value", -1.0}, {"no_mask_output", true}}),
                        .batch = false,
                        .padding = -1}},
       .build =
           [](std::vector<Variable> in, const Dictionary& a, const std::string& name) {
             return sequence::unpack(in[0], a.get<double>("padding_value"),
                                     a.get<bool>("no_mask_output"), name);
           }},
  };
}
}  // namespace loom
