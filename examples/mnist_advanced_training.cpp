// Seed 002's advanced training on Fashion-MNIST: the convnet of mnist_convnet with a
// ProgressPrinter that logs the first 10 minibatches and then every 50th to my.log, a
// TensorBoardProgressWriter writing every 50th minibatch, the epochs and the model's graph to
// my_tensorboard_logdir (`tensorboard --logdir my_tensorboard_logdir` shows them), a
// checkpoint every epoch keeping all of them, a cross-validation every 3 epochs whose callback
// halves the learning rate when the metric improved less than 5 % (relative) and stops after
// the 6th cut, a final test, and the loss progression printed at the end.
//
//   mnist_advanced_training [--epochs N (default 50)] [--samples N: train on the first N of
//                           the 54,000] [--cv-samples N] [--test-samples N] [--data FOLDER]
#include <cstdio>
#include <string>

#include "examples/fashion_mnist.h"

using namespace loom;

int main(int argc, char** argv) {
  size_t epochs = 50, samples = 54000, cv_samples = 6000, test_samples = 10000;
  std::string folder = examples::kFashionMnistFolder;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--epochs") {
      epochs = std::stoul(value);
    } else if (flag == "--samples") {
      samples = std::stoul(value);
    } else if (flag == "--cv-samples") {
      cv_samples = std::stoul(value);
    } else if (flag == "--test-samples") {
      test_samples = std::stoul(value);
    } else if (flag == "--data") {
      folder = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  examples::MnistData data = examples::load_mnist(folder, samples, cv_samples, test_samples);

  // Create model and criterion function.
  set_fixed_random_seed(1);
  Variable x = input_variable({28, 28});
  Variable y = input_variable({10}, {.is_sparse = true});
  Function model_mn = examples::create_model_mn();
  Function criterion = examples::criterion_mn(model_mn, x, y);

  // Create the learner.
  const size_t epoch_size = data.X_train.shape()[0];
  auto recipe = examples::mnist_recipe(epoch_size);
  auto learner = momentum_sgd(model_mn.parameters(), recipe.lrs, recipe.momentums);

  // Create progress callbacks for logging to file and TensorBoard event log.
  // Prints statistics for the first 10 minibatches, then for every 50th, to a log file.
  auto progress_writer = std::make_shared<ProgressPrinter>(
      ProgressPrinterOptions{.freq = 50, .first = 10, .log_to_file = "my.log"});
  auto tensorboard_writer =
      std::make_shared<TensorBoardProgressWriter>(TensorBoardProgressWriterOptions{
          .freq = 50, .log_dir = "my_tensorboard_logdir", .model = criterion});

  // Halve the learning rate each time the cross-validation metric improved less than 5 %
  // relative, and stop after 6 adjustments.
  double prev_metric = 1;  // metric from the previous call. Error = 100 % at start.

  // A checkpoint every epoch, all kept; restore = false starts afresh as the seed does. The
  // callback's memory goes into each checkpoint, so a run with restore = true resumes exactly.
  CheckpointConfig checkpoint_config{
      .filename = "model_mn.cmf",
      .frequency = epoch_size,
      .restore = false,
      .preserve_all = true,
      .save_state =
          [&] {
            Dictionary state;
            state["prev_metric"] = prev_metric;
            return state;
          },
      .restore_state =
          [&](const Dictionary& state) { prev_metric = state.get<double>("prev_metric"); }};

  const double first_lr = learner->learning_rate();
  auto adjust_lr_callback = [&](size_t /*index*/, double average_error, size_t /*cv_num_samples*/,
                                size_t /*cv_num_minibatches*/) {
    if ((prev_metric - average_error) / prev_metric < 0.05) {
      learner->reset_learning_rate(learning_parameter_schedule(learner->learning_rate() / 2,
                                                               /*minibatch_size=*/1));
      if (learner->learning_rate() < first_lr / (128 - 0.1)) {  // done after the 6th cut
        std::printf("Learning rate %g too small. Training complete.\n", learner->learning_rate());
        return false;
      }
      std::printf(
          "Improvement of metric from %.3f to %.3f insufficient. Halving learning rate to %g.\n",
          prev_metric, average_error, learner->learning_rate());
    }
    prev_metric = average_error;
    return true;
  };
  CrossValidationConfig cv_config{.source = {data.X_cv, data.Y_cv},
                                  .frequency = 3 * epoch_size,
                                  .minibatch_size = 256,
                                  .callback = adjust_lr_callback,
                                  .criterion = criterion};

  // Test the final model.
  TestConfig test_config{.source = {data.X_test, data.Y_test}, .criterion = criterion};

  // Train!
  TrainSummary progress = criterion.train({data.X_train, data.Y_train},
                                          {.minibatch_size = recipe.minibatch_sizes,
                                           .parameter_learners = {learner},
                                           .callbacks = {progress_writer, tensorboard_writer,
                                                         checkpoint_config, cv_config, test_config},
                                           .max_epochs = epochs});

  // Progress is available from the return value.
  std::string losses;
  for (const auto& summary : progress.epoch_summaries) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%s%.3f", losses.empty() ? "" : ", ", summary.loss);
    losses += buffer;
  }
  std::printf("loss progression = %s\n", losses.c_str());
  return 0;
}
