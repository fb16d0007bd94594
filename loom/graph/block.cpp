// Blocks (CNTK's BlockFunction): a composite seen from outside as one function. Loom computes a
// block as its expansion, the composite's primitives cloned onto the block's arguments, so the
// executor, the learners and every file format see primitives only; the block is a record
// (BlockInfo) on the expansion's outputs that are the block's, and its Function handles are
// views made from that record.
#include <algorithm>
#include <unordered_set>

#include "loom/graph/function.h"
#include "loom/graph/graph_impl.h"

namespace loom {

namespace {

// Variable a held with the function computing it (as a handle made by that function is).
Variable with_producer(const Variable& a) {
  return Variable(a.impl(), a.is_output() ? a.impl()->owner.lock() : nullptr);
}

// The outputs of the block that something still keeps (an output nothing reads or holds is
// freed with its function).
std::vector<Variable> live_outputs(const BlockInfo& block) {
  std::vector<Variable> outputs;
  for (const auto& o : block.outputs)
    if (auto v = o.lock()) outputs.push_back(with_producer(Variable(v)));
  return outputs;
}

}  // namespace

std::vector<Variable> block_inputs(const BlockInfo& block) {
  std::unordered_set<const VariableImpl*> arguments, seen;
  for (const Variable& a : block.arguments) arguments.insert(a.impl().get());
  std::vector<Variable> inputs;
  for (const auto& f : topological_order(live_outputs(block), arguments))
    for (const Variable& in : f->inputs)
      if ((in.is_parameter() || in.is_constant()) && seen.insert(in.impl().get()).second)
        inputs.push_back(in);
  for (const Variable& a : block.arguments) inputs.push_back(with_producer(a));
  return inputs;
}

BlockInfo::Definition BlockInfo::definition() const {
  std::lock_guard lock(mutex_);
  if (definition_) return *definition_;
  // The expansion cloned with each argument replaced by a placeholder of its type: what
  // as_block was given, up to uids.
  Definition d;
  std::unordered_map<Variable, Variable> substitutions;
  for (const Variable& a : arguments) {
    Variable p = a.has_known_shape() ? placeholder(a.shape(), a.dtype(), a.dynamic_axes(), a.name())
                                     : placeholder(a.name());
    d.placeholders.push_back(p);
    substitutions.emplace(a, p);
  }
  d.composite =
      combine(clone_graph(live_outputs(*this), ParameterCloneMethod::Share, substitutions, this));
  definition_ = d;
  return d;
}

std::optional<BlockInfo::Definition> BlockInfo::known_definition() const {
  std::lock_guard lock(mutex_);
  return definition_;
}

void BlockInfo::set_definition(Definition definition) {
  std::lock_guard lock(mutex_);
  definition_ = std::move(definition);
}

bool computed_inside(const BlockInfo& block, const Variable& v) {
  return v.is_output() && std::ranges::none_of(block.arguments, [&](const Variable& a) {
           return a.impl() == v.impl();
         });
}

void attach_block(const std::shared_ptr<BlockInfo>& block) {
  for (const auto& output : block->outputs) {
    const std::shared_ptr<VariableImpl> o = output.lock();
    if (!o->blocks.empty() && o->blocks.back() == block) continue;  // an output listed twice
    o->blocks.push_back(block);
    o->name = block->name;
  }
}

Function block_view(const std::shared_ptr<BlockInfo>& block) {
  auto f = std::make_shared<FunctionImpl>();
  f->block = block;
  f->name = block->name;
  f->uid = block->uid;
  f->block_name = block->op_name;
  for (const Variable& o : live_outputs(*block)) {
    f->outputs.push_back(o.impl());
    f->block_producers.push_back(o.impl()->owner.lock());
  }
  LOOM_CHECK(!f->outputs.empty(), StateError, "block ", function_label(*f), " (", block->op_name,
             ") has no outputs left");
  f->inputs = block_inputs(*block);
  // A call binds the block's placeholders in its input order (as_block's mapping order).
  for (const Variable& a : block->arguments)
    if (a.is_placeholder()) f->signature.push_back(a);
  return Function(f);
}

bool Function::is_block() const {
  return impl() && impl()->block;
}

namespace {
const BlockInfo& block_of(const Function& f, const char* what) {
  LOOM_CHECK(f.is_block(), StateError, what, ": ", f.valid() ? f.to_string() : "an empty Function",
             " is not a block");
  return *f.impl()->block;
}
}  // namespace

Function Function::block_root() const {
  const Function composite = block_of(*this, "block_root").definition().composite;
  const std::vector<Variable> outs = composite.outputs();
  return outs.size() == 1 && outs[0].is_output() ? outs[0].owner() : composite;
}

std::vector<std::pair<Variable, Variable>> Function::block_arguments_mapping() const {
  const BlockInfo& block = block_of(*this, "block_arguments_mapping");
  const BlockInfo::Definition d = block.definition();
  std::vector<std::pair<Variable, Variable>> mapping;
  for (size_t i = 0; i < block.arguments.size(); ++i)
    mapping.emplace_back(d.placeholders[i], with_producer(block.arguments[i]));
  return mapping;
}

Function as_block(const Function& composite,
                  const std::vector<std::pair<Variable, Variable>>& arguments_map,
                  const std::string& op_name, const std::string& instance_name) {
  LOOM_CHECK(composite.valid(), ArgumentError, "as_block: the composite is an empty Function");
  LOOM_CHECK(!op_name.empty(), ArgumentError, "as_block: the block needs an op name");
  const std::string label = "as_block '" + op_name + "'";
  std::unordered_map<Variable, Variable> substitutions;
  std::vector<Variable> placeholders, arguments;
  const std::vector<Variable> composite_arguments = composite.arguments();
  for (const auto& [p, a] : arguments_map) {
    LOOM_CHECK(p.valid() && a.valid(), ArgumentError, label, ": a mapping holds an empty Variable");
    LOOM_CHECK(std::ranges::count(composite_arguments, p) == 1, ArgumentError, label, ": ",
               p.describe(), " is not an argument of the composite ", composite.to_string());
    LOOM_CHECK(!p.has_known_shape() || !a.has_known_shape() || same_type(p, a), ShapeError, label,
               ": placeholder ", p.describe(), " cannot stand for ", a.describe(),
               " of another type");
    LOOM_CHECK(substitutions.emplace(p, a).second, ArgumentError, label, ": ", p.describe(),
               " is mapped twice");
    placeholders.push_back(p);
    arguments.push_back(a);
  }
  std::string unmapped;
  for (const Variable& a : composite_arguments) {
    LOOM_CHECK(a.is_placeholder(), ArgumentError, label, ": the composite's argument ",
               a.describe(),
               " is not a placeholder; a block's composite reads its inputs through "
               "placeholders, each mapped to the variable it stands for");
    if (!substitutions.contains(a)) unmapped += (unmapped.empty() ? "" : ", ") + a.describe();
  }
  LOOM_CHECK(unmapped.empty(), ArgumentError, label, ": no variable is given for ", unmapped);

  const std::vector<Variable> composite_outputs = composite.outputs();
  for (size_t i = 0; i < composite_outputs.size(); ++i)
    LOOM_CHECK(composite_outputs[i].is_output(), ArgumentError, label, ": output ", i,
               " of the composite is ", composite_outputs[i].describe(),
               ", which no function of the composite computes; pass it through alias()");
  return block_view(expand_block(composite, std::move(placeholders), arguments, op_name,
                                 instance_name, substitutions)
                        .first);
}

std::pair<std::shared_ptr<BlockInfo>, std::vector<Variable>> expand_block(
    const Function& composite, std::vector<Variable> placeholders,
    const std::vector<Variable>& arguments, const std::string& op_name, const std::string& name,
    const std::unordered_map<Variable, Variable>& substitutions) {
  const std::vector<Variable> outputs =
      clone_graph(composite.outputs(), ParameterCloneMethod::Share, substitutions);
  auto block = std::make_shared<BlockInfo>();
  block->op_name = op_name;
  block->name = name;
  block->uid = new_uid("Block");
  for (const Variable& a : arguments) block->arguments.emplace_back(a.impl());
  for (const Variable& o : outputs) {
    // The composite's outputs are its functions' (as_block and Function::operator() check),
    // so their copies are the block's functions'.
    LOOM_CHECK(computed_inside(*block, o), StateError, "block ", op_name, ": ", o.describe(),
               " is not computed inside the block");
    block->outputs.push_back(o.impl());
  }
  attach_block(block);
  block->set_definition({composite, std::move(placeholders)});
  return {block, outputs};
}

}  // namespace loom
