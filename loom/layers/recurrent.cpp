#include "loom/layers/recurrent.h"

#include <cmath>
#include <unordered_set>

#include "loom/graph/graph_impl.h"
#include "loom/layers/sequential.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/fused_rnn.h"
#include "loom/ops/linear.h"
#include "loom/ops/recurrence_ops.h"
#include "loom/ops/sequence_ops.h"
#include "loom/ops/shape_ops.h"

namespace loom {

namespace {

constexpr double kSteepness = 4;  // of the cells' self-stabilizers

// The step's state arguments (all but the last), which must have known types.
std::vector<Variable> state_arguments(const Function& step) {
  std::vector<Variable> args = step.placeholders();
  const size_t n = step.outputs().size();
  LOOM_CHECK(args.size() == n + 1, ArgumentError, "Recurrence: step function ", step.to_string(),
             " has ", n, " outputs (states), so it must take ", n + 1,
             " arguments (the states, then x), not ", args.size());
  args.pop_back();
  for (const Variable& s : args)
    LOOM_CHECK(s.has_known_shape(), ArgumentError, "Recurrence: state argument ", s.describe(),
               " of step function ", step.to_string(),
               " has no type; declare it as placeholder(shape, dtype, default_sequence_axes())");
  return args;
}

// The loop: prev_i = delay(state_i, init_i), outputs = step(prev..., x), state_i := output_i.
std::vector<Variable> recurrence(const Function& step, const std::vector<Variable>& states,
                                 const std::vector<Variable>& inits, const Variable& x,
                                 bool go_backwards) {
  std::vector<Variable> args;
  std::vector<Variable> forward;
  for (size_t i = 0; i < states.size(); ++i) {
    const Variable& s = states[i];
    forward.push_back(placeholder(s.shape(), s.dtype(), s.dynamic_axes(), s.name()));
    args.push_back(sequence::delay(forward.back(), inits[i], go_backwards ? -1 : 1));
  }
  args.push_back(x);
  Function out = step(args);
  std::unordered_map<Variable, Variable> close;
  for (size_t i = 0; i < states.size(); ++i) close.emplace(forward[i], out.outputs()[i]);
  out.replace_placeholders(close);
  return out.outputs();
}

// Whether out is computed from v, not counting delay ops' operands (a loop's closing edges).
bool computed_from(const Variable& out, const Variable& v) {
  std::vector<Variable> stack{out};
  std::unordered_set<const VariableImpl*> seen;
  while (!stack.empty()) {
    const Variable u = stack.back();
    stack.pop_back();
    if (u == v) return true;
    if (!u.is_output() || !seen.insert(u.impl().get()).second) continue;
    const FunctionImpl& f = *u.producer().impl();
    for (size_t i = is_delay(f) ? 1 : 0; i < f.inputs.size(); ++i) stack.push_back(f.inputs[i]);
  }
  return false;
}

// out, holding the loop's states: a loop's closing edge does not own the state it reads, so a
// state that out is not computed from would be lost with the function that made it.
// broadcast_as(out, state) passes out through (state is on out's axes) and owns state.
Variable owning(Variable out, const std::vector<Variable>& states) {
  for (const Variable& s : states)
    if (!computed_from(out, s)) out = sequence::broadcast_as(out, s);
  return out;
}

// The loop's outputs a layer returns: all with full_state, else the first (owning the others).
std::vector<Variable> returned(const std::vector<Variable>& outs, bool full_state) {
  if (full_state) return outs;
  return {owning(outs[0], std::vector<Variable>(outs.begin() + 1, outs.end()))};
}

std::vector<Variable> initial_states(const std::vector<Variable>& states,
                                     const RecurrenceOptions& o) {
  const size_t n = states.size(), given = o.initial_state.size();
  LOOM_CHECK(given <= 1 || given == n, ArgumentError, "Recurrence: ", given,
             " initial states for a step function with ", n, " states");
  std::vector<Variable> inits;
  for (size_t i = 0; i < n; ++i)
    inits.push_back(given == 0   ? Variable(constant(0, states[i].dtype()))
                    : given == 1 ? o.initial_state[0]
                                 : o.initial_state[i]);
  return inits;
}

// Stabilizer applied to v (v itself when not enabled).
Variable stabilized(const Function& stabilizer, const Variable& v) {
  return stabilizer.valid() ? Variable(stabilizer(v)) : v;
}

struct Cell {
  size_t n, c;
  bool proj;
  Activation act;
  DataType dtype;
  Parameter b, W, H, H1, Ci, Cf, Co, P;
  Function S_dh, S_dc, S_c, S_h;
  Variable dh, x;  // the arguments: the previous output and the input

