// The fused recurrence (Recurrence of an LSTM, GRU or RNNStep as one op) against the generic step
// loop of the same layer with the same parameters, on ragged minibatches in both directions;
// finite differences of its own gradients; state carried to continued sequences; model files.
#include "loom/ops/fused_rnn.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "loom/graph/executor.h"
#include "loom/graph/graph_impl.h"
#include "loom/layers/recurrent.h"
#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

constexpr size_t kIn = 3;
const std::vector<size_t> kRagged{5, 3, 1, 6, 1, 3};

bool has_fused_op(const Function& f) {
  for (auto& fn : topological_order(f.outputs()))
    if (std::string(fn->op->name()) == "FusedRecurrence") return true;
  return false;
}

struct Config {
  const char* cell;
  RecurrentCellOptions options;
  bool backwards;
  bool initial_state;  // a scalar parameter rather than 0
};

std::string describe(const Config& k) {
  return std::string(k.cell) + (k.options.use_peepholes ? " peepholes" : "") +
         (k.options.cell_shape ? " projection" : "") +
         (k.options.enable_self_stabilization ? " stabilized" : "") +
         (k.backwards ? " backwards" : "") + (k.initial_state ? " initial state" : "");
}

// The step function with random weights (and stabilizers away from 1, so their gradients show).
Function make_step(const Config& k, DataType dtype) {
  RecurrentCellOptions o = k.options;
  o.dtype = dtype;
  o.init = glorot_uniform(1.0, 1, 0, 11);
  o.init_bias = uniform(0.5, 12);
  const std::string cell = k.cell;
  Function step = cell == "LSTM" ? LSTM(4, o) : cell == "GRU" ? GRU(4, o) : RNNStep(4, o);
  return step;
}

// Recurrence of step on x, fused or through the step loop.
Function recurrence(const Function& step, const Config& k, const Variable& init, bool fused,
                    const Variable& x) {
  RecurrenceOptions ro{.go_backwards = k.backwards, .fused = fused};
  if (init.valid()) ro.initial_state = {init};
  return Recurrence(step, ro)(x);
}

void set_stabilizers(const Function& f) {
  double alpha = 0.6;
  for (const Parameter& p : f.parameters())
    if (p.name() == "alpha")
      p.set_value(dispatch(p.dtype(), [&](auto zero) {
        using T = decltype(zero);
        return NDArrayView::from_vector<T>({}, {T(alpha += 0.15)});
      }));
}

// Outputs and gradients (of x and every parameter) of both paths agree.
void expect_paths_match(const Config& k, DataType dtype, double tolerance) {
  SCOPED_TRACE(describe(k) + (dtype == kF64 ? " float64" : " float32"));
  const Function step = make_step(k, dtype);
  Variable x =
      sequence::input_variable({kIn}, {.dtype = dtype, .name = "x", .needs_gradient = true});
  const Variable init =
      k.initial_state ? Variable(parameter(random_array({1}, dtype, 30), "init")) : Variable();
  const Function fused = recurrence(step, k, init, true, x);
  const Function loop = recurrence(step, k, init, false, x);
  ASSERT_TRUE(has_fused_op(fused));
  ASSERT_FALSE(has_fused_op(loop));
  set_stabilizers(loop);
  // The same Parameters under the same paths.
  auto paths = [](const Function& f) {
    std::vector<std::string> p = f.parameter_paths();
    std::sort(p.begin(), p.end());
    return p;
  };
  EXPECT_EQ(paths(fused), paths(loop));
  std::vector<Variable> wrt{x};
  for (const Parameter& p : loop.parameters()) wrt.push_back(p);
  const ValueMap args{{x, random_sequences({kIn}, kRagged, dtype, 1)}};
  const auto out_f = fused.eval_one(args).as_sequences<double>();
  const auto out_l = loop.eval_one(args).as_sequences<double>();
  ASSERT_EQ(out_f.size(), out_l.size());
  for (size_t s = 0; s < out_f.size(); ++s)
    expect_all_near(out_f[s], out_l[s], tolerance, "output of sequence " + std::to_string(s));
  const ValueMap g_f = weighted_output(fused).grad(args, wrt);
  const ValueMap g_l = weighted_output(loop).grad(args, wrt);
  for (const Variable& v : wrt)
    expect_all_near(values(g_f.at(v)), values(g_l.at(v)), tolerance,
                    "gradient of " + v.name() + " " + v.uid());
}

std::vector<Config> configs() {
  std::vector<Config> c;
  for (bool back : {false, true}) {
    c.push_back({"LSTM", {}, back, back});
    c.push_back({"LSTM", {.use_peepholes = true}, back, !back});
    c.push_back({"LSTM", {.cell_shape = 5}, back, back});
    c.push_back({"LSTM",
                 {.cell_shape = 5, .use_peepholes = true, .enable_self_stabilization = true},
                 back,
                 true});
    c.push_back({"LSTM", {.activation = relu}, back, false});
    c.push_back({"GRU", {}, back, back});
    c.push_back({"GRU", {.enable_self_stabilization = true}, back, !back});
    c.push_back({"GRU",
                 {.cell_shape = 4, .activation = sigmoid, .enable_self_stabilization = true},
                 back,
                 true});
    c.push_back({"RNNStep", {}, back, back});
    c.push_back({"RNNStep",
                 {.cell_shape = 5, .activation = tanh, .enable_self_stabilization = true},
                 back,
                 true});
    c.push_back({"RNNStep", {.activation = relu}, back, false});
    c.push_back({"RNNStep", {.activation = None}, back, !back});
  }
  return c;
}

