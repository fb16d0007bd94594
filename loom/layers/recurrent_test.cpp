// Recurrent layers against the equations of RECURRENCE.md §4.2 computed here per sequence.
#include "loom/layers/recurrent.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/learners/sgd.h"
#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

using Vec = std::vector<double>;
const std::vector<size_t> kRagged{5, 3, 1, 3};
constexpr size_t kIn = 3;

double sig(double v) {
  return 1 / (1 + std::exp(-v));
}

// Row-major matrix products of the reference: y = b + x·W (x: [K], W: [K, N]).
Vec affine(const Vec& x, const Parameter& W, Vec y) {
  const Vec w = W.value().to_vector<double>();
  const size_t N = y.size();
  for (size_t k = 0; k < x.size(); ++k)
    for (size_t j = 0; j < N; ++j) y[j] += x[k] * w[k * N + j];
  return y;
}
Vec zeros(size_t n) {
  return Vec(n, 0.0);
}
Vec values_of(const Parameter& p) {
  return p.value().to_vector<double>();
}

// Runs a reference cell over each sequence of x (forward or backward), returning the
// sequence of outputs. cell(state, x_t) -> new state, whose first element is the output.
using State = std::vector<Vec>;
std::vector<Vec> run(const Value& x, bool backwards, const State& init,
                     const std::function<State(const State&, const Vec&)>& cell) {
  std::vector<Vec> out;
  for (const Vec& seq : x.as_sequences<double>()) {
    const size_t T = seq.size() / kIn;
    std::vector<Vec> hs(T);
    State s = init;
    for (size_t i = 0; i < T; ++i) {
      const size_t t = backwards ? T - 1 - i : i;
      s = cell(s, Vec(seq.begin() + int64_t(t * kIn), seq.begin() + int64_t((t + 1) * kIn)));
      hs[t] = s[0];
    }
    Vec flat;
    for (auto& h : hs) flat.insert(flat.end(), h.begin(), h.end());
    out.push_back(flat);
  }
  return out;
}

void expect_sequences_near(const std::vector<Vec>& actual, const std::vector<Vec>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t s = 0; s < actual.size(); ++s)
    expect_all_near(actual[s], expected[s], 1e-10, "sequence " + std::to_string(s));
}

Variable seq_input() {
  return sequence::input_variable({kIn}, f64("x"));
}

RecurrentCellOptions f64_cell(RecurrentCellOptions o = {}) {
  o.dtype = kF64;
  o.init = glorot_uniform(1.0, 1, 0, 11);
  o.init_bias = uniform(0.5, 12);  // not zero, so the bias shows in the results
  return o;
}

// The LSTM of §4.2: gates i, c~, f, o; peepholes on the stabilized c; f on the unstabilized c.
State lstm_step(const Function& f, bool peepholes, bool proj, const State& s, const Vec& x) {
  const Vec& h = s[0];
  const Vec& cp = s[1];
  const size_t c = cp.size();
  Vec a = affine(h, f.parameter("H"), affine(x, f.parameter("W"), values_of(f.parameter("b"))));
  Vec Ci = peepholes ? values_of(f.parameter("Ci")) : zeros(c),
      Cf = peepholes ? values_of(f.parameter("Cf")) : zeros(c),
      Co = peepholes ? values_of(f.parameter("Co")) : zeros(c);
  Vec ct(c), ht(c);
  for (size_t j = 0; j < c; ++j) {
    const double i = sig(a[j] + Ci[j] * cp[j]);
    const double fg = sig(a[2 * c + j] + Cf[j] * cp[j]);
    ct[j] = fg * cp[j] + i * std::tanh(a[c + j]);
    const double o = sig(a[3 * c + j] + Co[j] * ct[j]);
    ht[j] = o * std::tanh(ct[j]);
  }
  if (proj) ht = affine(ht, f.parameter("P"), zeros(h.size()));
  return {ht, ct};
}

TEST(RecurrentLayers, LSTMMatchesTheEquations) {
  struct Case {
    bool peepholes, proj, backwards;
  };
  for (Case k : {Case{false, false, false}, Case{true, false, false}, Case{true, true, true}}) {
    SCOPED_TRACE(std::to_string(k.peepholes) + std::to_string(k.proj) +
                 std::to_string(k.backwards));
    RecurrentCellOptions o = f64_cell({.use_peepholes = k.peepholes});
    if (k.proj) o.cell_shape = 5;
    Variable x = seq_input();
    Function r = Recurrence(LSTM(4, o), {.go_backwards = k.backwards})(x);
    EXPECT_EQ(r.output().type_string(), "Sequence[Tensor[4]]");
    EXPECT_EQ(r.parameter("W").shape(), (NDShape{kIn, k.proj ? 20u : 16u}));
    const Value xv = random_sequences({kIn}, kRagged, kF64, 1);
    expect_sequences_near(
        r.eval_one({{x, xv}}).as_sequences<double>(),
        run(xv, k.backwards, {zeros(4), zeros(k.proj ? 5 : 4)}, [&](const State& s, const Vec& xt) {
          return lstm_step(r, k.peepholes, k.proj, s, xt);
        }));
  }
}

