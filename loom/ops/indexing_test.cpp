// one_hot, gather and top_k: CNTK's documented examples (bindings/python/cntk/ops/__init__.py
// and its tests), the axes, the gradients, and the errors for bad indices, k and axes. The
// conformance harness checks the gradients against finite differences, float32, sequences,
// save and load.
#include "loom/ops/indexing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "loom/ops/elementwise.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

using V = std::vector<double>;

NDArrayView array(const NDShape& shape, const V& v) {
  return NDArrayView::from_vector<double>(shape, v);
}

// ---------------------------------------------------------------------------------------------
// one_hot

TEST(IndexingOneHot, CntkDocstringExample) {
  // C.one_hot(x, 6, False).eval({x: [[1, 2], [4, 5]]}) with x = C.input_variable((2,)).
  const Variable x = input_variable({2}, f64("x"));
  const Function y = one_hot(x, 6);
  EXPECT_EQ(y.output().shape(), (NDShape{2, 6}));
  const Value out = y.eval_one({{x, Value::create_batch<double>({2}, {1, 2, 4, 5})}});
  EXPECT_EQ(out.data().shape(), (NDShape{2, 2, 6}));
  EXPECT_EQ(values(out), (V{0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,  //
                            0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1}));
}

TEST(IndexingOneHot, NewAxisGoesWhereAxisSays) {
  const Variable x = input_variable({2, 3}, f64("x"));
  const V data{0, 1, 2, 2, 1, 0};
  const ValueMap args{{x, Value::create_batch<double>({2, 3}, data)}};
  for (int axis : {0, 1, 2, -1, -2, -3}) {
    SCOPED_TRACE(axis);
    const Function y = one_hot(x, 3, false, Axis(axis));
    const size_t a = size_t(axis < 0 ? axis + 3 : axis);
    std::vector<size_t> dims{2, 3};
    dims.insert(dims.begin() + ptrdiff_t(a), 3);
    ASSERT_EQ(y.output().shape(), NDShape(dims));
    // numpy: np.moveaxis(np.eye(3)[x], -1, a)
    const V out = values(y.eval_one(args));
    V expected(18);
    for (size_t i = 0; i < 2; ++i)
      for (size_t j = 0; j < 3; ++j)
        for (size_t c = 0; c < 3; ++c) {
          size_t idx[3] = {i, j, 0};
          size_t pos[3];
          for (size_t k = 0, src = 0; k < 3; ++k) pos[k] = k == a ? c : idx[src++];
          expected[(pos[0] * dims[1] + pos[1]) * dims[2] + pos[2]] =
              data[i * 3 + j] == double(c) ? 1 : 0;
        }
    EXPECT_EQ(out, expected);
  }
}

TEST(IndexingOneHot, TruncatesIndicesAsCntkCastsThem) {
  const Variable x = input_variable({3}, f64("x"));
  const V out =
      values(one_hot(x, 3).eval_one({{x, Value::create_batch<double>({3}, {0.9, 1.7, 2.2})}}));
  EXPECT_EQ(out, (V{1, 0, 0, 0, 1, 0, 0, 0, 1}));
}

TEST(IndexingOneHot, OutOfRangeIndicesAreArgumentErrors) {
  const Variable x = input_variable({2}, f64("x"));
  const Function y = one_hot(x, 6);
  for (double bad : {6.0, 7.5, -1.0}) {
    SCOPED_TRACE(bad);
    std::ostringstream shown;
    shown << bad;
    expect_argument_error(
        [&] {
          y.eval_one({{x, Value::create_batch<double>({2}, {1, bad})}});
        },
        {"one_hot", "index " + shown.str(), "out of range [0, 6)"});
  }
  expect_argument_error(
      [&] {
        y.eval_one(
            {{x, Value::create_batch<double>({2}, {std::numeric_limits<double>::quiet_NaN(), 1})}});
      },
      {"one_hot", "nan"});
  // The function still evaluates afterwards.
  EXPECT_EQ(values(y.eval_one({{x, Value::create_batch<double>({2}, {5, 0})}}))[5], 1);
}

