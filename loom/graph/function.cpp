#include "loom/graph/function.h"

#include <algorithm>
#include <unordered_set>

#include "loom/graph/executor.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/graph_walk.h"
#include "loom/graph/op.h"
#include "loom/graph/user_function.h"

namespace loom {

FunctionImpl::~FunctionImpl() {
  std::vector<std::shared_ptr<FunctionImpl>> pending;
  auto release_inputs = [&pending](FunctionImpl& f) {
    for (Variable& in : f.inputs)
      if (std::shared_ptr<FunctionImpl> k = in.release_keep_alive())
        pending.push_back(std::move(k));
  };
  release_inputs(*this);
  while (!pending.empty()) {
    std::shared_ptr<FunctionImpl> f = std::move(pending.back());
    pending.pop_back();
    // The last owner: take what f keeps alive before f goes (its destructor then finds nothing).
    if (f.use_count() == 1) release_inputs(*f);
  }
}

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
// The functions under roots in topological order, except that a delay op waits for the
// functions that make its axes (a where, gather or slice whose output is on an axis none of its
// inputs has) where it can: cloned first, they tell a loop's closing placeholder its axes.
std::vector<std::shared_ptr<FunctionImpl>> clone_order(
    const std::vector<Variable>& roots, const std::unordered_set<const VariableImpl*>& stop) {
  std::vector<std::shared_ptr<FunctionImpl>> pending = topological_order(roots, stop), order;
  std::unordered_map<std::string, const FunctionImpl*> maker;  // axis name -> function
  for (auto& f : pending)
    for (auto& o : f->outputs)
      for (const Axis& a : o->dynamic_axes) {
        bool inherited = false;
        for (auto& in : f->inputs)
          inherited = inherited || std::ranges::count(in.impl()->dynamic_axes, a) > 0;
        if (!inherited) maker.emplace(a.name(), f.get());
      }
  std::unordered_set<const FunctionImpl*> done;
  auto ready = [&](const FunctionImpl& f) {
    for (size_t i = is_delay(f) ? 1 : 0; i < f.inputs.size(); ++i) {
      auto producer = f.inputs[i].impl()->owner.lock();
      if (producer && !done.count(producer.get())) return false;
    }
    if (is_delay(f))
      for (const Axis& a : f.outputs[0]->dynamic_axes) {
        auto m = maker.find(a.name());
        if (m != maker.end() && m->second != &f && !done.count(m->second)) return false;
      }
    return true;
  };
  while (!pending.empty()) {
    std::vector<std::shared_ptr<FunctionImpl>> later;
    for (auto& f : pending) {
      if (!ready(*f)) {
        later.push_back(f);
        continue;
      }
      done.insert(f.get());
      order.push_back(f);
    }
    // Nothing ready: the first is a delay whose axis maker depends on it; it goes first.
    if (later.size() == pending.size()) {
      done.insert(later.front().get());
      order.push_back(later.front());
      later.erase(later.begin());
    }
    pending = std::move(later);
  }
  return order;
}
}  // namespace

bool is_delay(const FunctionImpl& f) {
  return f.op && f.op->traits(f.attributes).time_shift != 0;
}

std::vector<std::shared_ptr<FunctionImpl>> topological_order(
    const std::vector<Variable>& roots, const std::unordered_set<const VariableImpl*>& stop) {
  std::vector<std::shared_ptr<FunctionImpl>> order;
  std::unordered_set<const FunctionImpl*> done, on_stack;
  // Iterative depth-first post-order, so deep graphs (long unrolled chains) cannot overflow.
  struct Frame {
    std::shared_ptr<FunctionImpl> f;
    size_t next_input;
  };
  std::vector<Frame> stack;
  // Operands of delay ops: visited after the delay op, which breaks recurrent loops.
  std::vector<Variable> deferred;
  auto push = [&](const Variable& v) {
    if (!v.is_output() || stop.contains(v.impl().get())) return;
    auto f = v.impl()->owner.lock();
    LOOM_CHECK(f, StateError, "the function producing ", v.describe(), " no longer exists");
    if (done.count(f.get())) return;
    if (on_stack.count(f.get())) {
      std::string cycle;
      for (size_t i = stack.size(); i-- > 0 && (i + 1 == stack.size() || stack[i + 1].f != f);)
        cycle = function_label(*stack[i].f) + (cycle.empty() ? "" : " -> ") + cycle;
      throw StateError(detail::concat("the graph has a cycle without a delay op: ", cycle,
                                      "; a recurrence must go through past_value/future_value"));
    }
    on_stack.insert(f.get());
    stack.push_back({f, 0});
  };
  auto visit = [&](const Variable& r) {
    push(r);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next_input < top.f->inputs.size()) {
        const size_t i = top.next_input++;
        if (i == 0 && is_delay(*top.f)) {
          deferred.push_back(top.f->inputs[0]);
        } else {
          push(top.f->inputs[i]);
        }
        continue;
      }
      on_stack.erase(top.f.get());
      done.insert(top.f.get());
      order.push_back(top.f);
      stack.pop_back();
    }
  };
  for (auto& r : roots) visit(r);
  while (!deferred.empty()) {
    Variable v = deferred.back();
    deferred.pop_back();
    visit(v);
  }
  return order;
}