  // The parameters in CNTK's creation order (seeds follow it): G gate blocks for x, Gh for the
  // recurrent H, and H1 (GRU's weights of the reset state) when reset_weights.
  Cell(size_t shape, const RecurrentCellOptions& o, size_t G, size_t Gh, bool reset_weights,
       Activation default_activation)
      : n(shape),
        c(o.cell_shape.value_or(shape)),
        proj(o.cell_shape.has_value()),
        act(o.activation.value_or(default_activation)),
        dtype(o.dtype) {
    ResolvedDefaults d = current_defaults();
    const Initializer init = o.init.value_or(d.init);
    b = parameter({G * c}, o.init_bias.value_or(d.init_bias), dtype, "b");
    W = parameter({NDShape::kInferred, G * c}, init, dtype, "W");
    H = parameter({n, Gh * c}, init, dtype, "H");
    if (reset_weights) H1 = parameter({n, c}, init, dtype, "H1");
    if (o.use_peepholes) {
      Ci = parameter({c}, init, dtype, "Ci");
      Cf = parameter({c}, init, dtype, "Cf");
      Co = parameter({c}, init, dtype, "Co");
    }
    if (proj) P = parameter({c, n}, init, dtype, "P");
    if (o.enable_self_stabilization) {
      S_dh = Stabilizer(kSteepness, true, dtype);
      S_dc = Stabilizer(kSteepness, true, dtype);
      S_c = Stabilizer(kSteepness, true, dtype);
      S_h = Stabilizer(kSteepness, true, dtype);
    }
    dh = placeholder({n}, dtype, default_sequence_axes(), "dh");
    x = placeholder("x");
  }

  // The step as a block that tells Recurrence how to fuse it (fused_recurrence_of): the cell,
  // its activation's op, and its parameters' uids by role; without a fusable activation (one
  // that is not a single tanh, sigmoid or relu op, or none) it says nothing.
  Function describe(Function block, const char* cell) const {
    std::string op;
    if (!act.is_identity()) {
      const Variable probe = placeholder({1}, dtype, {});
      const Variable y = act(probe);
      if (!y.is_output() || y.owner().is_composite() || y.owner().inputs().size() != 1 ||
          !(y.owner().inputs()[0] == probe))
        return block;
      op = y.owner().op_name();
      if (op != "Tanh" && op != "Sigmoid" && op != "ReLU") return block;
    }
    Dictionary d;
    d["cell"] = cell;
    d["activation"] = op;
    auto uid = [](const Variable& p) { return p.valid() ? p.uid() : std::string(); };
    auto alpha = [](const Function& s) {
      return s.valid() ? s.parameters()[0].uid() : std::string();
    };
    for (const auto& [key, p] : {std::pair<const char*, const Variable*>{"b", &b},
                                 {"W", &W},
                                 {"H", &H},
                                 {"H1", &H1},
                                 {"Ci", &Ci},
                                 {"Cf", &Cf},
                                 {"Co", &Co},
                                 {"P", &P}})
      d[key] = uid(*p);
    for (const auto& [key, f] : {std::pair<const char*, const Function*>{"S_dh", &S_dh},
                                 {"S_dc", &S_dc},
                                 {"S_c", &S_c},
                                 {"S_h", &S_h}})
      d[key] = alpha(*f);
    block.impl()->attributes["fused_cell"] = d;
    return block;
  }

