#include "loom/ops/ctc.h"

#include <cmath>

#include "loom/graph/op.h"
#include "loom/kernels/ctc.h"
#include "loom/kernels/elementwise.h"
#include "loom/ops/op_util.h"

namespace loom {

namespace {

constexpr const char* kBlank = "blankTokenId";
constexpr const char* kDelay = "delayConstraint";

// A copy: CNTK's LabelsToGraph, the one producer of forward_backward's graph.
class LabelsToGraphOp : public OpDef {
 public:
  const char* name() const override { return "LabelsToGraph"; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return {{in[0].shape(), in[0].dtype(), in[0].dynamic_axes(), false}};
  }
  void forward(OpCall& call) const override {
    Tensor& y = *call.output;
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary(kernels::UnaryOp::Copy, y.size(), call.inputs[0]->ptr<T>(), y.ptr<T>());
    });
  }
  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      kernels::unary_backward<T>(kernels::UnaryOp::Copy, dx.size(), nullptr, nullptr,
                                 call.output_gradient->ptr<T>(), dx.ptr<T>(), accumulate);
    });
  }
  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .writes_over_inputs = InputSet::all()};
  }
};

const LabelsToGraphOp kLabelsToGraph;

// Inputs: graph (labels_to_graph's output) and features, on the same dynamic axes. Attributes:
// blankTokenId and delayConstraint (ints). The output is CNTK's one number for the minibatch,
// the sum of its sequences' losses (no dynamic axes). Forward keeps d loss / d features in the
// scratch area; backward scales it by the output's gradient.
class ForwardBackwardOp : public op_util::MinibatchCriterionOp {
 public:
  const char* name() const override { return "ForwardBackward"; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& in,
                                const Dictionary& a) const override {
    const char* fn = "forward_backward";
    const Variable &graph = in[0], &features = in[1];
    LOOM_CHECK(graph.is_output() && &graph.producer().op() == &kLabelsToGraph, ArgumentError, fn,
               ": graph ", graph.describe(), " must be labels_to_graph(labels)");
    LOOM_CHECK(!features.dynamic_axes().empty() && graph.dynamic_axes() == features.dynamic_axes(),
               ShapeError, fn, ": graph ", graph.describe(), " and features ", features.describe(),
               " must have the same dynamic axes: the labels are frame-aligned (pad a shorter "
               "label sequence by repeating its last label with the value 1)");
    const size_t classes = features.shape().total_size();
    LOOM_CHECK(graph.shape().total_size() == classes, ShapeError, fn, ": graph ", graph.describe(),
               " and features ", features.describe(), " must have the same sample size");
    const int64_t blank = a.get<int64_t>(kBlank), delay = a.get<int64_t>(kDelay);
    LOOM_CHECK(blank >= 0 && size_t(blank) < classes, ArgumentError, fn, ": blankTokenId ", blank,
               " is not a class of features ", features.describe());
    LOOM_CHECK(delay >= -1, ArgumentError, fn, ": delayConstraint must be -1 (none) or >= 0, not ",
               delay);
    return scalar_output(fn, in);
  }

