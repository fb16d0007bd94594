// Recurrent loops in the executor: graphs whose cycles go through past_value/future_value run
// one step at a time over the packed rows, forward and back-propagating through time.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error_test_util.h"
#include "loom/graph/executor.h"
#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

constexpr size_t kIn = 3, kHidden = 4;
const std::vector<size_t> kRagged{5, 3, 1, 3};

// h_t = tanh(x_t W + delay(h)_t U + b), with the state before the first step (after the last,
// for a backward loop) init: the hand-written recurrence closed with replace_placeholders.
struct Rnn {
  Variable x;
  Parameter W, U, b;
  Function h;
};

Rnn rnn(DataType dtype, int64_t shift, const Variable& init) {
  Rnn r{sequence::input_variable({kIn}, {.dtype = dtype, .name = "x"}),
        parameter(random_array({kIn, kHidden}, dtype, 1), "W"),
        parameter(random_array({kHidden, kHidden}, dtype, 2), "U"),
        parameter(random_array({kHidden}, dtype, 3), "b"),
        {}};
  Variable p = placeholder({kHidden}, dtype, r.x.dynamic_axes(), "h_prev");
  r.h = tanh(plus(plus(times(r.x, r.W), times(sequence::delay(p, init, shift), r.U)), r.b), "h");
  r.h.replace_placeholders({{p, r.h}});
  return r;
}

// The same recurrence as a plain loop over each sequence's steps.
std::vector<std::vector<double>> reference(const Rnn& r, const Value& x, int64_t shift,
                                           const std::function<std::vector<double>(size_t)>& init) {
  const auto W = r.W.value().to_vector<double>(), U = r.U.value().to_vector<double>(),
             b = r.b.value().to_vector<double>();
  std::vector<std::vector<double>> out;
  const auto seqs = x.as_sequences<double>();
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t T = int64_t(seqs[s].size() / kIn);
    std::vector<double> h(size_t(T) * kHidden);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t t = shift > 0 ? i : T - 1 - i, u = t - shift;
      const std::vector<double> prev =
          u >= 0 && u < T ? std::vector<double>(h.begin() + u * int64_t(kHidden),
                                                h.begin() + (u + 1) * int64_t(kHidden))
                          : init(s);
      for (size_t j = 0; j < kHidden; ++j) {
        double a = b[j];
        for (size_t k = 0; k < kIn; ++k) a += seqs[s][size_t(t) * kIn + k] * W[k * kHidden + j];
        for (size_t k = 0; k < kHidden; ++k) a += prev[k] * U[k * kHidden + j];
        h[size_t(t) * kHidden + j] = std::tanh(a);
      }
    }
    out.push_back(h);
  }
  return out;
}

void expect_near(const std::vector<std::vector<double>>& actual,
                 const std::vector<std::vector<double>>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t s = 0; s < actual.size(); ++s)
    expect_all_near(actual[s], expected[s], 1e-12, "sequence " + std::to_string(s));
}

const auto kZeros = [](size_t) { return std::vector<double>(kHidden, 0.0); };

TEST(RecurrentLoop, MatchesAPerSequenceLoop) {
  for (int64_t shift : {1, 2, -1, -2}) {
    SCOPED_TRACE(shift);
    Rnn r = rnn(kF64, shift, constant(0, kF64));
    EXPECT_EQ(r.h.output().type_string(), "Sequence[Tensor[4]]");
    const Value x = random_sequences({kIn}, kRagged, kF64, 4);
    expect_near(r.h.eval_one({{r.x, x}}).as_sequences<double>(), reference(r, x, shift, kZeros));
  }
}

TEST(RecurrentLoop, EmptySequenceStaysEmpty) {
  Rnn r = rnn(kF64, 1, constant(0, kF64));
  const Value x = random_sequences({kIn}, {3, 0, 2}, kF64, 18);
  const auto out = r.h.eval_one({{r.x, x}}).as_sequences<double>();
  expect_near(out, reference(r, x, 1, kZeros));
  EXPECT_TRUE(out[1].empty());
  expect_gradients_match(sequence::last(r.h), {{r.x, x}}, {r.x, r.W, r.U, r.b});
}