TEST(RecurrentLayers, GRUMatchesTheEquations) {
  Variable x = seq_input();
  Function r = Recurrence(GRU(4, f64_cell()))(x);
  const Value xv = random_sequences({kIn}, kRagged, kF64, 2);
  const size_t c = 4;
  expect_sequences_near(r.eval_one({{x, xv}}).as_sequences<double>(),
                        run(xv, false, {zeros(c)}, [&](const State& s, const Vec& xt) {
                          const Vec& h = s[0];
                          const Vec ax = affine(xt, r.parameter("W"), values_of(r.parameter("b")));
                          const Vec ah = affine(h, r.parameter("H"), zeros(2 * c));
                          Vec z(c), rh(c);
                          for (size_t j = 0; j < c; ++j) {
                            z[j] = sig(ax[j] + ah[j]);
                            rh[j] = h[j] * sig(ax[c + j] + ah[c + j]);
                          }
                          const Vec hr = affine(rh, r.parameter("H1"), zeros(c));
                          Vec out(c);
                          for (size_t j = 0; j < c; ++j)
                            out[j] = (1 - z[j]) * std::tanh(ax[2 * c + j] + hr[j]) + z[j] * h[j];
                          return State{out};
                        }));
}

TEST(RecurrentLayers, RNNStepWithInitialStateAndFold) {
  Variable x = seq_input();
  const NDArrayView init = random_array({4}, kF64, 3);
  Function step = RNNStep(4, f64_cell());
  Function r = Recurrence(step, {.initial_state = {constant(init)}})(x);
  Function fold = Fold(step, {.initial_state = {constant(init)}})(x);
  const Value xv = random_sequences({kIn}, kRagged, kF64, 4);
  const auto expected =
      run(xv, false, {init.to_vector<double>()}, [&](const State& s, const Vec& xt) {
        Vec a = affine(s[0], r.parameter("H"),
                       affine(xt, r.parameter("W"), values_of(r.parameter("b"))));
        for (double& v : a) v = sig(v);  // RNNStep's default activation
        return State{a};
      });
  expect_sequences_near(r.eval_one({{x, xv}}).as_sequences<double>(), expected);
  const Vec folded = fold.eval_one({{x, xv}}).data().to_vector<double>();
  for (size_t s = 0; s < expected.size(); ++s)
    expect_all_near(Vec(folded.begin() + int64_t(4 * s), folded.begin() + int64_t(4 * s + 4)),
                    Vec(expected[s].end() - 4, expected[s].end()), 1e-12, "fold");
}

TEST(RecurrentLayers, RecurrenceFromTakesPerSequenceStates) {
  Variable x = seq_input();
  Variable h0 = input_variable({4}, f64("h0"));
  Function r = RecurrenceFrom(RNNStep(4, f64_cell({.activation = tanh})))(h0, x);
  EXPECT_EQ(r.arguments().size(), 2u);
  const Value xv = random_sequences({kIn}, kRagged, kF64, 5);
  const Value hv = random_batch({4}, kRagged.size(), kF64, 6);
  const auto rows = hv.data().to_vector<double>();
  const auto seqs = r.eval_one({{x, xv}, {h0, hv}}).as_sequences<double>();
  for (size_t s = 0; s < kRagged.size(); ++s) {
    const Value one = Value::create_sequences<double>({kIn}, {xv.as_sequences<double>()[s]});
    const auto expected =
        run(one, false, {Vec(rows.begin() + int64_t(4 * s), rows.begin() + int64_t(4 * s + 4))},
            [&](const State& st, const Vec& xt) {
              Vec a = affine(st[0], r.parameter("H"),
                             affine(xt, r.parameter("W"), values_of(r.parameter("b"))));
              for (double& v : a) v = std::tanh(v);
              return State{a};
            });
    expect_all_near(seqs[s], expected[0], 1e-12, "sequence " + std::to_string(s));
  }
  // An encoder's output sequence as the state: the recurrence starts from its last step.
  Variable enc = sequence::input_variable(
      {4}, {.dtype = kF64,
            .name = "enc",
            .dynamic_axes = {Axis::default_batch_axis(), Axis::dynamic_axis_named("enc")}});
  Function from_seq = RecurrenceFrom(RNNStep(4, f64_cell({.activation = tanh})))(enc, x);
  Function rs = RecurrenceFrom(RNNStep(4, f64_cell({.activation = tanh})))(h0, x);
  std::vector<Vec> enc_seqs;
  for (size_t s = 0; s < kRagged.size(); ++s) {  // random steps, then sample s of hv last
    Vec e = random_array({2 * s, 4}, kF64, 40 + s).to_vector<double>();
    e.insert(e.end(), rows.begin() + int64_t(4 * s), rows.begin() + int64_t(4 * s + 4));
    enc_seqs.push_back(e);
  }
  for (size_t i = 0; i < 3; ++i)  // the same parameters in both layers
    rs.parameters()[i].set_value(from_seq.parameters()[i].value());
  EXPECT_EQ(from_seq.eval_one({{x, xv}, {enc, Value::create_sequences<double>({4}, enc_seqs)}})
                .as_sequences<double>(),
            rs.eval_one({{x, xv}, {h0, hv}}).as_sequences<double>());
}

TEST(RecurrentLayers, UserStepFunction) {
  Parameter W = parameter(random_array({kIn, 4}, kF64, 20), "W");
  Variable h = placeholder({4}, kF64, default_sequence_axes(), "h");
  Variable in = placeholder("in");
  Function step = as_layer({tanh(plus(h, times(in, W)))}, "MyStep", "", {h, in});
  Variable x = seq_input();
  Function r = Recurrence(step, {.go_backwards = true})(x);
  const Value xv = random_sequences({kIn}, kRagged, kF64, 21);
  expect_sequences_near(r.eval_one({{x, xv}}).as_sequences<double>(),
                        run(xv, true, {zeros(4)}, [&](const State& s, const Vec& xt) {
                          Vec a = affine(xt, W, s[0]);
                          for (double& v : a) v = std::tanh(v);
                          return State{a};
                        }));
  // A state argument without a type cannot tell the recurrence its shape.
  Variable untyped = placeholder("h");
  Function bad = as_layer({tanh(plus(untyped, times(in, W)))}, "MyStep", "", {untyped, in});
  try {
    Recurrence(bad);
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("has no type"), std::string::npos) << e.what();
  }
}

