#include "loom/ops/dynamic_axes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loom/ops/gradient_check.h"
#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// Two samples [3, 2]: steps (0, 1), (2, 3), (4, 5) and (6, 7), (8, 9), (10, 11).
Value two_samples_of_three_steps() {
  std::vector<double> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
  return Value::create_batch<double>({3, 2}, v);
}

TEST(ToSequence, EachSampleIsASequenceOfItsLeadingAxis) {
  const Variable x = input_variable({3, 2}, f64("x"));
  const Function f = to_sequence(x, kToSequenceAxisPrefix, "s");
  EXPECT_EQ(f.op_name(), "ToSequence");
  EXPECT_EQ(f.output().shape(), NDShape({2}));
  ASSERT_EQ(f.output().dynamic_axes().size(), 2u);
  EXPECT_EQ(f.output().dynamic_axes()[0], Axis::default_batch_axis());
  EXPECT_EQ(f.output().dynamic_axes()[1].name(), "toSequence_" + x.uid());
  // A second to_sequence of x is on the same axis (CNTK names it from x's uid): they meet.
  const Value out = plus(f, to_sequence(x)).eval_one({{x, two_samples_of_three_steps()}});
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{3, 3}));
  std::vector<double> want(12);
  for (size_t i = 0; i < want.size(); ++i) want[i] = 2.0 * double(i);
  EXPECT_EQ(values(out), want);
  // Another prefix, another axis.
  EXPECT_EQ(to_sequence(x, "mine_").output().dynamic_axes()[1].name(), "mine_" + x.uid());
}

TEST(ToSequence, LengthsTruncateAndMayBeZero) {
  const Variable x = input_variable({3, 2}, f64("x")), n = input_variable({1}, f64("n"));
  const Function f = to_sequence(x, n);
  const Value out = f.eval_one(
      {{x, two_samples_of_three_steps()}, {n, Value::create_batch<double>({1}, {2.9, 0})}});
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{2, 0}));
  // Padded to 2 steps: sequence 0 holds steps 0 and 1, sequence 1 nothing.
  EXPECT_EQ(values(out), (std::vector<double>{0, 1, 2, 3, 0, 0, 0, 0}));
  // The steps past a sequence's length get gradient 0.
  const ValueMap g = sequence::reduce_sum(f).grad(
      {{x, two_samples_of_three_steps()}, {n, Value::create_batch<double>({1}, {2, 3})}}, {x});
  EXPECT_EQ(values(g.at(x)), (std::vector<double>{1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1}));
  for (double bad : {4.0, -1.0, std::numeric_limits<double>::quiet_NaN()})
    expect_shape_error(
        [&] {
          f.eval_one(
              {{x, two_samples_of_three_steps()}, {n, Value::create_batch<double>({1}, {1, bad})}});
        },
        {"ToSequence", "sequence_lengths of sample 1",
         "from 0 to the input's leading static axis (3)"});
}

TEST(ToSequence, GradientsAndRecurrenceOverTheNewAxis) {
  const Variable x = input_variable({3, 2}, f64("x")), n = input_variable({}, f64("n"));
  const ValueMap args{{x, random_batch({3, 2}, 4, kF64, 5)},
                      {n, Value::create_batch<double>({}, {3, 1, 0, 2})}};
  const Function s = to_sequence(x, n);
  expect_gradients_match(s, args, {x});
  // past_value runs along the new axis, one sequence at a time.
  expect_gradients_match(element_times(s, sequence::past_value(tanh(s))), args, {x});
}

TEST(ToSequence, ErrorsNameTheOpAndTheInput) {
  expect_shape_error(
      [] {
        to_sequence(sequence::input_variable({3, 2}, {.name = "q"}));
      },
      {"ToSequence", "q: ", "is a sequence"});
  expect_shape_error(
      [] {
        to_sequence(parameter(NDShape{3, 2}));
      },
      {"ToSequence", "no dynamic axes"});
  expect_shape_error([] { to_sequence(input_variable({}, {.name = "scalar"})); },
                     {"ToSequence", "no static axis"});
  const Variable x = input_variable({3, 2});
  expect_shape_error([&] { to_sequence(x, input_variable({2}, {.name = "n"})); },
                     {"ToSequence", "sequence_lengths", "one number per sample"});
  expect_shape_error([&] { to_sequence(x, sequence::input_variable({1}, {.name = "n"})); },
                     {"ToSequence", "sequence_lengths", "dynamic axes"});
}

