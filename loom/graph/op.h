// OpDef: what one kind of primitive function does. Each op family in loom/ops/ implements
// this interface; the graph layer calls it for shape inference, the executor for compute.
#pragma once

#include <any>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/core/random.h"
#include "loom/graph/tensor.h"
#include "loom/graph/variable.h"

namespace loom {

// The type of one output, as shape inference determines it.
struct OutputSpec {
  NDShape shape;
  DataType dtype = DataType::Float32;
  std::vector<Axis> dynamic_axes;
  bool is_sparse = false;
  // False: the output needs no gradient whatever its inputs need, and none flows back through
  // it (a user function's output_variable(needs_gradient=False), as CNTK's).
  bool needs_gradient = true;
  // The output's own name (a user function's output_variable(name=...), as CNTK's); none: the
  // function's name.
  std::optional<std::string> name = {};
};

// One op application inside the executor: the inputs' and output's tensors, and for
// backward the output's gradient.
struct OpCall {
  const Dictionary& attributes;
  std::span<const Tensor* const> inputs;
  Tensor* output = nullptr;
  const Tensor* output_gradient = nullptr;
  // Scratch space the op may keep between forward and backward of one minibatch (e.g. the
  // softmax of cross_entropy_with_softmax); sized by the op, reused across minibatches.
  TensorStorage* scratch = nullptr;
  bool is_training = false;
  // The function's generator for random ops (OpTraits::is_random), else null.
  RandomGenerator* random = nullptr;
  // In backward: which inputs get a gradient in this pass. The executor asks for them in
  // increasing index order, so an op may compute a later input's gradient along with an
  // earlier one's (keeping it in scratch).
  const std::vector<bool>* gradient_wanted = nullptr;
  // Delay ops: the last steps of each sequence of the operand in the previous minibatch (its
  // own layout), which a sequence continuing there (SequenceLayout::begins false) reads;
  // null before the first minibatch.
  const Tensor* carried = nullptr;
  // Storage an op keeps from one forward to the next of the same executor, untouched by it
  // (the fused recurrence's final states, for the sequences that continue in the next
  // minibatch). A fresh storage reads as zeros.
  TensorStorage* state = nullptr;
  // The function applied, and what its forward leaves for its backward of the same minibatch
  // when that is not a tensor (user functions, loom/graph/user_function.h).
  const FunctionImpl* function = nullptr;
  std::any* user_state = nullptr;
  // Every output's tensor, output 0 (`output`) first, and in backward every output's gradient
  // (zeros where no gradient reached an output of an op of several outputs); empty inside a
  // recurrent loop. Ops of several outputs (user functions) compute them all in one call.
  std::span<Tensor* const> outputs = {};
  std::span<const Tensor* const> output_gradients = {};
};

// Whether an op takes an input in the blocked layout (Tensor::blocked).
enum class BlockedInput {
  No,
  Yes,
  // An elementwise op, indifferent to the layout: the input may be blocked when the output is.
  LikeOutput,
};

// A set of an op's inputs: the first 63 by index, the rest together (Splice takes any number).
class InputSet {
 public:
  static constexpr InputSet all() { return InputSet(~uint64_t{0}); }
  static constexpr InputSet none() { return InputSet(0); }
  static constexpr InputSet only(size_t index) { return InputSet(uint64_t{1} << index); }
  static constexpr InputSet all_but(size_t index) { return InputSet(~(uint64_t{1} << index)); }
  constexpr bool contains(size_t index) const { return bits_ >> (index < 63 ? index : 63) & 1; }
  constexpr InputSet operator|(InputSet other) const { return InputSet(bits_ | other.bits_); }