TEST(RecurrentLayers, ModelWithLstmSavesAndLoads) {
  Variable x = sequence::input_variable({kIn}, f64("x"));
  Function m = Sequential(
      {Recurrence(LSTM(4, f64_cell())), Recurrence(GRU(3, f64_cell()), {.go_backwards = true})})(x);
  Function loaded = load_model_from_bytes(save_model_to_bytes(m));
  const Value xv = random_sequences({kIn}, kRagged, kF64, 22);
  EXPECT_EQ(loaded.eval_one({{loaded.arguments()[0], xv}}).as_sequences<double>(),
            m.eval_one({{x, xv}}).as_sequences<double>());
}

TEST(RecurrentLayers, Gradients) {
  Variable x = sequence::input_variable({2}, {.dtype = kF64, .name = "x", .needs_gradient = true});
  ValueMap args{{x, random_sequences({2}, {3, 1, 2}, kF64, 7)}};
  auto check = [&](const Function& layer) {
    Function r = layer(x);
    std::vector<Variable> wrt{x};
    for (const Parameter& p : r.parameters()) wrt.push_back(p);
    expect_gradients_match(r, args, wrt);
  };
  check(Recurrence(LSTM(2, f64_cell({.use_peepholes = true, .enable_self_stabilization = true}))));
  check(Recurrence(LSTM(2, f64_cell({.cell_shape = 3})), {.go_backwards = true}));
  check(Recurrence(GRU(2, f64_cell({.enable_self_stabilization = true}))));
  check(Fold(RNNStep(2, f64_cell())));
}

// A layer built once runs on a sequence of any axis: on a named one it gives the outputs it gives
// on the default axis (the step loop's states follow its argument's axis), and its gradients
// match finite differences there.
TEST(RecurrentLayers, LayersRunOnANamedSequenceAxis) {
  const Axis question = Axis::new_unique_dynamic_axis("question");
  Variable plain = seq_input();
  Variable named = sequence::input_variable({kIn}, question, {.dtype = kF64, .name = "q"});
  const Value data = random_sequences({kIn}, kRagged, kF64, 21);
  auto same_results = [&](const Function& layer) {
    Function a = layer(plain), b = layer(named);  // one layer: shared parameters
    for (const Variable& y : b.outputs()) {
      if (y.has_sequence_axis()) {
        EXPECT_EQ(y.dynamic_axes()[1], question);
      }
    }
    const ValueMap ra = a.eval({{plain, data}}), rb = b.eval({{named, data}});
    for (size_t i = 0; i < a.outputs().size(); ++i)
      expect_all_near(rb.at(b.outputs()[i]).data().to_vector<double>(),
                      ra.at(a.outputs()[i]).data().to_vector<double>(), 0, layer.to_string());
  };
  same_results(Recurrence(LSTM(4, f64_cell())));
  same_results(Recurrence(LSTM(4, f64_cell()), {.fused = false}));
  same_results(Recurrence(GRU(3, f64_cell()), {.go_backwards = true, .fused = false}));
  same_results(Recurrence(LSTM(2, f64_cell()), {.return_full_state = true}));
  same_results(Fold(RNNStep(4, f64_cell())));
  Variable x =
      sequence::input_variable({2}, question, {.dtype = kF64, .name = "x", .needs_gradient = true});
  Function r = Fold(LSTM(2, f64_cell()))(x);
  std::vector<Variable> wrt{x};
  for (const Parameter& p : r.parameters()) wrt.push_back(p);
  expect_gradients_match(r, {{x, random_sequences({2}, {3, 1, 2}, kF64, 7)}}, wrt);
}

