#include "loom/ops/recurrence_ops.h"

#include <gtest/gtest.h>

#include "loom/graph/executor.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

using Sequences = std::vector<std::vector<double>>;

// Lengths 3, 1, 2 of samples of 2 elements; the length-1 sequence sits between the others.
const Sequences kSeqs{{1, 2, 3, 4, 5, 6}, {7, 8}, {9, 10, 11, 12}};

// The delay of each sequence by shift steps (past > 0, future < 0), the boundary steps
// reading init(b) (2 elements) for sequence b.
Sequences reference(const Sequences& seqs, int shift,
                    const std::function<std::vector<double>(size_t)>& init) {
  Sequences out;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int len = int(seqs[b].size() / 2);
    std::vector<double> o;
    for (int t = 0; t < len; ++t) {
      const int u = t - shift;
      for (int k = 0; k < 2; ++k)
        o.push_back(u >= 0 && u < len ? seqs[b][size_t(2 * u + k)] : init(b)[size_t(k)]);
    }
    out.push_back(o);
  }
  return out;
}

TEST(RecurrenceOps, ShapeInference) {
  Variable x = sequence::input_variable({2, 3}, f64("x"));
  Function p = sequence::past_value(x, 2, "p");
  EXPECT_EQ(p.op_name(), "PastValue");
  EXPECT_EQ(p.attributes().get<int64_t>("offset"), 2);
  EXPECT_EQ(p.output().type_string(), "Sequence[Tensor[2,3]]");
  EXPECT_EQ(p.output().dtype(), kF64);
  Function f = sequence::future_value(x, constant(random_array({3}, kF64, 1)));
  EXPECT_EQ(f.op_name(), "FutureValue");
  EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
  EXPECT_EQ(sequence::delay(x, constant(0, kF64), -1).op_name(), "FutureValue");
  EXPECT_EQ(sequence::delay(x, constant(0, kF64), 0).output(), x);
  // Without an initial state (0), and named at time step 0: an alias of x, as CNTK's delay.
  EXPECT_EQ(sequence::delay(x, 3).op_name(), "PastValue");
  EXPECT_EQ(sequence::delay(x, 3).attributes().get<int64_t>("offset"), 3);
  Function named = sequence::delay(x, 0, "d");
  EXPECT_EQ(named.name(), "d");
  EXPECT_EQ(named.inputs(), std::vector<Variable>{x});
}

TEST(RecurrenceOps, ShapeErrors) {
  Variable x = sequence::input_variable({2, 3}, f64("x"));
  expect_shape_error([&] { sequence::past_value(input_variable({2}, f64("b"))); },
                     {"PastValue", "b: Tensor[2]", "batch and a sequence axis"});
  expect_shape_error([&] { sequence::past_value(x, constant(random_array({2}, kF64, 1))); },
                     {"PastValue", "cannot be broadcast", "x: Sequence[Tensor[2,3]]"});
  expect_shape_error([&] { sequence::future_value(x, sequence::input_variable({3}, f64("q"))); },
                     {"FutureValue", "q: Sequence[Tensor[3]]", "sample shape"});
  expect_shape_error([&] { sequence::past_value(x, input_variable({3}, f64("s"))); },
                     {"PastValue", "s: Tensor[3]", "sample shape"});
  expect_shape_error([&] { sequence::past_value(x, constant(0)); }, {"PastValue", "types"});
}

TEST(RecurrenceOps, ForwardWithEachKindOfInitialState) {
  Variable x = sequence::input_variable({2}, f64("x"));
  const Value xv = Value::create_sequences<double>({2}, kSeqs);
  const NDArrayView tensor = NDArrayView::from_vector<double>({2}, {-1, -2});
  Variable s = input_variable({2}, f64("s"));
  const Value sv(NDArrayView::from_vector<double>({3, 2}, {-1, -2, -3, -4, -5, -6}), false);
  for (int shift : {1, 2, -1, -2}) {
    SCOPED_TRACE(shift);
    auto check = [&](const Variable& init, const std::function<std::vector<double>(size_t)>& ref,
                     ValueMap args) {
      args.emplace(x, xv);
      Value out = sequence::delay(x, init, shift).eval_one(args);
      EXPECT_EQ(out.as_sequences<double>(), reference(kSeqs, shift, ref));
    };
    check(constant(0, kF64), [](size_t) { return std::vector<double>{0, 0}; }, {});
    check(constant(0.5, kF64), [](size_t) { return std::vector<double>{0.5, 0.5}; }, {});
    check(constant(tensor), [](size_t) { return std::vector<double>{-1, -2}; }, {});
    check(s, [](size_t b) { return std::vector<double>{-1.0 - 2 * b, -2.0 - 2 * b}; }, {{s, sv}});
  }
}

