// Executor::backward's gradient-ready calls (what lets a distributed learner send gradients
// while backward goes on): each parameter is reported once, in gradient_order(), and the
// gradient it is reported with is already final.
#include <gtest/gtest.h>

#include <algorithm>

#include "loom/graph/executor.h"
#include "loom/graph/graph_test_util.h"
#include "loom/layers/dense.h"
#include "loom/layers/recurrent.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

struct Reported {
  std::vector<Variable> order;
  std::vector<std::vector<float>> gradients;  // as they were when reported
};

// Runs backward from root with a recording hook and checks what the hook saw against the
// executor's plan and its gradients at the end.
Reported backward_reporting(Executor& exec, const Variable& root,
                            const std::vector<Parameter>& parameters) {
  Reported r;
  exec.backward(root, nullptr, [&](const Variable& p, const NDArrayView& g) {
    r.order.push_back(p);
    r.gradients.push_back(g.to_vector<float>());
  });
  EXPECT_EQ(r.order, exec.gradient_order());
  EXPECT_EQ(r.order.size(), parameters.size());
  for (const Parameter& p : parameters)
    EXPECT_EQ(std::count(r.order.begin(), r.order.end(), Variable(p)), 1) << p.describe();
  for (size_t i = 0; i < r.order.size(); ++i)
    EXPECT_EQ(r.gradients[i], exec.parameter_gradient(r.order[i]).to_vector<float>())
        << r.order[i].describe() << " changed after it was reported";
  return r;
}

size_t position(const Reported& r, const Variable& p) {
  return size_t(std::find(r.order.begin(), r.order.end(), p) - r.order.begin());
}

TEST(GradientReady, EachParameterOnceWhenFinalInBackwardOrder) {
  Variable x = input_variable({4}, {.name = "x"});
  Variable y = input_variable({3}, {.name = "y"});
  Parameter w1 = parameter(NDArrayView::from_vector<float>({4, 5}, random_floats(20, 1)));
  Parameter b1 = parameter(NDArrayView::from_vector<float>({5}, random_floats(5, 2)));
  Parameter w2 = parameter(NDArrayView::from_vector<float>({5, 3}, random_floats(15, 3)));
  // s is read twice, far apart: its gradient is final only after its first reader's backward.
  Parameter s = parameter(NDArrayView::from_vector<float>({3}, random_floats(3, 4)));
  Variable h = relu(plus(times(x, w1), b1));
  Variable z = plus(element_times(plus(times(h, w2), s), s), s);
  Variable loss = squared_error(z, y);
  const std::vector<Parameter> parameters{w1, b1, w2, s};
  Executor exec({loss}, {w1, b1, w2, s});
  const ValueMap arguments{{x, Value::create_batch<float>({4}, random_floats(24, 5))},
                           {y, Value::create_batch<float>({3}, random_floats(18, 6))}};
  exec.forward(arguments, true);
  exec.backward(loss);
  std::vector<std::vector<float>> plain;
  for (const Parameter& p : parameters)
    plain.push_back(exec.parameter_gradient(p).to_vector<float>());

  exec.forward(arguments, true);
  const Reported r = backward_reporting(exec, loss, parameters);
  // The reporting changes no gradient.
  for (size_t i = 0; i < parameters.size(); ++i)
    EXPECT_EQ(exec.parameter_gradient(parameters[i]).to_vector<float>(), plain[i]);
  // The output layer's parameters are final before the first layer's.
  EXPECT_LT(position(r, w2), position(r, w1));
  EXPECT_LT(position(r, s), position(r, b1));
}

// A parameter backward does not reach from this root is reported with zeros, even when an
// earlier backward from another root wrote its gradient.
TEST(GradientReady, UnreachedParameterIsReportedAsZeros) {
  Variable x = input_variable({2}, {.name = "x"});
  Parameter w = parameter(NDArrayView::from_vector<float>({2, 2}, random_floats(4, 7)));
  Parameter q = parameter(NDArrayView::from_vector<float>({2, 2}, random_floats(4, 8)));
  Variable a = reduce_sum(times(x, w));
  Variable b = reduce_sum(times(x, q));
  Executor exec({a, b}, {w, q});
  exec.forward({{x, Value::create_batch<float>({2}, random_floats(6, 9))}}, true);
  exec.backward(b);
  EXPECT_NE(exec.parameter_gradient(q).to_vector<float>(), std::vector<float>(4, 0.0f));
  const Reported r = backward_reporting(exec, a, {w, q});
  EXPECT_EQ(r.gradients[position(r, q)], std::vector<float>(4, 0.0f));
}

// A recurrent loop runs backward as one block: its parameters are final after the whole loop,
// after the parameters of the layer on top of it.
TEST(GradientReady, LoopParametersAfterTheLoop) {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  Variable y = input_variable({2}, {.name = "y"});
  Function recurrence = Recurrence(LSTM(4), {.fused = false});
  Function dense = Dense(2);
  Variable z = dense(sequence::last(recurrence(x).output()).output());
  Variable loss = squared_error(z, y);
  const std::vector<Parameter> parameters = Function(loss).parameters();
  Executor exec({loss}, {parameters.begin(), parameters.end()});
  exec.forward({{x, Value::create_sequences<float>({3}, random_floats(3 * 7, 10), {3, 4})},
                {y, Value::create_batch<float>({2}, random_floats(4, 11))}},
               true);
  const Reported r = backward_reporting(exec, loss, parameters);
  for (const Parameter& d : dense.parameters())
    for (const Parameter& l : recurrence.parameters()) EXPECT_LT(position(r, d), position(r, l));
}

}  // namespace
}  // namespace loom
