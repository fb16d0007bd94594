#include "loom/ops/assign.h"

#include <gtest/gtest.h>

#include "loom/ops/registry.h"

#include "loom/layers/dense.h"
#include "loom/learners/sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/losses.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

std::vector<float> vec(const Variable& v) {
  return v.value().to_vector<float>();
}
std::vector<float> vec(const Value& v) {
  return v.data().to_vector<float>();
}

// A plain-tensor input (no dynamic axes) and a Value of exactly one sample for it.
Variable plain_input(const NDShape& shape, DataType dtype = DataType::Float32) {
  return input_variable(shape, {.dtype = dtype, .name = "x", .dynamic_axes = {}});
}
Value one_sample(const NDShape& shape, const std::vector<float>& v) {
  return Value(NDArrayView::from_vector<float>(shape.prepend(1), v), false);
}

TEST(AssignTest, WritesTheValueAndReturnsIt) {
  Constant c = constant(NDArrayView::from_vector<float>({3}, {1, 2, 3}), "c");
  Variable x = plain_input({3});
  Function f = assign(c, c + x, "assign_c");
  EXPECT_EQ(f.op_name(), "Assign");
  EXPECT_EQ(f.output().shape(), NDShape({3}));
  EXPECT_FALSE(f.output().has_batch_axis());
  ValueMap args{{x, one_sample({3}, {10, 20, 30})}};
  EXPECT_EQ(vec(f.eval_one(args)), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(vec(c), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(vec(f.eval_one(args)), (std::vector<float>{21, 42, 63}));
  EXPECT_EQ(vec(c), (std::vector<float>{21, 42, 63}));

  // A parameter as ref, float64.
  Parameter p = parameter(NDArrayView::from_vector<double>({2}, {0.5, -1}), "p");
  Function g = assign(p, p * p);
  EXPECT_EQ(g.eval_one({}).data().to_vector<double>(), (std::vector<double>{0.25, 1}));
  EXPECT_EQ(p.value().to_vector<double>(), (std::vector<double>{0.25, 1}));
}

TEST(AssignTest, WritesExactlyOncePerEvaluation) {
  Constant counter = constant(NDArrayView::from_vector<float>({1}, {0}), "counter");
  Constant one = constant(1.0);
  Variable next = assign(counter, counter + one);
  // Three consumers of the assign's output: still one write per evaluation.
  Function g = combine({next * constant(2.0), next + one, next});
  for (int i = 1; i <= 3; ++i) {
    ValueMap out = g.eval({});
    const auto outs = g.outputs();
    EXPECT_EQ(vec(out.at(outs[0])), std::vector<float>{2.0f * float(i)});
    EXPECT_EQ(vec(out.at(outs[1])), std::vector<float>{float(i) + 1});
    EXPECT_EQ(vec(out.at(outs[2])), std::vector<float>{float(i)});
    EXPECT_EQ(vec(counter), std::vector<float>{float(i)});
  }
  // An evaluation that does not ask for the assign (or anything depending on it) writes nothing.
  Function h = combine({Variable(counter + one), next});
  h.eval({}, {h.outputs()[0]});
  EXPECT_EQ(vec(counter), std::vector<float>{3});
}

// CNTK: every other use of ref in the same evaluation sees the old value, whether it runs
// before or after the assign; only the assign's output (and what depends on it) is new.
TEST(AssignTest, OtherReadersOfRefSeeTheOldValueDuringTheEvaluation) {
  Parameter p = parameter(NDArrayView::from_vector<float>({2}, {1, 2}), "p");
  Constant ten = constant(10.0);
  Variable a = assign(p, p + ten);
  Variable before = p * constant(1.0);  // not an input of the assign
  Variable after_new = a * constant(1.0);
  for (auto outputs :
       {std::vector<Variable>{a, before, after_new}, std::vector<Variable>{before, a, after_new},
        std::vector<Variable>{after_new, before, a}}) {
    p.set_value(NDArrayView::from_vector<float>({2}, {1, 2}));
    Function g = combine(outputs);
    const ValueMap out = g.eval({});
    const auto outs = g.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::vector<float> got = vec(out.at(outs[i]));
      if (outputs[i] == before) {
        EXPECT_EQ(got, (std::vector<float>{1, 2})) << "reader of p at position " << i;
      } else {
        EXPECT_EQ(got, (std::vector<float>{11, 12})) << "new value at position " << i;
      }
    }
    EXPECT_EQ(vec(p), (std::vector<float>{11, 12}));  // after the evaluation: the new value
  }
}

TEST(AssignTest, RefAsItsOwnInputAndAsAGraphOutput) {
  Constant c = constant(NDArrayView::from_vector<float>({2}, {3, 4}));
  Function same = assign(c, c);
  EXPECT_EQ(vec(same.eval_one({})), (std::vector<float>{3, 4}));
  EXPECT_EQ(vec(c), (std::vector<float>{3, 4}));
  // ref itself as an output of the graph: the value it had during the evaluation.
  Function g = combine({assign(c, c * c), c});
  ValueMap out = g.eval({});
  EXPECT_EQ(vec(out.at(g.outputs()[0])), (std::vector<float>{9, 16}));
  EXPECT_EQ(vec(out.at(g.outputs()[1])), (std::vector<float>{3, 4}));
  EXPECT_EQ(vec(c), (std::vector<float>{9, 16}));
}

// The gradient passes through to input unchanged; ref gets none (p's gradient below is only
// the one through p * 3, not that plus one from ref).
TEST(AssignTest, DifferentiableWithRespectToInputOnly) {
  Parameter p = parameter(NDArrayView::from_vector<double>({2}, {1, 2}), "p");
  Function f = assign(p, p * constant(3.0, DataType::Float64));
  ValueMap g = f.grad({}, {p});
  EXPECT_EQ(g.at(p).data().to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_EQ(p.value().to_vector<double>(), (std::vector<double>{3, 6}));  // it ran once

  // Finite differences: the output does not depend on ref's (changing) value.
  Constant ref = constant(NDArrayView(DataType::Float64, {3}), "ref");
  Parameter w = parameter(random_array({3}, DataType::Float64, 1), "w");
  Variable x = plain_input({3}, DataType::Float64);
  Function h = assign(ref, tanh(w * x));
  ValueMap args{{x, Value(random_array({1, 3}, DataType::Float64, 2), false)}};
  expect_gradients_match(h, args, {w, x});
  EXPECT_FALSE(find_op("Assign").traits({}).differentiable.contains(0));
  EXPECT_TRUE(find_op("Assign").traits({}).differentiable.contains(1));
}

// In a Trainer's criterion: the assign runs once per minibatch (forward and backward are one
// evaluation) and does not disturb training.
TEST(AssignTest, RunsOncePerMinibatchInsideATrainer) {
  Variable x = input_variable({2}, {.name = "x"});
  Variable t = input_variable({1}, {.name = "t"});
  Function layer = Dense(1);
  Variable y = layer(x);
  Constant counter = constant(NDArrayView::from_vector<float>({1}, {0}), "minibatches");
  Variable count = assign(counter, counter + constant(1.0));
  Variable loss = squared_error(y, t) + constant(0.0) * count;
  Trainer trainer(y, loss,
                  {sgd(layer.parameters(), learning_rate_schedule(0.1, UnitType::sample))});
  ValueMap data;
  data.emplace(x, Value::create_batch<float>({2}, {1, 0, 0, 1}));
  data.emplace(t, Value::create_batch<float>({1}, {1, 0}));
  for (int i = 1; i <= 4; ++i) {
    EXPECT_TRUE(trainer.train_minibatch(data));
    EXPECT_EQ(vec(counter), std::vector<float>{float(i)});
  }
}

TEST(AssignTest, Errors) {
  Parameter p = parameter(NDArrayView::from_vector<float>({2}, {1, 2}), "p");
  Constant c = constant(NDArrayView::from_vector<float>({2}, {1, 2}), "c");
  // ref must be a Parameter or Constant.
  Variable in = plain_input({2});
  EXPECT_THROW(assign(in, c), ArgumentError);
  EXPECT_THROW(assign(p + c, c), ArgumentError);
  // Same shape (no broadcasting), same type, no dynamic axes.
  EXPECT_THROW(assign(p, constant(NDArrayView::from_vector<float>({3}, {1, 2, 3}))), ShapeError);
  EXPECT_THROW(assign(p, constant(1.0)), ShapeError);
  EXPECT_THROW(assign(p, constant(NDArrayView::from_vector<double>({2}, {1, 2}))), ShapeError);
  EXPECT_THROW(assign(p, input_variable({2})), ShapeError);
  try {
    assign(c, constant(NDArrayView::from_vector<float>({2, 1}, {1, 2})));
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("Assign"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ref c: Tensor[2]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