TEST(IndexingOneHot, BadArgumentsAndAxes) {
  const Variable x = input_variable({2}, f64("x"));
  expect_argument_error([&] { one_hot(x, 4, true); }, {"one_hot", "sparse_output"});
  expect_argument_error([&] { one_hot(x, 0); }, {"one_hot", "num_classes"});
  expect_shape_error([&] { one_hot(x, 4, false, Axis(2)); }, {"one_hot", "axis 2"});
  expect_shape_error([&] { one_hot(x, 4, false, Axis(-3)); }, {"one_hot", "axis -3"});
  expect_shape_error([&] { one_hot(x, 4, false, Axis::default_batch_axis()); },
                     {"one_hot", "not a static axis"});
}

TEST(IndexingOneHot, HasNoGradient) {
  const Function y = one_hot(input_variable({2}), 3);
  EXPECT_FALSE(y.op().traits(y.attributes()).differentiable.contains(0));
}

// ---------------------------------------------------------------------------------------------
// gather

// CNTK's reference in its docstring and tests: np.arange(12).reshape(6, 2).
NDArrayView arange_6x2() {
  V v(12);
  for (size_t i = 0; i < 12; ++i) v[i] = double(i);
  return array({6, 2}, v);
}

TEST(IndexingGather, CntkDocstringExample) {
  // C.gather(C.constant(d), x).eval({x: [[[0], [1]], [[4], [5]]]}), x = C.input_variable((2, 1)).
  const Variable x = input_variable({2, 1}, f64("x"));
  const Function y = gather(constant(arange_6x2()), x);
  EXPECT_EQ(y.output().shape(), (NDShape{2, 1, 2}));
  const Value out = y.eval_one({{x, Value::create_batch<double>({2, 1}, {0, 1, 4, 5})}});
  EXPECT_EQ(out.data().shape(), (NDShape{2, 2, 1, 2}));
  EXPECT_EQ(values(out), (V{0, 1, 2, 3, 8, 9, 10, 11}));
}

TEST(IndexingGather, CntkTestGatherOp) {
  // reshaping_test.py, test_gather_op: values, and the gradient to the reference (a parameter).
  const Variable a = input_variable({2, 1}, f64("a"));
  const Parameter r = parameter(arange_6x2(), "r");
  const ValueMap args{{a, Value::create_batch<double>({2, 1}, {0, 1, 3, 4})}};
  const Function y = gather(r, a);
  EXPECT_EQ(values(y.eval_one(args)), (V{0, 1, 2, 3, 6, 7, 8, 9}));
  EXPECT_EQ(values(y.grad(args, {r}).at(r)), (V{1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0}));

  // Indices of two axes: b_data = [[[0, 2], [1, 3]], [[2, 4], [3, 5]]].
  const Variable b = input_variable({2, 2}, f64("b"));
  const Function z = gather(r, b);
  EXPECT_EQ(z.output().shape(), (NDShape{2, 2, 2}));
  EXPECT_EQ(
      values(z.eval_one({{b, Value::create_batch<double>({2, 2}, {0, 2, 1, 3, 2, 4, 3, 5})}})),
      (V{0, 1, 4, 5, 2, 3, 6, 7, 4, 5, 8, 9, 6, 7, 10, 11}));
}

TEST(IndexingGather, CntkTestGatherOpWithAxis) {
  // reshaping_test.py, test_gather_op_with_axis.
  const Constant data = constant(array({3, 3}, {1.0, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9}));
  const Constant i = constant(array({2}, {0, 2}));
  const Function y = gather(data, i, Axis(1));
  EXPECT_EQ(y.output().shape(), (NDShape{3, 2}));
  EXPECT_EQ(values(y.eval_one({})), (V{1.0, 1.9, 2.3, 3.9, 4.5, 5.9}));

  const Constant data3 = constant(array({3, 1, 3}, {1.0, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9}));
  const Function y3 = gather(data3, i, Axis(2));
  EXPECT_EQ(y3.output().shape(), (NDShape{3, 1, 2}));
  EXPECT_EQ(values(y3.eval_one({})), (V{1.0, 1.9, 2.3, 3.9, 4.5, 5.9}));
  EXPECT_EQ(values(gather(data3, i, Axis(-1)).eval_one({})), values(y3.eval_one({})));
}

