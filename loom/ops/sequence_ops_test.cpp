#include "loom/ops/sequence_ops.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/graph/executor.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/linear.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/reduction.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

struct SequenceCase {
  const char* op_name;
  Function (*fn)(const Variable&, const std::string&);
  std::vector<double> expected;  // for kSequences below
};

// Lengths {3, 1, 2}: packed by decreasing length, so the packed row order (0, 2, 1 at step 0)
// differs from the minibatch order the outputs must follow.
const std::vector<std::vector<double>> kSequences{{1, 2, 3, 4, 5, 6}, {7, 8}, {9, 10, 11, 12}};

const SequenceCase kCases[] = {
    {"SequenceFirst", sequence::first, {1, 2, 7, 8, 9, 10}},
    {"SequenceLast", sequence::last, {5, 6, 7, 8, 11, 12}},
    {"SequenceReduceSum", sequence::reduce_sum, {9, 12, 7, 8, 20, 22}},
    {"SequenceReduceMax", sequence::reduce_max, {5, 6, 7, 8, 11, 12}},
};

TEST(SequenceOps, ShapeInference) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({2, 3}, f64());
    Function f = c.fn(s, "out");
    EXPECT_EQ(f.op_name(), c.op_name);
    EXPECT_EQ(f.name(), "out");
    EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
    EXPECT_EQ(f.output().dtype(), kF64);
    EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
    EXPECT_EQ(f.output().type_string(), "Tensor[2,3]");
  }
}

TEST(SequenceOps, InputWithoutSequenceAxisIsAShapeError) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    for (const Variable& v : {input_variable({2}, {.name = "x"}), Variable(parameter({2}))}) {
      try {
        c.fn(v, "");
        ADD_FAILURE() << "expected ShapeError";
      } catch (const ShapeError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(c.op_name), std::string::npos) << msg;
        EXPECT_NE(msg.find("Tensor[2]"), std::string::npos) << msg;
        EXPECT_NE(msg.find("no sequence axis"), std::string::npos) << msg;
      }
    }
  }
}

TEST(SequenceOps, ForwardFollowsTheMinibatchOrder) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({2}, f64());
    Value out = c.fn(s, "").eval_one({{s, Value::create_sequences<double>({2}, kSequences)}});
    EXPECT_FALSE(out.is_sequence());
    EXPECT_EQ(out.data().shape(), (NDShape{3, 2}));
    EXPECT_EQ(out.data().to_vector<double>(), c.expected);
    Variable s32 = sequence::input_variable({2});
    std::vector<std::vector<float>> seqs32;
    for (auto& seq : kSequences) seqs32.emplace_back(seq.begin(), seq.end());
    Value out32 = c.fn(s32, "").eval_one({{s32, Value::create_sequences<float>({2}, seqs32)}});
    EXPECT_EQ(out32.data().dtype(), kF32);
    EXPECT_EQ(out32.data().to_vector<double>(), c.expected);
  }
}

TEST(SequenceOps, EmptySequenceGivesZeros) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({2}, f64());
    Value out = c.fn(s, "").eval_one(
        {{s, Value::create_sequences<double>({2}, {{1, 2, 3, 4}, {}, {5, 6}})}});
    const std::vector<double> v = out.data().to_vector<double>();
    EXPECT_EQ(v[2], 0);
    EXPECT_EQ(v[3], 0);
    EXPECT_EQ(v[4], 5);
  }
}

TEST(SequenceOps, Gradients) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({2, 3}, f64("s"));
    ValueMap args{{s, random_sequences({2, 3}, kLengths, kF64, 1)}};
    expect_gradients_match(c.fn(s, ""), args, {s});
    // A parameter broadcast over the packed rows before the op.
    Parameter p = parameter(random_array({3}, kF64, 2), "p");
    expect_gradients_match(c.fn(element_times(tanh(s), p), ""), args, {s, p});
    // The output lives on the batch axis: it combines with a batch input of one sample per
    // sequence.
    Variable y = input_variable({2, 3}, f64("y"));
    args.emplace(y, random_batch({2, 3}, kLengths.size(), kF64, 3));
    expect_gradients_match(element_times(c.fn(s, ""), y), args, {s, y});
  }
}

TEST(SequenceOps, SoftmaxNormalizesEachSequenceAlongItsSteps) {
  Variable s = sequence::input_variable({2}, f64("s"));
  const Value v = Value::create_sequences<double>({2}, kSequences);
  const std::vector<std::vector<double>> got =
      sequence::softmax(s).eval_one({{s, v}}).as_sequences<double>();
  ASSERT_EQ(got.size(), kSequences.size());
  for (size_t b = 0; b < kSequences.size(); ++b) {
    const std::vector<double>& x = kSequences[b];
    const size_t steps = x.size() / 2;
    for (size_t k = 0; k < 2; ++k) {  // each element over the steps
      double sum = 0;
      for (size_t t = 0; t < steps; ++t) sum += std::exp(x[t * 2 + k]);
      for (size_t t = 0; t < steps; ++t)
        EXPECT_NEAR(got[b][t * 2 + k], std::exp(x[t * 2 + k]) / sum, 1e-12) << b << " " << t;
    }
  }
  ValueMap args{{s, random_sequences({2}, kLengths, kF64, 7)}};
  Variable y = sequence::input_variable({2}, f64("y"));
  args.emplace(y, random_sequences({2}, kLengths, kF64, 8));
  expect_gradients_match(element_times(sequence::softmax(s), y), args, {s});
}

