// Seed 002's MNIST convnet, trained on Fashion-MNIST: the seed's model, criterion,
// momentum_sgd with the per-sample learning-rate list, per-sample momentum schedule and
// minibatch-size schedule over an epoch of 54,000 samples (6,000 split off for
// cross-validation, as the seed does), then the test set. Then, as the seed's deployment
// section does, the model applied to its input is printed and saved to mnist.cmf
// (examples/classify_digit.cpp loads it).
//
//   mnist_convnet [epochs (default 2)] [--samples N: train on the first N of the 54,000]
//                 [--data FOLDER (default /usr/share/datasets/fashion-mnist)]
//                 [--seed S: the random seed of the initial weights and dropout (default 1)]
//                 [--bf16: products and convolutions in bf16 mixed precision]
#include <cstdio>
#include <string>

#include "examples/fashion_mnist.h"

using namespace loom;

int main(int argc, char** argv) {
  size_t epochs = 2, samples = 54000, seed = 1;
  std::string folder = examples::kFashionMnistFolder;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--samples" && i + 1 < argc) {
      samples = std::stoul(argv[++i]);
    } else if (a == "--data" && i + 1 < argc) {
      folder = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoul(argv[++i]);
    } else if (a == "--bf16") {
      set_compute_precision(ComputePrecision::BFloat16);
    } else {
      epochs = std::stoul(a);
    }
  }
  examples::MnistData data = examples::load_mnist(folder, samples);

  set_fixed_random_seed(seed);
  Function model_mn = examples::create_model_mn();
  Variable x = input_variable({28, 28});
  Variable y = input_variable({10}, {.is_sparse = true});
  Function criterion = examples::criterion_mn(model_mn, x, y);

  auto recipe = examples::mnist_recipe(data.X_train.shape()[0]);
  auto learner = momentum_sgd(model_mn.parameters(), recipe.lrs, recipe.momentums);
  auto progress_writer = std::make_shared<ProgressPrinter>();
  criterion.train({data.X_train, data.Y_train}, {.minibatch_size = recipe.minibatch_sizes,
                                                 .parameter_learners = {learner},
                                                 .callbacks = {progress_writer},
                                                 .max_epochs = epochs});
  const double test_metric =
      criterion.test({data.X_test, data.Y_test}, {.callbacks = {progress_writer}}).metric;
  std::printf("Test error: %.2f%%\n", test_metric * 100);

  // Deploying: make the model's input type known, then save it.
  std::printf("%s\n", model_mn.to_string().c_str());
  Function model = model_mn(x);
  std::printf("%s\n", model.to_string().c_str());
  save_model(model, "mnist.cmf");
  return 0;
}
