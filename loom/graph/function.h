// Function: a node of the computation graph and, viewed from its outputs, the whole graph
// beneath it. A primitive function applies one op to its inputs; a composite (a combine(),
// or the result of calling a layer) is the graph as a unit with a name such as "Dense".
// Calling a function with arguments composes it: its placeholders are replaced by the
// arguments in a copy of its graph that shares the parameters.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/core/value.h"
#include "loom/graph/variable.h"

namespace loom {

class OpDef;
class Executor;
// Function::train/test's types, defined in loom/train/function_training.h.
class DataSource;
struct TrainOptions;
struct TrainSummary;
struct TestOptions;
struct TestSummary;
using ValueMap = std::unordered_map<Variable, Value>;

enum class ParameterCloneMethod {
  Share,   // the clone uses the same parameters
  Clone,   // the clone gets new parameters with copies of the values
  Freeze,  // the clone gets constants holding copies of the values
};

// What Function::forward keeps for Function::backward: the executor holding the pass's
// values. Valid until the next forward with the same state.
struct BackPropState {
  std::shared_ptr<Executor> executor;
};

class Function {
 public:
  Function() = default;
  explicit Function(std::shared_ptr<FunctionImpl> impl) : impl_(std::move(impl)) {}
  // The function producing v (for an output), else the composite of v alone.
  Function(const Variable& v);

  const std::vector<Variable>& inputs() const;
  std::vector<Variable> outputs() const;
  // The single output (ShapeError when there are several).
  Variable output() const;
  // Inputs and placeholders of the whole graph, in the order they were first used.
  std::vector<Variable> arguments() const;
  std::vector<Parameter> parameters() const;
  std::vector<Constant> constants() const;
  std::vector<Variable> placeholders() const;

  const std::string& name() const;
  const std::string& uid() const;
  // The op ("Plus", "Times", ...); "Composite" for combine() and layer results.
  std::string op_name() const;
  bool is_composite() const;
  const Dictionary& attributes() const;
  const OpDef& op() const;

  // "Dense(Tensor[2]) -> Tensor[2]", "Composite(Tensor[2], SparseTensor[2]) -> Tuple[...]".
  std::string to_string() const;

  // Applies the function to arguments, which replace its placeholders in order (or its
  // arguments, when it has no placeholders). Parameters are shared.
  Function operator()(const std::vector<Variable>& args) const;
  template <typename... V>
  Function operator()(const V&... args) const {
    return (*this)(std::vector<Variable>{Variable(args)...});
  }

  // A copy of the graph; substitutions replace variables (placeholders, inputs) by others.
  Function clone(ParameterCloneMethod method,
                 const std::unordered_map<Variable, Variable>& substitutions = {}) const;

  // Computes the outputs (all, or the given ones) in inference mode.
  ValueMap eval(const ValueMap& arguments, const std::vector<Variable>& outputs = {}) const;
  // The single output's value.
  Value eval_one(const ValueMap& arguments) const;
  // Gradients of the sum of the single output over all samples with respect to wrt
  // (parameters or inputs).
  ValueMap grad(const ValueMap& arguments, const std::vector<Variable>& wrt) const;

  // A forward pass that keeps what backward() needs. The state can back-propagate to the
  // function's parameters and to its inputs created with needs_gradient.
  std::pair<BackPropState, ValueMap> forward(const ValueMap& arguments,
                                             const std::vector<Variable>& outputs = {}) const;
  // Gradients of `variables` given the gradient of one output (root_gradients holds exactly
  // one entry: output -> its gradient, a Value of that output's form).
  ValueMap backward(const BackPropState& state, const ValueMap& root_gradients,
                    const std::vector<Variable>& variables) const;

  // Trains this criterion (outputs: loss, metric) with a Trainer and a training_session, and
  // evaluates its metric. Defined in the train layer: include loom/train/function_training.h.
  TrainSummary train(const DataSource& data, const TrainOptions& options) const;
  TestSummary test(const DataSource& data) const;
  TestSummary test(const DataSource& data, const TestOptions& options) const;

  bool valid() const { return impl_ != nullptr; }
  const std::shared_ptr<FunctionImpl>& impl() const { return impl_; }
  bool operator==(const Function& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<FunctionImpl> impl_;
};

// Creates a primitive function applying op to inputs; shapes are inferred now if the inputs'
// shapes are known. Ops in loom/ops/ are built on this.
Function make_primitive(const OpDef& op, std::vector<Variable> inputs, Dictionary attributes = {},
                        const std::string& name = "");
// A composite whose outputs are the given variables' (loss and metric as one criterion).
Function combine(const std::vector<Variable>& outputs, const std::string& name = "");
// A composite of the given outputs that prints as block_name (how layers present themselves:
// "Dense(Tensor[2]) -> Tensor[2]"); calling it gives a composite of the same block name.
Function as_block(const std::vector<Variable>& outputs, const std::string& block_name,
                  const std::string& name = "");

}  // namespace loom