Variable forward_declaration(const Variable& v, const Variable& delay_output,
                             const std::unordered_map<std::string, Axis>& renamed) {
  const Variable& typed = v.has_known_shape() || !delay_output.valid() ? v : delay_output;
  std::vector<Axis> axes;
  if (typed.has_known_shape())
    for (const Axis& a : typed.dynamic_axes()) {
      auto it = renamed.find(a.name());
      axes.push_back(it == renamed.end() ? a : it->second);
    }
  Variable p =
      typed.has_known_shape() ? placeholder(typed.shape(), typed.dtype(), axes) : placeholder();
  p.impl()->needs_gradient = v.needs_gradient();
  return p;
}

std::string function_label(const FunctionImpl& f) {
  return f.name.empty() ? f.uid : f.name + " (" + f.uid + ")";
}

Function::Function(const Variable& v)
    : impl_(v.is_output() && v.owner().outputs().size() == 1 ? v.owner().impl_
                                                             : combine({v}).impl_) {}

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
  // In CNTK's order: depth first, each function's inputs left to right (the arguments of
  // plus(x, sigmoid(y)) are x, y; leaves() would give y first).
  std::vector<Variable> out;
  for (const GraphNode& node : depth_first_search(*this, [](const GraphNode& n) {
         const Variable* v = std::get_if<Variable>(&n);
         return v && (v->is_input() || v->is_placeholder());
       }))
    out.push_back(std::get<Variable>(node));
  return in_signature_order(out);
}

std::vector<Variable> Function::in_signature_order(std::vector<Variable> args) const {
  const auto& signature = get(impl_).signature;
  auto rank = [&](const Variable& v) {
    return size_t(std::find(signature.begin(), signature.end(), v) - signature.begin());
  };
  std::stable_sort(args.begin(), args.end(),
                   [&](const Variable& a, const Variable& b) { return rank(a) < rank(b); });
  return args;
}

std::vector<Parameter> Function::parameters() const {
  std::vector<Parameter> out;
  for (auto& v : leaves(outputs()))
    if (v.is_parameter()) out.emplace_back(v);
  return out;
}

namespace {
// "a, b, c" for messages that list what exists.
std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "(none)" : s;
}

std::string name_or_uid(const Variable& v) {
  return v.name().empty() ? v.uid() : v.name();
}
}  // namespace

Variable Function::argument(const std::string& name) const {
  std::vector<Variable> found;
  std::vector<std::string> names;
  for (auto& a : arguments()) {
    if (a.name() == name) found.push_back(a);
    names.push_back(name_or_uid(a));
  }
  LOOM_CHECK(found.size() == 1, ArgumentError, to_string(), " has ",
             found.empty() ? "no" : "several", " arguments named '", name,
             "'; its arguments are: ", joined(names));
  return found[0];
}

std::vector<std::string> Function::parameter_paths() const {
  auto params = parameters();
  // Each layer's label (its name, else its block name), and how many layers share it.
  std::vector<const LayerTag*> layers;
  std::unordered_map<std::string, size_t> label_count;
  auto label = [](const LayerTag& l) { return l.name.empty() ? l.block_name : l.name; };
  for (auto& p : params) {
    const LayerTag* l = p.impl()->layer.get();
    if (l && std::find(layers.begin(), layers.end(), l) == layers.end()) {
      layers.push_back(l);
      ++label_count[label(*l)];
    }
  }
  std::unordered_map<const LayerTag*, std::string> prefix;
  std::unordered_map<std::string, size_t> numbered;
  for (const LayerTag* l : layers) {
    std::string s = label(*l);
    prefix[l] = label_count[s] > 1 ? s + std::to_string(++numbered[s]) + "." : s + ".";
  }
  std::vector<std::string> paths;
  for (auto& p : params) {
    const LayerTag* l = p.impl()->layer.get();
    paths.push_back((l ? prefix[l] : "") + name_or_uid(p));
  }
  return paths;
}