TEST(SequenceOps, InputUsedTwiceAccumulatesGradients) {
  Variable s = sequence::input_variable({2}, f64("s"));
  ValueMap args{{s, random_sequences({2}, kLengths, kF64, 4)}};
  for (const SequenceCase& a : kCases) {
    for (const SequenceCase& b : kCases) {
      SCOPED_TRACE(std::string(a.op_name) + " and " + b.op_name);
      expect_gradients_match(element_times(a.fn(s, ""), b.fn(s, "")), args, {s});
    }
    // And with an elementwise use of s on the sequence axis.
    expect_gradients_match(a.fn(element_times(s, s), ""), args, {s});
  }
}

TEST(SequenceOps, PackingIsInvisible) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({2, 2}, f64());
    expect_sequences_match_individually(c.fn(tanh(s), ""), s,
                                        random_sequences({2, 2}, {2, 4, 1, 3}, kF64, 5));
  }
}

TEST(SequenceOps, Float32MatchesFloat64) {
  for (const SequenceCase& c : kCases) {
    SCOPED_TRACE(c.op_name);
    expect_float32_matches_float64([&](DataType dtype) {
      Variable s = sequence::input_variable({2, 3}, {.dtype = dtype});
      return OpCase{c.fn(s, ""), {{s, random_sequences({2, 3}, kLengths, dtype, 6)}}, {s}};
    });
  }
}

// ---- the ops with new axes, broadcast_as, is_first/is_last --------------------------------------

// Scalar sequences of lengths {4, 1, 2, 3}, step t of sequence b holding 10 b + t.
const std::vector<std::vector<double>> kSteps{{0, 1, 2, 3}, {10}, {20, 21}, {30, 31, 32}};

template <typename T>
Value steps_value(const std::vector<std::vector<double>>& seqs = kSteps) {
  std::vector<std::vector<T>> v;
  for (const auto& s : seqs) v.emplace_back(s.begin(), s.end());
  return Value::create_sequences<T>(NDShape(), v);
}

std::vector<std::vector<double>> eval_sequences(const Function& f, const ValueMap& args) {
  Value out = f.eval_one(args);
  EXPECT_TRUE(out.is_sequence());
  return out.as_sequences<double>();
}

using Sequences = std::vector<std::vector<double>>;

TEST(SequenceSlice, PythonStyleRangesPerSequence) {
  struct Case {
    int begin, end;
    const char* axis;  // derived sequence axis
    Sequences expected;
  };
  const Case cases[] = {
      {1, 0, "defaultDynamicAxis_times_1_minus_1", {{1, 2, 3}, {}, {21}, {31, 32}}},
      {0, -1, "defaultDynamicAxis_times_1_minus_1", {{0, 1, 2}, {}, {20}, {30, 31}}},
      {-2, 0, "defaultDynamicAxis_fixedSliceOf_2", {{2, 3}, {10}, {20, 21}, {31, 32}}},
      {1, 3, "defaultDynamicAxis_fixedSliceOf_2", {{1, 2}, {}, {21}, {31, 32}}},
      {-3, -1, "defaultDynamicAxis_fixedSliceOf_2", {{1, 2}, {}, {20}, {30, 31}}},
      {0, 3, "defaultDynamicAxis_fixedSliceOf_3", {{0, 1, 2}, {10}, {20, 21}, {30, 31, 32}}},
      {2, -1, "defaultDynamicAxis_times_1_minus_3", {{2}, {}, {}, {}}},
      {0, 0, "defaultDynamicAxis", kSteps},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.begin) + ":" + std::to_string(c.end));
    for (DataType dtype : {kF64, kF32}) {
      Variable s = sequence::input_variable(NDShape(), {.dtype = dtype});
      Function f = sequence::slice(s, c.begin, c.end, "sl");
      EXPECT_EQ(f.op_name(), "SequenceSlice");
      EXPECT_EQ(f.output().dynamic_axes()[1].name(), c.axis);
      EXPECT_EQ(f.output().dtype(), dtype);
      const Value in = dtype == kF64 ? steps_value<double>() : steps_value<float>();
      EXPECT_EQ(eval_sequences(f, {{s, in}}), c.expected);
    }
  }
}

TEST(SequenceSlice, OneStepRemovesTheSequenceAxis) {
  Variable s = sequence::input_variable(NDShape(), f64());
  // A sequence without that step gives 0, as first and last do for an empty sequence.
  for (auto [begin, end, expected] : {std::tuple{1, 2, std::vector<double>{1, 0, 21, 31}},
                                      std::tuple{-2, -1, std::vector<double>{2, 0, 20, 31}},
                                      std::tuple{0, 1, std::vector<double>{0, 10, 20, 30}},
                                      std::tuple{-1, 0, std::vector<double>{3, 10, 21, 32}}}) {
    Function f = sequence::slice(s, begin, end);
    EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
    EXPECT_EQ(f.output().type_string(), "Tensor[]");
    Value out = f.eval_one({{s, steps_value<double>()}});
    EXPECT_FALSE(out.is_sequence());
    EXPECT_EQ(values(out), expected);
  }
}

