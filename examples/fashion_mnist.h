// Seed 002's MNIST data preparation, model and recipe, on Fashion-MNIST (Debian's
// dataset-fashion-mnist), shared by examples/mnist_convnet.cpp and
// examples/mnist_advanced_training.cpp.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "examples/numpy_random.h"
#include "loom/loom.h"

namespace examples {

inline const char* kFashionMnistFolder = "/usr/share/datasets/fashion-mnist";

// The seed's arrays: features [N, 28, 28] in [0, 1], labels as sparse one-hot [N, 10].
struct MnistData {
  loom::NDArrayView X_train, Y_train, X_cv, Y_cv, X_test, Y_test;
};

namespace detail {

struct Images {
  std::vector<float> pixels;
  std::vector<size_t> labels;
};

// All images and labels of one IDX pair, in file order.
inline Images read_idx(const std::string& images, const std::string& labels) {
  using namespace loom;
  Variable x = input_variable({28, 28});
  Variable y = input_variable({1});
  MinibatchSource source(
      std::make_shared<IDXDeserializer>(IDXStreamDefs{
          {"features", {.path = images, .scale = 1.0 / 255}}, {"labels", {.path = labels}}}),
      {.randomize = false, .max_sweeps = 1});
  auto mb = source.next_minibatch(1 << 20, {{x, source["features"]}, {y, source["labels"]}});
  Images out{mb.at(x).data.data().to_vector<float>(), {}};
  for (float c : mb.at(y).data.data().to_vector<float>()) out.labels.push_back(size_t(c));
  return out;
}

// Rows order[begin..end) of images: features and sparse one-hot labels.
inline std::pair<loom::NDArrayView, loom::NDArrayView> take(const Images& images,
                                                            const std::vector<size_t>& order,
                                                            size_t begin, size_t end) {
  const size_t pixels = 28 * 28;
  std::vector<float> x((end - begin) * pixels);
  std::vector<size_t> y;
  for (size_t i = begin; i < end; ++i) {
    std::copy_n(images.pixels.begin() + std::ptrdiff_t(order[i] * pixels), pixels,
                x.begin() + std::ptrdiff_t((i - begin) * pixels));
    y.push_back(images.labels[order[i]]);
  }
  return {loom::NDArrayView::from_vector(loom::NDShape{end - begin, 28, 28}, x),
          loom::Value::one_hot(10, y).data()};
}

}  // namespace detail

// The seed's split: the training images shuffled by numpy's np.random.seed(0) permutation,
// the first 54,000 (or the first train_samples of them) for training, the last 6,000 (or
// cv_samples) for cross-validation; the test set in file order (or its first test_samples).
inline MnistData load_mnist(const std::string& folder, size_t train_samples = 54000,
                            size_t cv_samples = 6000, size_t test_samples = 10000) {
  detail::Images train = detail::read_idx(folder + "/train-images-idx3-ubyte.gz",
                                          folder + "/train-labels-idx1-ubyte.gz");
  detail::Images test = detail::read_idx(folder + "/t10k-images-idx3-ubyte.gz",
                                         folder + "/t10k-labels-idx1-ubyte.gz");
  std::vector<size_t> order = NumpyRandomState(0).permutation(train.labels.size());
  std::vector<size_t> test_order(test.labels.size());
  for (size_t i = 0; i < test_order.size(); ++i) test_order[i] = i;
  auto [X_train, Y_train] = detail::take(train, order, 0, std::min<size_t>(train_samples, 54000));
  auto [X_cv, Y_cv] = detail::take(train, order, 54000, 54000 + std::min<size_t>(cv_samples, 6000));
  auto [X_test, Y_test] =
      detail::take(test, test_order, 0, std::min(test_samples, test_order.size()));
  return {X_train, Y_train, X_cv, Y_cv, X_test, Y_test};
}

// create_model_mn_factory(): the seed's convnet, relu through default_options.
inline loom::Function create_model_mn() {
  using namespace loom;
  auto scope = default_options({.activation = relu, .pad = false});
  return Sequential({
      Convolution2D({5, 5}, 32, {.pad = true, .reduction_rank = 0}),  // black-and-white images
      MaxPooling({3, 3}, {.strides = {2, 2}}), Convolution2D({3, 3}, 48),
      MaxPooling({3, 3}, {.strides = {2, 2}}), Convolution2D({3, 3}, 64), Dense(96), Dropout(0.5),
      Dense(10, {.activation = None}),  // the softmax is in the criterion
  });
}

// The seed's criterion over inputs x [28, 28] and sparse one-hot y [10]: (loss, metric).
inline loom::Function criterion_mn(const loom::Function& model, const loom::Variable& x,
                                   const loom::Variable& y) {
  using namespace loom;
  Variable z = model(x);
  return combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
}

// The seed's schedules over an epoch of N samples.
struct MnistRecipe {
  loom::LearningRateSchedule lrs;
  loom::MomentumSchedule momentums;
  loom::MinibatchSizeSchedule minibatch_sizes;
};

inline MnistRecipe mnist_recipe(size_t N) {
  using namespace loom;
  auto repeat = [](std::vector<std::pair<size_t, double>> runs) {
    std::vector<double> v;
    for (auto [n, value] : runs) v.insert(v.end(), n, value);
    return v;
  };
  std::vector<size_t> sizes;
  for (auto [n, size] :
       std::vector<std::pair<size_t, size_t>>{{6, 256}, {9, 512}, {7, 1024}, {8, 2048}, {1, 4096}})
    sizes.insert(sizes.end(), n, size);
  return {learning_parameter_schedule_per_sample(repeat({{12, 0.001},
                                                         {6, 0.0005},
                                                         {6, 0.00025},
                                                         {3, 0.000125},
                                                         {3, 0.0000625},
                                                         {1, 0.00003125}}),
                                                 N),
          momentum_schedule_per_sample(repeat({{5, 0.0}, {1, 0.9990239141819757}}), N),
          minibatch_size_schedule(sizes, N)};
}

}  // namespace examples