TEST(FusedRecurrence, MatchesTheStepLoopInFloat64) {
  for (const Config& k : configs()) expect_paths_match(k, kF64, 1e-10);
}

TEST(FusedRecurrence, MatchesTheStepLoopInFloat32) {
  for (const Config& k : configs()) expect_paths_match(k, kF32, 2e-4);
}

TEST(FusedRecurrence, FiniteDifferences) {
  const Value xv = random_sequences({2}, {3, 1, 2}, kF64, 7);
  for (const Config& k :
       {Config{"LSTM",
               {.cell_shape = 3, .use_peepholes = true, .enable_self_stabilization = true},
               true,
               true},
        Config{"LSTM", {.use_peepholes = true}, false, true},
        Config{"GRU", {.cell_shape = 2, .enable_self_stabilization = true}, false, true},
        Config{"RNNStep", {.activation = tanh, .enable_self_stabilization = true}, true, true}}) {
    SCOPED_TRACE(describe(k));
    RecurrentCellOptions o = k.options;
    o.dtype = kF64;
    o.init = glorot_uniform(1.0, 1, 0, 13);
    o.init_bias = uniform(0.5, 14);
    const std::string cell = k.cell;
    const Function step = cell == "LSTM" ? LSTM(2, o) : cell == "GRU" ? GRU(2, o) : RNNStep(2, o);
    Variable x =
        sequence::input_variable({2}, {.dtype = kF64, .name = "x", .needs_gradient = true});
    const Parameter init = parameter(random_array({1}, kF64, 15), "init");
    const Function f = recurrence(step, k, init, true, x);
    ASSERT_TRUE(has_fused_op(f));
    set_stabilizers(f);
    std::vector<Variable> wrt{x};
    for (const Parameter& p : f.parameters()) wrt.push_back(p);
    expect_gradients_match(f, {{x, xv}}, wrt);
  }
}

TEST(FusedRecurrence, Float32MatchesFloat64) {
  expect_float32_matches_float64([](DataType dtype) {
    const Function step = make_step({"LSTM", {.use_peepholes = true}, false, false}, dtype);
    Variable x =
        sequence::input_variable({kIn}, {.dtype = dtype, .name = "x", .needs_gradient = true});
    const Function f = Recurrence(step)(x);
    std::vector<Variable> wrt{x};
    for (const Parameter& p : f.parameters()) wrt.push_back(p);
    return OpCase{f, {{x, random_sequences({kIn}, kRagged, dtype, 2)}}, wrt};
  });
}

TEST(FusedRecurrence, OnlyForTheCellsItKnows) {
  Variable x = sequence::input_variable({kIn}, {.name = "x"});
  EXPECT_TRUE(has_fused_op(Recurrence(LSTM(4))(x)));
  EXPECT_TRUE(has_fused_op(Recurrence(GRU(4, {.activation = relu}))(x)));
  EXPECT_FALSE(has_fused_op(Recurrence(LSTM(4), {.fused = false})(x)));
  // Both states as outputs, an activation of several ops, a user's own step.
  EXPECT_FALSE(has_fused_op(Recurrence(LSTM(4), {.return_full_state = true})(x)));
  auto swish = [](const Variable& v) { return element_times(v, sigmoid(v)); };
  EXPECT_FALSE(has_fused_op(Recurrence(RNNStep(4, {.activation = swish}))(x)));
  Variable h = placeholder({4}, kF32, default_sequence_axes(), "h");
  Variable in = placeholder("in");
  Function mine = as_layer({tanh(plus(h, times(in, parameter({kIn, 4}, glorot_uniform()))))},
                           "MyStep", "", {h, in});
  EXPECT_FALSE(has_fused_op(Recurrence(mine)(x)));
  // Prints as the step loop does.
  EXPECT_EQ(Recurrence(LSTM(4))(x).to_string(),
            "Recurrence(x: Sequence[Tensor[3]]) -> Sequence[Tensor[4]]");
}

TEST(FusedRecurrence, EmptySequence) {
  const Function step = make_step({"LSTM", {}, false, false}, kF64);
  Variable x = sequence::input_variable({kIn}, f64("x"));
  const Value xv = random_sequences({kIn}, {3, 0, 2}, kF64, 3);
  const auto fused = Recurrence(step)(x).eval_one({{x, xv}}).as_sequences<double>();
  const auto loop =
      Recurrence(step, {.fused = false})(x).eval_one({{x, xv}}).as_sequences<double>();
  EXPECT_TRUE(fused[1].empty());
  for (size_t s = 0; s < 3; ++s) expect_all_near(fused[s], loop[s], 1e-12, "sequence");
}