TEST(IndexingGather, CntkTestGatherOpBackwardWithoutDynamicAxes) {
  const Parameter x = parameter(array({3, 3}, {1.0, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9}), "x");
  const Function y = gather(x, constant(array({2}, {0, 2})));
  EXPECT_EQ(values(y.grad({}, {x}).at(x)), (V{1, 1, 1, 0, 0, 0, 1, 1, 1}));
}

TEST(IndexingGather, RepeatedIndicesAddTheirGradients) {
  const Parameter r = parameter(array({3, 2}, {0, 1, 2, 3, 4, 5}), "r");
  const Variable i = input_variable({3}, f64("i"));
  const ValueMap args{{i, Value::create_batch<double>({3}, {1, 1, 0, 2, 1, 1})}};
  const Function y = gather(r, i);
  EXPECT_EQ(values(y.eval_one(args)), (V{2, 3, 2, 3, 0, 1, 4, 5, 2, 3, 2, 3}));
  EXPECT_EQ(values(y.grad(args, {r}).at(r)), (V{1, 1, 4, 4, 1, 1}));
}

TEST(IndexingGather, AlongAMiddleAxisIsNumpysTake) {
  // np.take(ref, idx, axis=1) for ref [2, 3, 2] and indices [2, 2]: shape [2, 2, 2, 2].
  V ref(12);
  for (size_t k = 0; k < 12; ++k) ref[k] = double(k);
  const Constant r = constant(array({2, 3, 2}, ref));
  const V idx{2, 0, 1, 1};
  const Function y = gather(r, constant(array({2, 2}, idx)), Axis(1));
  EXPECT_EQ(y.output().shape(), (NDShape{2, 2, 2, 2}));
  V expected;
  for (size_t a = 0; a < 2; ++a)
    for (double j : idx)
      for (size_t c = 0; c < 2; ++c) expected.push_back(ref[(a * 3 + size_t(j)) * 2 + c]);
  EXPECT_EQ(values(y.eval_one({})), expected);
}

TEST(IndexingGather, PerSampleReferenceWithSharedOrPerSampleIndices) {
  const Variable r = input_variable({3, 2}, f64("r"));
  const Value rv = Value::create_batch<double>({3, 2}, {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15});
  // Shared indices: each sample gathers from its own reference.
  const Function shared = gather(r, constant(array({2}, {2, 0})));
  EXPECT_EQ(values(shared.eval_one({{r, rv}})), (V{4, 5, 0, 1, 14, 15, 10, 11}));
  // Per-sample indices.
  const Variable i = input_variable({1}, f64("i"));
  const Function both = gather(r, i);
  const ValueMap args{{r, rv}, {i, Value::create_batch<double>({1}, {1, 2})}};
  EXPECT_EQ(values(both.eval_one(args)), (V{2, 3, 14, 15}));
}

TEST(IndexingGather, IndicesMayHaveTheOtherDtype) {
  const Parameter r = parameter(arange_6x2(), "r");  // float64
  const Variable i = input_variable({2}, {.dtype = kF32, .name = "i"});
  const Function y = gather(r, i);
  EXPECT_EQ(y.output().dtype(), kF64);
  EXPECT_EQ(values(y.eval_one({{i, Value::create_batch<float>({2}, {5, 0})}})), (V{10, 11, 0, 1}));
}

TEST(IndexingGather, OutOfRangeIndicesAreArgumentErrors) {
  const Variable i = input_variable({2}, f64("i"));
  const Parameter r = parameter(arange_6x2(), "r");
  const Function y = gather(r, i);
  for (double bad : {6.0, -1.0, 100.0}) {
    SCOPED_TRACE(bad);
    std::ostringstream shown;
    shown << bad;
    const ValueMap args{{i, Value::create_batch<double>({2}, {0, bad})}};
    expect_argument_error([&] { y.eval_one(args); },
                          {"gather", "index " + shown.str(), "out of range [0, 6)"});
    expect_argument_error([&] { y.grad(args, {r}); }, {"gather", "index " + shown.str()});
  }
  expect_argument_error([&] { gather(r, constant(array({1}, {-0.5}))).eval_one({}); },
                        {"gather", "index -0.5"});
  // Along axis 1 the extent is 2.
  expect_argument_error([&] { gather(r, constant(array({1}, {2})), Axis(1)).eval_one({}); },
                        {"gather", "index 2", "[0, 2)"});
}

