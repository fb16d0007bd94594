// Function objects: composition, parameter sharing, deferred shape inference, cloning,
// printing, default_options and initializers, through the Dense/Sequential layers.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/graph/executor.h"
#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/losses.h"

namespace loom {
namespace {

std::vector<std::string> uids(const std::vector<Parameter>& ps) {
  std::vector<std::string> out;
  for (auto& p : ps) out.push_back(p.uid());
  return out;
}

TEST(Dense, InfersInputDimensionAtFirstCall) {
  Function d = Dense(5);
  auto params = d.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].shape().to_string(), "[-1,5]");
  Variable x = input_variable({2});
  Function y = d(x);
  EXPECT_EQ(d.parameters()[0].shape(), (NDShape{2, 5}));
  EXPECT_EQ(y.to_string(), "Dense(Tensor[2]) -> Tensor[5]");
  EXPECT_EQ(y.output().shape(), (NDShape{5}));
  // A second input dimension no longer fits the now-known W.
  EXPECT_THROW(d(input_variable({3})), ShapeError);
}

TEST(Dense, MapsAllAxesOrInputRankOrMapRank) {
  Variable img = input_variable({3, 4});
  EXPECT_EQ(Dense(7)(img).output().shape(), (NDShape{7}));
  EXPECT_EQ(Dense(7)(img).parameters()[0].shape(), (NDShape{3, 4, 7}));
  EXPECT_EQ(Dense(7, {.input_rank = 1})(img).output().shape(), (NDShape{3, 7}));
  EXPECT_EQ(Dense(7, {.map_rank = 1})(img).output().shape(), (NDShape{3, 7}));
  EXPECT_EQ(Dense(NDShape{2, 3})(img).output().shape(), (NDShape{2, 3}));
}

TEST(Dense, SameObjectSharesParametersTwoObjectsDoNot) {
  Variable x1 = input_variable({2}), x2 = input_variable({2});
  Function d = Dense(3), e = Dense(3);
  EXPECT_EQ(uids(d(x1).parameters()), uids(d(x2).parameters()));
  EXPECT_NE(uids(d(x1).parameters()), uids(e(x1).parameters()));
  Function both = plus(d(x1), d(x2));
  EXPECT_EQ(both.parameters().size(), 2u);
}

TEST(Dense, ComputesActivationOfAffineMap) {
  Function d = Dense(2, {.activation = tanh});
  Variable x = input_variable({3});
  Function y = d(x);
  auto ps = d.parameters();
  ps[0].set_value(NDArrayView::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  ps[1].set_value(NDArrayView::from_vector<float>({2}, {0.5f, -0.5f}));
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({3}, {1, 0, -1, 0.1f, 0.2f, 0.3f}));
  auto out = y.eval_one(args).data().to_vector<float>();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FLOAT_EQ(out[0], std::tanh(1 - 5 + 0.5f));
  EXPECT_FLOAT_EQ(out[1], std::tanh(2 - 6 - 0.5f));
  EXPECT_FLOAT_EQ(out[2], std::tanh(0.1f + 0.6f + 1.5f + 0.5f));
  EXPECT_FLOAT_EQ(out[3], std::tanh(0.2f + 0.8f + 1.8f - 0.5f));
}

TEST(Dense, WorksPerElementOfVariableLengthSequences) {
  Function d = Dense(2, {.activation = sigmoid});
  Variable s = sequence::input_variable({3});
  Variable x = input_variable({3});
  Function ys = d(s), yx = d(x);
  EXPECT_EQ(ys.to_string(), "Dense(Sequence[Tensor[3]]) -> Sequence[Tensor[2]]");
  std::vector<std::vector<float>> seqs{
      {1, 2, 3, 4, 5, 6, 7, 8, 9}, {-1, -2, -3}, {0, 1, 0, 1, 0, 1}};
  ValueMap sargs;
  sargs.emplace(s, Value::create_sequences<float>({3}, seqs));
  Value out = ys.eval_one(sargs);
  ASSERT_TRUE(out.is_sequence());
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{3, 1, 2}));
  auto per_seq = out.as_sequences<float>();
  for (size_t b = 0; b < seqs.size(); ++b) {
    ValueMap xargs;
    xargs.emplace(x, Value::create_batch<float>({3}, seqs[b]));
    EXPECT_EQ(per_seq[b], yx.eval_one(xargs).data().to_vector<float>()) << "sequence " << b;
  }
}

