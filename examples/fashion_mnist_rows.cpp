// Real data as sequences: each Fashion-MNIST image read as a sequence of its 28 rows of 28 pixels,
// an LSTM over the rows, its last state, and a dense classifier:
//
//   Sequential({Recurrence(LSTM(128)), sequence::last, Dense(10)})
//
// trained with adam (lr 0.001 per sample, momentum 0.9, variance momentum 0.999 per minibatch)
// on minibatches of 128 images in order (seed 002's split: 54,000 training images shuffled by
// np.random.seed(0)), then tested
// on the 10,000 test images. bench/lstm_torch.py --accuracy is the same recipe in PyTorch
// (bench_lstm --accuracy EPOCHS prints both).
//
//   fashion_mnist_rows [epochs (default 1)] [--samples N: train on the first N of the 54,000]
//                      [--data FOLDER (default /usr/share/datasets/fashion-mnist)]
//                      [--seed S: the random seed of the initial weights (default 1)]
#include <cstdio>
#include <string>

#include "examples/fashion_mnist.h"
#include "loom/layers/recurrent.h"

using namespace loom;

int main(int argc, char** argv) {
  size_t epochs = 1, samples = 54000, seed = 1;
  std::string folder = examples::kFashionMnistFolder;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--samples" && i + 1 < argc) {
      samples = std::stoul(argv[++i]);
    } else if (a == "--data" && i + 1 < argc) {
      folder = argv[++i];
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoul(argv[++i]);
    } else {
      epochs = std::stoul(a);
    }
  }
  const examples::MnistData data = examples::load_mnist(folder, samples);
  // [N, 28, 28] images as N sequences of 28 steps of [28].
  const Value train_images(data.X_train, true), test_images(data.X_test, true);

  set_fixed_random_seed(seed);
  Variable rows = sequence::input_variable({28}, {.name = "rows"});
  Variable label = input_variable({10}, {.is_sparse = true, .name = "label"});
  Function model = Sequential({Recurrence(LSTM(128)), Function(sequence::last(placeholder("h"))),
                               Dense(10, {.activation = None})});
  Variable z = model(rows);
  Function criterion =
      combine({cross_entropy_with_softmax(z, label), classification_error(z, label)});
  std::printf("%s\n", z.owner().to_string().c_str());

  constexpr size_t kMinibatch = 128 * 28;  // samples are steps: 128 images of 28 rows
  // Per sample: CNTK scales a per-minibatch rate by 1/128 on the summed gradient, which adam's
  // normalization then passes on to every step (7.8e-6 instead of 0.001, docs/decisions.md).
  auto learner = adam(model.parameters(), learning_parameter_schedule_per_sample(0.001),
                      momentum_schedule(0.9), momentum_schedule(0.999));
  auto progress = std::make_shared<ProgressPrinter>();
  criterion.train({train_images, data.Y_train}, {.minibatch_size = kMinibatch,
                                                 .parameter_learners = {learner},
                                                 .callbacks = {progress},
                                                 .max_epochs = epochs});
  const double test_metric =
      criterion
          .test({test_images, data.Y_test}, {.minibatch_size = kMinibatch, .callbacks = {progress}})
          .metric;
  std::printf("Test error: %.2f%%\n", test_metric * 100);
  return 0;
}