// The step loop's multi-state forms on ragged sequences with a length-1 and an empty one:
// Recurrence with return_full_state (both directions), RecurrenceFrom from per-sequence (h, c)
// and Fold with return_full_state, all of one LSTM's parameters. Finite differences of every
// output; h equals the plain (fused) Recurrence's and Fold's states are the last steps.
TEST(RecurrentLayers, FullStateRecurrenceFromAndFoldGradients) {
  Variable x = sequence::input_variable({2}, {.dtype = kF64, .name = "x", .needs_gradient = true});
  Variable h0 = input_variable({2}, {.dtype = kF64, .name = "h0", .needs_gradient = true});
  Variable c0 = input_variable({3}, {.dtype = kF64, .name = "c0", .needs_gradient = true});
  const ValueMap args{{x, random_sequences({2}, {3, 1, 0, 2}, kF64, 7)},
                      {h0, random_batch({2}, 4, kF64, 8)},
                      {c0, random_batch({3}, 4, kF64, 9)}};
  Function step = LSTM(2, f64_cell({.cell_shape = 3, .use_peepholes = true}));
  Function full = Recurrence(step, {.return_full_state = true})(x);
  Function backwards = Recurrence(step, {.go_backwards = true, .return_full_state = true})(x);
  Function from = RecurrenceFrom(step, {.return_full_state = true})(h0, c0, x);
  Function fold = Fold(step, {.return_full_state = true})(x);
  ASSERT_EQ(full.outputs().size(), 2u);
  EXPECT_EQ(full.outputs()[1].shape(), NDShape{3});
  const std::vector<Vec> h = full.eval(args).at(full.outputs()[0]).as_sequences<double>();
  expect_sequences_near(h, Recurrence(step)(x).eval_one(args).as_sequences<double>());
  const ValueMap folded = fold.eval(args);
  for (size_t k = 0; k < 2; ++k) {
    const std::vector<Vec> seqs = full.eval(args).at(full.outputs()[k]).as_sequences<double>();
    const Vec last = folded.at(fold.outputs()[k]).data().to_vector<double>();
    const size_t n = k == 0 ? 2 : 3;
    for (size_t b = 0; b < seqs.size(); ++b)  // an empty sequence's final state is zeros
      expect_all_near(Vec(last.begin() + int64_t(n * b), last.begin() + int64_t(n * (b + 1))),
                      seqs[b].empty() ? zeros(n) : Vec(seqs[b].end() - int64_t(n), seqs[b].end()),
                      1e-12, "fold output " + std::to_string(k));
  }
  std::vector<Variable> wrt{x, h0, c0};
  for (const Parameter& p : step.parameters()) wrt.push_back(p);
  for (const Function& f : {full, backwards, from, fold})
    for (const Variable& out : f.outputs()) {
      ValueMap used;
      std::vector<Variable> w;
      for (const Variable& a : Function(out).arguments()) used.emplace(a, args.at(a));
      for (const Variable& v : wrt)
        if (v.is_parameter() || used.count(v)) w.push_back(v);
      expect_gradients_match(combine({out}), used, w);
    }
}

// A step (h, c, x) -> (h', c') whose first output reads the previous c but not c', which only
// the loop reads: h' = tanh(h·W + c), c' = tanh(c·A + x·U).
struct LaggedStep {
  Parameter W = parameter(random_array({2, 2}, kF64, 30), "W");
  Parameter A = parameter(random_array({2, 2}, kF64, 31), "A");
  Parameter U = parameter(random_array({2, 2}, kF64, 32), "U");
  Function f;
  LaggedStep() {
    Variable h = placeholder({2}, kF64, default_sequence_axes(), "h");
    Variable c = placeholder({2}, kF64, default_sequence_axes(), "c");
    Variable x = placeholder("x");
    f = as_layer({tanh(plus(times(h, W), c)), tanh(plus(times(c, A), times(x, U)))}, "Lagged", "",
                 {h, c, x});
  }
  State operator()(const State& s, const Vec& x) const {
    Vec h = affine(s[0], W, s[1]), c = affine(s[1], A, affine(x, U, zeros(2)));
    for (double& v : h) v = std::tanh(v);
    for (double& v : c) v = std::tanh(v);
    return {h, c};
  }
};

TEST(RecurrentLayers, StateOnlyTheLoopReads) {
  LaggedStep step;
  Variable x = sequence::input_variable({2}, {.dtype = kF64, .name = "x", .needs_gradient = true});
  Function r = Recurrence(step.f)(x);
  const Value xv = random_sequences({2}, {3, 1, 0, 2}, kF64, 33);
  std::vector<Vec> expected;
  for (const Vec& seq : xv.as_sequences<double>()) {
    State s{zeros(2), zeros(2)};
    Vec out;
    for (size_t t = 0; t < seq.size() / 2; ++t) {
      s = step(s, Vec(seq.begin() + int64_t(2 * t), seq.begin() + int64_t(2 * t + 2)));
      out.insert(out.end(), s[0].begin(), s[0].end());
    }
    expected.push_back(out);
  }
  expect_sequences_near(r.eval_one({{x, xv}}).as_sequences<double>(), expected);
  expect_gradients_match(r, {{x, xv}}, {x, step.W, step.A, step.U});
}

TEST(RecurrentLayers, StabilizerStartsAtOne) {
  Variable x = input_variable({2}, f64("x"));
  Function s = Stabilizer(4, true, kF64)(x);
  EXPECT_NEAR(s.parameters()[0].value().to_vector<double>()[0], 0.99537863, 1e-8);
  EXPECT_EQ(s.eval_one({{x, Value(NDArrayView::from_vector<double>({1, 2}, {3, -1}), false)}})
                .data()
                .to_vector<double>(),
            (Vec{3, -1}));
}

TEST(RecurrentLayers, PrintsAsCNTK) {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  // The states are typed: that is how a recurrence learns their shapes.
  EXPECT_EQ(LSTM(4).to_string(),
            "LSTM(dh: Sequence[Tensor[4]], dc: Sequence[Tensor[4]], x: Sequence[tensor]) -> "
            "Tuple[Sequence[tensor], Sequence[tensor]]");
  EXPECT_EQ(Recurrence(LSTM(4))(x).to_string(),
            "Recurrence(x: Sequence[Tensor[3]]) -> Sequence[Tensor[4]]");
  EXPECT_EQ(Fold(GRU(4))(x).to_string(), "Fold(x: Sequence[Tensor[3]]) -> Tensor[4]");
}

