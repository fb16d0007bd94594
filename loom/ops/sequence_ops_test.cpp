#include "loom/ops/sequence_ops.h"

#include <gtest/gtest.h>

#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"

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

}  // namespace
}  // namespace loom
