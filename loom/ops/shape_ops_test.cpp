#include "loom/ops/shape_ops.h"

#include <gtest/gtest.h>

#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

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

TEST(Splice, ANewLeadingAxisStacksTheInputs) {
  Variable a = input_variable({2}, f64()), b = input_variable({2}, f64());
  Function f = splice({a, b, a}, Axis::new_leading_axis());
  EXPECT_EQ(f.output().shape(), (NDShape{3, 2}));
  ValueMap args{{a, Value::create_batch<double>({2}, {1, 2})},
                {b, Value::create_batch<double>({2}, {3, 4})}};
  EXPECT_EQ(values(f.eval_one(args)), (std::vector<double>{1, 2, 3, 4, 1, 2}));
  EXPECT_EQ(Axis::new_leading_axis().to_string(), "Axis.new_leading_axis()");
  check_op({2, 3}, [](const Variable& v) {
    return splice({v, square(v)}, Axis::new_leading_axis());
  });
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

std::vector<double> iota(size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = double(i);
  return v;
}

// ---- reshape with begin_axis and end_axis ----------------------------------------------------

TEST(ReshapeAxes, ReplacesTheAxesBetweenBeginAndEnd) {
  Variable x = input_variable({2, 3, 4}, f64());
  EXPECT_EQ(reshape(x, {6}, ReshapeOptions{.begin_axis = 0, .end_axis = 2}).output().shape(),
            (NDShape{6, 4}));
  EXPECT_EQ(reshape(x, {12}, ReshapeOptions{.begin_axis = -2}).output().shape(), (NDShape{2, 12}));
  EXPECT_EQ(reshape(x, {1}, ReshapeOptions{.begin_axis = 3, .end_axis = 3}).output().shape(),
            (NDShape{2, 3, 4, 1}));
  EXPECT_EQ(reshape(x, {2, NDShape::kInferred}, ReshapeOptions{.begin_axis = 2}).output().shape(),
            (NDShape{2, 3, 2, 2}));
  EXPECT_EQ(reshape(x, {4, 6}, ReshapeOptions{}).output().shape(), (NDShape{4, 6}));
  expect_argument_error([&] { reshape(x, {6}, ReshapeOptions{.begin_axis = 2, .end_axis = 1}); },
                        {"reshape", "begin_axis", "comes after end_axis", "Tensor[2,3,4]"});
  expect_argument_error([&] { reshape(x, {6}, ReshapeOptions{.end_axis = 4}); },
                        {"reshape", "end_axis 4 is out of range", "-3 to 3"});
  expect_shape_error([&] { reshape(x, {5}, ReshapeOptions{.begin_axis = 1}); },
                     {"Reshape", "12 elements in the static axes replaced", "[5]"});
  check_op({2, 3, 4},
           [](const Variable& v) { return reshape(v, {6}, ReshapeOptions{.end_axis = -1}); });
}

// ---- squeeze, expand_dims, swapaxes, flatten -------------------------------------------------

TEST(Squeeze, RemovesAxesOfExtentOne) {
  Variable x = input_variable({1, 3, 1, 4}, f64());
  EXPECT_EQ(squeeze(x, std::nullopt, "s").output().shape(), (NDShape{3, 4}));
  EXPECT_EQ(squeeze(x).name(), "");
  EXPECT_EQ(squeeze(x, std::vector<int>{-2}).output().shape(), (NDShape{1, 3, 4}));
  EXPECT_EQ(squeeze(input_variable({1, 1})).output().shape(), NDShape{});
  expect_argument_error([&] { squeeze(x, std::vector<int>{1}); },
                        {"squeeze", "static axis 1", "extent 3, not 1"});
  expect_argument_error([&] { squeeze(x, std::vector<int>{4}); },
                        {"squeeze", "axis 4 is out of range", "-4 to 3"});
  expect_argument_error([&] { squeeze(x, std::vector<int>{0, -4}); }, {"squeeze", "named twice"});
  check_op({1, 3, 1}, [](const Variable& v) { return squeeze(v); });
}

TEST(ExpandDims, AddsAnAxisBehindTheOneNamedAsCntkDoes) {
  Variable x = input_variable({2, 3}, f64());
  EXPECT_EQ(expand_dims(x, 0).output().shape(), (NDShape{2, 1, 3}));  // CNTK's example
  EXPECT_EQ(expand_dims(x, 1).output().shape(), (NDShape{2, 3, 1}));
  EXPECT_EQ(expand_dims(x, -1).output().shape(), (NDShape{2, 3, 1}));
  EXPECT_EQ(expand_dims(x, -2).output().shape(), (NDShape{2, 1, 3}));
  EXPECT_EQ(expand_dims(x, -3).output().shape(), (NDShape{1, 2, 3}));
  expect_argument_error([&] { expand_dims(x, 2); },
                        {"expand_dims", "axis 2 is out of range", "-3 to 1"});
  expect_argument_error([&] { expand_dims(x, -4); }, {"expand_dims", "axis -4"});
  check_op({2, 3}, [](const Variable& v) { return expand_dims(v, -3); });
}

TEST(SwapAxes, ExchangesTwoAxes) {
  Variable x = input_variable({2, 3, 4}, f64());
  Function f = swapaxes(x);
  EXPECT_EQ(f.op_name(), "TransposeAxes");
  EXPECT_EQ(f.output().shape(), (NDShape{3, 2, 4}));
  EXPECT_EQ(swapaxes(x, {.axis1 = -1, .axis2 = 0}).output().shape(), (NDShape{4, 3, 2}));
  Variable y = input_variable({2, 3}, f64());
  EXPECT_EQ(
      values(swapaxes(y).eval_one({{y, Value::create_batch<double>({2, 3}, {0, 1, 2, 3, 4, 5})}})),
      (std::vector<double>{0, 3, 1, 4, 2, 5}));
  expect_argument_error([&] { swapaxes(x, {.axis2 = 3}); },
                        {"swapaxes", "axis2 3 is out of range", "Tensor[2,3,4]"});
  check_op({2, 3, 4}, [](const Variable& v) { return swapaxes(v, {.axis1 = 2, .axis2 = 0}); });
}

TEST(Flatten, MakesAMatrixAtTheAxis) {
  Variable x = input_variable({2, 3, 4}, f64());
  EXPECT_EQ(flatten(x).output().shape(), (NDShape{1, 24}));
  EXPECT_EQ(flatten(x, {.axis = 1}).output().shape(), (NDShape{2, 12}));
  EXPECT_EQ(flatten(x, {.axis = -1}).output().shape(), (NDShape{6, 4}));
  EXPECT_EQ(flatten(x, {.axis = 3}).output().shape(), (NDShape{24, 1}));
  expect_argument_error([&] { flatten(x, {.axis = 4}); },
                        {"flatten", "axis 4 is out of range", "-3 to 3"});
  check_op({2, 3, 4}, [](const Variable& v) { return flatten(v, {.axis = 2}); });
}

// ---- pad -------------------------------------------------------------------------------------

TEST(Pad, CntkExamples) {
  const Constant x = constant(NDArrayView::from_vector<double>({2, 3}, iota(6)));
  auto eval = [&](const PadOptions& o) { return values(pad(x, {{1, 1}, {2, 2}}, o).eval_one({})); };
  EXPECT_EQ(eval({.mode = kConstantPad, .constant_value = 1}),
            (std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 2, 1, 1,
                                 1, 1, 3, 4, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(eval({.mode = kReflectPad}),
            (std::vector<double>{5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0,
                                 5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0}));
  EXPECT_EQ(eval({.mode = kSymmetricPad}),
            (std::vector<double>{1, 0, 0, 1, 2, 2, 1, 1, 0, 0, 1, 2, 2, 1,
                                 4, 3, 3, 4, 5, 5, 4, 4, 3, 3, 4, 5, 5, 4}));
}

TEST(Pad, BatchRowsStayApartAndGradientsMatch) {
  Variable x = input_variable({3}, f64());
  EXPECT_EQ(values(pad(x, {{1, 2}}, {.mode = kReflectPad})
                       .eval_one({{x, Value::create_batch<double>({3}, {1, 2, 3, 4, 5, 6})}})),
            (std::vector<double>{2, 1, 2, 3, 2, 1, 5, 4, 5, 6, 5, 4}));
  for (int mode : {kConstantPad, kReflectPad, kSymmetricPad})
    check_op({3, 4}, [mode](const Variable& v) {
      return pad(v, {{2, 1}, {0, 3}}, {.mode = mode, .constant_value = -0.5});
    });
}

TEST(Pad, BadPatternsAndModesAreArgumentErrors) {
  Variable x = input_variable({3, 4});
  expect_argument_error(
      [&] {
        pad(x, {{1, 1}});
      },
      {"pad", "2 numbers", "Tensor[3,4]", "rank 2", "2 pairs"});
  expect_argument_error(
      [&] {
        pad(x, {{1, 1}, {1, 1}}, {.mode = 3});
      },
      {"pad", "mode 3", "CONSTANT_PAD"});
  expect_argument_error(
      [&] {
        pad(x, {{3, 0}, {0, 0}}, {.mode = kReflectPad});
      },
      {"pad", "(3, 0)", "static axis 0", "exceeds 2", "REFLECT_PAD"});
  expect_argument_error(
      [&] {
        pad(x, {{0, 0}, {0, 5}}, {.mode = kSymmetricPad});
      },
      {"pad", "(0, 5)", "static axis 1", "exceeds 4", "SYMMETRIC_PAD"});
  EXPECT_EQ(pad(x, {{0, 9}, {0, 0}}).output().shape(), (NDShape{12, 4}));  // constant: any
}

// ---- depth_to_space, space_to_depth ----------------------------------------------------------

TEST(DepthToSpace, MovesChannelsIntoBlocksAsCntk) {
  Variable x = input_variable({8, 1, 1}, f64());
  Function f = depth_to_space(x, 2, "d");
  EXPECT_EQ(f.name(), "d");
  EXPECT_EQ(f.output().shape(), (NDShape{2, 2, 2}));
  // channel (i * 2 + j) * 2 + c goes to position (i, j) of channel c
  EXPECT_EQ(values(f.eval_one({{x, Value::create_batch<double>({8, 1, 1}, iota(8))}})),
            (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}));
  check_op({8, 2, 3}, [](const Variable& v) { return depth_to_space(v, 2); });
  expect_argument_error(
      [&] {
        depth_to_space(input_variable({6, 2, 2}), 2);
      },
      {"depth_to_space", "6 channels", "Tensor[6,2,2]", "= 4"});
  expect_argument_error(
      [&] {
        depth_to_space(input_variable({4, 2}), 2);
      },
      {"depth_to_space", "rank 2", "[C, H, W]"});
}

TEST(SpaceToDepth, InvertsDepthToSpace) {
  Variable x = input_variable({2, 4, 6}, f64());
  Function f = space_to_depth(x, 2);
  EXPECT_EQ(f.output().shape(), (NDShape{8, 2, 3}));
  const ValueMap args{{x, random_batch({2, 4, 6}, 3, kF64, 5)}};
  EXPECT_EQ(values(depth_to_space(f, 2).eval_one(args)), values(args.at(x)));
  check_op({2, 4, 6}, [](const Variable& v) { return space_to_depth(v, 2); });
  expect_argument_error(
      [&] {
        space_to_depth(input_variable({1, 3, 4}), 2);
      },
      {"space_to_depth", "3 x 4", "block_size 2"});
}

// ---- eye_like, cast, times_transpose ---------------------------------------------------------

TEST(EyeLike, OnesOnTheDiagonalOfTheBatchMatrix) {
  Variable x = input_variable({4}, f64());
  Function f = eye_like(x);
  EXPECT_EQ(f.op_name(), "EyeLikeOp");
  EXPECT_EQ(values(f.eval_one({{x, Value::create_batch<double>({4}, iota(12))}})),
            (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
  const Constant c = constant(NDArrayView::from_vector<double>({3, 2}, iota(6)));
  EXPECT_EQ(values(eye_like(c).eval_one({})), (std::vector<double>{1, 0, 0, 1, 0, 0}));
  expect_argument_error([&] { eye_like(x, true); }, {"eye_like", "sparse"});
  expect_argument_error([&] { eye_like(input_variable({2, 2})); }, {"eye_like", "3 axes"});
  expect_argument_error([&] { eye_like(sequence::input_variable({2})); },
                        {"eye_like", "sequence axis"});
}

TEST(Cast, ConvertsValuesAndCastsTheGradientBack) {
  Variable x = input_variable({3}, {.name = "x", .needs_gradient = true});
  Function f = cast(x, kF64);
  EXPECT_EQ(f.output().dtype(), kF64);
  const ValueMap args{{x, Value::create_batch<float>({3}, {0.1f, -2.5f, 3})}};
  EXPECT_EQ(values(f.eval_one(args)), (std::vector<double>{double(0.1f), -2.5, 3}));
  const Function back = cast(Variable(element_times(f, f)), kF32);
  EXPECT_EQ(back.output().dtype(), kF32);
  const ValueMap g = back.grad(args, {x});
  EXPECT_EQ(g.at(x).data().dtype(), kF32);
  expect_all_near(values(g.at(x)), {2 * double(0.1f), -5, 6}, 1e-7, "gradient of x^2");
  // What the conformance harness cannot check (its cases keep the input's data type).
  const Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  EXPECT_EQ(loaded.op_name(), "Cast");
  EXPECT_EQ(loaded.output().dtype(), kF64);
  EXPECT_EQ(values(loaded.eval_one({{loaded.arguments()[0], args.at(x)}})),
            values(f.eval_one(args)));
  Variable s = sequence::input_variable({2}, {.name = "s"});
  const ValueMap sargs{{s, random_sequences({2}, kLengths, kF32, 8)}};
  expect_sequences_match_individually(cast(s, kF64), s, sargs.at(s), 0, false);
}

TEST(TimesTranspose, IsLeftTimesRightTransposed) {
  const Constant a = constant(NDArrayView::from_vector<double>({2, 2}, {1, 2, 3, 4}));
  const Constant b = constant(NDArrayView::from_vector<double>({2}, {2, -1}));
  EXPECT_EQ(values(times_transpose(a, a).eval_one({})), (std::vector<double>{5, 11, 11, 25}));
  EXPECT_EQ(times_transpose(a, b).output().shape(), (NDShape{2, 1}));
  EXPECT_EQ(values(times_transpose(a, b).eval_one({})), (std::vector<double>{0, 2}));
  EXPECT_EQ(values(times_transpose(b, b).eval_one({})), (std::vector<double>{5}));
  expect_argument_error(
      [&] {
        times_transpose(a, input_variable({2, 2, 2}));
      },
      {"times_transpose", "rank 3"});
  Variable x = input_variable({3}, f64());
  Parameter w = parameter(random_array({4, 3}, kF64, 6), "w");
  const ValueMap args{{x, random_batch({3}, 3, kF64, 7)}};
  expect_gradients_match(times_transpose(x, w), args, {x, w});
}

}  // namespace
}  // namespace loom