TEST(RecurrentLoop, StateCarriesOverToAContinuedSequence) {
  // Sequence 0 split over two minibatches gives what it gives in one; sequence 1 of the second
  // minibatch begins there.
  Rnn r = rnn(kF64, 1, constant(0, kF64));
  const Value whole = random_sequences({kIn}, {7}, kF64, 20);
  const auto steps = whole.as_sequences<double>()[0];
  const auto split = [&](size_t from, size_t to) {
    return std::vector<double>(steps.begin() + int64_t(from * kIn),
                               steps.begin() + int64_t(to * kIn));
  };
  const Value other = random_sequences({kIn}, {2}, kF64, 21);
  Value second =
      Value::create_sequences<double>({kIn}, {split(4, 7), other.as_sequences<double>()[0]});
  NDMask mask = *second.mask();
  mask.set(0, 0, MaskKind::Valid);
  Executor e({r.h.output()});
  e.forward({{r.x, Value::create_sequences<double>({kIn}, {split(0, 4)})}}, false);
  const auto first_part = e.output_value(r.h.output()).as_sequences<double>()[0];
  e.forward({{r.x, Value(second.data(), true, mask)}}, false);
  const auto out = e.output_value(r.h.output()).as_sequences<double>();
  auto expected = reference(r, whole, 1, kZeros)[0];
  std::vector<double> joined = first_part;
  joined.insert(joined.end(), out[0].begin(), out[0].end());
  expect_all_near(joined, expected, 1e-12, "continued sequence");
  expect_all_near(out[1], reference(r, other, 1, kZeros)[0], 1e-12, "new sequence");
}

TEST(RecurrentLoop, InitialStateKinds) {
  const Value x = random_sequences({kIn}, kRagged, kF64, 5);
  const NDArrayView init = random_array({kHidden}, kF64, 6);
  Rnn r = rnn(kF64, 1, constant(init));
  expect_near(r.h.eval_one({{r.x, x}}).as_sequences<double>(),
              reference(r, x, 1, [&](size_t) { return init.to_vector<double>(); }));
  Variable s = input_variable({kHidden}, f64("s"));
  const Value sv = random_batch({kHidden}, kRagged.size(), kF64, 7);
  Rnn q = rnn(kF64, -1, s);
  const auto rows = sv.data().to_vector<double>();
  expect_near(q.h.eval_one({{q.x, x}, {s, sv}}).as_sequences<double>(),
              reference(q, x, -1, [&](size_t b) {
                return std::vector<double>(rows.begin() + int64_t(b * kHidden),
                                           rows.begin() + int64_t((b + 1) * kHidden));
              }));
}

TEST(RecurrentLoop, GradientsThroughTime) {
  for (int64_t shift : {1, -1, 2}) {
    SCOPED_TRACE(shift);
    Parameter init = parameter(random_array({kHidden}, kF64, 8), "init");
    Rnn r = rnn(kF64, shift, init);
    ValueMap args{{r.x, random_sequences({kIn}, kRagged, kF64, 9)}};
    expect_gradients_match(r.h, args, {r.x, r.W, r.U, r.b, init});
  }
  // Per-sequence initial state, and the loop's output read by ops after it.
  Variable s = input_variable({kHidden}, f64("s"));
  Rnn r = rnn(kF64, 1, s);
  ValueMap args{{r.x, random_sequences({kIn}, kRagged, kF64, 10)},
                {s, random_batch({kHidden}, kRagged.size(), kF64, 11)}};
  expect_gradients_match(element_times(sequence::last(r.h), s), args, {r.x, r.W, r.U, s});
}

