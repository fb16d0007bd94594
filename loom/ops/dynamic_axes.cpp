#include "loom/ops/dynamic_axes.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "loom/graph/op.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/op_util.h"
#include "loom/ops/row_map.h"

namespace loom {

namespace {

using row_map::RowMapOp;

// A ShapeError unless x has the batch axis and no other dynamic axis (CNTK's ToSequence and
// UnpackBatch take no sequences).
void check_batch_only(const char* op, const Variable& x) {
  LOOM_CHECK(x.dynamic_axes() == default_batch_axes(), ShapeError, op, ": input ", x.describe(),
             x.dynamic_axes().empty()
                 ? " has no dynamic axes; it takes a batch of samples"
                 : " is a sequence; it takes a batch of samples without a sequence axis");
}

// ---- to_sequence, to_sequence_like -----------------------------------------------------------

// Sample b of x, [T, d...], read as T rows [d...]: output step t of sequence b is row b * T + t.
class ToSequenceOp : public RowMapOp {
 public:
  constexpr ToSequenceOp(const char* name, bool like)
      : RowMapOp(Direction::Gather), name_(name), like_(like) {}
  const char* name() const override { return name_; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const Variable& x = in[0];
    check_batch_only(name_, x);
    LOOM_CHECK(x.shape().rank() >= 1, ShapeError, name_, ": input ", x.describe(),
               " has no static axis to make the sequence axis of");
    const NDShape sample = x.shape().sub_shape(1);
    if (like_) {
      const Variable& like = in[1];
      LOOM_CHECK(like.has_sequence_axis(), ShapeError, name_, ": dynamic_axes_like ",
                 like.describe(), " is not a sequence; its sequence lengths are what it gives");
      return {{sample, x.dtype(), like.dynamic_axes(), false}};
    }
    if (in.size() == 2) {
      const Variable& lengths = in[1];
      LOOM_CHECK(lengths.dynamic_axes() == x.dynamic_axes(), ShapeError, name_,
                 ": sequence_lengths ", lengths.describe(), " is not on the dynamic axes of ",
                 x.describe());
      LOOM_CHECK(lengths.shape().total_size() == 1, ShapeError, name_, ": sequence_lengths ",
                 lengths.describe(), " must hold one number per sample");
    }
    const Axis axis =
        Axis::dynamic_axis_named(a.get<std::string>("sequence_axis_name_prefix") + x.uid());
    return {{sample, x.dtype(), {Axis::default_batch_axis(), axis}, false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache& layouts) const override {
    const Tensor& x = *in[0];
    const size_t samples = x.rows(), steps = x.shape[1];
    if (like_) {
      const SequenceLayout& l = *in[1]->layout;
      LOOM_CHECK(l.num_sequences() == samples, ShapeError, name_, ": the input has ", samples,
                 " samples but dynamic_axes_like has ", l.num_sequences(), " sequences");
      LOOM_CHECK(l.max_length() <= steps, ShapeError, name_,
                 ": dynamic_axes_like has a sequence of ", l.max_length(),
                 " steps, more than the input's leading static axis (", steps, ")");
      return &l;
    }
    std::vector<size_t> lengths(samples, steps);
    if (in.size() == 2) {
      dispatch(in[1]->dtype, [&](auto zero) {
        using T = decltype(zero);
        const T* given = in[1]->ptr<T>();
        for (size_t b = 0; b < samples; ++b) {
          const double v = double(given[x.layout->row(b, 0)]);
          LOOM_CHECK(std::isfinite(v) && v >= 0 && v < double(steps + 1), ShapeError, name_,
                     ": sequence_lengths of sample ", b, " is ", v,
                     "; a length is from 0 to the input's leading static axis (", steps, ")");
          lengths[b] = size_t(v);  // CNTK truncates
        }
      });
    }
    return layouts.add(SequenceLayout::from_lengths(std::move(lengths)));
  }

 protected:
  void fill_map(const OpCall& call, std::span<size_t> map) const override {
    const Tensor& x = *call.inputs[0];
    const SequenceLayout& out = *call.output->layout;
    const size_t steps = x.shape[1];
    for (size_t b = 0; b < out.num_sequences(); ++b)
      for (size_t t = 0; t < out.lengths[b]; ++t)
        map[out.row(b, t)] = x.layout->row(b, 0) * steps + t;
  }

 private:
  const char* name_;
  bool like_;
};

// ---- unpack_batch, to_batch ------------------------------------------------------------------

// The batch axis and a leading static axis exchanged: the elements stay in place (a batch's rows
// are its samples in order), so forward and backward copy.
class BatchAxisOp : public OpDef {
 public:
  constexpr BatchAxisOp(const char* name, bool unpack) : name_(name), unpack_(unpack) {}
  const char* name() const override { return name_; }
  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .runs_step_by_step = false};
  }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable& x = in[0];
    if (unpack_) {
      check_batch_only(name_, x);
      return {{x.shape().prepend(NDShape::kFree), x.dtype(), {}, false}};
    }
    LOOM_CHECK(x.dynamic_axes().empty(), ShapeError, name_, ": input ", x.describe(),
               " has dynamic axes; it takes a tensor without (its leading axis becomes the batch "
               "axis)");
    LOOM_CHECK(x.shape().rank() >= 1, ShapeError, name_, ": input ", x.describe(),
               " is a scalar; its leading axis becomes the batch axis");
    return {{x.shape().sub_shape(1), x.dtype(), default_batch_axes(), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache& layouts) const override {
    return unpack_ ? nullptr : layouts.batch(in[0]->shape[0]);
  }

  std::vector<NDShape> output_shapes(const std::vector<Variable>&,
                                     std::span<const Tensor* const> in,
                                     const Dictionary&) const override {
    return {unpack_ ? in[0]->shape : in[0]->shape.sub_shape(1)};  // unpack_batch: [N rows, d...]
  }

  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    dispatch(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(x.size(), x.ptr<T>(), call.output->ptr<T>(), false);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      op_util::copy_or_add(dx.size(), call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }

 private:
  const char* name_;
  bool unpack_;
};

// ---- reconcile_dynamic_axes ------------------------------------------------------------------

class ReconcileDynamicAxesOp : public RowMapOp {
 public:
  constexpr ReconcileDynamicAxesOp() : RowMapOp(Direction::Gather) {}
  const char* name() const override { return "ReconcileDynamicAxis"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    const Variable &x = in[0], &as = in[1];
    LOOM_CHECK(!as.dynamic_axes().empty(), ShapeError, name(), ": dynamic_axes_as ", as.describe(),
               " has no dynamic axes to give");
    return {{x.shape(), x.dtype(), as.dynamic_axes(), false}};
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> in, const Dictionary&,
                                      LayoutCache&) const override {
    return row_map::broadcast_layout(name(), *in[0], "x", *in[1]->layout, "dynamic_axes_as");
  }

 protected:
  void fill_map(const OpCall& call, std::span<size_t> map) const override {
    row_map::fill_broadcast_map(*call.inputs[0], *call.inputs[1]->layout, map);
  }
};

const ToSequenceOp kToSequence("ToSequence", false);
const ToSequenceOp kToSequenceLike("ToSequenceLike", true);
const BatchAxisOp kUnpackBatch("UnpackBatch", true);
const BatchAxisOp kToBatch("ToBatch", false);
const ReconcileDynamicAxesOp kReconcileDynamicAxes;

}  // namespace

Function to_sequence(const Variable& x, const std::string& sequence_axis_name_prefix,
                     const std::string& name) {
  return make_primitive(kToSequence, {x},
                        Dictionary({{"sequence_axis_name_prefix", sequence_axis_name_prefix}}),
                        name);
}
Function to_sequence(const Variable& x, const Variable& sequence_lengths,
                     const std::string& sequence_axis_name_prefix, const std::string& name) {
  return make_primitive(kToSequence, {x, sequence_lengths},
                        Dictionary({{"sequence_axis_name_prefix", sequence_axis_name_prefix}}),
                        name);
}
Function to_sequence_like(const Variable& x, const Variable& dynamic_axes_like,
                          const std::string& name) {
  return make_primitive(kToSequenceLike, {x, dynamic_axes_like}, {}, name);
}
Function unpack_batch(const Variable& x, const std::string& name) {
  return make_primitive(kUnpackBatch, {x}, {}, name);
}
Function to_batch(const Variable& x, const std::string& name) {
  return make_primitive(kToBatch, {x}, {}, name);
}
Function reconcile_dynamic_axes(const Variable& x, const Variable& dynamic_axes_as,
                                const std::string& name) {
  return make_primitive(kReconcileDynamicAxes, {x, dynamic_axes_as}, {}, name);
}

namespace {

// A schema of this file: a Python function of cntk.ops, without an ONNX counterpart.
OpSchema schema(const OpDef& op, size_t min_inputs, size_t max_inputs, const char* python,
                std::vector<OpParam> params, const char* doc,
                std::vector<ConformanceCase> conformance = {}) {
  OpSchema s{&op, min_inputs, max_inputs, python, "ops", std::move(params), false, doc};
  s.onnx.none_because =
      "ONNX tensors have no dynamic axes: Loom's exporter writes them from the graph's inputs";
  s.conformance = std::move(conformance);
  return s;
}

}  // namespace

std::vector<OpSchema> dynamic_axes_schemas() {
  const ConformanceInput steps{NDShape{3, 2}};
  // Lengths 0 to 3 (truncated): empty sequences among them.
  const ConformanceInput lengths{NDShape{}, true, 0, 3.99};
  ConformanceCase batch_of_steps{{steps}}, batch_with_lengths{{steps, lengths}};
  batch_of_steps.sequences = batch_with_lengths.sequences = false;  // x has no sequence axis
  ConformanceCase unpack{{{NDShape{2, 3}}}};
  unpack.sequences = false;
  ConformanceCase tensor{{{NDShape{3, 2}, false}}};  // to_batch of a parameter
  // Each sample's 3 steps cut to its sequence's length (the longest is 3).
  ConformanceCase like{{{.shape = NDShape{3, 2}, .over_sequences = false}, {NDShape{1}}}};
  like.batch = false;
  tensor.sequences = false;
  return {
      schema(kToSequence, 1, 2, "to_sequence",
             {{"x"},
              {"sequence_lengths", ParamType::OptionalTensor},
              {"sequence_axis_name_prefix", ParamType::String, std::string(kToSequenceAxisPrefix)}},
             "x's leading static axis as a new sequence axis (sequence_lengths: each sample's "
             "length)",
             {batch_of_steps, batch_with_lengths}),
      schema(kToSequenceLike, 2, 2, "to_sequence_like", {{"x"}, {"dynamic_axes_like"}},
             "x's leading static axis as the sequence axis of dynamic_axes_like, with its "
             "lengths",
             {like}),
      schema(kUnpackBatch, 1, 1, "unpack_batch", {{"x"}}, "the batch axis as a leading static axis",
             {unpack}),
      schema(kToBatch, 1, 1, "to_batch", {{"x"}}, "the leading static axis as the batch axis",
             {tensor}),
      schema(kReconcileDynamicAxes, 2, 2, "reconcile_dynamic_axes", {{"x"}, {"dynamic_axes_as"}},
             "x with the dynamic axes of dynamic_axes_as (the same lengths, or broadcast)",
             {{{{NDShape{2}}, {NDShape{3}}}}, {{{NDShape{2}, false}, {NDShape{3}}}}}),
  };
}

}  // namespace loom
