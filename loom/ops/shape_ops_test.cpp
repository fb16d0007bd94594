#include "loom/ops/shape_ops.h"

#include <gtest/gtest.h>

#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

// The checks every shape op gets: gradients on a batch, on sequences, on a parameter alone
// and on a parameter broadcast over the rows of a sequence; the packing being invisible;
// float32 against float64. `op` maps a variable of sample shape `in` to the op's output.
void check_op(const NDShape& in, const std::function<Function(const Variable&)>& op) {
  Variable x = input_variable(in, f64("x"));
  expect_gradients_match(op(x), {{x, random_batch(in, 3, kF64, 1)}}, {x});
  Variable s = sequence::input_variable(in, f64("s"));
  ValueMap sargs{{s, random_sequences(in, kLengths, kF64, 2)}};
  expect_gradients_match(op(s), sargs, {s});
  expect_sequences_match_individually(op(s), s, sargs.at(s));
  Parameter p = parameter(random_array(in, kF64, 3), "p");
  expect_gradients_match(op(p), {}, {p});
  expect_gradients_match(op(element_times(s, p)), sargs, {s, p});
  // s used twice: directly and through the op's input.
  expect_gradients_match(op(s + element_times(s, s)), sargs, {s});
  expect_float32_matches_float64([&](DataType dtype) {
    Variable v = sequence::input_variable(in, {.dtype = dtype});
    return OpCase{op(v), {{v, random_sequences(in, kLengths, dtype, 4)}}, {v}};
  });
}

// ---- reshape ---------------------------------------------------------------------------------

TEST(Reshape, ShapeInference) {
  Variable x = input_variable({2, 3, 4}, f64());
  Function f = reshape(x, {6, 4}, "r");
  EXPECT_EQ(f.op_name(), "Reshape");
  EXPECT_EQ(f.name(), "r");
  EXPECT_EQ(f.output().shape(), (NDShape{6, 4}));
  EXPECT_EQ(f.output().dtype(), kF64);
  EXPECT_EQ(Variable(reshape(x, {NDShape::kInferred, 2})).shape(), (NDShape{12, 2}));
  EXPECT_EQ(Variable(reshape(x, {4, NDShape::kInferred, 3})).shape(), (NDShape{4, 2, 3}));
  EXPECT_EQ(Variable(reshape(x, {24})).shape(), (NDShape{24}));
  EXPECT_EQ(Variable(reshape(sequence::input_variable({2, 3}), {3, 2})).type_string(),
            "Sequence[Tensor[3,2]]");
  EXPECT_EQ(Variable(reshape(input_variable({1}), {})).shape(), (NDShape{}));
}

TEST(Reshape, MismatchesAreShapeErrors) {
  Variable x = input_variable({2, 3});
  expect_shape_error([&] { reshape(x, {4, 2}); }, {"Reshape", "Tensor[2,3]", "[4,2]"});
  expect_shape_error([&] { reshape(x, {4, NDShape::kInferred}); }, {"Reshape", "[4,-1]"});
  expect_shape_error(
      [&] {
        reshape(x, {NDShape::kInferred, NDShape::kInferred});
      },
      {"Reshape", "more than one inferred"});
}

TEST(Reshape, ForwardKeepsElementOrder) {
  Variable x = sequence::input_variable({2, 3}, f64());
  Value v = Value::create_sequences<double>(
      {2, 3}, {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {13, 14, 15, 16, 17, 18}});
  Value out = reshape(x, {3, 2}).eval_one({{x, v}});
  EXPECT_EQ(out.data().shape(), (NDShape{2, 2, 3, 2}));
  EXPECT_EQ(out.as_sequences<double>(), v.as_sequences<double>());
}

TEST(Reshape, GradientsFloat32AndPacking) {
  check_op({2, 3}, [](const Variable& v) { return reshape(v, {3, NDShape::kInferred}); });
  check_op({2, 3}, [](const Variable& v) { return reshape(v, {6}); });
}

// ---- slice -----------------------------------------------------------------------------------

TEST(Slice, ShapeInferenceFollowsCntkIndices) {
  Variable x = input_variable({4, 5}, f64());
  Function f = slice(x, Axis(1), 1, 3, "s");
  EXPECT_EQ(f.op_name(), "Slice");
  EXPECT_EQ(f.name(), "s");
  EXPECT_EQ(f.output().shape(), (NDShape{4, 2}));
  EXPECT_EQ(f.output().dtype(), kF64);
  EXPECT_EQ(Variable(slice(x, Axis(0), -1, 0)).shape(), (NDShape{1, 5}));   // last element
  EXPECT_EQ(Variable(slice(x, Axis(-1), 0, -1)).shape(), (NDShape{4, 4}));  // all but last
  EXPECT_EQ(Variable(slice(x, Axis(1), 2, 2)).shape(), (NDShape{4, 0}));    // empty
  EXPECT_EQ(Variable(slice(sequence::input_variable({3}), Axis(0), 1, 0)).type_string(),
            "Sequence[Tensor[2]]");
}