TEST(RecurrenceOps, SequenceInitialState) {
  Variable x = sequence::input_variable({2}, f64("x"));
  Variable q = sequence::input_variable(
      {2}, {.dtype = kF64,
            .name = "q",
            .dynamic_axes = {Axis::default_batch_axis(), Axis::dynamic_axis_named("q")}});
  const Sequences init{{-1, -2, -3, -4}, {-5, -6}, {-7, -8, -9, -10, -11, -12}};
  ValueMap args{{x, Value::create_sequences<double>({2}, kSeqs)},
                {q, Value::create_sequences<double>({2}, init)}};
  for (int shift : {1, 2, -1, -2}) {
    SCOPED_TRACE(shift);
    const size_t k = size_t(std::abs(shift));
    // Sequence b's boundary steps read q's last k steps (past) or first k (future); its second
    // sequence has one step, which serves every boundary step.
    Sequences expected;
    for (size_t b = 0; b < kSeqs.size(); ++b) {
      const size_t len = kSeqs[b].size() / 2, qlen = init[b].size() / 2;
      std::vector<double> o;
      for (size_t t = 0; t < len; ++t) {
        const int64_t u = int64_t(t) - shift;
        const size_t j = shift > 0 ? t : t + k - len;
        const size_t from = qlen == 1 ? 0 : shift > 0 ? qlen - k + j : j;
        for (size_t e = 0; e < 2; ++e)
          o.push_back(u >= 0 && u < int64_t(len) ? kSeqs[b][size_t(u) * 2 + e]
                                                 : init[b][from * 2 + e]);
      }
      expected.push_back(o);
    }
    EXPECT_EQ(sequence::delay(x, q, shift).eval_one(args).as_sequences<double>(), expected);
  }
  Variable xg = sequence::input_variable({2, 3}, f64("xg"));
  Variable qg = sequence::input_variable(
      {2, 3}, {.dtype = kF64,
               .name = "qg",
               .dynamic_axes = {Axis::default_batch_axis(), Axis::dynamic_axis_named("q")}});
  ValueMap gargs{{xg, random_sequences({2, 3}, {5, 1, 3, 2}, kF64, 30)},
                 {qg, random_sequences({2, 3}, {2, 3, 1, 4}, kF64, 31)}};
  for (int shift : {1, 2, -1, -2}) {
    SCOPED_TRACE(shift);
    expect_gradients_match(sequence::delay(tanh(xg), qg, shift), gargs, {xg, qg});
  }
  // A state sequence shorter than the time step, but longer than one step.
  args.insert_or_assign(q, Value::create_sequences<double>({2}, {{1, 2}, {3, 4, 5, 6}, {7, 8}}));
  expect_shape_error([&] { sequence::past_value(x, q, 3).eval_one(args); },
                     {"PastValue", "initial state of sequence 1 has 2 steps", "time_step (3)"});
}

TEST(RecurrenceOps, Gradients) {
  Variable x = sequence::input_variable({2, 3}, f64("x"));
  Variable s = input_variable({2, 3}, f64("s"));
  const std::vector<size_t> lengths{5, 1, 3, 2};
  ValueMap args{{x, random_sequences({2, 3}, lengths, kF64, 1)},
                {s, random_batch({2, 3}, lengths.size(), kF64, 2)}};
  Parameter full = parameter(random_array({2, 3}, kF64, 3), "full");
  Parameter row = parameter(random_array({3}, kF64, 4), "row");
  Parameter scalar = parameter(random_array({}, kF64, 5), "scalar");
  for (int shift : {1, 2, -1, -3}) {
    SCOPED_TRACE(shift);
    // tanh so the gradient reaching the delay differs from step to step.
    // A parameter of x's shape, broadcast ones, and a function of one.
    for (const Variable& init : {Variable(full), Variable(row), Variable(scalar)})
      expect_gradients_match(sequence::delay(tanh(x), init, shift), args, {x, init});
    expect_gradients_match(sequence::delay(tanh(x), tanh(row), shift), args, {x, row});
    expect_gradients_match(sequence::delay(tanh(x), s, shift), args, {x, s});
  }
}