 private:
  constexpr explicit InputSet(uint64_t bits) : bits_(bits) {}
  uint64_t bits_;
};

// The properties of an op the executor plans with, one value per op (and attributes): what the
// gradient needs, which buffers may be shared or overwritten, which inputs may stay sparse, how
// the op may be reordered or run step by step. The defaults are the safe answers.
struct OpTraits {
  // The inputs the op can produce a gradient for (not e.g. a metric's labels or indices).
  InputSet differentiable = InputSet::all();
  // The inputs forward takes in sparse CSR form; the executor densifies sparse data for others.
  InputSet accepts_sparse = InputSet::none();
  // Whether backward reads the values of the inputs, and the output's value. An op that does
  // not lets the executor give that buffer to another value once forward is done with it
  // (docs/executor.md, "Sharing buffers").
  InputSet backward_reads_inputs = InputSet::all();
  bool backward_reads_output = true;
  // The inputs each output element is computed from the same element of (elementwise ops, where
  // the input has the output's shape): forward may write its output over such an input, and
  // backward that input's gradient over the output's gradient, in place.
  InputSet writes_over_inputs = InputSet::none();
  // Whether the output is input 0's elements in the same order (reshape, a copy): the executor
  // gives the output input 0's buffer instead of running forward, and backward may write input
  // 0's gradient over the output's, where it then has nothing to do (docs/executor.md, "Views").
  bool output_views_input = false;
  // Whether each output row is computed from the same step of its inputs alone, so the op can
  // run inside a recurrent loop one step at a time. False for ops that look along the sequence
  // axis (sequence::first, slice, is_first, where, gather, ...).
  bool runs_step_by_step = true;
  // The executor runs max pooling of a relu as relu of the max pooling, on the smaller output,
  // where nothing else reads the relu (docs/executor.md, "Relu after max pooling"): the values
  // and gradients are the same. selects_max: each output element is the largest of some
  // elements of the op's only input, and backward sends its gradient to that element (max
  // pooling). moves_behind_max: an elementwise op f with f(max(a, b)) = max(f(a), f(b)) that
  // adds no ties except where its gradient is zero (relu).
  bool selects_max = false;
  bool moves_behind_max = false;
  // Whether the op draws random numbers (dropout). make_primitive then gives its function a
  // generator: RandomGenerator(seed) when the attributes hold a uint64 "seed", else
  // next_default_generator().
  bool is_random = false;
  // Delay ops (past_value, future_value): output step t of a sequence is input 0's step t - k
  // (k > 0, past) or t + |k| (k < 0, future); 0 for every other op. A graph may have cycles
  // through input 0 of a delay op: the executor runs such recurrent loops one step at a time.
  int64_t time_shift = 0;
};

// An affine map of positions along one spatial axis, p -> scale * p + translate (CNTK's
// AxisTransform), and of the two trailing axes of an image [..., height, width].
struct AxisTransform {
  double scale = 1, translate = 0;
  bool operator==(const AxisTransform&) const = default;
  // This map after `first`.
  AxisTransform after(const AxisTransform& first) const {
    return {scale * first.scale, scale * first.translate + translate};
  }
  AxisTransform inverse() const { return {1 / scale, -translate / scale}; }
};
using SpatialTransform = std::array<AxisTransform, 2>;
inline SpatialTransform inverse(const SpatialTransform& t) {
  return {t[0].inverse(), t[1].inverse()};
}

class OpDef {
 public:
  virtual ~OpDef() = default;
  virtual const char* name() const = 0;
  // Output types from the inputs (all with known shapes). May fix the inferred dimensions of
  // parameter inputs through resolve_parameter_shape (e.g. times learns its input size).
  // Throws ShapeError naming the op, the inputs and their shapes on a mismatch.
  virtual std::vector<OutputSpec> infer(const std::vector<Variable>& inputs,
                                        const Dictionary& attributes) const = 0;
  // The outputs while some input's shape is unknown (placeholders, bound later): how many there
  // are, their names and needs_gradient; their types are inferred once the inputs are bound. One
  // output by default; a user function asks its infer_outputs, as CNTK's did.
  virtual std::vector<OutputSpec> infer_unbound(const std::vector<Variable>& /*inputs*/,
                                                const Dictionary& /*attributes*/) const {
    return std::vector<OutputSpec>(1);
  }
  // Which layout the output rows follow. By default the rows of the dynamic inputs (which
  // must all share one layout); sequence ops return another (e.g. one row per sequence), which
  // they may add to the minibatch's LayoutCache. Called once per minibatch after the inputs are
  // computed and before forward: an op whose output lengths depend on data (sequence::where,
  // gather) reads its inputs' values here.
  virtual const SequenceLayout* output_layout(std::span<const Tensor* const> inputs,
                                              const Dictionary& attributes,
                                              LayoutCache& layouts) const;
  // The sample shapes of the outputs for this minibatch, one per output, when an inferred one
  // has free dimensions (NDShape::kFree); called by the executor after output_layout, which
  // reads the entries of the outputs with free dimensions. By default, shape inference again on
  // stand-ins of the inputs with free dimensions, typed with their tensors' shapes; an op that
  // decides a free dimension from its inputs' data (sequence::unpack) overrides it.
  virtual std::vector<NDShape> output_shapes(const std::vector<Variable>& inputs,
                                             std::span<const Tensor* const> tensors,
                                             const Dictionary& attributes) const;
  virtual void forward(OpCall& call) const = 0;
  // Writes (accumulate=false) or adds (accumulate=true) the gradient for input `index` into
  // input_gradient, whose shape equals that input's tensor shape.
  virtual void backward(OpCall& call, size_t index, Tensor& input_gradient,
                        bool accumulate) const = 0;
  // What the executor may assume of one application of the op (its attributes).
  virtual OpTraits traits(const Dictionary& /*attributes*/) const { return {}; }
  // Whether forward takes input `index` in oneDNN's blocked layout (Tensor::blocked), and
  // whether it can write its output so, given which inputs are blocked (functions, not traits:
  // the answer depends on the inputs' shapes and on the layouts of the other inputs). The executor
  // keeps a value blocked when its producer can write it so and every consumer takes it so
  // (docs/executor.md); backward then sees the gradients in the same layouts.
  virtual BlockedInput blocked_input(size_t /*index*/, const std::vector<Variable>& /*inputs*/,
                                     const Dictionary& /*attributes*/) const {
    return BlockedInput::No;
  }
  virtual bool blocked_output(const std::vector<Variable>& /*inputs*/,
                              const Dictionary& /*attributes*/,
                              const std::vector<bool>& /*inputs_blocked*/) const {
    return false;
  }
  // Where the op puts the two trailing (spatial) axes of input `index` in its output: output
  // position = transform(input position), as CNTK's TransformerNode; crop_automatic composes
  // them along the graph. nullopt (the default) where the op has no such map.
  virtual std::optional<SpatialTransform> spatial_transform(
      size_t /*index*/, const std::vector<Variable>& /*inputs*/,
      const Dictionary& /*attributes*/) const {
    return std::nullopt;
  }
  // Delay ops only: forward of the output rows of step t alone, and backward of them, which adds
  // into input_gradient. The call holds the whole packed tensors (input 0's earlier or later
  // rows are what step t reads).
  virtual void forward_step(OpCall& call, size_t t) const;
  virtual void backward_step(OpCall& call, size_t index, Tensor& input_gradient, size_t t) const;
};

// An op that computes each output position from its inputs at the same position (elementwise
// ops, dropout, batch normalization): the identity for crop_automatic.
class AlignedOpDef : public OpDef {
 public:
  std::optional<SpatialTransform> spatial_transform(size_t, const std::vector<Variable>&,
                                                    const Dictionary&) const override {
    return SpatialTransform{};
  }
};

// Fixes inferred dimensions of a parameter input; for known dimensions checks they agree.
void resolve_parameter_shape(const Variable& parameter, const NDShape& shape);

// Shape-inference helpers shared by the op families.
// The common dynamic axes of inputs (those that have any must agree), or a ShapeError.
std::vector<Axis> common_dynamic_axes(const char* op, const std::vector<Variable>& inputs);
// The common data type of inputs, or a ShapeError.
DataType common_dtype(const char* op, const std::vector<Variable>& inputs);
// Numpy broadcasting of sample shapes (right-aligned, 1 broadcasts), or a ShapeError.
NDShape broadcast_shapes(const char* op, const std::vector<Variable>& inputs);

}  // namespace loom
