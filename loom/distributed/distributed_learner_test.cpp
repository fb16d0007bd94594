// The distributed learners on one worker (no mpirun); tests/distributed runs them on several.
#include "loom/distributed/distributed_learner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/graph/executor.h"
#include "loom/layers/dense.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/learners/sgd.h"
#include "loom/ops/ops.h"

namespace loom::distributed {
namespace {

using Gradients = std::unordered_map<Variable, NDArrayView>;

Parameter make_parameter(std::vector<float> values) {
  return parameter(NDArrayView::from_vector<float>({values.size()}, values));
}

std::shared_ptr<Learner> momentum(const Parameter& p) {
  return momentum_sgd({p}, learning_rate_schedule(0.1, UnitType::sample), 0.9);
}

// One worker: a data-parallel learner (float or quantized) takes the local learner's steps,
// and MinibatchInfo's sums are its own.
TEST(DistributedLearnerTest, OneWorkerDataParallelIsTheLocalLearner) {
  for (int bits : {32, 1}) {
    Parameter p = make_parameter({1, 2, 3}), q = make_parameter({1, 2, 3});
    auto learner = data_parallel_distributed_learner(momentum(p), 0, bits);
    auto local = momentum(q);
    for (int step = 0; step < 4; ++step) {
      auto g = NDArrayView::from_vector<float>({3}, {0.5f, -1.0f, float(step)});
      Gradients gp{{p, g.deep_clone()}}, gq{{q, g.deep_clone()}};
      const NDArrayView given = gp.at(p);
      MinibatchInfo info{.number_of_samples = 4, .training_loss = 2.5, .eval_criterion = 1.0};
      EXPECT_TRUE(learner->update(gp, info));
      EXPECT_TRUE(gp.at(p).aliases(given));  // a Trainer's tensors stay in the map
      local->update(gq, 4);
      EXPECT_EQ(info.number_of_samples, 4u);
      EXPECT_EQ(info.training_loss, 2.5);
      EXPECT_EQ(info.eval_criterion, 1.0);
    }
    EXPECT_EQ(p.value().to_vector<float>(), q.value().to_vector<float>()) << bits << " bits";
    EXPECT_EQ(learner->total_number_of_samples_seen(), 16u);
    EXPECT_EQ(learner->total_number_of_minibatches_seen(), 4u);
    EXPECT_EQ(learner->minibatch_size_scale_factor(), 1u);
  }
}

// Float data-parallel starts its sum during the backward pass: once backward has reported the
// gradients, the round is under way (another collective is refused until update() ends it),
// and the step equals the local learner's.
TEST(DistributedLearnerTest, DataParallelStartsItsSumDuringBackward) {
  Variable x = input_variable({3}), y = input_variable({2});
  Function model = Dense(2);
  Variable loss = squared_error(model(x).output(), y);
  std::vector<Parameter> parameters = model.parameters();
  std::vector<Variable> wrt(parameters.begin(), parameters.end());
  std::vector<NDArrayView> start;
  for (const Parameter& p : parameters) start.push_back(p.value().deep_clone());
  const ValueMap data{{x, Value::create_batch<float>({3}, {1, 2, 3, -1, 0, 2})},
                      {y, Value::create_batch<float>({2}, {1, 0, 0, 1})}};
  auto comm = mpi_communicator();
  auto learner = data_parallel_distributed_learner(sgd(parameters, 0.1));
  Executor exec({loss}, wrt);
  learner->set_gradient_order(exec.gradient_order());
  exec.forward(data, true);
  exec.backward(loss, nullptr,
                [&](const Variable& p, const NDArrayView& g) { learner->gradient_ready(p, g); });
  EXPECT_THROW(comm->barrier(), StateError);  // the sum's round is under way
  MinibatchInfo info{.number_of_samples = 2};
  EXPECT_TRUE(learner->update(exec.parameter_gradients(), info));
  comm->barrier();  // update() finished the round
  std::vector<float> distributed;
  for (const Parameter& p : parameters)
    for (float v : p.value().to_vector<float>()) distributed.push_back(v);

  for (size_t i = 0; i < parameters.size(); ++i) parameters[i].value().copy_from(start[i]);
  auto local = sgd(parameters, 0.1);
  exec.forward(data, true);
  exec.backward(loss);
  EXPECT_TRUE(local->update(exec.parameter_gradients(), 2));
  std::vector<float> alone;
  for (const Parameter& p : parameters)
    for (float v : p.value().to_vector<float>()) alone.push_back(v);
  EXPECT_EQ(distributed, alone);
  EXPECT_THROW(learner->set_gradient_order({wrt[0]}), ArgumentError);  // not every parameter
}

// An empty minibatch takes part with zero gradients and reports that it did not update.
TEST(DistributedLearnerTest, EmptyMinibatchDoesNotUpdate) {
  Parameter p = make_parameter({1, 2});
  auto learner = data_parallel_distributed_learner(sgd({p}, 0.5));
  Gradients g;
  MinibatchInfo info;
  EXPECT_FALSE(learner->update(g, info));
  EXPECT_EQ(p.value().to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_TRUE(g.empty());
}

// The learning rate, its reset, the counters and the progress observer are the local
// learner's.
TEST(DistributedLearnerTest, ForwardsToTheLocalLearner) {
  Parameter p = make_parameter({0});
  auto local = sgd({p}, 0.5);
  auto learner = data_parallel_distributed_learner(local);
  EXPECT_EQ(learner->parameters(), local->parameters());
  EXPECT_EQ(learner->learning_rate(), 0.5);
  std::vector<std::string> keys;
  learner->set_progress_observer([&](const std::string& k, double) { keys.push_back(k); });
  Gradients g{{p, NDArrayView::from_vector<float>({1}, {1.0f})}};
  learner->update(g, 2, true);
  EXPECT_EQ(keys, std::vector<std::string>{"Learning rate per minibatch"});
  EXPECT_EQ(local->total_number_of_sweeps_seen(), 1u);
  EXPECT_EQ(learner->total_number_of_sweeps_seen(), 1u);
  learner->reset_learning_rate(0.25, ReferenceMinibatchSize::keep);
  EXPECT_EQ(local->learning_rate(), 0.25);
  EXPECT_EQ(learner->learning_rate(), 0.25);
}

TEST(DistributedLearnerTest, CheckpointRoundTripAndRefusals) {
  Parameter p = make_parameter({1, 2, 3});
  auto learner = data_parallel_distributed_learner(momentum(p), 0, 2);
  Gradients g{{p, NDArrayView::from_vector<float>({3}, {0.3f, -0.7f, 1.1f})}};
  learner->update(g, 2);
  const Dictionary saved = learner->create_checkpoint();
  EXPECT_EQ(saved.get<uint64_t>("totalNumberOfSamplesSeen"), 2u);
  EXPECT_EQ(saved.get<DictionaryVector>("residuals").size(), 1u);  // one worker's
  const auto saved_p = p.value().deep_clone();
  learner->update(g, 2);
  const auto continued = p.value().to_vector<float>();
  p.value().copy_from(saved_p);
  learner->restore_from_checkpoint(saved);
  learner->update(g, 2);
  EXPECT_EQ(p.value().to_vector<float>(), continued);

  // Another kind of learner's checkpoint, or other quantization bits, is refused.
  auto other_bits = data_parallel_distributed_learner(momentum(p), 0, 32);
  EXPECT_THROW(other_bits->restore_from_checkpoint(saved), StateError);
  auto block = block_momentum_distributed_learner(momentum(p), 4);
  EXPECT_THROW(block->restore_from_checkpoint(saved), StateError);
  EXPECT_THROW(learner->restore_from_checkpoint(momentum(p)->create_checkpoint()), StateError);

  // A checkpoint of an older Loom (residuals in columns of the last axis) is refused, saying so.
  DictionaryMap old_layout = saved.map();
  old_layout.erase("residualLayout");
  try {
    learner->restore_from_checkpoint(Dictionary(old_layout));
    ADD_FAILURE() << "an old residual layout was accepted";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("residuals are in layout 1"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(p.value().to_vector<float>(), continued);  // nothing changed
}

TEST(DistributedLearnerTest, RefusesBadArguments) {
  Parameter p = make_parameter({0});
  EXPECT_THROW(data_parallel_distributed_learner(nullptr), ArgumentError);
  EXPECT_THROW(data_parallel_distributed_learner(sgd({p}, 0.1), 0, 0), ArgumentError);
  EXPECT_THROW(data_parallel_distributed_learner(sgd({p}, 0.1), 0, 16), ArgumentError);
  EXPECT_THROW(data_parallel_distributed_learner(data_parallel_distributed_learner(sgd({p}, 0.1))),
               ArgumentError);
  EXPECT_THROW(block_momentum_distributed_learner(sgd({p}, 0.1), 0), ArgumentError);
  EXPECT_THROW(block_momentum_distributed_learner(sgd({p}, 0.1), 4, {.block_learning_rate = 0}),
               ArgumentError);
  EXPECT_THROW(
      block_momentum_distributed_learner(sgd({p}, 0.1), 4, {.block_momentum_as_time_constant = -1}),
      ArgumentError);
}

// One worker: the default block momentum is 1 - 1/1 = 0, so a block ends where the local
// learner went, scaled by the block learning rate: p = start - blr (start - local).
TEST(DistributedLearnerTest, OneWorkerBlockMomentum) {
  Parameter p = make_parameter({4}), q = make_parameter({4});
  auto learner = block_momentum_distributed_learner(
      sgd({p}, learning_rate_schedule(0.25, UnitType::sample)), 4, {.block_learning_rate = 0.5});
  auto local = sgd({q}, learning_rate_schedule(0.25, UnitType::sample));
  Gradients gp{{p, NDArrayView::from_vector<float>({1}, {1.0f})}},
      gq{{q, NDArrayView::from_vector<float>({1}, {1.0f})}};
  EXPECT_TRUE(learner->update(gp, 2));  // 2 of the block's 4 samples: p = 3.75
  EXPECT_EQ(p.value().to_vector<float>()[0], 3.75f);
  EXPECT_TRUE(learner->update(gp, 2));  // local 3.5; block: 4 - 0.5 * (4 - 3.5)
  EXPECT_EQ(p.value().to_vector<float>()[0], 3.75f);
  // The last minibatch of the data ends the block early and stops training.
  MinibatchInfo last{.at_end_of_data = true, .number_of_samples = 2};
  EXPECT_FALSE(learner->update(gp, last));  // local 3.5; block: 3.75 - 0.5 * 0.25
  EXPECT_EQ(p.value().to_vector<float>()[0], 3.625f);
  EXPECT_EQ(learner->total_number_of_samples_seen(), 6u);
  local->update(gq, 2);
  EXPECT_EQ(q.value().to_vector<float>()[0], 3.75f);

  // The checkpoint ends the block (so all workers hold one model) and keeps the block state.
  const Dictionary saved = learner->create_checkpoint();
  EXPECT_EQ(saved.get<uint64_t>("localTotalNumSamplesSeen"), 6u);
  EXPECT_EQ(saved.get<DictionaryVector>("blockLevelSmoothedGradient").size(), 1u);
  EXPECT_NO_THROW(learner->restore_from_checkpoint(saved));
}

// Nesterov's look-ahead (- bm v) is where the next block starts; the block that the end of the
// data ends has no next block and leaves the model at start - v.
TEST(DistributedLearnerTest, TheLastBlockEndsWithoutTheLookAhead) {
  Parameter p = make_parameter({4});
  auto learner =
      block_momentum_distributed_learner(sgd({p}, learning_rate_schedule(0.25, UnitType::sample)),
                                         2, {.block_momentum_as_time_constant = 4});
  Gradients g{{p, NDArrayView::from_vector<float>({1}, {1.0f})}};
  const double bm = std::exp(-0.5);
  learner->update(g, 2);  // a block: local 3.75, v = (1 - bm) 0.25, p = 4 - v - bm v
  const double v1 = (1 - bm) * 0.25, start = 4 - v1 - bm * v1;
  EXPECT_FLOAT_EQ(p.value().to_vector<float>()[0], float(start));
  MinibatchInfo last{.at_end_of_data = true, .number_of_samples = 2};
  EXPECT_FALSE(learner->update(g, last));  // local start - 0.25; v = bm v + (1 - bm) 0.25
  const double v2 = bm * v1 + (1 - bm) * 0.25;
  EXPECT_FLOAT_EQ(p.value().to_vector<float>()[0], float(start - v2));
}

// A checkpoint right after a block's end leaves the model alone (CNTK would apply the block
// momentum once more: with no samples bm = 1).
TEST(DistributedLearnerTest, CheckpointAfterABlockKeepsTheModel) {
  Parameter p = make_parameter({4});
  auto learner =
      block_momentum_distributed_learner(sgd({p}, learning_rate_schedule(0.25, UnitType::sample)),
                                         2, {.block_momentum_as_time_constant = 4});
  Gradients g{{p, NDArrayView::from_vector<float>({1}, {1.0f})}};
  learner->update(g, 2);  // a block: local 3.75, v = (1 - e^-0.5) 0.25, p = 4 - v - e^-0.5 v
  const float v = float((1 - std::exp(-0.5)) * 0.25);
  EXPECT_FLOAT_EQ(p.value().to_vector<float>()[0], 4 - v - float(std::exp(-0.5)) * v);
  const auto before = p.value().to_vector<float>();
  learner->create_checkpoint();
  EXPECT_EQ(p.value().to_vector<float>(), before);
}

}  // namespace
}  // namespace loom::distributed
