#include "loom/graph/function.h"

#include <unordered_set>

#include "loom/graph/executor.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"

namespace loom {

namespace {
const FunctionImpl& get(const std::shared_ptr<FunctionImpl>& p) {
  LOOM_CHECK(p, StateError, "use of an empty Function");
  return *p;
}

Variable handle(const std::shared_ptr<VariableImpl>& v, const std::shared_ptr<FunctionImpl>& f) {
  return Variable(v, f);
}

// Leaves (inputs, placeholders, parameters, constants) in order of first use, depth first.
std::vector<Variable> leaves(const std::vector<Variable>& roots) {
  std::vector<Variable> out;
  std::unordered_set<const void*> seen;
  for (auto& f : topological_order(roots))
    for (auto& in : f->inputs)
      if (!in.is_output() && seen.insert(in.impl().get()).second) out.push_back(in);
  for (auto& r : roots)
    if (!r.is_output() && seen.insert(r.impl().get()).second) out.push_back(r);
  return out;
}
}  // namespace

std::vector<std::shared_ptr<FunctionImpl>> topological_order(const std::vector<Variable>& roots) {
  std::vector<std::shared_ptr<FunctionImpl>> order;
  std::unordered_set<const FunctionImpl*> done, on_stack;
  // Iterative depth-first post-order, so deep graphs (long unrolled chains) cannot overflow.
  struct Frame {
    std::shared_ptr<FunctionImpl> f;
    size_t next_input;
  };
  std::vector<Frame> stack;
  auto push = [&](const Variable& v) {
    if (!v.is_output()) return;
    auto f = v.impl()->owner.lock();
    LOOM_CHECK(f, StateError, "the function producing '", v.uid(), "' no longer exists");
    if (done.count(f.get())) return;
    LOOM_CHECK(!on_stack.count(f.get()), StateError, "the graph has a cycle through ", f->uid,
               "; recurrences must go through past_value/future_value");
    on_stack.insert(f.get());
    stack.push_back({f, 0});
  };
  for (auto& r : roots) {
    push(r);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next_input < top.f->inputs.size()) {
        push(top.f->inputs[top.next_input++]);
        continue;
      }
      on_stack.erase(top.f.get());
      done.insert(top.f.get());
      order.push_back(top.f);
      stack.pop_back();
    }
  }
  return order;
}

Function::Function(const Variable& v)
    : impl_(v.is_output() ? v.owner().impl_ : combine({v}).impl_) {}

const std::vector<Variable>& Function::inputs() const {
  return get(impl_).inputs;
}

std::vector<Variable> Function::outputs() const {
  std::vector<Variable> out;
  for (auto& o : get(impl_).outputs) out.push_back(handle(o, impl_));
  return out;
}

Variable Function::output() const {
  return Variable(*this);
}

std::vector<Variable> Function::arguments() const {
  std::vector<Variable> out;
  for (auto& v : leaves(outputs()))
    if (v.is_input() || v.is_placeholder()) out.push_back(v);
  return out;
}

std::vector<Parameter> Function::parameters() const {
  std::vector<Parameter> out;
  for (auto& v : leaves(outputs()))
    if (v.is_parameter()) out.emplace_back(v);
  return out;
}

std::vector<Constant> Function::constants() const {
  std::vector<Constant> out;
  for (auto& v : leaves(outputs()))
    if (v.is_constant()) out.emplace_back(v);
  return out;
}

std::vector<Variable> Function::placeholders() const {
  std::vector<Variable> out;
  for (auto& v : leaves(outputs()))
    if (v.is_placeholder()) out.push_back(v);
  return out;
}

const std::string& Function::name() const {
  return get(impl_).name;
}
const std::string& Function::uid() const {
  return get(impl_).uid;
}
bool Function::is_composite() const {
  return get(impl_).op == nullptr;
}
const Dictionary& Function::attributes() const {
  return get(impl_).attributes;
}

const OpDef& Function::op() const {
  LOOM_CHECK(!is_composite(), StateError, "composite ", to_string(), " has no single op");
  return *impl_->op;
}

std::string Function::op_name() const {
  const FunctionImpl& f = get(impl_);
  return f.op ? f.op->name() : f.block_name;
}

std::string Function::to_string() const {
  std::string s = op_name() + "(";
  auto args = arguments();
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].type_string();
  s += ") -> ";
  auto outs = outputs();
  if (outs.size() == 1) return s + outs[0].type_string();
  s += "Tuple[";
  for (size_t i = 0; i < outs.size(); ++i) s += (i ? ", " : "") + outs[i].type_string();
  return s + "]";
}

Function make_primitive(const OpDef& op, std::vector<Variable> inputs, Dictionary attributes,
                        const std::string& name) {
  auto f = std::make_shared<FunctionImpl>();
  f->op = &op;
  f->inputs = std::move(inputs);
  f->attributes = std::move(attributes);
  f->name = name;
  f->uid = new_uid(op.name());
  bool known = true, needs_gradient = false;
  for (auto& in : f->inputs) {
    LOOM_CHECK(in.valid(), ArgumentError, op.name(), ": an input is an empty Variable");
    known = known && in.has_known_shape();
    needs_gradient = needs_gradient || in.needs_gradient();
  }
  std::vector<OutputSpec> specs;
  if (known) {
    specs = op.infer(f->inputs, f->attributes);
  } else {
    specs.resize(1);  // bound later, when the placeholders are replaced
  }
  if (op.is_random()) {
    const bool seeded = f->attributes.contains("seed");
    f->random =
        seeded ? RandomGenerator(f->attributes.get<uint64_t>("seed")) : next_default_generator();
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    auto v = std::make_shared<VariableImpl>();
    v->kind = VariableKind::Output;
    v->shape = specs[i].shape;
    v->shape_known = known;
    v->dtype = specs[i].dtype;
    v->dynamic_axes = specs[i].dynamic_axes;
    v->is_sparse = specs[i].is_sparse;
    v->needs_gradient = needs_gradient;
    v->name = name;
    v->uid = f->uid + "_Output_" + std::to_string(i);
    v->owner = f;
    v->output_index = i;
    f->outputs.push_back(std::move(v));
  }
  return Function(f);
}