// Two minibatches through one executor: sequences 0 and 1 of the second continue those of the
// first (their masks start Valid), sequence 2 begins. Both paths give the same outputs and
// parameter gradients (none of which crosses into the first minibatch).
TEST(FusedRecurrence, CarriesStateToContinuedSequences) {
  for (const char* cell : {"LSTM", "GRU"}) {
    SCOPED_TRACE(cell);
    const Config k{cell, {.use_peepholes = std::string(cell) == "LSTM"}, false, true};
    const Function step = make_step(k, kF64);
    Variable x = sequence::input_variable({kIn}, f64("x"));
    const Parameter init = parameter(random_array({1}, kF64, 31), "init");
    const Value first = random_sequences({kIn}, {4, 2}, kF64, 4);
    const Value later = random_sequences({kIn}, {3, 1, 2}, kF64, 5);
    NDMask mask = *later.mask();
    mask.set(0, 0, MaskKind::Valid);
    mask.set(1, 0, MaskKind::Valid);
    const Value second(later.data(), true, mask);
    std::vector<std::vector<double>> outputs[2];
    std::vector<std::vector<double>> gradients[2];
    std::vector<Variable> params;  // the same for both paths, in one order
    for (bool fused : {true, false}) {
      const Function r = recurrence(step, k, init, fused, x);
      if (params.empty())
        for (const Parameter& p : r.parameters()) params.push_back(p);
      Executor e({r.output()}, params);
      e.forward({{x, first}}, true);
      e.forward({{x, second}}, true);
      outputs[fused] = e.output_value(r.output()).as_sequences<double>();
      e.backward(r.output());
      for (const Variable& p : params)
        gradients[fused].push_back(e.parameter_gradient(p).to_vector<double>());
      // A continued sequence needs one in the previous minibatch.
      NDMask bad = *later.mask();
      bad.set(2, 0, MaskKind::Valid);
      Executor fresh({r.output()});
      fresh.forward({{x, first}}, false);
      EXPECT_THROW(fresh.forward({{x, Value(later.data(), true, bad)}}, false), StateError);
    }
    for (size_t s = 0; s < 3; ++s) expect_all_near(outputs[1][s], outputs[0][s], 1e-12, "output");
    ASSERT_EQ(gradients[1].size(), gradients[0].size());
    for (size_t i = 0; i < gradients[1].size(); ++i)
      expect_all_near(gradients[1][i], gradients[0][i], 1e-10, "parameter gradient");
  }
}

TEST(FusedRecurrence, InitialStateOfTheWrongShape) {
  const Constant bad = constant(random_array({3}, kF32, 6), "h_init");
  expect_shape_error([&] { Recurrence(LSTM(4), {.initial_state = {bad}}); },
                     {"h_init", "[3]", "[4]"});
  EXPECT_THROW(Recurrence(LSTM(4), {.initial_state = {bad}, .fused = false}), ShapeError);
}

TEST(FusedRecurrence, SavesAndLoads) {
  const Function step =
      make_step({"LSTM", {.cell_shape = 5, .use_peepholes = true}, true, false}, kF64);
  Variable x = sequence::input_variable({kIn}, f64("x"));
  const Function m = Recurrence(step, {.go_backwards = true})(x);
  const Function loaded = load_model_from_bytes(save_model_to_bytes(m));
  EXPECT_TRUE(has_fused_op(loaded));
  EXPECT_EQ(loaded.to_string(), m.to_string());
  EXPECT_EQ(loaded.parameter_paths(), m.parameter_paths());
  const Value xv = random_sequences({kIn}, kRagged, kF64, 8);
  EXPECT_EQ(loaded.eval_one({{loaded.arguments()[0], xv}}).as_sequences<double>(),
            m.eval_one({{x, xv}}).as_sequences<double>());
}

TEST(FusedRecurrence, InputsMustMatchTheAttributes) {
  Variable x = sequence::input_variable({kIn}, {.name = "x"});
  const Parameter b = parameter({12}, glorot_uniform(), DataType::Float32, "b");
  const Parameter W = parameter({kIn, 12}, glorot_uniform(), DataType::Float32, "W");
  const Parameter H = parameter({4, 8}, glorot_uniform(), DataType::Float32, "H");
  // A GRU needs H1.
  EXPECT_THROW(fused_recurrence(x, {.cell = "GRU",
                                    .activation = "Tanh",
                                    .b = b,
                                    .W = W,
                                    .H = H,
                                    .h0 = constant(0, DataType::Float32)}),
               ArgumentError);
  EXPECT_THROW(fused_recurrence(x, {.cell = "LSTM2",
                                    .activation = "Tanh",
                                    .b = b,
                                    .W = W,
                                    .H = H,
                                    .h0 = constant(0, DataType::Float32)}),
               ArgumentError);
}

}  // namespace
}  // namespace loom