TEST(RecurrentLoop, StackedLoopsAndPackingInvisible) {
  Rnn a = rnn(kF64, 1, constant(0, kF64));
  // A second, backward loop over the first one's output.
  Parameter V = parameter(random_array({kHidden, kHidden}, kF64, 12), "V");
  Variable p = placeholder({kHidden}, kF64, a.x.dynamic_axes());
  Function g = tanh(plus(times(a.h, V), sequence::future_value(p)));
  g.replace_placeholders({{p, g}});
  expect_sequences_match_individually(g, a.x, random_sequences({kIn}, {2, 4, 1, 3}, kF64, 13));
  expect_gradients_match(g, {{a.x, random_sequences({kIn}, kRagged, kF64, 14)}},
                         {a.x, a.W, a.U, V});
}

TEST(RecurrentLoop, LoopOffTheRootsPathGetsNoGradient) {
  Rnn r = rnn(kF64, 1, constant(0, kF64));
  Function y = times(r.x, r.W);  // shares W and x with the loop, but does not read it
  Executor e({r.h.output(), y.output()}, {r.W, r.U});
  e.forward({{r.x, random_sequences({kIn}, kRagged, kF64, 19)}}, true);
  e.backward(y.output());
  for (double g : e.parameter_gradient(r.U).to_vector<double>()) EXPECT_EQ(g, 0);
  // dW of the sum of x·W: the column sums of x, the same for every output unit.
  const auto dW = e.parameter_gradient(r.W).to_vector<double>();
  EXPECT_NE(dW[0], 0);
  EXPECT_EQ(dW[0], dW[1]);
}

TEST(RecurrentLoop, Float32MatchesFloat64) {
  expect_float32_matches_float64([](DataType dtype) {
    Rnn r = rnn(dtype, 1, constant(0, dtype));
    return OpCase{r.h, {{r.x, random_sequences({kIn}, kRagged, dtype, 15)}}, {r.x, r.W, r.U}};
  });
}

TEST(RecurrentLoop, CloneKeepsTheLoop) {
  Rnn r = rnn(kF64, 1, constant(0, kF64));
  const Value x = random_sequences({kIn}, kRagged, kF64, 16);
  Function c = r.h.clone(ParameterCloneMethod::Clone);
  expect_near(c.eval_one({{r.x, x}}).as_sequences<double>(), reference(r, x, 1, kZeros));
  EXPECT_EQ(c.parameters().size(), 3u);
  EXPECT_NE(c.parameters()[0], r.W);
}

// The loop's placeholder needs no gradient, the variable closing it does: the delay's output
// needs one once the loop is closed, as a loaded copy infers (it was saved as not needing one).
TEST(RecurrentLoop, SavesAndLoadsTheLoop) {
  Rnn r = rnn(kF64, 1, constant(0, kF64));
  const Value x = random_sequences({kIn}, kRagged, kF64, 17);
  Function loaded = load_model_from_bytes(save_model_to_bytes(r.h));
  expect_near(loaded.eval_one({{loaded.arguments()[0], x}}).as_sequences<double>(),
              reference(r, x, 1, kZeros));
}