TEST(SequenceSlice, RangeEmptyForEveryLengthIsAnArgumentError) {
  Variable s = sequence::input_variable({2}, f64("s"));
  for (auto [begin, end] :
       {std::pair{2, 2}, std::pair{3, 1}, std::pair{-1, -2}, std::pair{-2, -2}}) {
    try {
      sequence::slice(s, begin, end);
      ADD_FAILURE() << "expected ArgumentError";
    } catch (const ArgumentError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("s: Sequence[Tensor[2]]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("is empty for every sequence"), std::string::npos) << msg;
    }
  }
  expect_shape_error([] { sequence::slice(input_variable({2}, {.name = "x"}), 1, 0); },
                     {"SequenceSlice", "Tensor[2]", "no sequence axis"});
}

// slice(x, 1, 0) and slice(x, 0, -1) are on one derived axis: x[t] - x[t-1].
TEST(SequenceSlice, SlicesOnOneDerivedAxisCombine) {
  Variable s = sequence::input_variable(NDShape(), f64());
  Function d = minus(sequence::slice(s, 1, 0), sequence::slice(s, 0, -1));
  EXPECT_EQ(eval_sequences(d, {{s, steps_value<double>()}}),
            (Sequences{{1, 1, 1}, {}, {1}, {1, 1}}));
  // Different derived axes do not.
  expect_shape_error([&] { plus(sequence::slice(s, 1, 0), sequence::slice(s, 1, 3)); },
                     {"different dynamic axes"});
}

TEST(SequenceSlice, Gradients) {
  Variable s = sequence::input_variable({2, 3}, f64("s"));
  ValueMap args{{s, random_sequences({2, 3}, {3, 1, 2, 4}, kF64, 11)}};
  for (auto [begin, end] : {std::pair{1, 0}, std::pair{0, -1}, std::pair{-2, 0}, std::pair{1, 3},
                            std::pair{1, 2}, std::pair{-2, -1}, std::pair{0, 0}}) {
    SCOPED_TRACE(std::to_string(begin) + ":" + std::to_string(end));
    expect_gradients_match(sequence::slice(s, begin, end), args, {s});
    expect_gradients_match(sequence::slice(element_times(s, s), begin, end), args, {s});
  }
  expect_gradients_match(minus(sequence::slice(s, 1, 0), sequence::slice(s, 0, -1)), args, {s});
}

TEST(SequenceSlice, PackingIsInvisibleAndFloat32MatchesFloat64) {
  for (auto [begin, end] : {std::pair{1, 0}, std::pair{-2, 0}, std::pair{1, 2}}) {
    SCOPED_TRACE(std::to_string(begin) + ":" + std::to_string(end));
    Variable s = sequence::input_variable({2}, f64());
    expect_sequences_match_individually(sequence::slice(tanh(s), begin, end), s,
                                        random_sequences({2}, {2, 4, 1, 3}, kF64, 12));
    expect_float32_matches_float64([&](DataType dtype) {
      Variable x = sequence::input_variable({2, 3}, {.dtype = dtype});
      return OpCase{sequence::slice(x, begin, end),
                    {{x, random_sequences({2, 3}, {3, 1, 2, 4}, dtype, 13)}},
                    {x}};
    });
  }
}

TEST(SequenceIsFirstIsLast, MarkEachSequencesEnds) {
  for (DataType dtype : {kF64, kF32}) {
    Variable s = sequence::input_variable({2}, {.dtype = dtype});
    const Value in = random_sequences({2}, {4, 1, 2, 3}, dtype, 14);
    Function first = sequence::is_first(s, "f"), last = sequence::is_last(s);
    EXPECT_EQ(first.op_name(), "SequenceIsFirst");
    EXPECT_EQ(first.output().type_string(), "Sequence[Tensor[]]");
    EXPECT_EQ(first.output().dtype(), dtype);
    EXPECT_EQ(eval_sequences(first, {{s, in}}), (Sequences{{1, 0, 0, 0}, {1}, {1, 0}, {1, 0, 0}}));
    EXPECT_EQ(eval_sequences(last, {{s, in}}), (Sequences{{0, 0, 0, 1}, {1}, {0, 1}, {0, 0, 1}}));
  }
  // An empty sequence has no ends to mark, nor steps to broadcast to.
  Variable s = sequence::input_variable(NDShape(), f64());
  const Value with_empty = steps_value<double>({{1, 2}, {}, {3}});
  EXPECT_EQ(eval_sequences(sequence::is_last(s), {{s, with_empty}}), (Sequences{{0, 1}, {}, {1}}));
  EXPECT_EQ(eval_sequences(sequence::broadcast_as(2, s), {{s, with_empty}}),
            (Sequences{{2, 2}, {}, {2}}));
}

// The flags pass no gradient; the graph around them does.
TEST(SequenceIsFirstIsLast, GradientsFlowAroundThem) {
  Variable s = sequence::input_variable({2, 3}, f64("s"));
  ValueMap args{{s, random_sequences({2, 3}, {3, 1, 2}, kF64, 15)}};
  expect_gradients_match(element_times(s, sequence::is_first(s)), args, {s});
  expect_gradients_match(element_times(tanh(s), sequence::is_last(tanh(s))), args, {s});
}

TEST(SequenceBroadcastAs, EachStepGetsItsSequencesSample) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Variable y = input_variable({2}, f64("y"));
  const Value seqs =
      Value::create_sequences<double>({2}, {{1, 1, 1, 1, 1, 1}, {1, 1}, {1, 1, 1, 1}});
  const Value batch = Value::create_batch<double>({2}, {1, 2, 3, 4, 5, 6});
  Function f = sequence::broadcast_as(y, s, "b");
  EXPECT_EQ(f.op_name(), "SequenceBroadcastAs");
  EXPECT_EQ(f.output().type_string(), "Sequence[Tensor[2]]");
  EXPECT_EQ(eval_sequences(f, {{s, seqs}, {y, batch}}),
            (Sequences{{1, 2, 1, 2, 1, 2}, {3, 4}, {5, 6, 5, 6}}));
  // A tensor without dynamic axes, and a scalar of ref's type.
  Function p = sequence::broadcast_as(constant(NDArrayView::from_vector<double>({2}, {7, 8})), s);
  EXPECT_EQ(eval_sequences(p, {{s, seqs}}), (Sequences{{7, 8, 7, 8, 7, 8}, {7, 8}, {7, 8, 7, 8}}));
  Function one = sequence::broadcast_as(1, s);
  EXPECT_EQ(one.output().type_string(), "Sequence[Tensor[]]");
  EXPECT_EQ(one.output().dtype(), kF64);
  EXPECT_EQ(eval_sequences(one, {{s, seqs}}), (Sequences{{1, 1, 1}, {1}, {1, 1}}));
  // More samples than ref has sequences.
  expect_shape_error(
      [&] {
        f.eval_one({{s, seqs}, {y, Value::create_batch<double>({2}, {1, 2, 3, 4})}});
      },
      {"SequenceBroadcastAs", "op has 2 samples but ref has 3 sequences"});
}