Parameter Function::parameter(const std::string& path) const {
  auto params = parameters();
  auto paths = parameter_paths();
  for (size_t i = 0; i < params.size(); ++i)
    if (paths[i] == path) return params[i];
  std::vector<size_t> named;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name() == path) named.push_back(i);
  if (named.size() == 1) return params[named[0]];
  std::vector<std::string> matches;
  for (size_t i : named) matches.push_back(paths[i]);
  LOOM_CHECK(named.empty(), ArgumentError, "'", path, "' names several parameters of ", to_string(),
             ": ", joined(matches));
  throw ArgumentError(detail::concat("no parameter '", path, "' in ", to_string(),
                                     "; its parameters are: ", joined(paths)));
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
  return in_signature_order(out);
}

const std::string& Function::name() const {
  return get(impl_).name;
}
const std::string& Function::uid() const {
  return get(impl_).uid;
}
bool Function::is_composite() const {
  const FunctionImpl& f = get(impl_);
  return f.op == nullptr && !f.block;
}

bool Function::operator==(const Function& o) const {
  return impl_ == o.impl_ || (impl_ && o.impl_ && impl_->block && impl_->block == o.impl_->block);
}

size_t Function::hash() const {
  return std::hash<const void*>()(
      impl_ && impl_->block ? static_cast<const void*>(impl_->block.get()) : impl_.get());
}
const Dictionary& Function::attributes() const {
  return get(impl_).attributes;
}

void Function::set_attribute(const std::string& name, const DictionaryValue& value) const {
  get(impl_);  // checks it is a function
  FunctionImpl& f = is_composite() && outputs().size() == 1 && output().is_output()
                        ? *output().producer().impl()  // inside a layer's block too
                        : *impl_;
  LOOM_CHECK(f.op, ArgumentError, "set_attribute('", name, "'): ", to_string(),
             " is not a primitive function");
  const auto number = [&] {
    LOOM_CHECK(value.is<double>() || value.is<int64_t>() || value.is<uint64_t>(), ArgumentError,
               "set_attribute('", name, "'): a number, not ", value.type_name());
    return value.is<double>()    ? value.get<double>()
           : value.is<int64_t>() ? double(value.get<int64_t>())
                                 : double(value.get<uint64_t>());
  };
  if (name == "dropoutRate") {
    LOOM_CHECK(std::string_view(f.op->name()) == "Dropout", ArgumentError,
               "set_attribute('dropoutRate'): ", function_label(f), " is ", f.op->name(),
               ", not Dropout");
    const double rate = number();
    LOOM_CHECK(rate >= 0 && rate < 1, ArgumentError,
               "set_attribute('dropoutRate'): the rate is in [0, 1), not ", rate);
    f.attributes["dropout_rate"] = rate;
  } else if (name == "rngSeed") {
    LOOM_CHECK(f.random.has_value(), ArgumentError, "set_attribute('rngSeed'): ", function_label(f),
               " (", f.op->name(), ") draws no random numbers");
    const double seed = number();
    LOOM_CHECK(seed >= 0 && seed == double(uint64_t(seed)), ArgumentError,
               "set_attribute('rngSeed'): a seed is a whole number >= 0, not ", seed);
    f.attributes["seed"] = uint64_t(seed);
    f.random = RandomGenerator(uint64_t(seed));
  } else {
    throw ArgumentError("set_attribute: '" + name +
                        "' cannot be set; CNTK's settable attributes are dropoutRate (Dropout) "
                        "and rngSeed (ops that draw random numbers)");
  }
}

Dictionary& Function::custom_attributes() const {
  get(impl_);  // checks it is a function
  return impl_->custom_attributes;
}

const OpDef& Function::op() const {
  const FunctionImpl& f = get(impl_);
  LOOM_CHECK(f.op, StateError, f.block ? "block " : "composite ", to_string(), " has no single op");
  return *f.op;
}

std::string Function::op_name() const {
  const FunctionImpl& f = get(impl_);
  return f.op ? op_name_of(f) : f.block_name;
}