TEST(RecurrentLoop, CycleWithoutDelayIsRejected) {
  Variable x = sequence::input_variable({2}, f64("x"));
  Variable p = placeholder({2}, kF64, x.dynamic_axes());
  Function a = plus(x, p, "a");
  Function y = tanh(a, "y");
  const std::string msg = message_of([&] { y.replace_placeholders({{p, y}}); });
  EXPECT_NE(msg.find("cycle without a delay op"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a (" + a.uid() + ")"), std::string::npos) << msg;
  EXPECT_NE(msg.find("y (" + y.uid() + ")"), std::string::npos) << msg;
}

TEST(RecurrentLoop, MixedDirectionsAreRejected) {
  Variable x = sequence::input_variable({2}, f64("x"));
  Variable p = placeholder({2}, kF64, x.dynamic_axes());
  Function past = sequence::past_value(p, 1, "past");
  Function y = tanh(plus(plus(x, past), sequence::future_value(p, 1, "future")), "y");
  y.replace_placeholders({{p, y}});
  const std::string msg = message_of([&] { Executor e({y.output()}); });
  EXPECT_NE(msg.find("mixes past_value and future_value"), std::string::npos) << msg;
  EXPECT_NE(msg.find("past (" + past.uid() + ")"), std::string::npos) << msg;
}

TEST(RecurrentLoop, SequenceReductionInsideALoopIsRejected) {
  Variable x = sequence::input_variable({2}, f64("x"));
  Variable p = placeholder({2}, kF64, x.dynamic_axes());
  Function y = tanh(plus(x, sequence::past_value(p)), "y");
  // A loop through an op that gives no sequence (its value enters as a per-sequence state).
  Function l = sequence::last(y, "l");
  Function z = tanh(plus(x, sequence::past_value(p, l)), "z");
  z.replace_placeholders({{p, z}});
  y.replace_placeholders({{p, z}});
  const std::string msg = message_of([&] {
    z.eval_one({{x, random_sequences({2}, kRagged, kF64, 17)}});
  });
  EXPECT_NE(msg.find("looks along the sequence axis"), std::string::npos) << msg;
}

// An op that keeps the sequence axis but reads along it (is_first marks each sequence's first
// step) would see one step as a whole sequence inside a loop: refused, not silently wrong.
TEST(RecurrentLoop, OpsReadingAlongTheSequenceAxisAreRejectedInsideALoop) {
  Variable x = sequence::input_variable({2}, f64("x"));
  Variable p = placeholder({2}, kF64, x.dynamic_axes());
  Variable h = sequence::past_value(p);
  Function z = tanh(plus(x, element_times(h, sequence::is_first(h))), "z");
  z.replace_placeholders({{p, z}});
  const std::string msg = message_of([&] {
    z.eval_one({{x, random_sequences({2}, kRagged, kF64, 17)}});
  });
  EXPECT_NE(msg.find("SequenceIsFirst"), std::string::npos) << msg;
  EXPECT_NE(msg.find("looks along the sequence axis"), std::string::npos) << msg;
}

// A loop on a new axis (a running sum over the steps gather keeps) called: the call's gather
// makes another axis (named after its condition, now c), which the call's loop takes (its
// closing placeholder typed on it). A clone of the call keeps c, so c's axis.
TEST(RecurrentLoop, CloneOfALoopOnANewAxisRunsOnTheClonesAxis) {
  Variable x = placeholder({1}, kF64, default_sequence_axes(), "x");
  Variable keep = placeholder({}, kF64, default_sequence_axes(), "keep");
  Variable kept = sequence::gather(x, keep);
  Variable p = placeholder({1}, kF64, kept.dynamic_axes());
  Function sum = plus(sequence::past_value(p), kept);
  sum.replace_placeholders({{p, sum}});
  Function block = as_layer({sum}, "RunningSum", "", {x, keep});
  Variable a = sequence::input_variable({1}, f64("a"));
  Variable c = sequence::input_variable({}, f64("c"));
  Function once = block(a, c), twice = once.clone(ParameterCloneMethod::Share);
  EXPECT_NE(once.output().dynamic_axes()[1], kept.dynamic_axes()[1]);
  EXPECT_EQ(twice.output().dynamic_axes()[1], once.output().dynamic_axes()[1]);
  const ValueMap args{{a, Value::create_sequences<double>({1}, {{1, 2, 3, 4}, {5}, {}})},
                      {c, Value::create_sequences<double>({}, {{1, 0, 1, 1}, {0}, {}})}};
  const std::vector<std::vector<double>> expected{{1, 4, 8}, {}, {}};
  EXPECT_EQ(once.eval_one(args).as_sequences<double>(), expected);
  EXPECT_EQ(twice.eval_one(args).as_sequences<double>(), expected);
}

}  // namespace
}  // namespace loom
