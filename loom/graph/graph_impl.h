// The shared state behind Variable and Function handles. Used by the graph layer and by the
// executor; user code sees only the handles.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
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

// A block (CNTK's BlockFunction, made by as_block): a composite of placeholders applied to
// outer variables and seen from outside as one function of op op_name. Loom computes it as the
// composite's primitives cloned onto the outer variables (its expansion); the block itself is
// this record, kept by the outputs of the expansion that are the block's outputs. Function
// handles to the block are views made from it (block_view).
struct BlockInfo {
  std::string op_name;
  std::string name;
  std::string uid;
  // The outer variables, in the block's input order. Held without their functions
  // (Variable(impl)): a block in a recurrent loop reads its own output through a delay, and the
  // record must not own the loop.
  std::vector<Variable> arguments;
  // The expansion's variables that are the block's outputs, in the composite's output order
  // (weak: their functions own them).
  std::vector<std::weak_ptr<VariableImpl>> outputs;

  // What the block is: the composite, and its placeholders (placeholders[i] stands for
  // arguments[i]).
  struct Definition {
    Function composite;
    std::vector<Variable> placeholders;
  };
  // as_block's own composite; for a block loaded or cloned from one not asked yet, made when
  // first asked for, from the expansion (thread safe).
  Definition definition() const;
  // The definition when it is known already.
  std::optional<Definition> known_definition() const;
  void set_definition(Definition definition);

 private:
  mutable std::mutex mutex_;
  mutable std::optional<Definition> definition_;
};

struct VariableImpl {
  VariableKind kind;
  NDShape shape;
  bool shape_known = true;
  DataType dtype = DataType::Float32;
  std::vector<Axis> dynamic_axes;
  bool is_sparse = false;
  bool needs_gradient = false;
  // Outputs: needs no gradient whatever its function's inputs need (OutputSpec::needs_gradient
  // false): a user function's backward gets none for it (user_function.h).
  bool stops_gradient = false;
  std::string name;
  std::string uid;
  // Outputs: the producing primitive (weak: the function owns its outputs).
  std::weak_ptr<FunctionImpl> owner;
  size_t output_index = 0;
  // Parameters and constants: the value once the shape is known, and how to make it.
  std::optional<NDArrayView> value;
  Initializer init;
  RandomGenerator init_generator;
  // Parameters of a layer: the layer (set by as_layer; null for free parameters).
  std::shared_ptr<const LayerTag> layer;
  // Outputs: the blocks this variable is an output of, innermost first (a block whose
  // composite's output is a nested block's output is the outer one).
  std::vector<std::shared_ptr<BlockInfo>> blocks;

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
  // A layer (as_layer) whose call is a block of op block_name and this function's name, as
  // CNTK's layers are (Function::operator()).
  bool call_as_block = false;
  // Composites: placeholders in the order a call binds them (as_layer's arguments), ahead of the
  // others; empty: the order of first use.
  std::vector<Variable> signature;
  // Random ops (OpTraits::is_random): the generator their draws come from. Its state is part of
  // the model file and of checkpoints (loom/graph/random_state.h).
  std::optional<RandomGenerator> random;
  // Function::custom_attributes: the caller's, saved with the model.
  Dictionary custom_attributes;
  // A block's view (block_view): the block, and the functions computing its outputs (the view
  // keeps them alive as an output's handle does).
  std::shared_ptr<BlockInfo> block;
  std::vector<std::shared_ptr<FunctionImpl>> block_producers;
};

// describe(Variable) for the state behind it.
std::string describe(const VariableImpl& v);

// A new uid with the given prefix ("Parameter", "Input", "Plus", ...), unique in the process.
std::string new_uid(const std::string& prefix);

// All primitive functions the given variables depend on, each once, inputs before the
// functions that use them (a topological order), except the operand of a delay op
// (past_value/future_value), which may come after it: that edge is how a recurrent loop closes.
// A cycle that does not go through a delay op's operand is a StateError naming its functions.
// The walk does not go past the variables in stop (a clone's substituted variables, a block's
// arguments).
std::vector<std::shared_ptr<FunctionImpl>> topological_order(
    const std::vector<Variable>& roots, const std::unordered_set<const VariableImpl*>& stop = {});
// Whether f is a delay op (OpTraits::time_shift), whose operand may close a recurrent loop.
bool is_delay(const FunctionImpl& f);
// A placeholder standing for v, the operand of a delay op closing a loop, until v exists (when
// a graph is copied or loaded): of v's type, or where that is not known yet the delay's output's
// (the same), with v's needs_gradient; on the axes renamed names instead (a clone's: the
// original's axis name -> the clone's axis).
Variable forward_declaration(const Variable& v, const Variable& delay_output,
                             const std::unordered_map<std::string, Axis>& renamed = {});
// Function::clone's copy of the graph under roots: the roots' copies. The copies of blocks'
// outputs are the copied blocks' outputs (cloned_blocks: original -> copy), except for block
// skip (a block's definition made from its expansion: its outputs are the composite's).
std::vector<Variable> clone_graph(
    const std::vector<Variable>& roots, ParameterCloneMethod method,
    const std::unordered_map<Variable, Variable>& substitutions, const BlockInfo* skip = nullptr,
    std::unordered_map<const BlockInfo*, std::shared_ptr<BlockInfo>>* cloned_blocks = nullptr);
// f's op applied to other inputs, with f's attributes and name (a clone's copy of f); a user
// function's copy is the one its clone() gives (user_function.h).
Function remake_primitive(const FunctionImpl& f, std::vector<Variable> inputs);
// Whether output v of a block's composite, applied to the block's arguments, is computed by a
// function of the block (not an argument, parameter or constant passed through).
bool computed_inside(const BlockInfo& block, const Variable& v);
// Records block on its outputs (each once, innermost blocks first) and gives them the block's
// name, as CNTK's block outputs have.
void attach_block(const std::shared_ptr<BlockInfo>& block);
// composite (a function of the placeholders only, each output computed by one of its functions)
// applied to arguments (placeholders[i] -> arguments[i], as substitutions holds), recorded as a
// block of op op_name: the expansion, clone(Share) onto the arguments, and the block on its
// outputs. as_block and the call of a layer (Function::operator()) make blocks with it. The
// block, and its outputs held with their functions (the block keeps them weakly).
std::pair<std::shared_ptr<BlockInfo>, std::vector<Variable>> expand_block(
    const Function& composite, std::vector<Variable> placeholders,
    const std::vector<Variable>& arguments, const std::string& op_name, const std::string& name,
    const std::unordered_map<Variable, Variable>& substitutions);
// A block's inputs as CNTK's: the parameters and constants its expansion reads, in order of
// first use, then its arguments.
std::vector<Variable> block_inputs(const BlockInfo& block);
// The Function handle of a block: a view with the block's op name, name and uid, its inputs
// (the composite's parameters and constants, then the outer variables, as CNTK's) and outputs.
Function block_view(const std::shared_ptr<BlockInfo>& block);
// Whether a and b have the same type: both of unknown shape, or the same shape, data type,
// dynamic axes and sparseness.
bool same_type(const Variable& a, const Variable& b);
// How messages name a function: "name (uid)", or the uid alone.
std::string function_label(const FunctionImpl& f);

}  // namespace loom