std::string Function::to_string() const {
  const FunctionImpl& f = get(impl_);
  // A primitive or block (a layer's call) is shown as its op only when it is applied to the
  // arguments themselves.
  bool direct = true;
  for (auto& in : f.inputs) direct = direct && !in.is_output();
  std::string s = (f.name.empty() ? "" : f.name + ": ") +
                  ((f.op || f.block) && !direct ? "Composite"
                   : f.op                       ? op_name_of(f)
                                                : f.block_name) +
                  "(";
  auto args = arguments();
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", " : "") + (args[i].name().empty() ? "" : args[i].name() + ": ") +
         args[i].type_string();
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
  // Unknown inputs are bound later, when the placeholders are replaced.
  std::vector<OutputSpec> specs =
      known ? op.infer(f->inputs, f->attributes) : op.infer_unbound(f->inputs, f->attributes);
  if (op.traits(f->attributes).is_random) {
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
    v->stops_gradient = !specs[i].needs_gradient;
    v->needs_gradient = needs_gradient && !v->stops_gradient;
    v->name = specs[i].name.value_or(name);
    v->uid = f->uid + "_Output_" + std::to_string(i);
    v->owner = f;
    v->output_index = i;
    f->outputs.push_back(std::move(v));
  }
  return Function(f);
}

