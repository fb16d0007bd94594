// The universal learner: a learner written as an expression of assign ops (seed 003).
#include "loom/learners/universal.h"

#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/learners/learners_test_util.h"
#include "loom/learners/sgd.h"
#include "loom/ops/assign.h"
#include "loom/ops/elementwise.h"

namespace loom {
namespace {

using testing::inspect_update;
using testing::printed;

// Seed 003's my_rmsprop, line by line.
Function my_rmsprop(const std::vector<Parameter>& parameters,
                    const std::vector<Variable>& gradients) {
  const double rho = 0.999;
  const double lr = 0.01;
  // We use the following accumulator to store the moving average of every squared gradient
  std::vector<Constant> accumulators;
  for (const Parameter& p : parameters) {
    NDArrayView init(p.dtype(), p.shape());
    init.fill(1e-6);
    accumulators.push_back(constant(init));
  }
  std::vector<Variable> update_funcs;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& p = parameters[i];
    const Variable& g = gradients[i];
    const Constant& a = accumulators[i];
    const DataType t = p.dtype();
    // `a` will be replaced by an exponential moving average of squared gradients; the
    // return value is the expression rho * a + (1-rho) * g * g
    Variable accum_new = assign(a, constant(rho, t) * a + constant(1 - rho, t) * g * g);
    // The rmsprop update; accum_new creates the dependency on the assign above, so that
    // evaluating this graph runs both assigns.
    update_funcs.push_back(assign(p, p - constant(lr, t) * g / sqrt(accum_new)));
  }
  return combine(update_funcs);
}

std::shared_ptr<Learner> my_learner(std::vector<Parameter> p) {
  return universal(my_rmsprop, std::move(p));
}

// Seed 003, In [6]: inspect_update(my_learner, 10, 2) prints [-0.5397 -0.5397].
TEST(UniversalLearnerTest, Seed003MyRmsprop) {
  EXPECT_EQ(printed(inspect_update(my_learner, 10, 2)), "-0.5397");
  // The current manual (sum gradient = M = 10) prints [-0.5399 -0.5399].
  EXPECT_EQ(printed(inspect_update(my_learner, 10, 2, 10.0f)), "-0.5399");
}

// The same experiment on the seed's model: every element of every parameter of
// Sequential([Dense(4, relu), Dense(2)]) over a 3-dimensional input.
TEST(UniversalLearnerTest, Seed003MyRmspropOnTheSeedModel) {
  Variable features = input_variable({3});
  Function z = Sequential({Dense(4, {.activation = relu}), Dense(2)})(features);
  auto params = z.parameters();
  ASSERT_EQ(params.size(), 4u);
  auto learner = universal(my_rmsprop, params);
  std::unordered_map<Variable, NDArrayView> updates;
  for (Parameter& p : params) {
    p.value().fill(0);
    NDArrayView g(p.dtype(), p.shape());
    g.fill(1);
    updates.emplace(p, g);
  }
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(learner->update(updates, 10));
  for (const Parameter& p : params) {
    for (float v : p.value().to_vector<float>()) EXPECT_EQ(printed(v), "-0.5397") << p.uid();
  }
  // The gradients are left as they were.
  for (auto& [p, g] : updates) EXPECT_EQ(g.to_vector<float>(), std::vector<float>(g.size(), 1.0f));
}

// CNTK's LearnerUniversal has LearningRateSchedule(1.0): a rate of 1 per minibatch, reported
// at the first update; it is not applied by the learner (the graph has its own).
TEST(UniversalLearnerTest, LearningRateIsCntksFixedOne) {
  Parameter p = testing::make_parameter({0.0f});
  auto learner = universal(my_rmsprop, {p});
  EXPECT_EQ(learner->learning_rate(), 1.0);
  std::vector<std::pair<std::string, double>> reported;
  learner->set_progress_observer(
      [&](const std::string& k, double v) { reported.emplace_back(k, v); });
  std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({1}, {1})}};
  EXPECT_TRUE(learner->update(g, 4));
  EXPECT_TRUE(learner->update(g, 4, /*sweep_end=*/true));
  EXPECT_EQ(reported,
            (std::vector<std::pair<std::string, double>>{{"Learning rate per minibatch", 1.0}}));
  EXPECT_EQ(learner->total_number_of_samples_seen(), 8u);
  EXPECT_EQ(learner->total_number_of_minibatches_seen(), 2u);
  EXPECT_EQ(learner->total_number_of_sweeps_seen(), 1u);
  // A rate of 0 stops it, as any learner.
  const float before = p.value().to_vector<float>()[0];
  learner->reset_learning_rate(learning_parameter_schedule(0.0));
  EXPECT_FALSE(learner->update(g, 4));
  EXPECT_EQ(p.value().to_vector<float>()[0], before);
}