TEST(SequenceBroadcastAs, OpOnAnotherSequenceAxisIsAShapeError) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Variable m = sequence::input_variable({2}, Axis::dynamic_axis_named("m"), f64("m"));
  expect_shape_error(
      [&] { sequence::broadcast_as(m, s); },
      {"SequenceBroadcastAs", "m: SequenceOver[m][Tensor[2]]", "s: Sequence[Tensor[2]]"});
  expect_shape_error([&] { sequence::broadcast_as(s, input_variable({2}, {.name = "y"})); },
                     {"SequenceBroadcastAs", "ref Tensor[2] 'y'", "no sequence axis"});
  // On ref's own axis it passes the sequence through.
  const Value v = random_sequences({2}, {2, 1}, kF64, 16);
  EXPECT_EQ(values(sequence::broadcast_as(s, s).eval_one({{s, v}})), values(v));
}

TEST(SequenceBroadcastAs, Gradients) {
  Variable s = sequence::input_variable({2, 3}, f64("s"));
  Variable y = input_variable({2, 3}, f64("y"));
  Parameter p = parameter(random_array({3}, kF64, 17), "p");
  ValueMap args{{s, random_sequences({2, 3}, {3, 1, 2}, kF64, 18)},
                {y, random_batch({2, 3}, 3, kF64, 19)}};
  expect_gradients_match(element_times(sequence::broadcast_as(y, s), s), args, {s, y});
  expect_gradients_match(element_times(sequence::broadcast_as(p, s), tanh(s)), args, {s, p});
  // The softmax pattern: each step against its sequence's sum.
  expect_gradients_match(
      element_divide(exp(s), sequence::broadcast_as(sequence::reduce_sum(exp(s)), s)), args, {s});
  expect_float32_matches_float64([](DataType dtype) {
    Variable x = sequence::input_variable({2, 3}, {.dtype = dtype});
    Variable b = input_variable({2, 3}, {.dtype = dtype});
    return OpCase{element_times(sequence::broadcast_as(b, x), x),
                  {{x, random_sequences({2, 3}, {3, 1, 2}, dtype, 20)},
                   {b, random_batch({2, 3}, 3, dtype, 21)}},
                  {x, b}};
  });
}

// cond for kSteps' lengths {4, 1, 2, 3}.
const Sequences kCond{{1, 0, 1, 1}, {0}, {2, 1}, {0, 1, 0}};

TEST(SequenceWhere, IndicesWithCntksFractionalCountRule) {
  for (DataType dtype : {kF64, kF32}) {
    Variable c = sequence::input_variable(NDShape(), {.dtype = dtype, .name = "c"});
    Function w = sequence::where(c, "w");
    EXPECT_EQ(w.op_name(), "SequenceWhere");
    EXPECT_EQ(w.output().dynamic_axes()[1].name(), "whereNodeDynamicAxis_conditionVar_" + c.uid());
    EXPECT_EQ(w.output().dtype(), dtype);
    const Sequences cond{std::vector<double>(10, 1.2),  // CNTK's docstring example
                         {0, 1, 0, 2},
                         {0, 0},  // selects nothing: an empty sequence
                         {0.5, 0.5, 0.5, 0.5},
                         {3}};
    const Value in = dtype == kF64 ? steps_value<double>(cond) : steps_value<float>(cond);
    EXPECT_EQ(eval_sequences(w, {{c, in}}),
              (Sequences{{0, 0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9}, {1, 3, 3}, {}, {0, 2}, {0, 0, 0}}));
  }
}