TEST(IndexingGather, BadAxesAndShapes) {
  const Parameter r = parameter(arange_6x2(), "r");
  const Variable i = input_variable({2}, f64("i"));
  expect_shape_error([&] { gather(r, i, Axis(2)); }, {"gather", "axis 2", "rank 2"});
  expect_shape_error([&] { gather(r, i, Axis(-3)); }, {"gather", "axis -3"});
  expect_shape_error([&] { gather(r, i, Axis::default_batch_axis()); },
                     {"gather", "not a static axis"});
  expect_shape_error([&] { gather(constant(2.0, kF64), i); }, {"gather", "static axis"});
}

// ---------------------------------------------------------------------------------------------
// top_k

TEST(IndexingTopK, CntkDocstringExample) {
  // y = C.top_k(-x * C.log(x), 3) at x0 = np.arange(10) * 0.1: indices [4, 3, 5].
  const Variable x = input_variable({10}, f64("x"));
  const Function y = top_k(element_times(negate(x), log(x)), 3);
  ASSERT_EQ(y.outputs().size(), 2u);
  EXPECT_EQ(y.outputs()[0].shape(), (NDShape{3}));
  EXPECT_EQ(y.outputs()[1].shape(), (NDShape{3}));
  V x0(10);
  for (size_t i = 0; i < 10; ++i) x0[i] = double(i) * 0.1;
  const ValueMap top = y.eval({{x, Value::create_batch<double>({10}, x0)}});
  EXPECT_EQ(values(top.at(y.outputs()[1])), (V{4, 3, 5}));
  auto f = [](double v) { return -v * std::log(v); };
  expect_all_near(values(top.at(y.outputs()[0])), {f(0.4), f(0.3), f(0.5)}, 1e-12, "values");
}