// Each update evaluates the graph exactly once: a counter kept in a constant counts updates;
// the update sees the gradient it was given (here, the sum over the minibatch, as is).
TEST(UniversalLearnerTest, EvaluatesTheGraphOncePerUpdate) {
  Constant counter = constant(NDArrayView::from_vector<float>({1}, {0}), "updates");
  auto plain_sgd = [&](const std::vector<Parameter>& ps, const std::vector<Variable>& gs) {
    std::vector<Variable> outs;
    for (size_t i = 0; i < ps.size(); ++i) outs.push_back(assign(ps[i], ps[i] - gs[i]));
    outs.push_back(assign(counter, counter + constant(1.0)));
    return combine(outs);
  };
  Parameter a = testing::make_parameter({1.0f, 2.0f});
  Parameter b = testing::make_parameter<double>({5.0});
  auto learner = universal(plain_sgd, {a, b});
  auto* u = dynamic_cast<UniversalLearner*>(learner.get());
  ASSERT_NE(u, nullptr);
  ASSERT_EQ(u->gradient_variables().size(), 2u);
  EXPECT_EQ(u->gradient_variables()[0].shape(), a.shape());
  EXPECT_EQ(u->gradient_variables()[1].dtype(), DataType::Float64);
  EXPECT_FALSE(u->gradient_variables()[0].has_batch_axis());
  EXPECT_EQ(u->gradient_variables()[0].name(), "gradient");
  std::unordered_map<Variable, NDArrayView> g{
      {a, NDArrayView::from_vector<float>({2}, {0.5f, -1.0f})},
      {b, NDArrayView::from_vector<double>({1}, {2.0})}};
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(learner->update(g, 7));
    EXPECT_EQ(counter.value().to_vector<float>(), std::vector<float>{float(i)});
  }
  EXPECT_EQ(testing::values_of(a), (std::vector<float>{-0.5f, 5.0f}));
  EXPECT_EQ(testing::values_of<double>(b), std::vector<double>{-1.0});
}

// N updates, checkpoint, M updates; a fresh learner restored from the checkpoint repeats the M
// updates bit for bit (the accumulators in the graph's constants are part of the checkpoint).
TEST(UniversalLearnerTest, CheckpointRoundTrip) {
  testing::expect_checkpoint_round_trip(my_learner);
}

