// A learner written as a C++ class (seed 003's MySgd).
#include "loom/learners/user_learner.h"

#include <gtest/gtest.h>

#include <map>

#include "loom/core/error.h"
#include "loom/layers/dense.h"
#include "loom/layers/sequential.h"
#include "loom/learners/learners_test_util.h"
#include "loom/ops/elementwise.h"

namespace loom {
namespace {

using testing::printed;

// Seed 003's MySgd, as its Python does it: one graph per parameter shape computing
// param - lr / count * gradient on inputs with a batch axis, evaluated per parameter; the
// one-sample result, without its batch axis, becomes the parameter's value.
class MySgd : public UserLearner {
 public:
  MySgd(std::vector<Parameter> parameters, LearningRateSchedule lr_schedule)
      : UserLearner(parameters, lr_schedule) {
    sample_count_input_ = input_variable({}, {.name = "count"});
    const double lr = lr_schedule[0];  // assuming constant learning rate
    Variable eta = constant(lr) / sample_count_input_;
    // we need one graph per parameter shape
    for (const Parameter& param : parameters) {
      const auto& p_shape = param.shape().dims();
      grad_input_[p_shape] = input_variable(param.shape());
      new_p_[p_shape] = param - eta * grad_input_[p_shape];
    }
  }

  bool update(std::unordered_map<Variable, NDArrayView>& gradient_values,
              size_t training_sample_count, bool /*sweep_end*/) override {
    for (auto& [p, g] : gradient_values) {
      const Function& new_p = new_p_.at(p.shape().dims());
      const Variable& grad_input = grad_input_.at(p.shape().dims());
      ValueMap data;
      data.emplace(
          sample_count_input_,
          Value(NDArrayView::from_vector<float>({1}, {float(training_sample_count)}), false));
      data.emplace(grad_input, Value(g.reshaped(g.shape().prepend(1)), false));
      Value result = new_p.eval_one(data);
      const NDShape& shape = result.data().shape();
      // result has the shape of a complete minibatch, but contains only one tensor, which we
      // want to write to p: slice off the leading dynamic axis.
      NDArrayView static_tensor = result.data().reshaped(shape.sub_shape(1));
      p.set_value(static_tensor);
    }
    ++updates;
    return true;
  }

  size_t updates = 0;

