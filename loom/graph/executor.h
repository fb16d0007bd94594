// Executor: runs a graph. It plans once (topological order, which variables need gradients,
// one storage slot per variable) and reuses that plan and its grow-only buffers for every
// minibatch, so a steady training loop allocates nothing. See docs/executor.md.
#pragma once

#include <any>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "loom/graph/function.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"

namespace loom {

struct ExecutorOptions {
  // Values (and gradients) whose lifetimes do not overlap share one buffer (docs/executor.md,
  // "Sharing buffers"); off, every variable keeps its own, for tests and debugging.
  bool share_buffers = true;
};

class Executor {
 public:
  // outputs: what forward computes; wrt: parameters or inputs whose gradients backward gives.
  explicit Executor(std::vector<Variable> outputs, std::vector<Variable> wrt = {},
                    ExecutorOptions options = {});
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Binds the arguments (every input the outputs depend on needs a value; others are
  // ignored) and computes the outputs. is_training selects training behaviour of ops such
  // as dropout and batch normalization.
  void forward(const ValueMap& arguments, bool is_training);
  // The value of an input, or null when none is given.
  using ArgumentLookup = std::function<const Value*(const Variable&)>;
  // The same with the arguments found through a lookup, so a caller holding them in another
  // map (the Trainer's MinibatchMap) binds them without copying them into a ValueMap.
  void forward(const ArgumentLookup& argument, bool is_training);
  // Back-propagates from root (one of the outputs), after forward. Without root_gradient
  // that is the gradient of the sum of root over all its elements and samples; with it, the
  // given gradient of root (a Value of root's form and layout).
  // ready, when given, is called with each parameter's gradient as soon as backward has
  // finished it (no op after that writes it), in the order of gradient_order(): a distributed
  // learner starts sending gradients while backward goes on.
  using GradientReady = std::function<void(const Variable& parameter, const NDArrayView& gradient)>;
  void backward(const Variable& root, const Value* root_gradient = nullptr,
                const GradientReady& ready = {});
  // The wrt parameters in the order in which backward finishes their gradients (by the plan:
  // the same for every minibatch and every process that runs the same graph).
  const std::vector<Variable>& gradient_order() const { return gradient_order_; }

  // After forward: a variable's packed tensor, and its value unpacked into a Value (copy).
  // With shared buffers only the outputs' values are sure to be intact.
  const Tensor& tensor(const Variable& v) const;
  Value output_value(const Variable& v) const;
  // Sum of all elements of a computed variable over all samples.
  double sum(const Variable& v) const;
  // Number of samples (rows) of a computed variable; 1 when it has no dynamic axes.
  size_t sample_count(const Variable& v) const;
  // After backward: the gradient of a wrt variable. For parameters, an NDArrayView of the
  // parameter's shape owned by the executor and reused across minibatches.
  NDArrayView parameter_gradient(const Variable& parameter) const;
  Value gradient_value(const Variable& v) const;
  // Gradients of all wrt parameters, keyed by parameter (the learners' input).
  std::unordered_map<Variable, NDArrayView>& parameter_gradients() { return param_grads_; }

 private:
  struct Slot {
    Tensor value;
    TensorStorage storage;
    Tensor grad;
    TensorStorage grad_storage;
    bool grad_written = false;
    bool needs_grad = false;
    std::optional<NDArrayView> bound;  // keeps a bound input's data alive
    bool densify = false;              // a consumer needs this sparse input dense
    TensorStorage scratch;
    std::vector<TensorStorage> step_scratch;  // per step, for the nodes of a loop
    // Where an op's output and its gradient live: storage/grad_storage, or a buffer of
    // shared_ that other values use when this one is not alive (plan_buffers).
    TensorStorage* value_buffer = nullptr;
    TensorStorage* grad_buffer = nullptr;
    size_t sequence_axis = kNoAxis;  // an input with a sequence axis: its index in axes_
  };
  // A sequence axis of the inputs: this minibatch's layout, and the input first bound on it,
  // whose lengths the others on the axis must have.
  struct SequenceAxis {
    std::shared_ptr<const SequenceLayout> layout;
    const Variable* first = nullptr;
    const Value* first_value = nullptr;
  };
  struct Node {
    std::shared_ptr<FunctionImpl> fn;
    std::vector<size_t> inputs;               // slot indices
    std::vector<const Tensor*> input_values;  // those slots' value tensors
    size_t output;                            // slot index of output 0
    std::vector<bool> gradient_wanted;        // per input: gets a gradient in backward
    // An op of several outputs: the slots of outputs 1, 2, ... (after all nodes' slots, each
    // with buffers of its own).
    std::vector<size_t> more_outputs = {};
    // Every output's value and gradient tensor (OpCall::outputs, output_gradients).
    std::vector<Tensor*> output_values = {};
    std::vector<const Tensor*> output_grads = {};
    size_t loop = kNoLoop;     // index in loops_ for a node of a recurrent loop
    bool delay = false;        // a delay op of a loop: runs OpDef::forward_step/backward_step
    bool views_input = false;  // its output is input 0's buffer (OpTraits::output_views_input)
    // The views of one step's rows that a loop's node runs on, reused from step to step.
    std::vector<Tensor> step_inputs = {};
    std::vector<const Tensor*> step_input_values = {};
    Tensor step_output = {}, step_output_grad = {}, step_input_grad = {};
    // past_value: the operand's last time_step steps of each sequence of the previous
    // minibatch, kept when the next forward starts, for the sequences that continue there
    // (truncated BPTT).
    Tensor carried = {};
    SequenceLayout carried_layout = {};
    TensorStorage carried_storage = {};
    TensorStorage state = {};  // OpCall::state
    std::any user_state = {};  // OpCall::user_state
    // This minibatch's output sample shapes (OpDef::output_shapes), when some have free dims.
    std::vector<NDShape> free_shapes = {};
  };
  // A recurrent loop: nodes_[begin, end), a strongly connected component through delay ops,
  // run one step at a time (docs/executor.md).
  struct Loop {
    size_t begin, end;
    bool backwards;        // future_value loops run from the last step to the first
    size_t sequence_slot;  // a slot from outside the loop whose sequence layout gives the steps
  };
  static constexpr size_t kNoLoop = size_t(-1);
  static constexpr size_t kNoAxis = size_t(-1);

  // Orders the functions for execution: each recurrent loop as one block of nodes.
  std::vector<std::shared_ptr<FunctionImpl>> schedule(
      const std::vector<std::shared_ptr<FunctionImpl>>& order);
  // Loop checks that need the nodes: sequence inputs, ops that cannot run one step at a time.
  void plan_loop(Loop& loop);
  void forward_loop(const Loop& loop);
  void backward_loop(const Loop& loop);
  // Marks a gradient written, filling it with zeros first if it was not.
  void zero_gradient_once(size_t slot);
  // Whether a gradient reached any output of node; where one did, the outputs of an op of
  // several outputs that none reached get zeros (its backward reads them all).
  bool gradient_reached(const Node& node);
  // Keeps node's operand's last steps for the minibatch about to start (Node::carried).
  void carry_over(Node& node);
  // The OpCall of node's whole tensors (without output gradient in forward).
  OpCall whole_call(Node& node, bool with_gradient);
  // Points a loop node's step tensors at the rows of step t: its sequence inputs and output.
  void step_views(Node& node, const Slot& out, const SequenceLayout& loop, size_t t,
                  const SequenceLayout* step);
  size_t slot_of(const Variable& v) const;
  // Which values stay in oneDNN's blocked layout (Tensor::blocked).
  void plan_blocked_layouts();
  // Gives the ops' outputs and gradients their buffers, shared where lifetimes do not overlap.
  void plan_buffers(bool share);
  // Where in backward each parameter's gradient is final (final_after_, gradient_order_).
  void plan_gradient_order();
  // Zeros the gradients final at position that no op wrote, and reports them to ready.
  void finish_gradients(size_t position, const GradientReady& ready);
  void bind_input(const Variable& v, Slot& slot, const Value& value);
  void bind_sequence_layouts(const ArgumentLookup& argument);
  Tensor& gradient_tensor(size_t slot);
  // Whether backward reads the root gradient g where it lies instead of a copy in the root's
  // gradient buffer.
  bool seeds_in_place(size_t root, const Value& g) const;
  // Runs a node's backward (run) under the debugging aids (loom/graph/debugging.h), which time
  // it and check the gradients it writes.
  void observe_backward(const Node& node, const std::function<void()>& run);
  // The gradients node writes to its inputs, and their input indices.
  std::pair<std::vector<const Tensor*>, std::vector<size_t>> written_gradients(const Node& node);

  std::vector<Variable> outputs_;
  std::vector<Node> nodes_;
  std::vector<Loop> loops_;
  std::vector<Slot> slots_;
  std::deque<TensorStorage> shared_;  // the buffers plan_buffers shares (stable addresses)
  std::unordered_map<const VariableImpl*, size_t> slot_index_;
  std::vector<Variable> leaf_vars_;  // slot i < leaf_vars_.size() holds leaf_vars_[i]
  std::unordered_map<Variable, NDArrayView> param_grads_;
  // Per backward position (a node's index; a loop's first node; nodes_.size() for the end of
  // backward), the parameter slots whose gradients are final there.
  std::vector<std::vector<size_t>> final_after_;
  std::vector<Variable> gradient_order_;
  std::optional<NDArrayView> root_gradient_;  // the last backward's root gradient, in place
  LayoutCache layouts_;
  std::vector<SequenceAxis> axes_;
  bool forward_done_ = false;
  bool is_training_ = false;
  // Whether this pass runs its nodes under the debugging aids (node_observation_active()).
  bool observe_ = false;
};

}  // namespace loom