TEST(UniversalLearnerTest, CheckpointHoldsTheGraphState) {
  Parameter p = testing::make_parameter({0.0f, 0.0f});
  auto learner = universal(my_rmsprop, {p});
  std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({2}, {1, -2})}};
  learner->update(g, 3);
  learner->update(g, 5, true);
  const Dictionary d = learner->create_checkpoint();
  EXPECT_EQ(d.get<uint64_t>("sample_count"), 8u);
  EXPECT_EQ(d.get<uint64_t>("minibatchCount"), 2u);
  EXPECT_EQ(d.get<uint64_t>("sweepCount"), 1u);
  // The graph's constants: the accumulator (shape (2,)) and the scalars rho, 1 - rho and lr.
  const auto& state = d.get<DictionaryVector>("update_function_state");
  ASSERT_EQ(state.size(), 4u);
  std::vector<float> acc;
  for (const auto& s : state)
    if (s.get<NDArrayView>().shape() == NDShape{2}) {
      EXPECT_TRUE(acc.empty());
      acc = s.get<NDArrayView>().to_vector<float>();
    }
  ASSERT_EQ(acc.size(), 2u);
  EXPECT_NEAR(acc[0], 0.999 * (0.999 * 1e-6 + 0.001) + 0.001, 1e-7);
  EXPECT_NEAR(acc[1], 4 * (0.999 * (0.999 * 1e-6 / 4 + 0.001) + 0.001), 1e-6);

  // Restored into a fresh learner: counters and accumulators come back.
  Parameter q = parameter(p.value().deep_clone());
  auto fresh = universal(my_rmsprop, {q});
  fresh->restore_from_checkpoint(d);
  EXPECT_EQ(fresh->total_number_of_samples_seen(), 8u);
  EXPECT_EQ(fresh->total_number_of_sweeps_seen(), 1u);
  std::unordered_map<Variable, NDArrayView> gq{{q, g.at(p)}};
  learner->update(g, 2);
  fresh->update(gq, 2);
  EXPECT_EQ(testing::values_of(q), testing::values_of(p));
  // Without the accumulators the next step would differ.
  Parameter r = parameter(q.value().deep_clone());
  auto unrestored = universal(my_rmsprop, {r});
  std::unordered_map<Variable, NDArrayView> gr{{r, g.at(p)}};
  unrestored->update(gr, 2);
  learner->update(g, 2);
  EXPECT_NE(testing::values_of(r), testing::values_of(p));

  // A checkpoint of another kind of graph is refused.
  auto other = universal(
      [](const std::vector<Parameter>& ps, const std::vector<Variable>& gs) {
        return combine({assign(ps[0], ps[0] - gs[0])});
      },
      {testing::make_parameter({0.0f, 0.0f})});
  EXPECT_THROW(other->restore_from_checkpoint(d), StateError);
  EXPECT_THROW(fresh->restore_from_checkpoint(sgd({q}, 0.1)->create_checkpoint()), StateError);
}

TEST(UniversalLearnerTest, Errors) {
  Parameter p = testing::make_parameter({0.0f, 0.0f});
  Parameter unused = testing::make_parameter({0.0f});
  // The graph must use every parameter.
  auto only_first = [](const std::vector<Parameter>& ps, const std::vector<Variable>& gs) {
    return combine({assign(ps[0], ps[0] - gs[0])});
  };
  EXPECT_THROW(universal(only_first, {p, unused}), ArgumentError);
  // It may read only the gradients it is given.
  Variable stranger = input_variable({2}, {.name = "stranger", .dynamic_axes = {}});
  EXPECT_THROW(universal(
                   [&](const std::vector<Parameter>& ps, const std::vector<Variable>& gs) {
                     return combine({assign(ps[0], ps[0] - gs[0] * stranger)});
                   },
                   {p}),
               ArgumentError);
  EXPECT_THROW(universal(nullptr, {p}), ArgumentError);
  EXPECT_THROW(universal(only_first, {}), ArgumentError);
  EXPECT_THROW(universal(only_first, {parameter({NDShape::kInferred, 2})}), ArgumentError);
  // update(): every gradient present, of the parameter's shape and type; nothing changes on
  // a bad call.
  auto learner = universal(only_first, {p});
  std::unordered_map<Variable, NDArrayView> none;
  EXPECT_THROW(learner->update(none, 1), ArgumentError);
  std::unordered_map<Variable, NDArrayView> wrong{
      {p, NDArrayView::from_vector<float>({3}, {1, 1, 1})}};
  EXPECT_THROW(learner->update(wrong, 1), ShapeError);
  std::unordered_map<Variable, NDArrayView> f64{{p, NDArrayView::from_vector<double>({2}, {1, 1})}};
  EXPECT_THROW(learner->update(f64, 1), ShapeError);
  std::unordered_map<Variable, NDArrayView> good{{p, NDArrayView::from_vector<float>({2}, {1, 1})}};
  EXPECT_THROW(learner->update(good, 0), ArgumentError);
  EXPECT_EQ(testing::values_of(p), (std::vector<float>{0, 0}));
  EXPECT_EQ(learner->total_number_of_minibatches_seen(), 0u);
}

}  // namespace
}  // namespace loom