TEST(SequenceWhere, ConditionMustBeAScalarSequence) {
  expect_shape_error([] { sequence::where(sequence::input_variable({2}, f64("c"))); },
                     {"SequenceWhere", "cond Sequence[Tensor[2]] 'c'", "one number per step"});
  expect_shape_error([] { sequence::where(input_variable(NDShape(), f64("c"))); },
                     {"SequenceWhere", "cond Tensor[] 'c'", "no sequence axis"});
}

TEST(SequenceGather, KeepsTheSelectedStepsOnWheresAxis) {
  for (DataType dtype : {kF64, kF32}) {
    Variable s = sequence::input_variable(NDShape(), {.dtype = dtype});
    Variable c = sequence::input_variable(NDShape(), {.dtype = dtype});
    const Value sv = dtype == kF64 ? steps_value<double>() : steps_value<float>();
    const Value cv = dtype == kF64 ? steps_value<double>(kCond) : steps_value<float>(kCond);
    Function g = sequence::gather(s, c, "g");
    EXPECT_EQ(g.op_name(), "SequenceGather");
    EXPECT_EQ(g.output().dynamic_axes(), sequence::where(c).output().dynamic_axes());
    // A 2 repeats its step.
    EXPECT_EQ(eval_sequences(g, {{s, sv}, {c, cv}}),
              (Sequences{{0, 2, 3}, {}, {20, 20, 21}, {31}}));
    // gather and where share the new axis: gathered values meet their indices.
    EXPECT_EQ(eval_sequences(minus(g, sequence::where(c)), {{s, sv}, {c, cv}}),
              (Sequences{{0, 0, 0}, {}, {20, 20, 20}, {30}}));
  }
}

TEST(SequenceGather, ConditionOnAnotherAxisIsAShapeError) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Variable m = sequence::input_variable(NDShape(), Axis::dynamic_axis_named("m"), f64("m"));
  expect_shape_error(
      [&] { sequence::gather(s, m); },
      {"SequenceGather", "cond m: SequenceOver[m][Tensor[]]", "s: Sequence[Tensor[2]]"});
  expect_shape_error([&] { sequence::gather(s, s); }, {"SequenceGather", "one number per step"});
}

TEST(SequenceGather, Gradients) {
  Variable s = sequence::input_variable({2, 3}, f64("s"));
  Variable c = sequence::input_variable(NDShape(), f64("c"));
  ValueMap args{{s, random_sequences({2, 3}, {4, 1, 2, 3}, kF64, 22)},
                {c, steps_value<double>(kCond)}};
  expect_gradients_match(sequence::gather(s, c), args, {s});
  expect_gradients_match(sequence::reduce_sum(sequence::gather(tanh(s), c)), args, {s});
  expect_float32_matches_float64([](DataType dtype) {
    Variable x = sequence::input_variable({2, 3}, {.dtype = dtype});
    Variable cond = sequence::input_variable(NDShape(), {.dtype = dtype});
    return OpCase{sequence::gather(x, cond),
                  {{x, random_sequences({2, 3}, {4, 1, 2, 3}, dtype, 23)},
                   {cond, dtype == kF64 ? steps_value<double>(kCond) : steps_value<float>(kCond)}},
                  {x}};
  });
}

TEST(SequenceGather, OnADerivedAxisAsNewSequenceAxisTypeinfoSays) {
  Variable s = sequence::input_variable(NDShape(), f64());
  const ValueMap args{{s, steps_value<double>()}};
  // All but the first step: one step shorter, on slice(s, 1, 0)'s axis.
  Function rest = sequence::gather(s, minus(constant(1.0, kF64), sequence::is_first(s)),
                                   std::pair{1, -1}, "rest");
  EXPECT_EQ(rest.output().dynamic_axes()[1].name(), "defaultDynamicAxis_times_1_minus_1");
  EXPECT_EQ(eval_sequences(minus(rest, sequence::slice(s, 1, 0)), args),
            (Sequences{{0, 0, 0}, {}, {0}, {0, 0}}));
  // (0, 1): one step per sequence, no sequence axis.
  Function last = sequence::gather(s, sequence::is_last(s), std::pair{0, 1});
  EXPECT_EQ(last.output().dynamic_axes(), default_batch_axes());
  EXPECT_EQ(values(last.eval_one(args)), (std::vector<double>{3, 10, 21, 32}));
  expect_shape_error(
      [&] {
        sequence::gather(s, s, std::pair{0, 1}).eval_one(args);
      },
      {"SequenceGather", "cond selects 6 steps of sequence 0", "promises exactly one"});
  EXPECT_THROW(sequence::gather(s, s, std::pair{0, 0}), ArgumentError);
  // Gradients through both.
  Variable x = sequence::input_variable({2, 3}, f64("x"));
  ValueMap xargs{{x, random_sequences({2, 3}, {4, 1, 2, 3}, kF64, 35)}};
  const Variable flag = sequence::is_last(x);
  expect_gradients_match(sequence::gather(tanh(x), flag, std::pair{0, 1}), xargs, {x});
  expect_gradients_match(
      sequence::gather(x, minus(constant(1.0, kF64), sequence::is_first(x)), std::pair{1, -1}),
      xargs, {x});
}

