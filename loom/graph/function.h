// Function: a node of the computation graph and, viewed from its outputs, the whole graph
// beneath it. A primitive function applies one op to its inputs; a composite (a combine(),
// or the result of calling a layer) is the graph as a unit with a name such as "Dense".
// Calling a function with arguments composes it: its placeholders are replaced by the
// arguments in a copy of its graph that shares the parameters.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
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

// Data for one argument of a function evaluated on data (`model(data)`, `model.eval(data)`): a
// Value as is; an NDArrayView holding one sample of the argument's shape or a batch [N, shape...]
// (a sequence argument: one sequence [T, shape...] or a batch [N, T, shape...]); or float values
// in row-major order, a whole number of samples (a sequence argument: one sequence of them).
class ArgumentData {
 public:
  ArgumentData(Value value) : data_(std::move(value)) {}
  ArgumentData(NDArrayView array) : data_(std::move(array)) {}
  ArgumentData(const std::vector<float>& values);

  // The Value to bind to argument; ShapeError naming it when the data do not fit.
  Value to_value(const Variable& argument) const;

 private:
  std::variant<Value, NDArrayView> data_;
  bool flat_ = false;  // float values: any whole number of samples
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
  // The function producing v, where v is its only output; else the composite of v alone (one
  // output of TopK), as CNTK converts a Variable to a FunctionPtr.
  Function(const Variable& v);

  const std::vector<Variable>& inputs() const;
  std::vector<Variable> outputs() const;
  // The single output (ShapeError when there are several).
  Variable output() const;
  // Inputs and placeholders of the whole graph, in CNTK's order: depth first, each function's
  // inputs left to right (the arguments of plus(x, sigmoid(y)) are x, y); a signature's first.
  std::vector<Variable> arguments() const;
  // The argument of that name (a loaded model's inputs: model.argument("features")).
  // ArgumentError listing the arguments when none or several have it.
  Variable argument(const std::string& name) const;
  std::vector<Parameter> parameters() const;
  // The parameter at path: "<layer>.<parameter>" with the layer's name, or its block name
  // numbered when the function has several ("Dense1.W", "Dense2.b"; one Dense: "Dense.W"), or
  // a parameter's own name when only one parameter has it ("W"). ArgumentError listing the
  // paths when none or several match.
  Parameter parameter(const std::string& path) const;
  // Every parameter's path, in parameters() order.
  std::vector<std::string> parameter_paths() const;
  std::vector<Constant> constants() const;
  std::vector<Variable> placeholders() const;

  const std::string& name() const;
  const std::string& uid() const;
  // The op ("Plus", "Times", ...); a block's op name (as_block); "Composite" for combine() and
  // layer results.
  std::string op_name() const;
  // A composite: combine()'s result or a layer's; neither a primitive nor a block.
  bool is_composite() const;
  // A block (as_block): one function from outside, its composite inside (CNTK's BlockFunction).
  bool is_block() const;
  // A block's composite's root function (its single output's function, else the composite).
  // StateError for a function that is not a block.
  Function block_root() const;
  // A block's (placeholder of its composite, variable it stands for) pairs, in input order.
  std::vector<std::pair<Variable, Variable>> block_arguments_mapping() const;
  const Dictionary& attributes() const;
  const OpDef& op() const;
  // CNTK's SetAttribute, on a primitive (or a composite of one output, its root): "dropoutRate"
  // of a Dropout, "rngSeed" of an op that draws random numbers (its draws start anew from that
  // seed). An ArgumentError for other names, ops or values.
  void set_attribute(const std::string& name, const DictionaryValue& value) const;
  // The caller's own entries, saved and loaded with the model (CNTK's custom_attributes).
  Dictionary& custom_attributes() const;

  // As CNTK prints functions: "[name: ]Op(argument: Type, ...) -> Type" (or "-> Tuple[Type, ...]"),
  // arguments without a name printing as just their type: "Dense(Tensor[2]) -> Tensor[2]",
  // "Composite(images: Tensor[28,28], labels: SparseTensor[10]) -> Tuple[Tensor[1], Tensor[1]]".
  // Op is the op or layer when it is applied directly to the arguments, else "Composite".
  std::string to_string() const;

  // Applies the function to arguments, which replace its placeholders in order (or its
  // arguments, when it has no placeholders). Parameters are shared.
  Function operator()(const std::vector<Variable>& args) const;
  template <typename... V>
  requires(std::is_convertible_v<const V&, Variable>&&...) Function operator()(
      const V&... args) const {
    return (*this)(std::vector<Variable>{Variable(args)...});
  }
  // Evaluates a one-argument, one-output function on data: `scores = model(image)`; the
  // output's value, [N, output shape...]: print it, index a sample (scores[0]), argmax().
  Value operator()(const ArgumentData& data) const;
  // model({2.f, 1.f}): float values (an overload of its own, which a braced list of numbers
  // prefers to the vector of Variables; eval takes std::vector<float>, since eval({}) is an
  // empty ValueMap).
  Value operator()(std::initializer_list<float> values) const {
    return eval(ArgumentData(std::vector<float>(values)));
  }