TEST(Sequential, ComposesAndPrints) {
  Function model = Sequential({Dense(2, {.activation = tanh}), Dense(1)});
  Variable xy = input_variable({2});
  Function z = model(xy);
  EXPECT_EQ(z.to_string(), "Composite(Tensor[2]) -> Tensor[1]");
  EXPECT_EQ(model.parameters().size(), 4u);
  EXPECT_EQ(uids(model.parameters()), uids(z.parameters()));
  Function id = Identity();
  ValueMap args;
  args.emplace(xy, Value::create_batch<float>({2}, {1, 2}));
  EXPECT_EQ(id(xy).eval_one(args).data().to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(Clone, ShareCloneFreeze) {
  Variable x = input_variable({2});
  Function f = Dense(2)(x);
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({2}, {1, -1}));
  auto reference = f.eval_one(args).data().to_vector<float>();
  Function shared = f.clone(ParameterCloneMethod::Share);
  Function cloned = f.clone(ParameterCloneMethod::Clone);
  Function frozen = f.clone(ParameterCloneMethod::Freeze);
  EXPECT_EQ(uids(shared.parameters()), uids(f.parameters()));
  EXPECT_NE(uids(cloned.parameters()), uids(f.parameters()));
  EXPECT_TRUE(frozen.parameters().empty());
  EXPECT_EQ(frozen.constants().size(), 2u);
  for (const Function& g : {shared, cloned, frozen})
    EXPECT_EQ(g.eval_one(args).data().to_vector<float>(), reference);
  // Changing the original's weights shows through the shared clone only.
  f.parameters()[1].set_value(NDArrayView::from_vector<float>({2}, {10, 10}));
  EXPECT_NE(shared.eval_one(args).data().to_vector<float>(), reference);
  EXPECT_EQ(cloned.eval_one(args).data().to_vector<float>(), reference);
  EXPECT_EQ(frozen.eval_one(args).data().to_vector<float>(), reference);
  // Substitution replaces an input.
  Variable x2 = input_variable({2});
  Function moved = f.clone(ParameterCloneMethod::Share, {{x, x2}});
  EXPECT_EQ(moved.arguments().size(), 1u);
  EXPECT_EQ(moved.arguments()[0], x2);
}

TEST(DefaultOptions, ScopesSetAndRestoreDefaults) {
  Variable x = input_variable({1});
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({1}, {-3}));
  auto run = [&](const Function& d) {
    d(x);
    d.parameters()[0].set_value(NDArrayView::from_vector<float>({1, 1}, {1}));
    return d(x).eval_one(args).data().to_vector<float>()[0];
  };
  {
    auto scope = default_options({.activation = relu});
    EXPECT_EQ(run(Dense(1)), 0.f);                         // relu(-3)
    EXPECT_EQ(run(Dense(1, {.activation = None})), -3.f);  // explicit none wins
    {
      auto inner = default_options({.bias = false});
      Function d = Dense(1);
      EXPECT_EQ(d.parameters().size(), 1u);
      EXPECT_EQ(run(d), 0.f);  // activation still from the outer scope
    }
  }
  EXPECT_EQ(run(Dense(1)), -3.f);  // scopes closed: no activation
}

TEST(Initializers, SeededAndScaledAsDocumented) {
  set_fixed_random_seed(7);
  auto a = parameter({100, 50}).value().to_vector<float>();
  set_fixed_random_seed(7);
  auto b = parameter({100, 50}).value().to_vector<float>();
  EXPECT_EQ(a, b);
  float limit = std::sqrt(6.f / 150.f);
  double sq = 0;
  for (float v : a) {
    EXPECT_LE(std::abs(v), limit);
    sq += double(v) * v;
  }
  EXPECT_NEAR(sq / a.size(), limit * limit / 3, 0.1 * limit * limit / 3);  // uniform variance
  auto h = parameter({400, 100}, he_normal()).value().to_vector<float>();
  double hs = 0;
  for (float v : h) hs += double(v) * v;
  EXPECT_NEAR(std::sqrt(hs / h.size()), std::sqrt(2.0 / 400), 0.003);
  auto z = parameter({3}, zeros()).value().to_vector<float>();
  EXPECT_EQ(z, (std::vector<float>{0, 0, 0}));
  auto u = parameter({1000}, uniform(0.5, 11)).value().to_vector<float>();
  EXPECT_EQ(u, parameter({1000}, uniform(0.5, 11)).value().to_vector<float>());  // explicit seed
  for (float v : u) EXPECT_LE(std::abs(v), 0.5f);
}