TEST(Slice, BadRangesAndAxesAreShapeErrors) {
  Variable x = input_variable({4, 5});
  expect_shape_error([&] { slice(x, Axis(1), 3, 6); }, {"Slice", "[3,6)", "Tensor[4,5]"});
  expect_shape_error([&] { slice(x, Axis(1), 3, 2); }, {"Slice", "[3,2)"});
  expect_shape_error([&] { slice(x, Axis(0), -5, 0); }, {"Slice", "[-5,0)", "[-1,4)"});
  expect_shape_error([&] { slice(x, Axis(2), 0, 1); }, {"Slice", "2", "Tensor[4,5]"});
  expect_shape_error([&] { slice(x, Axis::default_dynamic_axis(), 0, 1); },
                     {"Slice", "not a static axis"});
}

TEST(Slice, ForwardValues) {
  Variable x = input_variable({2, 3}, f64());
  ValueMap args{{x, Value::create_batch<double>({2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})}};
  auto eval = [&](const Function& f) { return values(f.eval_one(args)); };
  EXPECT_EQ(eval(slice(x, Axis(1), 1, 0)), (std::vector<double>{2, 3, 5, 6, 8, 9, 11, 12}));
  EXPECT_EQ(eval(slice(x, Axis(0), -1, 0)), (std::vector<double>{4, 5, 6, 10, 11, 12}));
  EXPECT_EQ(eval(slice(x, Axis(-1), 0, -2)), (std::vector<double>{1, 4, 7, 10}));
  Variable s = sequence::input_variable({3}, f64());
  Value out =
      slice(s, Axis(0), 0, 2)
          .eval_one({{s, Value::create_sequences<double>({3}, {{1, 2, 3, 4, 5, 6}, {7, 8, 9}})}});
  EXPECT_EQ(out.as_sequences<double>(), (std::vector<std::vector<double>>{{1, 2, 4, 5}, {7, 8}}));
}

TEST(Slice, GradientsFloat32AndPacking) {
  check_op({3, 4}, [](const Variable& v) { return slice(v, Axis(1), 1, -1); });
  check_op({3, 4}, [](const Variable& v) { return slice(v, Axis(0), -1, 0); });
  check_op({3, 4}, [](const Variable& v) { return slice(v, Axis(0), 0, 2); });
}

// ---- splice ----------------------------------------------------------------------------------

TEST(Splice, ShapeInference) {
  Variable a = input_variable({2, 3}, f64()), b = input_variable({2, 1}, f64()),
           c = input_variable({4, 3}, f64());
  Function f = splice({a, b}, Axis(-1), "sp");
  EXPECT_EQ(f.op_name(), "Splice");
  EXPECT_EQ(f.name(), "sp");
  EXPECT_EQ(f.output().shape(), (NDShape{2, 4}));
  EXPECT_EQ(f.output().dtype(), kF64);
  EXPECT_EQ(Variable(splice({a, b, a})).shape(), (NDShape{2, 7}));
  EXPECT_EQ(Variable(splice({a, c}, Axis(0))).shape(), (NDShape{6, 3}));
  EXPECT_EQ(Variable(splice({a})).shape(), (NDShape{2, 3}));
  Variable s = sequence::input_variable({2}), t = sequence::input_variable({3});
  EXPECT_EQ(Variable(splice({s, t})).type_string(), "Sequence[Tensor[5]]");
}

TEST(Splice, MismatchesAreShapeErrors) {
  Variable a = input_variable({2, 3}), b = input_variable({3, 3});
  expect_shape_error([&] { splice({a, b}); }, {"Splice", "Tensor[2,3]", "Tensor[3,3]"});
  expect_shape_error([&] { splice({a, input_variable({2})}); }, {"Splice", "Tensor[2]"});
  expect_shape_error([&] { splice({a, input_variable({2, 3}, f64())}); }, {"Splice", "data types"});
  expect_shape_error(
      [&] {
        splice({a, sequence::input_variable({2, 3})});
      },
      {"Splice", "dynamic axes", "Sequence[Tensor[2,3]]"});
  expect_shape_error([&] { splice({a, parameter({2, 3})}); }, {"Splice", "dynamic axes"});
  expect_shape_error([&] { splice({a, a}, Axis(2)); }, {"Splice", "Tensor[2,3]"});
  EXPECT_THROW(splice({}), ArgumentError);
}