Function remake_primitive(const FunctionImpl& f, std::vector<Variable> inputs) {
  Function copy;
  if (auto user = user_function_of(f)) {
    std::shared_ptr<UserFunction> made = user->clone(inputs);
    LOOM_CHECK(made != nullptr, StateError, user->op_name(), ": clone gave no user function");
    copy = user_function(std::move(made), std::move(inputs), f.name);
  } else {
    copy = make_primitive(*f.op, std::move(inputs), f.attributes, f.name);
    copy.impl()->owned_op = f.owned_op;  // a debug node's op, holding its callback
  }
  copy.impl()->custom_attributes = f.custom_attributes;
  return copy;
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

Function as_layer(const std::vector<Variable>& outputs, const std::string& block_name,
                  const std::string& name, const std::vector<Variable>& arguments, LayerCall call) {
  Function c = combine(outputs, name);
  c.impl()->block_name = block_name;
  c.impl()->signature = arguments;
  c.impl()->call_as_block = call == LayerCall::Block;
  auto layer = std::make_shared<const LayerTag>(LayerTag{block_name, name});
  for (auto& p : c.parameters())
    if (!p.impl()->layer) p.impl()->layer = layer;
  return c;
}

std::vector<Variable> clone_graph(
    const std::vector<Variable>& roots, ParameterCloneMethod method,
    const std::unordered_map<Variable, Variable>& substitutions, const BlockInfo* skip,
    std::unordered_map<const BlockInfo*, std::shared_ptr<BlockInfo>>* cloned_blocks) {
  std::unordered_map<const VariableImpl*, Variable> map;
  std::unordered_set<const VariableImpl*> substituted;
  for (auto& [from, to] : substitutions) {
    map[from.impl().get()] = to;
    substituted.insert(from.impl().get());
  }
  auto mapped = [&](const Variable& v) -> Variable {
    auto it = map.find(v.impl().get());
    if (it != map.end()) return it->second;
    if (v.is_parameter() && method != ParameterCloneMethod::Share) {
      NDArrayView copy = v.value().deep_clone();
      Variable c = method == ParameterCloneMethod::Clone ? Variable(loom::parameter(copy, v.name()))
                                                         : Variable(constant(copy, v.name()));
      c.impl()->layer = v.impl()->layer;
      map[v.impl().get()] = c;
      return c;
    }
    return v;
  };
  // The clone of a sequence may be on another axis than the original: a where, gather or slice
  // names its new axis after its (new) uid, and an argument may be on another axis than the
  // placeholder it replaces. renamed holds each original axis's first other name in the clone.
  std::unordered_map<std::string, Axis> renamed;
  auto note_axes = [&](const Variable& from, const Variable& to) {
    if (!from.has_known_shape() || !to.has_known_shape()) return;
    const std::vector<Axis>&a = from.dynamic_axes(), &b = to.dynamic_axes();
    if (a.size() == b.size())
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) renamed.emplace(a[i].name(), b[i]);
  };
  for (auto& [from, to] : substitutions) {
    note_axes(from, to);
    // A layer built on an untyped argument whose loops' states are declared on the default
    // sequence axis (Recurrence, Fold, UnfoldFrom) runs them on its argument's sequence axis.
    if (!from.has_known_shape() && to.has_known_shape() && to.dynamic_axes().size() == 2 &&
        to.dynamic_axes()[1] != Axis::default_dynamic_axis())
      renamed.emplace(Axis::default_dynamic_axis().name(), to.dynamic_axes()[1]);
  }
  // A delay op closing a loop is cloned before its operand: it reads a placeholder of the
  // operand's type (on the clone's axes) until the operand's clone exists. The copy ends at the
  // substituted variables: what only they lead to is not copied.
  std::vector<std::pair<Function, Variable>> loop_edges;  // (delay clone, original operand)
  std::unordered_map<const VariableImpl*, std::shared_ptr<VariableImpl>> copies;
  for (auto& f : clone_order(roots, substituted)) {
    const bool closes_loop =
        is_delay(*f) && f->inputs[0].is_output() && !map.count(f->inputs[0].impl().get());
    std::vector<Variable> ins;
    for (auto& in : f->inputs)
      ins.push_back(!closes_loop || !ins.empty()
                        ? mapped(in)
                        : forward_declaration(in, Variable(f->outputs[0], f), renamed));
    Function g = remake_primitive(*f, std::move(ins));
    LOOM_CHECK(g.impl()->outputs.size() == f->outputs.size(), StateError, "clone of ", f->uid,
               " produced ", g.impl()->outputs.size(), " outputs instead of ", f->outputs.size());
    for (size_t i = 0; i < f->outputs.size(); ++i) {
      const std::shared_ptr<VariableImpl>& copy = g.impl()->outputs[i];
      copy->name = f->outputs[i]->name;  // a loaded model's or a block's output has its own
      copies.emplace(f->outputs[i].get(), copy);
      // An output substituted (CNTK's clone replaces any variable, not only leaves) keeps its
      // substitute: the functions that read it read the substitute.
      if (map.try_emplace(f->outputs[i].get(), handle(copy, g.impl())).second)
        note_axes(Variable(f->outputs[i], f), map[f->outputs[i].get()]);
    }
    if (closes_loop) loop_edges.emplace_back(g, f->inputs[0]);
  }
  std::vector<Variable> new_roots;
  for (auto& r : roots) new_roots.push_back(mapped(r));
  for (auto& [delay, operand] : loop_edges)
    delay.replace_placeholders({{delay.inputs()[0], mapped(operand)}});
  // The blocks copied: each with the copies of its arguments and outputs.
  std::unordered_map<const BlockInfo*, std::shared_ptr<BlockInfo>> blocks;
  auto copy_of = [&](const std::shared_ptr<BlockInfo>& b) -> std::shared_ptr<BlockInfo> {
    auto& c = blocks[b.get()];
    if (c) return c;
    c = std::make_shared<BlockInfo>();
    c->op_name = b->op_name;
    c->name = b->name;
    c->uid = new_uid("Block");
    for (const Variable& a : b->arguments) c->arguments.emplace_back(mapped(a).impl());
    if (auto d = b->known_definition()) c->set_definition(*d);
    return c;
  };
  for (auto& [original, copy] : copies)
    for (const std::shared_ptr<BlockInfo>& b : original->blocks)
      if (b.get() != skip) copy->blocks.push_back(copy_of(b));
  for (auto& [original, c] : blocks)
    for (const auto& o : original->outputs) {
      auto it = copies.find(o.lock().get());
      if (it != copies.end()) c->outputs.push_back(it->second);
    }
  if (cloned_blocks) *cloned_blocks = std::move(blocks);
  return new_roots;
}

Function Function::clone(ParameterCloneMethod method,
                         const std::unordered_map<Variable, Variable>& substitutions) const {
  const FunctionImpl& f = get(impl_);
  std::unordered_map<const BlockInfo*, std::shared_ptr<BlockInfo>> blocks;
  std::vector<Variable> new_roots = clone_graph(outputs(), method, substitutions, nullptr, &blocks);
  if (f.block) {
    auto it = blocks.find(f.block.get());
    LOOM_CHECK(it != blocks.end(), StateError, "clone of block ", function_label(f),
               ": its outputs were substituted");
    return block_view(it->second);
  }
  if (f.op) return new_roots[0].producer();
  Function c = combine(new_roots, name());  // not as_layer: the layer tags stay as they are
  c.impl()->block_name = f.block_name;
  c.impl()->call_as_block = f.call_as_block;
  c.impl()->custom_attributes = f.custom_attributes;
  std::unordered_map<const VariableImpl*, Variable> substitute;
  for (auto& [from, to] : substitutions) substitute.emplace(from.impl().get(), to);
  for (auto& v : f.signature) {
    auto it = substitute.find(v.impl().get());
    const Variable& now = it == substitute.end() ? v : it->second;
    if (now.is_placeholder()) c.impl()->signature.push_back(now);
  }
  return c;
}