  Variable gate(const Variable& a, size_t k) const {
    return slice(a, Axis(0), int(k * c), int((k + 1) * c));
  }
  // h~ projected to the output: (S_h·h~)·P with a cell_shape, else h~.
  Variable output(const Variable& h) const {
    return proj ? Variable(times(stabilized(S_h, h), P)) : h;
  }
};

// The recurrence of an LSTM, GRU or RNNStep step as one fused op, when the step describes
// itself (Cell::describe) and the initial states have no dynamic axes; else nothing.
std::optional<Variable> fused_recurrence_of(const Function& step,
                                            const std::vector<Variable>& inits, const Variable& x,
                                            bool go_backwards) {
  if (!step.impl() || !step.attributes().contains("fused_cell")) return std::nullopt;
  for (const Variable& s : inits)
    if (s.has_batch_axis()) return std::nullopt;
  const Dictionary d = step.attributes().get_dictionary("fused_cell");
  const std::vector<Parameter> params = step.parameters();
  auto role = [&](const char* key) {
    for (const Parameter& p : params)
      if (p.uid() == d.get<std::string>(key)) return Variable(p);
    return Variable();
  };
  const FusedRecurrenceInputs in{.cell = d.get<std::string>("cell"),
                                 .activation = d.get<std::string>("activation"),
                                 .go_backwards = go_backwards,
                                 .b = role("b"),
                                 .W = role("W"),
                                 .H = role("H"),
                                 .H1 = role("H1"),
                                 .Ci = role("Ci"),
                                 .Cf = role("Cf"),
                                 .Co = role("Co"),
                                 .P = role("P"),
                                 .alpha_dh = role("S_dh"),
                                 .alpha_dc = role("S_dc"),
                                 .alpha_c = role("S_c"),
                                 .alpha_h = role("S_h"),
                                 .steepness = kSteepness,
                                 .h0 = inits[0],
                                 .c0 = inits.size() > 1 ? inits[1] : Variable()};
  return Variable(fused_recurrence(x, in));
}

// CNTK's _inject_name for the layers whose calls are inlined (no block to carry the name): a
// named layer of one output ends in an alias of its name, which find_by_name finds; one of
// several outputs is a composite of that name (as_layer's).
std::vector<Variable> named(std::vector<Variable> outputs, const std::string& name) {
  if (!name.empty() && outputs.size() == 1) outputs[0] = alias(outputs[0], name);
  return outputs;
}

}  // namespace

Function Recurrence(const Function& step, const RecurrenceOptions& o) {
  const std::vector<Variable> states = state_arguments(step);
  Variable x = placeholder("x");
  const std::vector<Variable> inits = initial_states(states, o);
  if (o.fused && !o.return_full_state)
    if (std::optional<Variable> h = fused_recurrence_of(step, inits, x, o.go_backwards))
      return as_layer(named({*h}, o.name), "Recurrence", o.name, {x}, LayerCall::Inline);
  auto outs = recurrence(step, states, inits, x, o.go_backwards);
  return as_layer(named(returned(outs, o.return_full_state), o.name), "Recurrence", o.name, {x},
                  LayerCall::Inline);
}

Function RecurrenceFrom(const Function& step, const RecurrenceOptions& o) {
  LOOM_CHECK(o.initial_state.empty(), ArgumentError,
             "RecurrenceFrom takes its initial states as arguments, not as options");
  const std::vector<Variable> states = state_arguments(step);
  std::vector<Variable> inits;
  for (const Variable& s : states)
    inits.push_back(placeholder(s.shape(), s.dtype(), {s.dynamic_axes()[0]}, "init_" + s.name()));
  Variable x = placeholder("x");
  auto outs = recurrence(step, states, inits, x, o.go_backwards);
  std::vector<Variable> arguments = inits;
  arguments.push_back(x);
  return as_layer(named(returned(outs, o.return_full_state), o.name), "RecurrenceFrom", o.name,
                  arguments, LayerCall::Inline);
}

Function Fold(const Function& step, const RecurrenceOptions& o) {
  const std::vector<Variable> states = state_arguments(step);
  Variable x = placeholder("x");
  std::vector<Variable> finals;
  for (const Variable& s :
       returned(recurrence(step, states, initial_states(states, o), x, o.go_backwards),
                o.return_full_state))
    finals.push_back(o.go_backwards ? sequence::first(s) : sequence::last(s));
  return as_layer(named(finals, o.name), "Fold", o.name, {x}, LayerCall::Inline);
}

Function LSTM(size_t shape, const RecurrentCellOptions& o) {
  Cell k(shape, o, 4, 4, false, tanh);
  const Variable dc = placeholder({k.c}, k.dtype, default_sequence_axes(), "dc");
  const Variable dhs = stabilized(k.S_dh, k.dh), dcs = stabilized(k.S_dc, dc);
  const Variable a = plus(plus(k.b, times(k.x, k.W)), times(dhs, k.H));
  auto peephole = [&](const Variable& z, const Parameter& C, const Variable& s) {
    return o.use_peepholes ? Variable(plus(z, element_times(C, s))) : z;
  };
  const Variable i = sigmoid(peephole(k.gate(a, 0), k.Ci, dcs));
  const Variable f = sigmoid(peephole(k.gate(a, 2), k.Cf, dcs));
  const Variable c = plus(element_times(f, dc), element_times(i, k.act(k.gate(a, 1))));
  const Variable og = sigmoid(peephole(k.gate(a, 3), k.Co, stabilized(k.S_c, c)));
  const Variable h = k.output(element_times(og, k.act(c)));
  return k.describe(as_layer({h, c}, "LSTM", o.name, {k.dh, dc, k.x}), "LSTM");
}

Function GRU(size_t shape, const RecurrentCellOptions& o) {
  Cell k(shape, o, 3, 2, true, tanh);
  const Variable dhs = stabilized(k.S_dh, k.dh);
  const Variable ax = plus(k.b, times(k.x, k.W));
  const Variable ah = times(dhs, k.H);
  const Variable z = sigmoid(plus(k.gate(ax, 0), k.gate(ah, 0)));
  const Variable r = sigmoid(plus(k.gate(ax, 1), k.gate(ah, 1)));
  const Variable cand = k.act(plus(k.gate(ax, 2), times(element_times(dhs, r), k.H1)));
  const Variable blend =
      plus(element_times(minus(constant(1, k.dtype), z), cand), element_times(z, dhs));
  return k.describe(as_layer({k.output(blend)}, "GRU", o.name, {k.dh, k.x}), "GRU");
}

Function RNNStep(size_t shape, const RecurrentCellOptions& o) {
  Cell k(shape, o, 1, 1, false, sigmoid);
  const Variable dhs = stabilized(k.S_dh, k.dh);
  const Variable h = k.act(plus(plus(k.b, times(k.x, k.W)), times(dhs, k.H)));
  return k.describe(as_layer({k.output(h)}, "RNNStep", o.name, {k.dh, k.x}), "RNNStep");
}

Function Embedding(size_t shape, const EmbeddingOptions& o) {
  Parameter E = parameter({NDShape::kInferred, shape}, o.init.value_or(current_defaults().init),
                          o.dtype, "E");
  Variable x = placeholder("x");
  return as_layer({times(x, E)}, "Embedding", o.name);
}

Function Embedding(const NDArrayView& weights, const std::string& name) {
  LOOM_CHECK(weights.shape().rank() == 2, ShapeError, "Embedding: weights of shape ",
             weights.shape().to_string(), " are not a matrix [input dim, embedding dim]");
  Variable x = placeholder("x");
  return as_layer({times(x, constant(weights, "E"))}, "Embedding", name);
}

Function Stabilizer(double steepness, bool enable, DataType dtype, const std::string& name) {
  if (!enable) return Identity(name);
  // alpha starts at softplus^-1(steepness) / steepness, where beta = 1.
  const double alpha0 = std::log(std::exp(steepness) - 1) / steepness;
  Parameter alpha = parameter({}, constant_initializer(alpha0), dtype, "alpha");
  const Variable k = constant(steepness, dtype);
  const Variable beta =
      element_divide(log(plus(constant(1, dtype), exp(element_times(k, alpha)))), k);
  Variable x = placeholder("x");
  return as_layer({element_times(beta, x)}, "Stabilizer", name);
}

Function UnfoldFrom(const Function& generator, const UnfoldOptions& o) {
  const std::vector<Variable> args = generator.placeholders();
  const size_t outputs = generator.outputs().size();
  LOOM_CHECK(args.size() == 1 && (outputs == 1 || outputs == 2), ArgumentError,
             "UnfoldFrom: generator ", generator.to_string(),
             " must take one argument (the state) and give the new state or (output, new state); "
             "it takes ",
             args.size(), " and gives ", outputs);
  LOOM_CHECK(o.length_increase > 0, ArgumentError, "UnfoldFrom: length_increase ",
             o.length_increase, " must be positive");
  const Variable& s = args[0];
  LOOM_CHECK(s.has_known_shape(), ArgumentError, "UnfoldFrom: the state argument ", s.describe(),
             " of generator ", generator.to_string(),
             " has no type; declare it as placeholder(shape, dtype, default_sequence_axes())");
  Variable initial_state =
      placeholder(s.shape(), s.dtype(), {s.dynamic_axes()[0]}, "initial_state");
  // Only like's axes matter: the call's own (any shape, type or sequence axis) replace these.
  Variable like = placeholder(NDShape{}, s.dtype(), default_sequence_axes(), "dynamic_axes_like");
  // The steps: like's, or CNTK's where(broadcast_as(length_increase, like)), length_increase
  // steps per step of like with the fractions carried (a new axis, one per call).
  Variable steps = like;
  if (o.length_increase != 1)
    steps = sequence::where(sequence::broadcast_as(o.length_increase, like));
  // The new state adds a zero of each step, which gives the loop its steps and axis.
  Variable zeros = sequence::broadcast_as(0.0, steps);
  Variable forward = placeholder(s.shape(), s.dtype(), zeros.dynamic_axes(), s.name());
  Function z = generator({sequence::past_value(forward, initial_state)});
  Variable state = plus(z.outputs().back(), zeros);
  z.replace_placeholders({{forward, state}});
  const Variable emitted = z.outputs()[0];
  const Variable output = outputs == 1 ? state : owning(emitted, {state});
  if (!o.until_predicate.valid())
    return as_layer(named({output}, o.name), "UnfoldFrom", o.name, {initial_state, like},
                    LayerCall::Inline);
  const Function& until = o.until_predicate;
  LOOM_CHECK(until.placeholders().size() == 1 && until.outputs().size() == 1, ArgumentError,
             "UnfoldFrom: until_predicate ", until.to_string(),
             " must take one argument (the generated step) and give one output; it takes ",
             until.placeholders().size(), " and gives ", until.outputs().size());
  // Step t is kept while valid_t = prod_{u<t} (1 - predicate_u) is 1: a loop
  // valid_t = (1 - predicate_{t-1}) * valid_{t-1}, valid_{-1} = 1.
  Variable p = until({emitted});
  Variable before = minus(constant(1, p.dtype()), sequence::past_value(p, constant(0, p.dtype())));
  Variable h = placeholder(p.shape(), p.dtype(), p.dynamic_axes(), "valid");
  Function valid = element_times(before, sequence::past_value(h, constant(1, p.dtype())));
  valid.replace_placeholders({{h, valid}});
  return as_layer(named({sequence::gather(output, valid)}, o.name), "UnfoldFrom", o.name,
                  {initial_state, like}, LayerCall::Inline);
}

Function Delay(int64_t T, const Variable& initial_state, const std::string& name) {
  Variable x = placeholder("x");
  if (T == 0) return as_layer({Identity()(x)}, "Delay", name, {x});
  Variable delayed = initial_state.valid()
                         ? Variable(sequence::delay(x, initial_state, T))
                         : Variable(T > 0 ? sequence::past_value(x, size_t(T))
                                          : sequence::future_value(x, size_t(-T)));
  return as_layer({delayed}, "Delay", name, {x});
}

namespace {
// One unit axis inserted so that the result has it at static axis `axis` (Python-style,
// counted in the result), whatever x's rank: in front of x's axis `axis` (axis >= 0), or behind
// its axis axis + 1 from the end (axis < 0).
Variable new_axis_at(const Variable& x, int axis) {
  if (axis >= 0)
    return reshape(x, NDShape{1}, ReshapeOptions{.begin_axis = axis, .end_axis = axis});
  if (axis == -1)
    return reshape(x, NDShape{NDShape::kInferred, 1}, ReshapeOptions{.begin_axis = -1});
  return reshape(x, NDShape{1}, ReshapeOptions{.begin_axis = axis + 1, .end_axis = axis + 1});
}
}  // namespace

Function PastValueWindow(size_t window_size, int axis, const PastValueWindowOptions& o) {
  LOOM_CHECK(window_size >= 1, ArgumentError, "PastValueWindow: window_size must be at least 1");
  const bool backwards = o.go_backwards;
  Variable x = placeholder("x");
  const Variable ones = sequence::broadcast_as(1.0, x);
  // The scalar validity flags as splice pads a scalar for `axis`: rank -axis, or axis + 1.
  const size_t flag_rank = axis < 0 ? size_t(-axis) : size_t(axis) + 1;
  std::vector<Variable> values, valids;
  for (size_t t = 0; t < window_size; ++t) {
    const int64_t T = backwards ? -int64_t(t) : int64_t(t);
    auto nth = [&](const Variable& v) {
      const Variable d = Delay(T)(v);
      return Variable(backwards ? sequence::first(d) : sequence::last(d));
    };
    values.push_back(new_axis_at(nth(x), axis));
    valids.push_back(reshape(nth(ones), NDShape(std::vector<size_t>(flag_rank, 1))));
  }
  const Variable value = splice(values, Axis(axis), "value");
  const Variable valid = splice(valids, Axis(axis), "valid");
  return as_layer({value, valid}, "PastValueWindow", o.name, {x});
}

}  // namespace loom