  // A copy of the graph; substitutions replace variables (placeholders, inputs) by others.
  Function clone(ParameterCloneMethod method,
                 const std::unordered_map<Variable, Variable>& substitutions = {}) const;

  // Replaces placeholders of this function's graph by other variables, in place (CNTK's
  // ReplacePlaceholders). This is how a recurrent loop closes:
  //   Variable p = placeholder(shape, dtype, x.dynamic_axes());
  //   Function h = tanh(plus(times(x, W), times(sequence::past_value(p), U)));
  //   h.replace_placeholders({{p, h}});
  // A placeholder of known type takes a variable of that type, or one whose type is not known
  // yet (a layer's loop before the layer is called); outputs computed from untyped placeholders
  // take their types from the new inputs where those are known.
  Function& replace_placeholders(const std::unordered_map<Variable, Variable>& substitutions);

  // Computes the outputs (all, or the given ones) in inference mode.
  ValueMap eval(const ValueMap& arguments, const std::vector<Variable>& outputs = {}) const;
  // The single output's value.
  Value eval_one(const ValueMap& arguments) const;
  // model(data) as a member, as CNTK's model.eval(data).
  Value eval(const ArgumentData& data) const;

  // The single output's value with the arguments' data by name:
  // loss.eval({{"images", x}, {"labels", y}}). A template only so that eval({}) stays the
  // ValueMap overload (a non-template wins a tie).
  using NamedData = std::vector<std::pair<std::string, ArgumentData>>;
  template <typename Named = NamedData>
  requires std::is_same_v<Named, NamedData> Value eval(const Named& data)
  const { return eval_named(data); }
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
  // The same function: the same primitive or composite, or views of the same block.
  bool operator==(const Function& o) const;
  size_t hash() const;

 private:
  Value eval_named(const NamedData& data) const;
  // A layer's call as a block (as_layer, LayerCall::Block): the composite of its outputs; an
  // empty Function where the layer is not called as a block.
  Function call_as_block(const std::vector<Variable>& params, const std::vector<Variable>& args,
                         const std::unordered_map<Variable, Variable>& subst) const;
  // args with the placeholders of the signature (as_layer's arguments) first, in its order.
  std::vector<Variable> in_signature_order(std::vector<Variable> args) const;

  std::shared_ptr<FunctionImpl> impl_;
};

// Creates a primitive function applying op to inputs; shapes are inferred now if the inputs'
// shapes are known. Ops in loom/ops/ are built on this.
Function make_primitive(const OpDef& op, std::vector<Variable> inputs, Dictionary attributes = {},
                        const std::string& name = "");
// A composite whose outputs are the given variables' (loss and metric as one criterion).
Function combine(const std::vector<Variable>& outputs, const std::string& name = "");
// CNTK's as_block: composite (a function of placeholders only) applied to the variables that
// arguments_map gives for each of its placeholders, seen from outside as one function whose op
// is op_name: its inputs are the composite's parameters and constants, then the variables;
// graph walks at depth 0 meet it and not what is inside; block_root() and
// block_arguments_mapping() give the composite back. It computes as the composite's primitives
// would (clone(Share) onto the variables), and saves, loads and clones as a block.
// ArgumentError for an argument of composite that is not a placeholder, or one mapped twice or
// not at all; ShapeError for a typed placeholder mapped to a variable of another type.
Function as_block(const Function& composite,
                  const std::vector<std::pair<Variable, Variable>>& arguments_map,
                  const std::string& op_name, const std::string& instance_name = "");
// What a call of a layer (as_layer) leaves in the graph it is applied to.
enum class LayerCall {
  // A block of op block_name named name (CNTK's @BlockFunction layers: Dense, Embedding,
  // Convolution, LSTM, ...): walks at depth 0 meet it, find_by_name finds it by the layer's name.
  // A layer that passes an argument through (an identity, Activation(None)) is inlined instead.
  Block,
  // The composite's functions, inlined (CNTK's Recurrence, RecurrenceFrom, Fold and UnfoldFrom,
  // which are composites, not blocks).
  Inline,
};

// A composite of the given outputs that prints as block_name (how layers present themselves:
// "Dense(Tensor[2]) -> Tensor[2]"); calling it gives a composite of the same block name whose
// root is the block of the call (LayerCall::Block, as CNTK's layers are). The parameters it uses
// that belong to no layer yet become this layer's (Function::parameter).
// arguments: its placeholders in the order a call binds them (default: the order of first use).
Function as_layer(const std::vector<Variable>& outputs, const std::string& block_name,
                  const std::string& name = "", const std::vector<Variable>& arguments = {},
                  LayerCall call = LayerCall::Block);

}  // namespace loom

template <>
struct std::hash<loom::Function> {
  size_t operator()(const loom::Function& f) const noexcept { return f.hash(); }
};