TEST(Splice, ForwardValues) {
  Variable a = input_variable({2, 2}, f64()), b = input_variable({2, 1}, f64());
  ValueMap args{{a, Value::create_batch<double>({2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})},
                {b, Value::create_batch<double>({2, 1}, {-1, -2, -3, -4})}};
  EXPECT_EQ(values(splice({a, b}).eval_one(args)),
            (std::vector<double>{1, 2, -1, 3, 4, -2, 5, 6, -3, 7, 8, -4}));
  EXPECT_EQ(values(splice({b, a}, Axis(1)).eval_one(args)),
            (std::vector<double>{-1, 1, 2, -2, 3, 4, -3, 5, 6, -4, 7, 8}));
  Variable c = input_variable({1, 2}, f64());
  args.emplace(c, Value::create_batch<double>({1, 2}, {9, 10, 11, 12}));
  EXPECT_EQ(values(splice({a, c}, Axis(0)).eval_one(args)),
            (std::vector<double>{1, 2, 3, 4, 9, 10, 5, 6, 7, 8, 11, 12}));
}

TEST(Splice, GradientsFloat32AndPacking) {
  // Splices of one variable with ops of itself, so check_op's single argument covers it.
  check_op({2, 3}, [](const Variable& v) { return splice({v, square(v), v}, Axis(0)); });
  check_op({2, 3}, [](const Variable& v) {
    return splice({slice(v, Axis(1), 0, 1), v, slice(v, Axis(1), 1, 0)}, Axis(-1));
  });
  // Two sequence inputs.
  Variable a = sequence::input_variable({2, 1}, f64("a")),
           b = sequence::input_variable({2, 3}, f64("b"));
  expect_gradients_match(splice({a, b}),
                         {{a, random_sequences({2, 1}, kLengths, kF64, 5)},
                          {b, random_sequences({2, 3}, kLengths, kF64, 6)}},
                         {a, b});
}

// ---- transpose -------------------------------------------------------------------------------

TEST(Transpose, ShapeInference) {
  Variable x = input_variable({2, 3}, f64());
  Function f = transpose(x, {}, "t");
  EXPECT_EQ(f.op_name(), "Transpose");
  EXPECT_EQ(f.name(), "t");
  EXPECT_EQ(f.output().shape(), (NDShape{3, 2}));
  EXPECT_EQ(f.output().dtype(), kF64);
  Variable y = input_variable({2, 3, 4});
  EXPECT_EQ(Variable(transpose(y)).shape(), (NDShape{4, 3, 2}));
  EXPECT_EQ(Variable(transpose(y, {1, 2, 0})).shape(), (NDShape{3, 4, 2}));
  EXPECT_EQ(Variable(transpose(y, {0, -1, 1})).shape(), (NDShape{2, 4, 3}));
  EXPECT_EQ(Variable(transpose(sequence::input_variable({2, 5}))).type_string(),
            "Sequence[Tensor[5,2]]");
}

TEST(Transpose, BadPermutationsAreShapeErrors) {
  Variable y = input_variable({2, 3, 4});
  expect_shape_error([&] { transpose(y, {1, 0}); }, {"Transpose", "2 axes", "Tensor[2,3,4]"});
  expect_shape_error([&] { transpose(y, {0, 1, 1}); }, {"Transpose", "twice", "Tensor[2,3,4]"});
  expect_shape_error([&] { transpose(y, {0, 1, 3}); }, {"Transpose", "3", "Tensor[2,3,4]"});
}

TEST(Transpose, ForwardValues) {
  Variable x = input_variable({2, 3}, f64());
  ValueMap args{{x, Value::create_batch<double>({2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})}};
  EXPECT_EQ(values(transpose(x).eval_one(args)),
            (std::vector<double>{1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12}));
  Variable y = input_variable({2, 2, 2}, f64());
  // out[i][j][k] = in[k][i][j] for perm {1, 2, 0}
  Value out =
      transpose(y, {1, 2, 0})
          .eval_one({{y, Value::create_batch<double>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})}});
  EXPECT_EQ(values(out), (std::vector<double>{0, 4, 1, 5, 2, 6, 3, 7}));
}

TEST(Transpose, GradientsFloat32AndPacking) {
  check_op({2, 3}, [](const Variable& v) { return transpose(v); });
  check_op({2, 3, 4}, [](const Variable& v) { return transpose(v, {2, 0, 1}); });
  check_op({2, 3, 4}, [](const Variable& v) { return transpose(v, {0, 2, 1}); });
}

}  // namespace
}  // namespace loom