TEST(SequenceScatter, PutsStepsBackWhereCondSelects) {
  Variable s = sequence::input_variable(NDShape(), f64());
  Variable c = sequence::input_variable(NDShape(), f64());
  ValueMap args{{s, steps_value<double>()}, {c, steps_value<double>(kCond)}};
  Function back = sequence::scatter(sequence::gather(s, c), c, "sc");
  EXPECT_EQ(back.op_name(), "SequenceScatter");
  EXPECT_EQ(back.output().dynamic_axes(), c.dynamic_axes());
  // The repeated step adds up.
  EXPECT_EQ(eval_sequences(back, args), (Sequences{{0, 0, 2, 3}, {0}, {40, 21}, {0, 31, 0}}));
  // As many steps as cond selects, per sequence.
  Variable m = sequence::input_variable(NDShape(), Axis::dynamic_axis_named("m"), f64("m"));
  args.emplace(m, steps_value<double>({{1, 2}, {}, {3, 4, 5}, {6}}));
  expect_shape_error([&] { sequence::scatter(m, c).eval_one(args); },
                     {"SequenceScatter", "sequence 0 of the input has 2 steps but cond selects 3"});
}

TEST(SequenceScatter, Gradients) {
  Variable s = sequence::input_variable({2, 3}, f64("s"));
  Variable c = sequence::input_variable(NDShape(), f64("c"));
  ValueMap args{{s, random_sequences({2, 3}, {4, 1, 2, 3}, kF64, 24)},
                {c, steps_value<double>(kCond)}};
  expect_gradients_match(sequence::scatter(tanh(sequence::gather(s, c)), c), args, {s});
  expect_gradients_match(element_times(sequence::scatter(sequence::gather(s, c), c), s), args, {s});
  expect_float32_matches_float64([](DataType dtype) {
    Variable x = sequence::input_variable({2, 3}, {.dtype = dtype});
    Variable cond = sequence::input_variable(NDShape(), {.dtype = dtype});
    return OpCase{sequence::scatter(sequence::gather(x, cond), cond),
                  {{x, random_sequences({2, 3}, {4, 1, 2, 3}, dtype, 25)},
                   {cond, dtype == kF64 ? steps_value<double>(kCond) : steps_value<float>(kCond)}},
                  {x}};
  });
}

// ---- named sequence axes, binding checks, model files ---------------------------------------

TEST(SequenceAxes, InputsOnDifferentNamedAxesDoNotMeet) {
  Variable x = sequence::input_variable({2}, Axis::dynamic_axis_named("m"), f64("x"));
  Variable y = sequence::input_variable({2}, Axis::dynamic_axis_named("n"), f64("y"));
  Variable x2 = sequence::input_variable({2}, Axis::dynamic_axis_named("m"), f64("x2"));
  EXPECT_EQ(x.type_string(), "SequenceOver[m][Tensor[2]]");
  expect_shape_error([&] { plus(x, y); }, {"Plus", "x: SequenceOver[m][Tensor[2]]",
                                           "y: SequenceOver[n][Tensor[2]]", "dynamic axes"});
  // Same axis: equal lengths add up; different lengths are an error at binding.
  const Value a = random_sequences({2}, {2, 1}, kF64, 26),
              b = random_sequences({2}, {2, 1}, kF64, 27);
  EXPECT_EQ(plus(x, x2).eval_one({{x, a}, {x2, b}}).sequence_lengths(),
            (std::vector<size_t>{2, 1}));
  expect_shape_error(
      [&] {
        plus(x, x2).eval_one({{x, a}, {x2, random_sequences({2}, {2, 2}, kF64, 28)}});
      },
      {"sequence axis 'm'"});
  try {
    sequence::input_variable({2}, Axis::default_batch_axis());
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("other than the batch axis"), std::string::npos)
        << e.what();
  }
}