TEST(Executor, BadArgumentsAreClearErrors) {
  Variable x = input_variable({2}, {.name = "features"});
  Function y = Dense(3)(x);
  ValueMap wrong_shape;
  wrong_shape.emplace(x, Value::create_batch<float>({3}, {1, 2, 3}));
  try {
    y.eval(wrong_shape);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("features"), std::string::npos) << m;
    EXPECT_NE(m.find("[3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[2]"), std::string::npos) << m;
  }
  EXPECT_THROW(y.eval({}), ArgumentError);
  ValueMap wrong_type;
  wrong_type.emplace(x, Value::create_batch<double>({2}, {1, 2}));
  EXPECT_THROW(y.eval(wrong_type), ShapeError);
  Variable s = sequence::input_variable({2});
  ValueMap seq_for_batch;
  seq_for_batch.emplace(x, Value::create_sequences<float>({2}, {{1, 2, 3, 4}}));
  EXPECT_THROW(y.eval(seq_for_batch), ShapeError);
  Variable p = placeholder();
  EXPECT_THROW(Dense(3)(p).eval({}), StateError);
}

TEST(Executor, ReusesBuffersAcrossMinibatches) {
  Variable x = input_variable({4});
  Variable y = Dense(3, {.activation = tanh})(x);
  Executor exec({y});
  auto batch = [&](size_t n) {
    ValueMap a;
    a.emplace(x, Value::create_batch<float>({4}, std::vector<float>(4 * n, 0.5f)));
    return a;
  };
  exec.forward(batch(32), false);
  const void* first = exec.tensor(y).data;
  exec.forward(batch(32), false);
  EXPECT_EQ(exec.tensor(y).data, first);
  exec.forward(batch(7), false);  // smaller: same storage
  EXPECT_EQ(exec.tensor(y).data, first);
  EXPECT_EQ(exec.sample_count(y), 7u);
}

TEST(Executor, SharedParameterGradientsAccumulate) {
  Variable x = input_variable({2});
  Function d = Dense(1, {.bias = false});
  Function once = d(x);
  Function twice = plus(d(x), d(x));
  Parameter W = d.parameters()[0];
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({2}, {1, 2, 3, 4}));
  auto g1 = once.grad(args, {W}).at(W).data().to_vector<float>();
  auto g2 = twice.grad(args, {W}).at(W).data().to_vector<float>();
  ASSERT_EQ(g1.size(), 2u);
  EXPECT_FLOAT_EQ(g1[0], 4);  // Σ over samples of x0
  EXPECT_FLOAT_EQ(g1[1], 6);
  EXPECT_FLOAT_EQ(g2[0], 2 * g1[0]);
  EXPECT_FLOAT_EQ(g2[1], 2 * g1[1]);
}

