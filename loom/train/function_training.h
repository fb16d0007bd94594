// Function::train and Function::test (CNTK's criterion.train / criterion.test): a Trainer and a
// training_session built for a criterion function whose outputs are (loss, metric), fed from a
// MinibatchSource or in-memory arrays in the order of its arguments:
//
//   auto progress = criterion.train({X, Y}, {.parameter_learners = {learner},
//                                            .callbacks = {printer}, .max_epochs = 5});
//   double error = criterion.test({X_test, Y_test}).metric;
//
// The member functions are declared in loom/graph/function.h (the graph layer lies below train)
// and defined in function_training.cpp; include this header to call them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "loom/graph/function.h"
#include "loom/train/training_session.h"

namespace loom {

// One of Function::train's callbacks, as CNTK's list: progress writers, and at most one of
// each config.
using TrainingCallback = std::variant<std::shared_ptr<ProgressWriter>, CheckpointConfig,
                                      CrossValidationConfig, TestConfig>;

struct TrainOptions {
  MinibatchSizeSchedule minibatch_size = 32;
  // A MinibatchSource's stream names in argument order; or model_inputs_to_streams; by default
  // the streams named as the arguments.
  std::vector<std::string> streams = {};
  InputMap model_inputs_to_streams = {};
  std::vector<std::shared_ptr<Learner>> parameter_learners = {};
  std::vector<TrainingCallback> callbacks = {};
  // Training summaries; default: every epoch.
  std::optional<Frequency> progress_frequency = std::nullopt;
  std::optional<size_t> max_epochs = std::nullopt;  // default 1
  // Samples per epoch; default: the size of in-memory data, one sweep over a source.
  std::optional<size_t> epoch_size = std::nullopt;
  // Overrides max_epochs.
  std::optional<size_t> max_samples = std::nullopt;
};

// Averages per sample over `samples` samples (CNTK's summary namespaces).
struct TrainingProgress {
  double loss = 0;
  std::optional<double> metric;  // absent when the criterion has no metric
  size_t samples = 0;
};

struct TestSummary {
  double metric = 0;
  size_t samples = 0;
};

struct TrainSummary {
  std::vector<TrainingProgress> epoch_summaries;  // one per training summary (epoch)
  std::vector<TrainingProgress> updates;          // one per minibatch
  std::optional<TestSummary> test_summary;        // with a TestConfig callback
};

struct TestOptions {
  MinibatchSizeSchedule minibatch_size = 32;
  std::vector<std::string> streams = {};
  InputMap model_inputs_to_streams = {};
  std::vector<std::shared_ptr<ProgressWriter>> callbacks = {};
  // Under mpirun: every worker (distributed::mpi_communicator()) evaluates its partition of
  // the data and the results are summed over the workers, so every worker returns the same
  // summary (CNTK's Evaluator.test_minibatch(distributed=True)). Every worker must call test.
  bool distributed = false;
};

}  // namespace loom