TEST(ToSequenceLike, TakesTheLengthsAndAxesOfItsSecondInput) {
  const Variable x = input_variable({3, 2}, f64("x"));
  const Variable like = sequence::input_variable({2}, f64("like"));
  const Function f = to_sequence_like(x, like);
  EXPECT_EQ(f.output().dynamic_axes(), like.dynamic_axes());
  const Value lengths_3_1 = Value::create_sequences<double>({2}, {{1, 1, 1, 1, 1, 1}, {1, 1}});
  const Value out =
      plus(f, like).eval_one({{x, two_samples_of_three_steps()}, {like, lengths_3_1}});
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{3, 1}));
  EXPECT_EQ(values(out), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}));
  const ValueMap args{{x, two_samples_of_three_steps()}, {like, lengths_3_1}};
  expect_gradients_match(element_times(f, like), args, {x, like});
  // The sequences of sequence.unpack come back as they were.
  const Variable s = sequence::input_variable({2}, f64("s"));
  const Function round_trip = to_sequence_like(sequence::unpack(s, 0, true), s);
  const Value seqs = random_sequences({2}, kLengths, kF64, 8);
  const Value back = round_trip.eval_one({{s, seqs}});
  EXPECT_EQ(back.sequence_lengths(), kLengths);
  EXPECT_EQ(values(back), values(seqs));
  // Errors: not a sequence; too few steps; another sample count.
  expect_shape_error([&] { to_sequence_like(x, input_variable({2}, {.name = "b"})); },
                     {"ToSequenceLike", "b: ", "not a sequence"});
  expect_shape_error(
      [&] {
        f.eval_one(
            {{x, two_samples_of_three_steps()},
             {like, Value::create_sequences<double>({2}, {{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1}})}});
      },
      {"ToSequenceLike", "4 steps", "leading static axis (3)"});
  expect_shape_error(
      [&] {
        f.eval_one({{x, two_samples_of_three_steps()},
                    {like, Value::create_sequences<double>({2}, {{1, 1}})}});
      },
      {"ToSequenceLike", "2 samples", "1 sequences"});
}

TEST(UnpackBatch, TheBatchBecomesALeadingStaticAxis) {
  // CNTK's docstring: unpack_batch of a batch of three [2, 2] samples is the [3, 2, 2] array.
  const Variable x = input_variable({2, 2}, f64("x"));
  const Function u = unpack_batch(x);
  EXPECT_TRUE(u.output().dynamic_axes().empty());
  EXPECT_EQ(u.output().type_string(), "Tensor[-3,2,2]");
  std::vector<double> data(12);
  for (size_t i = 0; i < data.size(); ++i) data[i] = double(i);
  const ValueMap args{{x, Value::create_batch<double>({2, 2}, data)}};
  const Value out = u.eval_one(args);  // one sample: the output has no batch axis
  EXPECT_EQ(out.data().shape(), NDShape({1, 3, 2, 2}));
  EXPECT_EQ(values(out), data);
  // to_batch undoes it, and a reduction over the new static axis is one over the batch.
  const Value back = to_batch(u).eval_one(args);
  EXPECT_EQ(back.data().shape(), NDShape({3, 2, 2}));
  EXPECT_EQ(values(back), data);
  EXPECT_EQ(values(reduce_sum(u, Axis(0), false).eval_one(args)),
            values(reduce_sum(x, Axis::default_batch_axis()).eval_one(args)));
  expect_gradients_match(element_times(to_batch(tanh(u)), x), args, {x});
  expect_shape_error([] { unpack_batch(sequence::input_variable({2}, {.name = "q"})); },
                     {"UnpackBatch", "q: ", "is a sequence"});
  expect_shape_error([] { unpack_batch(parameter(NDShape{2})); },
                     {"UnpackBatch", "no dynamic axes"});
}

TEST(ToBatch, TheLeadingStaticAxisBecomesTheBatch) {
  // CNTK's docstring: to_batch of a [3, 2, 2] constant has samples of shape (2, 2).
  std::vector<double> data(12);
  for (size_t i = 0; i < data.size(); ++i) data[i] = double(i);
  const Constant c = constant(NDArrayView::from_vector<double>({3, 2, 2}, data));
  const Function b = to_batch(c);
  EXPECT_EQ(b.output().shape(), NDShape({2, 2}));
  EXPECT_EQ(b.output().dynamic_axes(), default_batch_axes());
  const Value out = b.eval_one({});
  EXPECT_EQ(out.data().shape(), NDShape({3, 2, 2}));
  EXPECT_EQ(values(out), data);
  // It meets a batch input of as many samples; another count is an error at evaluation.
  const Variable x = input_variable({2, 2}, f64("x"));
  EXPECT_EQ(values(plus(b, x).eval_one({{x, Value::create_batch<double>({2, 2}, data)}})),
            values(element_times(constant(2.0, kF64), b).eval_one({})));
  expect_shape_error(
      [&] {
        plus(b, x).eval_one({{x, random_batch({2, 2}, 2, kF64, 1)}});
      },
      {"Plus", "different numbers of samples"});
  expect_shape_error([] { to_batch(input_variable({2}, {.name = "x"})); },
                     {"ToBatch", "x: ", "has dynamic axes"});
  expect_shape_error([] { to_batch(constant(1.0)); }, {"ToBatch", "scalar"});
}