bool same_type(const Variable& a, const Variable& b) {
  return a.has_known_shape() == b.has_known_shape() &&
         (!a.has_known_shape() ||
          (a.shape() == b.shape() && a.dtype() == b.dtype() &&
           a.dynamic_axes() == b.dynamic_axes() && a.is_sparse() == b.is_sparse()));
}

namespace {

// Whether v is computed (through any chain of inputs) from the output of f.
bool produced_from(const Variable& v, const FunctionImpl& f) {
  std::vector<std::shared_ptr<FunctionImpl>> stack;
  std::unordered_set<const FunctionImpl*> seen;
  if (auto producer = v.impl()->owner.lock()) stack.push_back(std::move(producer));
  while (!stack.empty()) {
    std::shared_ptr<FunctionImpl> g = std::move(stack.back());
    stack.pop_back();
    if (g.get() == &f) return true;
    if (!seen.insert(g.get()).second) continue;
    for (const Variable& in : g->inputs)
      if (auto producer = in.impl()->owner.lock()) stack.push_back(std::move(producer));
  }
  return false;
}

}  // namespace

Function& Function::replace_placeholders(
    const std::unordered_map<Variable, Variable>& substitutions) {
  for (auto& f : topological_order(outputs()))
    for (auto& in : f->inputs) {
      auto it = substitutions.find(in);
      if (it == substitutions.end()) continue;
      LOOM_CHECK(in.is_placeholder(), ArgumentError, "replace_placeholders: ", in.describe(),
                 " is not a placeholder");
      LOOM_CHECK(
          !in.has_known_shape() || !it->second.has_known_shape() || same_type(in, it->second),
          ShapeError, "replace_placeholders: placeholder ", in.describe(), " cannot take ",
          it->second.describe(), " of another type");
      in = it->second;
      // A recurrent loop closes here when f computes its own input. That edge must not own
      // the input's producer, or the loop's functions would own each other in a cycle that is
      // never freed: whoever holds the loop's outputs keeps it alive.
      if (produced_from(in, *f)) in = Variable(in.impl());
    }
  // Outputs computed from untyped placeholders learn their types now where they can; blocks
  // read the new variables.
  const auto order = topological_order(outputs());
  for (auto& f : order) {
    for (auto& o : f->outputs)
      for (auto& block : o->blocks)
        for (Variable& a : block->arguments)
          if (auto it = substitutions.find(a); it != substitutions.end())
            a = Variable(it->second.impl());
    bool known = true;
    for (auto& in : f->inputs) known = known && in.has_known_shape();
    if (!known || f->outputs[0]->shape_known) continue;
    auto specs = f->op->infer(f->inputs, f->attributes);
    for (size_t i = 0; i < specs.size(); ++i) {
      VariableImpl& o = *f->outputs[i];
      o.shape = specs[i].shape;
      o.shape_known = true;
      o.dtype = specs[i].dtype;
      o.dynamic_axes = specs[i].dynamic_axes;
      o.is_sparse = specs[i].is_sparse;
      o.stops_gradient = !specs[i].needs_gradient;
      o.needs_gradient = o.needs_gradient && !o.stops_gradient;
    }
  }
  // An output needs a gradient where an input does (make_primitive's rule), also where the
  // input is new; a loop closed here passes it around (hence until nothing changes).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& f : order) {
      bool needs = false;
      for (auto& in : f->inputs) needs = needs || in.needs_gradient();
      for (auto& o : f->outputs)
        if (needs && !o->needs_gradient && !o->stops_gradient) o->needs_gradient = changed = true;
    }
  }
  if (impl_->block) impl_->inputs = block_inputs(*impl_->block);
  return *this;
}

