// The shared state behind Variable and Function handles. Used by the graph layer and by the
// executor; user code sees only the handles.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/core/random.h"
#include "loom/graph/function.h"
#include "loom/graph/variable.h"

namespace loom {

// The layer a parameter was created by: its block name ("Dense") and the name the layer was
// given (may be empty). The parameters of one layer object share one tag, which is how a model
// tells two Dense layers apart (Function::parameter).
struct LayerTag {
  std::string block_name;
  std::string name;
};

struct VariableImpl {
  VariableKind kind;
  NDShape shape;
  bool shape_known = true;
  DataType dtype = DataType::Float32;
  std::vector<Axis> dynamic_axes;
  bool is_sparse = false;
  bool needs_gradient = false;
  std::string name;
  std::string uid;
  // Outputs: the producing primitive (weak: the function owns its outputs).
  std::weak_ptr<FunctionImpl> owner;
  size_t output_index = 0;
  // Parameters and constants: the value once the shape is known, and how to make it.
  std::optional<NDArrayView> value;
  Initializer init;
  RandomGenerator init_generator;
  // Parameters of a layer: the layer (set by as_block; null for free parameters).
  std::shared_ptr<const LayerTag> layer;

  // Fixes the inferred dimensions of a parameter's shape and runs its initializer.
  void resolve_shape(const NDShape& full);
};

class FunctionImpl {
 public:
  FunctionImpl() = default;
  FunctionImpl(const FunctionImpl&) = default;
  FunctionImpl& operator=(const FunctionImpl&) = default;
  // Frees the functions only this one kept alive one after another, not by nested destructor
  // calls, so that a graph of any depth is freed in constant stack.
  ~FunctionImpl();

  const OpDef* op = nullptr;
  // Where op is this function's own (a user function's, user_function.h): what keeps it alive.
  std::shared_ptr<const OpDef> owned_op;
  std::vector<Variable> inputs;
  std::vector<std::shared_ptr<VariableImpl>> outputs;
  Dictionary attributes;
  std::string name;
  std::string uid;
  // Set for combine() results and layer calls: the name it prints as ("Composite", "Dense").
  std::string block_name;
  // Composites: placeholders in the order a call binds them (as_block's arguments), ahead of the
  // others; empty: the order of first use.
  std::vector<Variable> signature;
  // Random ops (OpTraits::is_random): the generator their draws come from. Its state is part of
  // the model file and of checkpoints (loom/graph/random_state.h).
  std::optional<RandomGenerator> random;
  // Function::custom_attributes: the caller's, saved with the model.
  Dictionary custom_attributes;
};

// describe(Variable) for the state behind it.
std::string describe(const VariableImpl& v);

// A new uid with the given prefix ("Parameter", "Input", "Plus", ...), unique in the process.
std::string new_uid(const std::string& prefix);

// All primitive functions the given variables depend on, each once, inputs before the
// functions that use them (a topological order), except the operand of a delay op
// (past_value/future_value), which may come after it: that edge is how a recurrent loop closes.
// A cycle that does not go through a delay op's operand is a StateError naming its functions.
std::vector<std::shared_ptr<FunctionImpl>> topological_order(const std::vector<Variable>& roots);
// Whether f is a delay op (OpTraits::time_shift), whose operand may close a recurrent loop.
bool is_delay(const FunctionImpl& f);
// A placeholder standing for v, the operand of a delay op closing a loop, until v exists (when
// a graph is copied or loaded): of v's type, or where that is not known yet the delay's output's
// (the same), with v's needs_gradient; on the axes renamed names instead (a clone's: the
// original's axis name -> the clone's axis).
Variable forward_declaration(const Variable& v, const Variable& delay_output,
                             const std::unordered_map<std::string, Axis>& renamed = {});
// f's op applied to other inputs, with f's attributes and name (a clone's copy of f); a user
// function's copy is the one its clone() gives (user_function.h).
Function remake_primitive(const FunctionImpl& f, std::vector<Variable> inputs);
// How messages name a function: "name (uid)", or the uid alone.
std::string function_label(const FunctionImpl& f);

}  // namespace loom