TEST(ReconcileDynamicAxes, SameLengthsOnAxesDeclaredApart) {
  const Variable x = sequence::input_variable({2}, Axis::dynamic_axis_named("m"), f64("x"));
  const Variable y = sequence::input_variable({2}, Axis::dynamic_axis_named("n"), f64("y"));
  const Function r = reconcile_dynamic_axes(x, y);
  EXPECT_EQ(r.op_name(), "ReconcileDynamicAxis");
  EXPECT_EQ(r.output().dynamic_axes(), y.dynamic_axes());
  const ValueMap args{{x, random_sequences({2}, kLengths, kF64, 3)},
                      {y, random_sequences({2}, kLengths, kF64, 4)}};
  std::vector<double> want = values(args.at(x));
  const std::vector<double> yv = values(args.at(y));
  for (size_t i = 0; i < want.size(); ++i) want[i] += yv[i];
  EXPECT_EQ(values(plus(r, y).eval_one(args)), want);
  expect_gradients_match(element_times(r, y), args, {x, y});
  // Other lengths at evaluation: an error naming both operands.
  expect_shape_error(
      [&] {
        r.eval_one({{x, random_sequences({2}, {3, 2, 2}, kF64, 3)}, {y, args.at(y)}});
      },
      {"ReconcileDynamicAxis", "x's sequences differ in length from dynamic_axes_as's"});
  expect_shape_error([&] { reconcile_dynamic_axes(x, parameter(NDShape{2})); },
                     {"ReconcileDynamicAxis", "dynamic_axes_as", "no dynamic axes"});
}

TEST(ReconcileDynamicAxes, BroadcastsABatchAlongSequencesAndATensorEverywhere) {
  const Variable s = sequence::input_variable({2}, f64("s"));
  const Variable b = input_variable({2}, f64("b"));
  const ValueMap args{{s, Value::create_sequences<double>({2}, {{1, 1, 1, 1, 1, 1}, {1, 1}})},
                      {b, Value::create_batch<double>({2}, {10, 20, 30, 40})}};
  const Value along = reconcile_dynamic_axes(b, s).eval_one(args);
  EXPECT_EQ(along.sequence_lengths(), (std::vector<size_t>{3, 1}));
  EXPECT_EQ(values(along), (std::vector<double>{10, 20, 10, 20, 10, 20, 30, 40, 0, 0, 0, 0}));
  const Parameter p(parameter(NDArrayView::from_vector<double>({2}, {5, 6}), "p"));
  const Value everywhere = reconcile_dynamic_axes(p, s).eval_one(args);
  EXPECT_EQ(values(everywhere), (std::vector<double>{5, 6, 5, 6, 5, 6, 5, 6, 0, 0, 0, 0}));
  expect_gradients_match(element_times(reconcile_dynamic_axes(element_times(b, p), s), s), args,
                         {b, p});
  expect_shape_error(
      [&] {
        reconcile_dynamic_axes(b, s).eval_one(
            {{s, args.at(s)}, {b, Value::create_batch<double>({2}, {1, 2, 3, 4, 5, 6})}});
      },
      {"ReconcileDynamicAxis", "x has 3 samples but dynamic_axes_as has 2 sequences"});
}

TEST(DynamicAxesOps, SurviveSaveAndLoad) {
  const Variable x = input_variable({3, 2}, f64("x")), n = input_variable({}, f64("n"));
  const Function f =
      combine({sequence::reduce_sum(to_sequence(x, n)), unpack_batch(x),
               reconcile_dynamic_axes(to_batch(constant(NDArrayView::from_vector<double>(
                                          {4, 2}, std::vector<double>(8, 1.5)))),
                                      x)});
  const Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  ASSERT_EQ(loaded.outputs().size(), 3u);
  const ValueMap args{{x, random_batch({3, 2}, 4, kF64, 5)},
                      {n, Value::create_batch<double>({}, {3, 1, 0, 2})}};
  ValueMap loaded_args;
  for (const Variable& a : loaded.arguments())
    loaded_args.emplace(a, args.at(a.name() == "x" ? x : n));
  const ValueMap want = f.eval(args), got = loaded.eval(loaded_args);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(values(got.at(loaded.outputs()[i])), values(want.at(f.outputs()[i]))) << i;
}

}  // namespace
}  // namespace loom