TEST(RecurrentLayers, SparseEmbeddingGradientMatchesDense) {
  Function emb = Embedding(3, {.dtype = kF64});
  Variable sparse = sequence::input_variable({6}, {.dtype = kF64, .is_sparse = true, .name = "s"});
  Variable dense = sequence::input_variable({6}, f64("d"));
  Function a = emb(sparse), b = emb(dense);
  const std::vector<std::vector<size_t>> ids{{1, 4, 4}, {0}};
  const Value sv = Value::one_hot_sequences(6, ids, kF64);
  const Value dv(sv.data().to_dense(), true, sv.mask());
  Parameter E = a.parameters()[0];
  EXPECT_EQ(E.shape(), (NDShape{6, 3}));
  const Vec ga = weighted_output(a).grad({{sparse, sv}}, {E}).at(E).data().to_vector<double>();
  const Vec gb = weighted_output(b).grad({{dense, dv}}, {E}).at(E).data().to_vector<double>();
  EXPECT_EQ(ga, gb);
  for (size_t row : {2, 3, 5})  // unused rows get no gradient
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(ga[row * 3 + j], 0);
}

// Whether token 7 occurs in a sequence of tokens 0..49: an embedding, an LSTM over the
// sequence, its last state and a dense classifier learn it.
TEST(RecurrentLayers, LstmClassifierTrains) {
  constexpr size_t kVocab = 50, kClasses = 5;
  Variable tokens = sequence::input_variable({kVocab}, {.is_sparse = true, .name = "tokens"});
  Variable label = input_variable({kClasses}, {.name = "label"});
  Function last = Function(sequence::last(placeholder("h")));
  Function model = Sequential({Embedding(50), Recurrence(LSTM(25)), last, Dense(kClasses)})(tokens);
  Variable loss = cross_entropy_with_softmax(model, label);
  Trainer trainer(model, loss, {sgd(model.parameters(), learning_parameter_schedule(0.1))});
  std::mt19937 gen(3);
  auto minibatch = [&] {
    std::vector<std::vector<size_t>> seqs;
    std::vector<size_t> labels;
    for (size_t i = 0; i < 16; ++i) {
      std::vector<size_t> s(2 + gen() % 7);
      for (auto& t : s) t = 10 + gen() % 40;
      const bool has = gen() % 2;
      if (has) s[gen() % s.size()] = 7;
      seqs.push_back(s);
      labels.push_back(has ? 1 : 0);
    }
    return ValueMap{{tokens, Value::one_hot_sequences(kVocab, seqs)},
                    {label, Value::one_hot(kClasses, labels)}};
  };
  double first = 0, final = 0;
  for (int step = 0; step < 300; ++step) {
    trainer.train_minibatch(minibatch());
    const double l = trainer.previous_minibatch_loss_average();
    if (step < 20) first += l / 20;
    if (step >= 280) final += l / 20;
  }
  EXPECT_LT(final, 0.5 * first) << "first " << first << ", final " << final;
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// The sequences of f's only output.
std::vector<Vec> output_sequences(const Function& f, const ValueMap& args) {
  return f.eval(args).at(f.output()).as_sequences<double>();
}

// h_t = tanh(h_{t-1} · W) from a per-sequence initial state, over each sequence's length.
TEST(UnfoldFrom, GeneratesFromEachSequencesInitialState) {
  for (DataType dtype : {kF64, DataType::Float32}) {
    Parameter W = parameter({2, 2}, glorot_uniform(1.0, 1, 0, 5), dtype, "W");
    Variable h = placeholder({2}, dtype, default_sequence_axes(), "h");
    Function generator = tanh(times(h, W));
    Variable s0 = input_variable({2}, {.dtype = dtype, .name = "s0", .needs_gradient = true});
    Variable like = sequence::input_variable({1}, {.dtype = dtype, .name = "like"});
    Function unfold = UnfoldFrom(generator)(s0, like);
    const std::vector<size_t> lengths{3, 1, 2};
    Value init = Value::create_batch<double>({2}, {0.5, -1, 1, 0.25, -0.5, 2});
    if (dtype == DataType::Float32)
      init = Value::create_batch<float>({2}, {0.5f, -1, 1, 0.25f, -0.5f, 2});
    ValueMap args{{s0, init}, {like, random_sequences({1}, lengths, dtype, 3)}};
    const std::vector<Vec> out = output_sequences(unfold, args);
    const Vec w = W.value().to_vector<double>();
    const std::vector<Vec> starts = init.as_sequences<double>();
    ASSERT_EQ(out.size(), lengths.size());
    for (size_t b = 0; b < lengths.size(); ++b) {
      Vec prev = starts[b], expected;
      for (size_t t = 0; t < lengths[b]; ++t) {
        Vec next{std::tanh(prev[0] * w[0] + prev[1] * w[2]),
                 std::tanh(prev[0] * w[1] + prev[1] * w[3])};
        expected.insert(expected.end(), next.begin(), next.end());
        prev = next;
      }
      expect_all_near(out[b], expected, dtype == kF64 ? 1e-12 : 1e-6,
                      "sequence " + std::to_string(b));
    }
    if (dtype == kF64) expect_gradients_match(unfold, args, {W, s0});
  }
}

// The generator s_t = s_{t-1} + b (b = 1) and the predicate "above 2.5" (1 from 3 on, and 0 or 1
// under finite differences), with an initial state s0 per sequence and like's steps.
struct StoppingCounter {
  Parameter b;
  Function generator, above;
  Variable s0, like;
  DataType dtype;

  explicit StoppingCounter(DataType t) : dtype(t) {
    b = parameter({1}, constant_initializer(1), dtype, "b");
    Variable h = placeholder({1}, dtype, default_sequence_axes(), "h");
    Variable y = placeholder({1}, dtype, default_sequence_axes(), "y");
    generator = plus(h, b);
    above = element_min(element_times(relu(minus(y, constant(2.5, dtype))), constant(10, dtype)),
                        constant(1, dtype));
    s0 = input_variable({1}, {.dtype = dtype, .name = "s0", .needs_gradient = true});
    like = sequence::input_variable({1}, {.dtype = dtype, .name = "like"});
  }
  Value initial_states(const std::vector<double>& values) const {
    if (dtype == kF64) return Value::create_batch<double>({1}, values);
    return Value::create_batch<float>({1}, std::vector<float>(values.begin(), values.end()));
  }
};

// A counter s_t = s_{t-1} + b that stops at the first step above 2.5 (the predicate is 1
// from 3 on, and stays 0 or 1 under the finite differences), on sequences that stop early, run
// their whole length, or stop at once.
TEST(UnfoldFrom, UntilPredicateEndsEachSequenceAtItsFirstTrueStep) {
  for (DataType dtype : {kF64, DataType::Float32}) {
    const StoppingCounter k(dtype);
    Function unfold = UnfoldFrom(k.generator, {.until_predicate = k.above})(k.s0, k.like);
    EXPECT_EQ(unfold.output().dynamic_axes()[1].name().rfind("whereNodeDynamicAxis", 0), 0u);
    ValueMap args{{k.s0, k.initial_states({0, -5, 2})},
                  {k.like, random_sequences({1}, {5, 2, 4}, dtype, 3)}};
    EXPECT_EQ(output_sequences(unfold, args), (std::vector<Vec>{{1, 2, 3}, {-4, -3}, {3}}));
    if (dtype == kF64) expect_gradients_match(unfold, args, {k.b, k.s0});
  }
  Variable a = placeholder({1}, kF64, default_sequence_axes(), "a");
  Variable c = placeholder({1}, kF64, default_sequence_axes(), "c");
  EXPECT_THROW(UnfoldFrom(relu(a), {.until_predicate = plus(a, c)}), ArgumentError);
}

TEST(UnfoldFrom, BadGenerators) {
  Variable a = placeholder({1}, kF64, default_sequence_axes(), "a");
  Variable b = placeholder({1}, kF64, default_sequence_axes(), "b");
  EXPECT_THROW(UnfoldFrom(plus(a, b)), ArgumentError);
  EXPECT_THROW(UnfoldFrom(combine({relu(a), tanh(a), sigmoid(a)})), ArgumentError);
  EXPECT_THROW(UnfoldFrom(Function(relu(placeholder("untyped")))), ArgumentError);
}

// Runs step (state -> (output, new state)) n times from state: the outputs, one after another.
Vec unfolded(Vec state, size_t n, const std::function<std::pair<Vec, Vec>(const Vec&)>& step) {
  Vec out;
  for (size_t t = 0; t < n; ++t) {
    auto [y, next] = step(state);
    out.insert(out.end(), y.begin(), y.end());
    state = next;
  }
  return out;
}

// The generator h_t = tanh(h_{t-1} · W + b), as a function and as a reference step.
struct TanhGenerator {
  Parameter W, b;
  Function f;
  explicit TanhGenerator(DataType dtype)
      : W(parameter({2, 2}, glorot_uniform(1.0, 1, 0, 5), dtype, "W")),
        b(parameter({2}, uniform(0.5, 6), dtype, "b")) {
    Variable h = placeholder({2}, dtype, default_sequence_axes(), "h");
    f = tanh(plus(times(h, W), b));
  }
  std::pair<Vec, Vec> operator()(const Vec& h) const {
    Vec next = affine(h, W, values_of(b));
    for (double& v : next) v = std::tanh(v);
    return {next, next};
  }
};

// length_increase 1 and 2 multiply each sequence's steps; 1.5 rounds up as CNTK's where does
// (3 -> 5, 1 -> 2, 2 -> 3); an empty sequence stays empty. A new axis unless 1.
TEST(UnfoldFrom, LengthIncreaseScalesEachSequencesSteps) {
  struct Case {
    double increase;
    std::vector<size_t> steps;
  };
  const std::vector<size_t> lengths{3, 1, 0, 2};
  for (const Case& c : {Case{1, {3, 1, 0, 2}}, Case{2, {6, 2, 0, 4}}, Case{1.5, {5, 2, 0, 3}}})
    for (DataType dtype : {kF64, DataType::Float32}) {
      TanhGenerator gen(dtype);
      Variable s0 = input_variable({2}, {.dtype = dtype, .name = "s0", .needs_gradient = true});
      Variable like = sequence::input_variable({1}, {.dtype = dtype, .name = "like"});
      Function unfold = UnfoldFrom(gen.f, {.length_increase = c.increase})(s0, like);
      const std::string axis = unfold.output().dynamic_axes()[1].name();
      EXPECT_EQ(axis.rfind("whereNodeDynamicAxis", 0) == 0, c.increase != 1) << axis;
      const Value init(random_array({4, 2}, dtype, 8), false);
      ValueMap args{{s0, init}, {like, random_sequences({1}, lengths, dtype, 3)}};
      const std::vector<Vec> out = output_sequences(unfold, args);
      const std::vector<Vec> starts = init.as_sequences<double>();
      ASSERT_EQ(out.size(), lengths.size());
      for (size_t b = 0; b < lengths.size(); ++b)
        expect_all_near(
            out[b], unfolded(starts[b], c.steps[b], gen), dtype == kF64 ? 1e-12 : 1e-6,
            "length_increase " + std::to_string(c.increase) + ", sequence " + std::to_string(b));
      if (dtype == kF64) expect_gradients_match(unfold, args, {gen.W, gen.b, s0});
    }
  Variable h = placeholder({1}, kF64, default_sequence_axes(), "h");
  EXPECT_THROW(UnfoldFrom(relu(h), {.length_increase = 0}), ArgumentError);
}

// The counter s_t = s_{t-1} + 1 stops at its first step above 2.5 or after 1.5 times like's
// steps, whichever comes first: 3 steps from -1 (no stop; 2 with length_increase 1), 2 from -5,
// 1 from 2.
TEST(UnfoldFrom, LengthIncreaseWithUntilPredicate) {
  for (DataType dtype : {kF64, DataType::Float32}) {
    const StoppingCounter k(dtype);
    Function unfold =
        UnfoldFrom(k.generator, {.until_predicate = k.above, .length_increase = 1.5})(k.s0, k.like);
    ValueMap args{{k.s0, k.initial_states({-1, -5, 2})},
                  {k.like, random_sequences({1}, {2, 1, 3}, dtype, 3)}};
    EXPECT_EQ(output_sequences(unfold, args), (std::vector<Vec>{{0, 1, 2}, {-4, -3}, {3}}));
    if (dtype == kF64) expect_gradients_match(unfold, args, {k.b, k.s0});
  }
}

// One UnfoldFrom block called twice in a graph: each call has its own new axis, so sequences of
// other lengths (here like2 on a named axis) unfold side by side; with length_increase 1 the
// result is on like's own axis.
TEST(UnfoldFrom, EachCallHasItsOwnAxis) {
  TanhGenerator gen(kF64);
  Variable s0 = input_variable({2}, {.dtype = kF64, .name = "s0", .needs_gradient = true});
  Variable like1 = sequence::input_variable({1}, f64("like1"));
  Variable like2 = sequence::input_variable({3}, Axis::dynamic_axis_named("m"), f64("like2"));
  Function block = UnfoldFrom(gen.f, {.length_increase = 2});
  Function u1 = block(s0, like1), u2 = block(s0, like2);
  EXPECT_NE(u1.output().dynamic_axes()[1], u2.output().dynamic_axes()[1]);
  EXPECT_EQ(UnfoldFrom(gen.f)(s0, like2).output().dynamic_axes()[1].name(), "m");
  const Value init(random_array({2, 2}, kF64, 8), false);
  ValueMap args{{s0, init},
                {like1, random_sequences({1}, {2, 1}, kF64, 3)},
                {like2, random_sequences({3}, {1, 3}, kF64, 4)}};
  const std::vector<Vec> starts = init.as_sequences<double>();
  const std::vector<std::vector<size_t>> steps{{4, 2}, {2, 6}};
  const std::vector<Function> calls{u1, u2};
  for (size_t k = 0; k < 2; ++k) {
    const std::vector<Vec> out = output_sequences(calls[k], args);
    ASSERT_EQ(out.size(), 2u);
    for (size_t b = 0; b < 2; ++b)
      expect_all_near(out[b], unfolded(starts[b], steps[k][b], gen), 1e-12,
                      "call " + std::to_string(k) + ", sequence " + std::to_string(b));
  }
  Function both = plus(sequence::reduce_sum(u1), sequence::reduce_sum(u2));
  expect_gradients_match(both, args, {gen.W, gen.b, s0});
}

// A graph holding an UnfoldFrom with length_increase and until_predicate survives a clone (new
// axes again) and a model file with the same results.
TEST(UnfoldFrom, ClonesAndModelFilesKeepTheResults) {
  TanhGenerator gen(kF64);
  Variable y = placeholder({2}, kF64, default_sequence_axes(), "y");
  Function above = element_min(
      element_times(relu(minus(slice(y, Axis(0), 0, 1), constant(0.6, kF64))), constant(1e6, kF64)),
      constant(1, kF64));
  Variable s0 = input_variable({2}, f64("s0"));
  Variable like = sequence::input_variable({1}, f64("like"));
  Function unfold = UnfoldFrom(gen.f, {.until_predicate = above, .length_increase = 1.5})(s0, like);
  const Value init(random_array({3, 2}, kF64, 8), false);
  const Value likes = random_sequences({1}, {3, 1, 2}, kF64, 3);
  const std::vector<Vec> expected = output_sequences(unfold, {{s0, init}, {like, likes}});
  Function copy = unfold.clone(ParameterCloneMethod::Clone);
  EXPECT_NE(copy.output().dynamic_axes()[1], unfold.output().dynamic_axes()[1]);
  Function loaded = load_model_from_bytes(save_model_to_bytes(unfold));
  for (const Function& f : {copy, loaded})
    EXPECT_EQ(output_sequences(f, {{f.argument("s0"), init}, {f.argument("like"), likes}}),
              expected);
}

// Generators giving (output, new state): a decoder emitting y = softmax(h·V + c) and feeding
// back tanh(y·E + h·W) (the new state reads the output), and one emitting sigmoid(h·V + c)
// beside the new state tanh(h·W) (which only the loop reads), against a step loop written
// here, with until_predicate and length_increase on the second.
TEST(UnfoldFrom, OutputAndNewStateGenerators) {
  for (DataType dtype : {kF64, DataType::Float32}) {
    Parameter V = parameter({2, 3}, glorot_uniform(1.0, 1, 0, 21), dtype, "V");
    Parameter c = parameter({3}, uniform(0.5, 22), dtype, "c");
    Parameter E = parameter({3, 2}, glorot_uniform(1.0, 1, 0, 23), dtype, "E");
    Parameter W = parameter({2, 2}, glorot_uniform(1.0, 1, 0, 24), dtype, "W");
    Variable h = placeholder({2}, dtype, default_sequence_axes(), "h");
    Variable y = softmax(plus(times(h, V), c));
    Function decoder = combine({y, tanh(plus(times(y, E), times(h, W)))});
    Function side = combine({sigmoid(plus(times(h, V), c)), tanh(times(h, W))});
    auto tanh_of = [](Vec v) {
      for (double& x : v) x = std::tanh(x);
      return v;
    };
    auto decoder_step = [&](const Vec& s) {
      Vec o = affine(s, V, values_of(c));
      double total = 0;
      for (double& x : o) total += (x = std::exp(x));
      for (double& x : o) x /= total;
      return std::pair{o, tanh_of(affine(o, E, affine(s, W, zeros(2))))};
    };
    auto side_step = [&](const Vec& s) {
      Vec o = affine(s, V, values_of(c));
      for (double& x : o) x = sig(x);
      return std::pair{o, tanh_of(affine(s, W, zeros(2)))};
    };
    // 1 where the output's first element is above 0.6 (0 or 1 but within 1e-6 of it).
    Variable out = placeholder({3}, dtype, default_sequence_axes(), "out");
    Function stop =
        element_min(element_times(relu(minus(slice(out, Axis(0), 0, 1), constant(0.6, dtype))),
                                  constant(1e6, dtype)),
                    constant(1, dtype));
    auto until_stop = [](Vec o) {
      for (size_t t = 0; t < o.size(); t += 3)
        if (o[t] > 0.6) return Vec(o.begin(), o.begin() + int64_t(t + 3));
      return o;
    };
    Variable s0 = input_variable({2}, {.dtype = dtype, .name = "s0", .needs_gradient = true});
    Variable like = sequence::input_variable({1}, {.dtype = dtype, .name = "like"});
    const std::vector<size_t> lengths{3, 1, 0, 2};
    const Value init(random_array({4, 2}, dtype, 8), false);
    ValueMap args{{s0, init}, {like, random_sequences({1}, lengths, dtype, 3)}};
    const std::vector<Vec> starts = init.as_sequences<double>();
    const double tolerance = dtype == kF64 ? 1e-12 : 1e-6;
    Function decoded = UnfoldFrom(decoder)(s0, like);
    Function sided = UnfoldFrom(side, {.until_predicate = stop, .length_increase = 2})(s0, like);
    const std::vector<Vec> a = output_sequences(decoded, args), b = output_sequences(sided, args);
    size_t cut = 0;  // sequences the predicate ends early
    for (size_t k = 0; k < lengths.size(); ++k) {
      cut += b[k].size() < 2 * lengths[k] * 3;
      expect_all_near(a[k], unfolded(starts[k], lengths[k], decoder_step), tolerance,
                      "decoder, sequence " + std::to_string(k));
      expect_all_near(b[k], until_stop(unfolded(starts[k], 2 * lengths[k], side_step)), tolerance,
                      "side, sequence " + std::to_string(k));
    }
    EXPECT_GE(cut, 1u);
    EXPECT_LT(cut, 3u);
    if (dtype == kF64) {
      expect_gradients_match(decoded, args, {V, c, E, W, s0});
      expect_gradients_match(sided, args, {V, c, W, s0});
    }
  }
}

// Delay(T) is past_value (T > 0), future_value (T < 0) or x (T = 0), on ragged sequences with
// one of length 1 and an empty one (which stays empty).
TEST(Delay, IsTheDelayOpAsALayer) {
  for (DataType dtype : {kF64, DataType::Float32}) {
    Variable x =
        sequence::input_variable({2}, {.dtype = dtype, .name = "x", .needs_gradient = true});
    ValueMap args{{x, random_sequences({2}, {3, 1, 2}, dtype, 9)}};
    const std::vector<Vec> in = args.at(x).as_sequences<double>();
    auto shifted = [&](int T, double init) {
      std::vector<Vec> out;
      for (const Vec& s : in) {
        const int n = int(s.size() / 2);
        Vec o;
        for (int t = 0; t < n; ++t)
          for (int j = 0; j < 2; ++j)
            o.push_back(t - T >= 0 && t - T < n ? s[size_t(2 * (t - T) + j)] : init);
        out.push_back(o);
      }
      return out;
    };
    const Constant zero = constant(0, dtype);
    EXPECT_EQ(output_sequences(Delay(1, zero)(x), args), shifted(1, 0));
    EXPECT_EQ(output_sequences(Delay(-2, zero)(x), args), shifted(-2, 0));
    EXPECT_EQ(output_sequences(Delay(0)(x), args), in);
    EXPECT_EQ(output_sequences(Delay(1, constant(0.5, dtype))(x), args), shifted(1, 0.5));
    if (dtype == kF64) {
      Parameter init = parameter({2}, uniform(1.0, 2), kF64, "init");
      expect_gradients_match(Delay(1, init)(x), args, {x, init});
      expect_gradients_match(Delay(-1, zero)(x), args, {x});
    }
  }
  Variable x = sequence::input_variable({1}, {.name = "x"});  // float32: Delay(1)'s 0
  Value with_empty = Value::create_sequences<float>({1}, std::vector<float>{1, 2}, {2, 0});
  EXPECT_EQ(output_sequences(Delay(1)(x), {{x, with_empty}}), (std::vector<Vec>{{0, 1}, {}}));
  EXPECT_EQ(Delay(1)(x).to_string().rfind("Delay(", 0), 0u) << Delay(1)(x).to_string();
}

}  // namespace
}  // namespace loom