Function combine(const std::vector<Variable>& outputs, const std::string& name) {
  auto f = std::make_shared<FunctionImpl>();
  f->inputs = outputs;
  for (auto& o : outputs) f->outputs.push_back(o.impl());
  f->name = name;
  f->uid = new_uid("Combine");
  f->block_name = "Composite";
  return Function(f);
}

Function as_block(const std::vector<Variable>& outputs, const std::string& block_name,
                  const std::string& name) {
  Function c = combine(outputs, name);
  c.impl()->block_name = block_name;
  return c;
}

Function Function::clone(ParameterCloneMethod method,
                         const std::unordered_map<Variable, Variable>& substitutions) const {
  std::unordered_map<const VariableImpl*, Variable> map;
  for (auto& [from, to] : substitutions) map[from.impl().get()] = to;
  auto mapped = [&](const Variable& v) -> Variable {
    auto it = map.find(v.impl().get());
    if (it != map.end()) return it->second;
    if (v.is_parameter() && method != ParameterCloneMethod::Share) {
      NDArrayView copy = v.value().deep_clone();
      Variable c = method == ParameterCloneMethod::Clone ? Variable(parameter(copy, v.name()))
                                                         : Variable(constant(copy, v.name()));
      map[v.impl().get()] = c;
      return c;
    }
    return v;
  };
  auto roots = outputs();
  for (auto& f : topological_order(roots)) {
    std::vector<Variable> ins;
    for (auto& in : f->inputs) ins.push_back(mapped(in));
    Function g = make_primitive(*f->op, std::move(ins), f->attributes, f->name);
    LOOM_CHECK(g.impl()->outputs.size() == f->outputs.size(), StateError, "clone of ", f->uid,
               " produced ", g.impl()->outputs.size(), " outputs instead of ", f->outputs.size());
    for (size_t i = 0; i < f->outputs.size(); ++i)
      map[f->outputs[i].get()] = handle(g.impl()->outputs[i], g.impl());
  }
  std::vector<Variable> new_roots;
  for (auto& r : roots) new_roots.push_back(mapped(r));
  if (is_composite()) return as_block(new_roots, impl_->block_name, name());
  return new_roots[0].owner();
}

Function Function::operator()(const std::vector<Variable>& args) const {
  auto params = placeholders();
  if (params.empty()) params = arguments();
  LOOM_CHECK(args.size() == params.size(), ArgumentError, to_string(), " takes ", params.size(),
             " argument(s), got ", args.size());
  std::unordered_map<Variable, Variable> subst;
  for (size_t i = 0; i < args.size(); ++i) subst.emplace(params[i], args[i]);
  return clone(ParameterCloneMethod::Share, subst);
}

ValueMap Function::eval(const ValueMap& arguments, const std::vector<Variable>& outs) const {
  std::vector<Variable> wanted = outs.empty() ? outputs() : outs;
  Executor exec(wanted);
  exec.forward(arguments, /*is_training=*/false);
  ValueMap result;
  for (auto& o : wanted) result.emplace(o, exec.output_value(o));
  return result;
}

Value Function::eval_one(const ValueMap& arguments) const {
  Variable o = output();
  return eval(arguments, {o}).at(o);
}

ValueMap Function::grad(const ValueMap& arguments, const std::vector<Variable>& wrt) const {
  Variable root = output();
  Executor exec({root}, wrt);
  exec.forward(arguments, /*is_training=*/true);
  exec.backward(root);
  ValueMap result;
  for (auto& w : wrt) result.emplace(w, exec.gradient_value(w));
  return result;
}

std::pair<BackPropState, ValueMap> Function::forward(const ValueMap& args,
                                                     const std::vector<Variable>& outs) const {
  std::vector<Variable> wanted = outs.empty() ? outputs() : outs;
  std::vector<Variable> wrt;
  for (auto& p : parameters()) wrt.push_back(p);
  for (auto& a : arguments())
    if (a.needs_gradient()) wrt.push_back(a);
  auto exec = std::make_shared<Executor>(wanted, wrt);
  exec->forward(args, /*is_training=*/true);
  ValueMap result;
  for (auto& o : wanted) result.emplace(o, exec->output_value(o));
  return {BackPropState{exec}, std::move(result)};
}

ValueMap Function::backward(const BackPropState& state, const ValueMap& root_gradients,
                            const std::vector<Variable>& variables) const {
  LOOM_CHECK(state.executor, StateError, "backward with an empty state: call forward first");
  LOOM_CHECK(root_gradients.size() == 1, ArgumentError,
             "backward takes the gradient of exactly one output, got ", root_gradients.size());
  const auto& [root, gradient] = *root_gradients.begin();
  state.executor->backward(root, &gradient);
  ValueMap result;
  for (auto& v : variables) result.emplace(v, state.executor->gradient_value(v));
  return result;
}

}  // namespace loom