TEST(RecurrenceOps, PackingIsInvisible) {
  Variable x = sequence::input_variable({2}, f64("x"));
  Parameter init = parameter(random_array({2}, kF64, 6));
  for (int shift : {1, 2, -1, -2}) {
    SCOPED_TRACE(shift);
    expect_sequences_match_individually(element_times(sequence::delay(tanh(x), init, shift), x), x,
                                        random_sequences({2}, {2, 4, 1, 3}, kF64, 7));
  }
}

TEST(RecurrenceOps, Float32MatchesFloat64) {
  for (int shift : {1, -2}) {
    SCOPED_TRACE(shift);
    expect_float32_matches_float64([&](DataType dtype) {
      Variable x = sequence::input_variable({3}, {.dtype = dtype});
      Parameter init = parameter(random_array({3}, dtype, 8));
      return OpCase{sequence::delay(tanh(x), init, shift),
                    {{x, random_sequences({3}, {5, 3, 1, 3}, dtype, 9)}},
                    {x, init}};
    });
  }
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Minibatch 2 continues sequence 0 of minibatch 1 (truncated BPTT: its mask starts Valid).
Value continuing(const Sequences& seqs, const std::vector<bool>& begins) {
  Value v = Value::create_sequences<double>({1}, seqs);
  NDMask mask = *v.mask();
  for (size_t b = 0; b < begins.size(); ++b)
    if (!begins[b]) mask.set(b, 0, MaskKind::Valid);
  return Value(v.data(), true, mask);
}

TEST(RecurrenceOps, ContinuedSequenceReadsThePreviousMinibatch) {
  Variable x = sequence::input_variable({1}, f64("x"));
  Parameter init = parameter(NDArrayView::from_vector<double>({1}, {-1}), "init");
  for (size_t k : {1, 2, 3}) {
    SCOPED_TRACE(k);
    Function f = sequence::past_value(x, init, k);
    Executor e({f.output()}, {init});
    e.forward({{x, Value::create_sequences<double>({1}, {{1, 2, 3}, {4, 5}})}}, true);
    e.forward({{x, continuing({{6, 7}, {8}}, {false, true})}}, true);
    // Sequence 0 is 1 2 3 | 6 7: its first steps here read the last ones there.
    const std::vector<double> seq0 = k == 1   ? std::vector<double>{3, 6}
                                     : k == 2 ? std::vector<double>{2, 3}
                                              : std::vector<double>{1, 2};
    EXPECT_EQ(e.output_value(f.output()).as_sequences<double>(), (Sequences{seq0, {-1}}));
    // The initial state's gradient counts only the boundary step of sequence 1.
    e.backward(f.output());
    EXPECT_EQ(e.parameter_gradient(init).to_vector<double>(), std::vector<double>{1});
  }
  // A continued sequence that began one step earlier reads the initial state before that.
  Function f = sequence::past_value(x, init, 2);
  Executor e({f.output()}, {init});
  e.forward({{x, Value::create_sequences<double>({1}, {{1}})}}, true);
  e.forward({{x, continuing({{2, 3}}, {false})}}, true);
  EXPECT_EQ(e.output_value(f.output()).as_sequences<double>(), (Sequences{{-1, 1}}));
}

TEST(RecurrenceOps, ContinuationOfAMissingSequenceIsAnError) {
  Variable x = sequence::input_variable({1}, f64("x"));
  try {
    sequence::past_value(x).eval_one({{x, continuing({{1, 2}, {3}}, {true, false})}});
    ADD_FAILURE() << "expected StateError";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("PastValue: sequence 1 continues one of the previous "
                                         "minibatch, which had no sequence 1"),
              std::string::npos)
        << e.what();
  }
  // future_value never reads before a sequence's start.
  EXPECT_EQ(sequence::future_value(x)
                .eval_one({{x, continuing({{1, 2}, {3}}, {true, false})}})
                .as_sequences<double>(),
            (Sequences{{2, 0}, {0}}));
}

}  // namespace
}  // namespace loom