TEST(SequenceAxes, ValueFormChecks) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Variable x = input_variable({2}, f64("x"));
  const Value seqs = random_sequences({2}, {3, 1}, kF64, 29),
              batch = random_batch({2}, 3, kF64, 30);
  check_value_form(s, seqs);
  check_value_form(x, batch);
  check_value_form(x, random_sequences({2}, {1, 1, 1}, kF64, 31));  // CNTK's extra axis of 1
  expect_shape_error(
      [&] {
        check_value_form(x, random_sequences({2}, {1, 0}, kF64, 31));
      },
      {"x: Tensor[2]", "2 sequences of [1,0] steps"});
  expect_shape_error([&] { check_value_form(s, batch); }, {"s: Sequence[Tensor[2]]", "shape [3,2]",
                                                           "3 samples without a sequence axis"});
  expect_shape_error(
      [&] { check_value_form(x, seqs); },
      {"x: Tensor[2]", "shape [2,3,2]", "2 sequences of [3,1] steps", "no sequence axis"});
  EXPECT_FALSE(seqs.has_padded_form());  // the message's shape is computed, not padded
  Variable t = sequence::input_variable({2}, f64("t"));
  check_same_sequence_lengths(s, seqs, t, random_sequences({2}, {3, 1}, kF64, 32));
  expect_shape_error(
      [&] {
        check_same_sequence_lengths(s, seqs, t, random_sequences({2}, {3, 2}, kF64, 33));
      },
      {"s: Sequence[Tensor[2]]", "t: Sequence[Tensor[2]]", "'defaultDynamicAxis'",
       "lengths [3,1] and [3,2]"});
}

// Binding errors through the executor (needs the bind_input/bind_sequence_layouts patch).
TEST(SequenceAxes, BindingErrorsNameTheVariableShapesAndLengths) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Variable t = sequence::input_variable({2}, f64("t"));
  Variable x = input_variable({2}, f64("x"));
  expect_shape_error(
      [&] {
        tanh(s).eval_one({{s, random_batch({2}, 3, kF64, 40)}});
      },
      {"s: Sequence[Tensor[2]]", "shape [3,2]", "without a sequence axis"});
  expect_shape_error(
      [&] {
        tanh(x).eval_one({{x, random_sequences({2}, {3, 1}, kF64, 41)}});
      },
      {"x: Tensor[2]", "2 sequences of [3,1] steps"});
  expect_shape_error(
      [&] {
        plus(s, t).eval_one({{s, random_sequences({2}, {3, 1}, kF64, 42)},
                             {t, random_sequences({2}, {3, 2}, kF64, 43)}});
      },
      {"s: Sequence[Tensor[2]]", "t: Sequence[Tensor[2]]", "lengths [3,1] and [3,2]"});
}

TEST(SequenceOps, ModelWithEveryOpSurvivesSaveAndLoad) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Variable c = sequence::input_variable(NDShape(), f64("c"));
  Function g = element_times(sequence::gather(s, c), sequence::where(c));
  Function u = plus(sequence::scatter(g, c), sequence::broadcast_as(sequence::reduce_max(s), s));
  Function v = plus(element_times(u, sequence::is_first(s)), sequence::is_last(u));
  Function f =
      plus(sequence::reduce_sum(minus(sequence::slice(v, 1, 0), sequence::slice(v, 0, -1))),
           sequence::slice(v, -2, -1));
  Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  const Value sv = random_sequences({2}, {4, 1, 2, 3}, kF64, 34), cv = steps_value<double>(kCond);
  Variable ls = loaded.arguments().at(0), lc = loaded.arguments().at(1);
  if (ls.name() != "s") std::swap(ls, lc);
  const std::vector<double> expected = values(f.eval_one({{s, sv}, {c, cv}}));
  EXPECT_EQ(values(loaded.eval_one({{ls, sv}, {lc, cv}})), expected);
  EXPECT_NE(expected, std::vector<double>(expected.size(), 0.0));
}

// ---- unpack ------------------------------------------------------------------------------------

TEST(SequenceUnpack, PadsEachSequenceAndMasksItsSteps) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Function f = sequence::unpack(s, -1, false, "u");
  ASSERT_EQ(f.outputs().size(), 2u);
  const Variable data = f.outputs()[0], mask = f.outputs()[1];
  EXPECT_EQ(data.type_string(), "Tensor[-3,2]");
  EXPECT_EQ(mask.type_string(), "Tensor[-3]");
  EXPECT_EQ(data.dynamic_axes(), default_batch_axes());
  // Lengths {3, 1, 2}: T = 3.
  const ValueMap out = f.eval({{s, Value::create_sequences<double>({2}, kSequences)}});
  EXPECT_EQ(out.at(data).data().shape(), (NDShape{3, 3, 2}));
  EXPECT_EQ(values(out.at(data)),
            (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, -1, 9, 10, 11, 12, -1, -1}));
  EXPECT_EQ(out.at(mask).data().shape(), (NDShape{3, 3}));
  EXPECT_EQ(values(out.at(mask)), (std::vector<double>{1, 1, 1, 1, 0, 0, 1, 1, 0}));
  // float32, and the data alone.
  Variable s32 = sequence::input_variable({2});
  std::vector<std::vector<float>> seqs32;
  for (auto& seq : kSequences) seqs32.emplace_back(seq.begin(), seq.end());
  Function d32 = sequence::unpack(s32, 0.5, true);
  EXPECT_EQ(d32.outputs().size(), 1u);
  const Value v32 = d32.eval_one({{s32, Value::create_sequences<float>({2}, seqs32)}});
  EXPECT_EQ(v32.data().dtype(), kF32);
  EXPECT_EQ(values(v32), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0.5, 0.5, 0.5, 0.5, 9, 10, 11,
                                              12, 0.5, 0.5}));
}