 private:
  Variable sample_count_input_;
  std::map<std::vector<size_t>, Variable> grad_input_;
  std::map<std::vector<size_t>, Function> new_p_;
};

// Seed 003, In [7]: inspect_user_learner_update(my_sgd, 64, 10) prints [-0.1562 -0.1562] for
// the seed's model (every element of every parameter: 10 steps of 1/64).
TEST(UserLearnerTest, Seed003MySgd) {
  Variable features = input_variable({3});
  Function z = Sequential({Dense(4, {.activation = relu}), Dense(2)})(features);
  const size_t mb_size = 64;
  auto lr_schedule = learning_rate_schedule(1, UnitType::minibatch);
  auto my_sgd = std::make_shared<MySgd>(z.parameters(), lr_schedule);

  // inspect_user_learner_update(learner, mbsize, count)
  std::vector<Parameter> easy_parameters = my_sgd->parameters();
  std::vector<NDArrayView> old_values;
  for (auto& p : easy_parameters) old_values.push_back(p.value().deep_clone());
  for (auto& p : easy_parameters) p.value().fill(0);
  std::unordered_map<Variable, NDArrayView> updates;
  for (auto& p : easy_parameters) {
    NDArrayView one(p.dtype(), p.shape());
    one.fill(1);
    updates.emplace(p, one);
  }
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(my_sgd->update(updates, mb_size, /*sweep_end=*/false));
  std::vector<std::vector<float>> ret_values;
  for (auto& p : easy_parameters) ret_values.push_back(p.value().to_vector<float>());
  for (size_t i = 0; i < easy_parameters.size(); ++i) easy_parameters[i].set_value(old_values[i]);

  ASSERT_EQ(ret_values.size(), 4u);
  EXPECT_EQ(printed(ret_values[0][0]), "-0.1562");
  for (const auto& values : ret_values)
    for (float v : values) EXPECT_EQ(v, -0.15625f);
  EXPECT_EQ(easy_parameters[0].value().to_vector<float>(), old_values[0].to_vector<float>());
}

// The base class gives what every learner has; update() is the user's alone.
TEST(UserLearnerTest, BaseProvidesParametersScheduleAndCheckpoint) {
  Parameter p = testing::make_parameter({0.0f});
  MySgd learner({p}, learning_rate_schedule(std::vector<double>{0.5, 0.25}, UnitType::sample, 4));
  EXPECT_EQ(learner.parameters().size(), 1u);
  EXPECT_EQ(learner.learning_rate(), 0.5);
  std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({1}, {1})}};
  EXPECT_TRUE(learner.update(g, 2, false));
  // The base advances no counter and reports nothing unless the user learner asks it to.
  EXPECT_EQ(learner.total_number_of_samples_seen(), 0u);
  const Dictionary d = learner.create_checkpoint();
  EXPECT_EQ(d.get<std::string>("type"), "Learner");
  learner.reset_learning_rate(learning_rate_schedule(0.1, UnitType::sample));
  EXPECT_EQ(learner.learning_rate(), 0.1);
  learner.restore_from_checkpoint(d);
  EXPECT_EQ(learner.learning_rate(), 0.5);
  EXPECT_THROW(MySgd({}, 0.1), ArgumentError);
  EXPECT_THROW(MySgd({p, p}, 0.1), ArgumentError);
}

// A user learner that wants the built-in bookkeeping uses the protected helpers.
class CountingSgd : public UserLearner {
 public:
  CountingSgd(std::vector<Parameter> p, LearningRateSchedule lr)
      : UserLearner(std::move(p), std::move(lr)) {}
  bool update(std::unordered_map<Variable, NDArrayView>& gradient_values,
              size_t training_sample_count, bool sweep_end) override {
    if (!begin_update(training_sample_count)) return false;
    const double lr = effective_learning_rate(training_sample_count);
    for (auto& [p, g] : gradient_values) {
      float* w = p.value().data<float>();
      const float* d = g.data<float>();
      for (size_t i = 0; i < g.size(); ++i) w[i] -= float(lr) * d[i];
    }
    advance_counters(training_sample_count, sweep_end);
    return true;
  }
};

TEST(UserLearnerTest, HelpersGiveTheBuiltInBookkeeping) {
  Parameter p = testing::make_parameter({0.0f});
  CountingSgd learner({p},
                      learning_rate_schedule(std::vector<double>{0.5, 0.0}, UnitType::sample, 4));
  std::vector<std::string> keys;
  learner.set_progress_observer([&](const std::string& k, double) { keys.push_back(k); });
  std::unordered_map<Variable, NDArrayView> g{{p, NDArrayView::from_vector<float>({1}, {1})}};
  EXPECT_TRUE(learner.update(g, 2, false));
  EXPECT_TRUE(learner.update(g, 2, true));
  EXPECT_EQ(testing::values_of(p), std::vector<float>{-1.0f});  // 2 x 0.5 x 1
  EXPECT_EQ(learner.total_number_of_samples_seen(), 4u);
  EXPECT_EQ(learner.total_number_of_sweeps_seen(), 1u);
  EXPECT_FALSE(learner.update(g, 2, false));                    // the schedule reached 0
  EXPECT_EQ(testing::values_of(p), std::vector<float>{-1.0f});  // 2 x 0.5 x 1
  EXPECT_EQ(keys,
            (std::vector<std::string>{"Learning rate per sample", "Learning rate per sample"}));
}

}  // namespace
}  // namespace loom