TEST(IndexingTopK, AlongEachAxisAsSorting) {
  const Variable x = input_variable({3, 4}, f64("x"));
  const V data{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  const ValueMap args{{x, Value::create_batch<double>({3, 4}, data)}};
  // Along the last axis, k = 2; ties (1, 1 and 5, 5) go to the lower position first.
  const Function last = top_k(x, 2);
  const ValueMap a = last.eval(args);
  EXPECT_EQ(values(a.at(last.outputs()[0])), (V{4, 3, 9, 6, 8, 5}));
  EXPECT_EQ(values(a.at(last.outputs()[1])), (V{2, 0, 1, 3, 3, 0}));
  // Along the first axis, k = 3: shape [3, 4], each column sorted.
  const Function first = top_k(x, 3, Axis(0));
  EXPECT_EQ(first.outputs()[0].shape(), (NDShape{3, 4}));
  const ValueMap b = first.eval(args);
  EXPECT_EQ(values(b.at(first.outputs()[0])), (V{5, 9, 5, 8, 5, 3, 4, 6, 3, 1, 2, 1}));
  EXPECT_EQ(values(b.at(first.outputs()[1])), (V{1, 1, 2, 2, 2, 2, 0, 1, 0, 0, 1, 0}));
}

TEST(IndexingTopK, NaNRanksFirst) {
  const Constant x = constant(array({4}, {1, std::numeric_limits<double>::quiet_NaN(), 3, 2}));
  const Function y = top_k(x, 2);
  const ValueMap out = y.eval({});
  EXPECT_EQ(values(out.at(y.outputs()[1])), (V{1, 2}));
  EXPECT_TRUE(std::isnan(values(out.at(y.outputs()[0]))[0]));
}

TEST(IndexingTopK, GradientGoesToTheSelectedValues) {
  // reshaping_test.py, test_topk_backward: the output's gradient lands at the positions.
  const Variable x = input_variable({2, 4}, {.dtype = kF64, .name = "x", .needs_gradient = true});
  const V data{0.5, -1, 2, 0.25, 7, 6, 5, 4, -3, -2, -1, 0, 1, 1.5, 1.25, 1.75};
  const ValueMap args{{x, Value::create_batch<double>({2, 4}, data)}};
  const Function y = top_k(x, 2);
  const Variable values_out = y.outputs()[0];
  // The values' gradient [[1, 2], [3, 4]] in each sample.
  const Function weighted = element_times(values_out, constant(array({2, 2}, {1, 2, 3, 4})));
  const V g = values(weighted.grad(args, {x}).at(x));
  // Sample 0 rows: [0.5, -1, 2, 0.25] -> positions 2, 0; [7, 6, 5, 4] -> 0, 1.
  // Sample 1 rows: [-3, -2, -1, 0] -> 3, 2; [1, 1.5, 1.25, 1.75] -> 3, 1.
  EXPECT_EQ(g, (V{2, 0, 1, 0, 3, 4, 0, 0, 0, 0, 2, 1, 0, 4, 0, 3}));
  // No gradient flows through the positions.
  EXPECT_EQ(values(combine({y.outputs()[1]}).grad(args, {x}).at(x)), V(16, 0.0));
}

TEST(IndexingTopK, BadKAndAxes) {
  const Variable x = input_variable({3, 4}, f64("x"));
  expect_argument_error([&] { top_k(x, 5); }, {"top_k", "k 5", "extent 4"});
  expect_argument_error([&] { top_k(x, 4, Axis(0)); }, {"top_k", "k 4", "extent 3"});
  expect_argument_error([&] { top_k(x, 0); }, {"top_k", "at least 1"});
  expect_shape_error([&] { top_k(x, 1, Axis(2)); }, {"top_k", "axis 2", "rank 2"});
  expect_shape_error([&] { top_k(x, 1, Axis::default_batch_axis()); },
                     {"top_k", "not a static axis"});
  expect_shape_error([&] { top_k(constant(1.0, kF64), 1); }, {"top_k", "rank 0"});
}

TEST(IndexingTopK, TheTablesTopKIsOnePrimitiveOfBothOutputs) {
  // Python's top_k comes from the op table: CNTK's TopK, the values and their positions.
  const Variable x = input_variable({4}, f64("x"));
  const Function y = find_schema("TopK")->apply({x}, Dictionary({{"k", int64_t{2}}}), "top");
  EXPECT_EQ(y.op().name(), std::string("TopK"));
  ASSERT_EQ(y.outputs().size(), 2u);
  EXPECT_EQ(y.outputs()[1].owner().impl(), y.impl());
  const ValueMap out = y.eval({{x, Value::create_batch<double>({4}, {1, 4, 2, 3})}});
  EXPECT_EQ(values(out.at(y.outputs()[0])), (V{4, 3}));
  EXPECT_EQ(values(out.at(y.outputs()[1])), (V{1, 3}));
}

TEST(IndexingTopK, OneOutputAsAFunctionIsThatOutputAlone) {
  // As CNTK converts a Variable to a FunctionPtr: the owner where it has one output, else the
  // composite of the Variable alone.
  const Variable x = input_variable({4}, f64("x"));
  const Function y = top_k(x, 2, Axis(-1), "top");
  const Function positions(y.outputs()[1]);
  ASSERT_EQ(positions.outputs().size(), 1u);
  EXPECT_EQ(positions.output(), y.outputs()[1]);
  EXPECT_EQ(values(positions.eval_one({{x, Value::create_batch<double>({4}, {1, 4, 2, 3})}})),
            (V{1, 3}));
  EXPECT_EQ(Function(y.outputs()[0]).outputs().size(), 1u);
  const Function a = abs(x);  // one output: the op itself
  EXPECT_EQ(Function(a.output()).impl(), a.impl());
}

TEST(IndexingTopK, SavesAndLoadsBothOutputs) {
  const Variable x = input_variable({4}, f64("x"));
  const Function y = top_k(x, 2, Axis(-1), "top");
  const Function loaded = load_model_from_bytes(save_model_to_bytes(y));
  ASSERT_EQ(loaded.outputs().size(), 2u);
  const Variable lx = loaded.arguments()[0];
  const ValueMap out = loaded.eval({{lx, Value::create_batch<double>({4}, {1, 4, 2, 3})}});
  EXPECT_EQ(values(out.at(loaded.outputs()[0])), (V{4, 3}));
  EXPECT_EQ(values(out.at(loaded.outputs()[1])), (V{1, 3}));
}

}  // namespace
}  // namespace loom