TEST(SequenceUnpack, EmptySequencesArePaddingWithAZeroMask) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Function f = sequence::unpack(s, 7);
  const Variable data = f.outputs()[0], mask = f.outputs()[1];
  ValueMap out = f.eval({{s, Value::create_sequences<double>({2}, {{1, 2}, {}})}});
  EXPECT_EQ(values(out.at(data)), (std::vector<double>{1, 2, 7, 7}));
  EXPECT_EQ(values(out.at(mask)), (std::vector<double>{1, 0}));
  out = f.eval({{s, Value::create_sequences<double>({2}, {{}, {}})}});
  EXPECT_EQ(out.at(data).data().shape(), (NDShape{2, 0, 2}));
  EXPECT_EQ(out.at(mask).data().shape(), (NDShape{2, 0}));
}

TEST(SequenceUnpack, InputWithoutSequenceAxisIsAShapeError) {
  expect_shape_error([] { sequence::unpack(input_variable({2}, {.name = "x"}), 0); },
                     {"UnpackSequence", "x", "Tensor[2]", "no sequence axis"});
}

// times with a parameter and a reduction along the free axis: the data's T reaches both.
Function unpacked_model(const Variable& s, const Parameter& W) {
  Function y = times(sequence::unpack(s, 0.5, true), W);
  return reduce_sum(element_times(y, y), Axis(0));
}

TEST(SequenceUnpack, FreeDimensionPropagatesDownstream) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Parameter W = parameter(random_array({2, 3}, kF64, 1), "W");
  Function y = times(sequence::unpack(s, 0.5, true), W);
  EXPECT_EQ(y.output().shape(), (NDShape{NDShape::kFree, 3}));
  const Value sv = random_sequences({2}, {4, 1, 2}, kF64, 2);
  const Value yv = y.eval_one({{s, sv}});
  EXPECT_EQ(yv.data().shape(), (NDShape{3, 4, 3}));
  // Row t of sample b is step t of sequence b times W, or the padding [0.5, 0.5] times W.
  const auto seqs = sv.as_sequences<double>();
  const auto w = W.value().to_vector<double>();
  const auto got = values(yv);
  for (size_t b = 0; b < 3; ++b)
    for (size_t t = 0; t < 4; ++t)
      for (size_t j = 0; j < 3; ++j) {
        const bool step = t < seqs[b].size() / 2;
        const double x0 = step ? seqs[b][2 * t] : 0.5, x1 = step ? seqs[b][2 * t + 1] : 0.5;
        EXPECT_NEAR(got[(b * 4 + t) * 3 + j], x0 * w[j] + x1 * w[3 + j], 1e-12);
      }
  // The reduction over T gives a known shape again, and T changes from minibatch to minibatch.
  Function f = unpacked_model(s, W);
  EXPECT_EQ(f.output().shape(), (NDShape{1, 3}));
  EXPECT_EQ(f.eval_one({{s, random_sequences({2}, {2, 5}, kF64, 3)}}).data().shape(),
            (NDShape{2, 1, 3}));
  EXPECT_EQ(f.eval_one({{s, sv}}).data().shape(), (NDShape{3, 1, 3}));
  // A root gradient of this minibatch's shape for an output with a free dimension: ones give
  // the gradient of the sum.
  Executor ex({y}, {W});
  ex.forward({{s, sv}}, true);
  ex.backward(y);
  const auto of_sum = ex.parameter_gradient(W).to_vector<double>();
  const Value ones(NDArrayView::from_vector<double>({3, 4, 3}, std::vector<double>(36, 1.0)),
                   false);
  ex.backward(y, &ones);
  EXPECT_EQ(ex.parameter_gradient(W).to_vector<double>(), of_sum);
  // A parameter cannot learn a free dimension.
  expect_shape_error(
      [&] {
        times(sequence::unpack(s, 0, true),
              parameter({NDShape::kInferred, 3}, glorot_uniform(), kF64), 1, 0);
      },
      {"[-3,2,3]", "free dimension"});
}

TEST(SequenceUnpack, GradientMatchesFiniteDifferences) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Parameter W = parameter(random_array({2, 3}, kF64, 4), "W");
  expect_gradients_match(unpacked_model(s, W), {{s, random_sequences({2}, {3, 1, 4, 1}, kF64, 5)}},
                         {s, W});
}

TEST(SequenceUnpack, Float32MatchesFloat64) {
  expect_float32_matches_float64([](DataType dtype) {
    Variable s = sequence::input_variable({2}, {.dtype = dtype});
    Parameter W = parameter(random_array({2, 3}, dtype, 6), "W");
    return OpCase{
        unpacked_model(s, W), {{s, random_sequences({2}, {3, 1, 4, 1}, dtype, 7)}}, {s, W}};
  });
}

TEST(SequenceUnpack, SurvivesSaveAndLoad) {
  Variable s = sequence::input_variable({2}, f64("s"));
  Function f = unpacked_model(s, parameter(random_array({2, 3}, kF64, 8), "W"));
  Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  const Value sv = random_sequences({2}, {3, 1, 2}, kF64, 9);
  EXPECT_EQ(values(loaded.eval_one({{loaded.arguments().at(0), sv}})),
            values(f.eval_one({{s, sv}})));
}

}  // namespace
}  // namespace loom