Function Function::operator()(const std::vector<Variable>& args) const {
  auto params = placeholders();
  if (params.empty()) params = arguments();
  LOOM_CHECK(args.size() == params.size(), ArgumentError, to_string(), " takes ", params.size(),
             " argument(s), got ", args.size());
  std::unordered_map<Variable, Variable> subst;
  bool on_arguments = true;  // CNTK shows a layer by its name only when applied to arguments
  for (size_t i = 0; i < args.size(); ++i) {
    subst.emplace(params[i], args[i]);
    on_arguments = on_arguments && !args[i].is_output();
  }
  if (Function block = call_as_block(params, args, subst); block.valid()) {
    if (!on_arguments) block.impl()->block_name = "Composite";
    return block;
  }
  Function result = clone(ParameterCloneMethod::Share, subst);
  if (result.is_composite() && !on_arguments) result.impl()->block_name = "Composite";
  result.impl()->call_as_block = false;  // a layer's result, not a layer
  return result;
}

Function Function::call_as_block(const std::vector<Variable>& params,
                                 const std::vector<Variable>& args,
                                 const std::unordered_map<Variable, Variable>& subst) const {
  const FunctionImpl& f = get(impl_);
  if (!f.call_as_block) return {};
  // A block is a function of placeholders whose outputs its functions compute; a layer typed in
  // place (update_signature: inputs for placeholders) or passing an argument through is inlined.
  for (const Variable& p : params)
    if (!p.is_placeholder()) return {};
  if (arguments().size() != params.size()) return {};
  for (const auto& o : f.outputs)
    if (o->kind != VariableKind::Output) return {};
  auto [block, outs] = expand_block(*this, params, args, f.block_name, f.name, subst);
  // The call's result as CNTK's: a composite whose root is the block.
  Function c = combine(outs, f.name);
  c.impl()->block_name = f.block_name;
  c.impl()->custom_attributes = f.custom_attributes;
  for (const Variable& v : f.signature) {
    auto it = subst.find(v);
    const Variable& now = it == subst.end() ? v : it->second;
    if (now.is_placeholder()) c.impl()->signature.push_back(now);
  }
  return c;
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

ArgumentData::ArgumentData(const std::vector<float>& values)
    : data_(NDArrayView::from_vector<float>(NDShape(values.size()), values)), flat_(true) {}

Value ArgumentData::to_value(const Variable& argument) const {
  if (auto* value = std::get_if<Value>(&data_)) return *value;
  const NDArrayView& a = std::get<NDArrayView>(data_);
  const NDShape& sample = argument.shape();
  const size_t sample_size = sample.total_size();
  const bool sequence = argument.has_sequence_axis();
  if (flat_) {
    LOOM_CHECK(sample_size && a.size() % sample_size == 0, ShapeError, a.size(),
               " values for argument ", argument.describe(), " are not a whole number of samples");
    const NDShape samples = sample.prepend(a.size() / sample_size);
    return Value(a.reshaped(sequence ? samples.prepend(1) : samples), sequence);
  }
  const size_t rank = a.shape().rank();
  bool fits = rank >= sample.rank() && rank <= sample.rank() + 1 + size_t(sequence);
  for (size_t i = 0; fits && i < sample.rank(); ++i)  // a free dimension takes any size
    fits = sample[i] == NDShape::kFree || a.shape()[rank - sample.rank() + i] == sample[i];
  LOOM_CHECK(fits, ShapeError, "data of shape ", a.shape().to_string(), " for argument ",
             argument.describe(), ": expected ", sample.to_string(),
             sequence ? " ([T, shape]: one sequence, or [N, T, shape]: N sequences)"
                      : " (one sample) or [N,...] (N samples)");
  const size_t missing = sample.rank() + 1 + size_t(sequence) - rank;  // leading axes of 1
  NDShape shape = a.shape();
  for (size_t i = 0; i < missing; ++i) shape = shape.prepend(1);
  return Value(a.reshaped(shape), sequence);
}

Value Function::operator()(const ArgumentData& data) const {
  return eval(data);
}

Value Function::eval(const ArgumentData& data) const {
  auto args = arguments();
  LOOM_CHECK(args.size() == 1, ArgumentError, to_string(), " takes ", args.size(),
             " arguments: give their data by name, eval({{\"name\", data}, ...})");
  return eval_one({{args[0], data.to_value(args[0])}});
}

Value Function::eval_named(const NamedData& data) const {
  ValueMap values;
  for (auto& [name, d] : data) {
    Variable a = argument(name);
    values.insert_or_assign(a, d.to_value(a));
  }
  return eval_one(values);
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