  void forward(OpCall& call) const override {
    const Tensor &graph = *call.inputs[0], &x = *call.inputs[1];
    Tensor& y = *call.output;
    const kernels::CtcBatch batch = ctc_batch(x, call.attributes);
    dispatch(y.dtype, [&](auto zero) {
      using T = decltype(zero);
      const std::vector<kernels::CtcLabels> labels = kernels::ctc_labels(batch, graph.ptr<T>());
      for (size_t b = 0; b < labels.size(); ++b)
        for (size_t k = 0; k < labels[b].tokens.size(); ++k)
          LOOM_CHECK(labels[b].tokens[k] != batch.blank, DataError, "forward_backward: sequence ",
                     b, " has the blank (blankTokenId ", batch.blank, ") as a label, at frame ",
                     labels[b].starts[k]);
      std::vector<double> loss(batch.num_sequences());
      kernels::ctc_loss(batch, labels, x.ptr<T>(), loss.data(), gradient<T>(call, x));
      double total = 0;
      for (size_t b = 0; b < loss.size(); ++b) {
        const size_t begin = batch.offsets[b], frames = batch.offsets[b + 1] - begin;
        LOOM_CHECK(std::isfinite(loss[b]), DataError, "forward_backward: no alignment of ",
                   "sequence ", b, "'s ", labels[b].tokens.size(), " labels fits its ", frames,
                   " frames", batch.delay >= 0 ? " within delayConstraint" : "",
                   " (a label repeated on the next frame leaves no frame for the blank between)");
        total += loss[b];
      }
      set_scalar(y, total);
    });
  }

  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    const kernels::CtcBatch batch = ctc_batch(dx, call.attributes);
    dispatch(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T scale = *call.output_gradient->ptr<T>(), *grad = gradient<T>(call, dx);
      T* out = dx.ptr<T>();
      for (size_t i = 0, n = dx.size(); i < n; ++i)
        out[i] = (accumulate ? out[i] : T(0)) + scale * grad[i];
    });
  }

  OpTraits traits(const Dictionary&) const override {
    return {.differentiable = InputSet::only(1),
            .backward_reads_inputs = InputSet::none(),
            .backward_reads_output = false,
            .runs_step_by_step = false};
  }

 private:
  // The sequences of x's layout (features or their gradient) and the attributes.
  static kernels::CtcBatch ctc_batch(const Tensor& x, const Dictionary& a) {
    kernels::CtcBatch batch;
    batch.classes = x.sample_size();
    batch.blank = size_t(a.get<int64_t>(kBlank));
    batch.delay = a.get<int64_t>(kDelay);
    const SequenceLayout& layout = *x.layout;
    batch.offsets.push_back(0);
    for (size_t b = 0; b < layout.num_sequences(); ++b) {
      for (size_t t = 0; t < layout.lengths[b]; ++t) batch.rows.push_back(layout.row(b, t));
      batch.offsets.push_back(batch.rows.size());
    }
    return batch;
  }
  // d loss / d features, which forward writes and backward reads.
  template <typename T>
  static T* gradient(OpCall& call, const Tensor& x) {
    return static_cast<T*>(call.scratch->ensure(x.size() * sizeof(T)));
  }
};

const ForwardBackwardOp kForwardBackward;

}  // namespace

Function labels_to_graph(const Variable& labels, const std::string& name) {
  return make_primitive(kLabelsToGraph, {labels}, {}, name);
}

Function forward_backward(const Variable& graph, const Variable& features, size_t blank_token_id,
                          const ForwardBackwardOptions& options, const std::string& name) {
  return make_primitive(
      kForwardBackward, {graph, features},
      Dictionary({{kBlank, int64_t(blank_token_id)}, {kDelay, options.delay_constraint}}), name);
}

std::vector<OpSchema> ctc_schemas() {
  OpSchema graph{&kLabelsToGraph, 1, 1};
  graph.python = "labels_to_graph";
  graph.params = {{"labels"}};
  graph.doc = "labels unchanged, as the graph of labels that forward_backward reads";
  graph.onnx.none_because = "only forward_backward reads it, and ONNX has no CTC op";
  graph.conformance = {{{{NDShape{2, 3}}}}};

  OpSchema fb{&kForwardBackward, 2, 2};
  fb.python = "forward_backward";
  fb.params = {{"graph"},
               {"features"},
               {kBlank, ParamType::Int},
               {kDelay, ParamType::Int, ForwardBackwardOptions{}.delay_constraint}};
  fb.doc =
      "the CTC loss -log P(labels | softmax(features)) summed over the minibatch's sequences; "
      "graph is labels_to_graph of frame-aligned labels (2 where a label starts)";
  fb.onnx.none_because = "ONNX has no CTC op";
  // Frame-aligned labels of 3 classes over the harness's sequences of 3, 0, 1 and 2 frames
  // (each row 2 where a label starts, 1 where it goes on).
  auto labels = [](std::vector<double> rows, int64_t blank) {
    return ConformanceCase{
        .inputs = {{.shape = NDShape{3}, .values = std::move(rows), .through = "LabelsToGraph"},
                   {NDShape{3}}},
        .attributes = Dictionary({{kBlank, blank}}),
        .batch = false,
        .sums_sequences = true};
  };
  fb.conformance = {
      // Alternating 0 and 1, a label starting on every frame; the blank 2.
      labels({2, 0, 0, 0, 2, 0}, 2),
      // The blank 2. Label 0 twice in 3 frames (the fewest: a blank must come between), one
      // frame without a label (blanks only), label 1 held for 2 frames (merged when repeated).
      labels({2, 0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 2, 0, 0, 1, 0}, 2),
      // The blank 0. Labels 1, 2, 1 in 3 frames and label 2 in 1 (the fewest), 2 frames without
      // a label.
      labels({0, 2, 0, 0, 0, 2, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0}, 0)};
  return {graph, fb};
}

}  // namespace loom