TEST(Function, ArgumentsParametersAndCombinePrinting) {
  Variable x = input_variable({2}, {.name = "x"});
  Variable y = input_variable({2}, {.is_sparse = true, .name = "y"});
  Function model = Dense(2);
  Variable z = model(x);
  Function criterion = combine({cross_entropy_with_softmax(z, y), squared_error(z, y)});
  EXPECT_EQ(criterion.to_string(),
            "Composite(x: Tensor[2], y: SparseTensor[2]) -> Tuple[Tensor[1], Tensor[1]]");
  auto args = criterion.arguments();
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0], x);
  EXPECT_EQ(args[1], y);
  EXPECT_EQ(criterion.parameters().size(), 2u);
  EXPECT_EQ(criterion.outputs().size(), 2u);
  EXPECT_EQ(criterion.outputs()[0].owner().op_name(), "CrossEntropyWithSoftmax");
  EXPECT_TRUE(criterion.is_composite());
  EXPECT_FALSE(criterion.outputs()[0].owner().is_composite());
  EXPECT_NE(criterion.uid(), criterion.outputs()[0].owner().uid());
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(Function, ForwardKeepsStateForBackwardWithRootGradient) {
  Variable x = input_variable({2}, {.needs_gradient = true});
  Function d = Dense(2, {.bias = false});
  Function y = d(x);
  Parameter W = d.parameters()[0];
  W.set_value(NDArrayView::from_vector<float>({2, 2}, {1, 2, 3, 4}));
  ValueMap args;
  args.emplace(x, Value::create_batch<float>({2}, {1, 1, 2, 0}));
  auto [state, outputs] = y.forward(args);
  EXPECT_EQ(outputs.at(y.output()).data().to_vector<float>(), (std::vector<float>{4, 6, 2, 4}));
  // dL/dy = [[1, 0], [0, 2]]: dW = xᵀ·g, dx = g·Wᵀ.
  ValueMap root;
  root.emplace(y.output(), Value::create_batch<float>({2}, {1, 0, 0, 2}));
  ValueMap g = y.backward(state, root, {W, x});
  EXPECT_EQ(g.at(W).data().to_vector<float>(), (std::vector<float>{1, 4, 1, 0}));
  EXPECT_EQ(g.at(x).data().to_vector<float>(), (std::vector<float>{1, 3, 4, 8}));
  ValueMap wrong;
  wrong.emplace(y.output(), Value::create_batch<float>({2}, {1, 0}));
  EXPECT_THROW(y.backward(state, wrong, {W}), ShapeError);
}

TEST(Function, GradWithRespectToSequenceInput) {
  Variable s = sequence::input_variable({2}, {.needs_gradient = true});
  Function d = Dense(1, {.bias = false});
  Function y = d(s);
  d.parameters()[0].set_value(NDArrayView::from_vector<float>({2, 1}, {3, -1}));
  ValueMap args;
  args.emplace(s, Value::create_sequences<float>({2}, {{1, 2, 3, 4}, {5, 6}}));
  Value g = y.grad(args, {s}).at(s);
  ASSERT_TRUE(g.is_sequence());
  EXPECT_EQ(g.sequence_lengths(), (std::vector<size_t>{2, 1}));
  EXPECT_EQ(g.as_sequences<float>()[0], (std::vector<float>{3, -1, 3, -1}));
  EXPECT_EQ(g.as_sequences<float>()[1], (std::vector<float>{3, -1}));
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(Executor, DensifiesSparseInputsForDenseOnlyOps) {
  Variable y = input_variable({3}, {.is_sparse = true});
  Variable doubled = plus(y, y);
  ValueMap args;
  args.emplace(y, Value::one_hot(3, {2, 0}));
  EXPECT_EQ(Function(doubled).eval_one(args).data().to_vector<float>(),
            (std::vector<float>{0, 0, 2, 2, 0, 0}));
  Variable s = sequence::input_variable({3}, {.is_sparse = true});
  ValueMap seq;
  seq.emplace(s, Value::one_hot_sequences(3, {{1, 2}, {0}}));
  Value out = Function(plus(s, s)).eval_one(seq);
  EXPECT_EQ(out.as_sequences<float>()[0], (std::vector<float>{0, 2, 0, 0, 0, 2}));
  EXPECT_EQ(out.as_sequences<float>()[1], (std::vector<float>{2, 0, 0}));
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

TEST(Executor, InputsWithoutDynamicAxesTakeOneSample) {
  Variable g = input_variable({3}, {.dynamic_axes = {}});
  Parameter p = parameter(NDArrayView::from_vector<float>({3}, {1, 2, 3}));
  Function f = plus(p, g);
  EXPECT_EQ(f.to_string(), "Plus(Tensor[3]) -> Tensor[3]");
  ValueMap args;
  args.emplace(g, Value::create_batch<float>({3}, {10, 20, 30}));
  EXPECT_EQ(f.eval_one(args).data().to_vector<float>(), (std::vector<float>{11, 22, 33}));
  ValueMap two;
  two.emplace(g, Value::create_batch<float>({3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(f.eval(two), ShapeError);
}

}  // namespace
}  // namespace loom
