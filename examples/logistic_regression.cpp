// Seed 002's logistic regression, fed through an explicit minibatch loop: 20,000 training
// and 1,024 test points from two 2-D normal distributions, Dense(2) on 2 inputs,
// cross_entropy_with_softmax as loss and classification_error as metric, sgd at 0.1 per
// minibatch, minibatch 32, ProgressPrinter(50), an Evaluator on the test set, and the model
// applied to 20 test points.
#include <cstdio>
#include <memory>

#include "examples/numpy_random.h"
#include "loom/loom.h"

using namespace loom;

namespace {

constexpr size_t kInputDim = 2, kNumClasses = 2;

struct Data {
  std::vector<float> features;  // N x 2
  std::vector<size_t> labels;   // N class indices
};

// np.random.seed(0); Y = randint(0, 2, N); X = (randn(N, 2) + 3) * (Y + 1)
Data generate_synthetic_data(examples::NumpyRandomState& rng, size_t n) {
  Data d;
  for (size_t i = 0; i < n; ++i) d.labels.push_back(size_t(rng.randint(0, kNumClasses)));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < kInputDim; ++j)
      d.features.push_back(float((rng.randn() + 3) * double(d.labels[i] + 1)));
  return d;
}

// Minibatch [begin, end) of the data as values of the two criterion arguments.
ValueMap minibatch(const Data& d, size_t begin, size_t end, const Variable& x, const Variable& y) {
  ValueMap m;
  m.emplace(x, Value::create_batch<float>(
                   {kInputDim}, std::vector<float>(d.features.begin() + begin * kInputDim,
                                                   d.features.begin() + end * kInputDim)));
  m.emplace(y, Value::one_hot(kNumClasses, std::vector<size_t>(d.labels.begin() + begin,
                                                               d.labels.begin() + end)));
  return m;
}

}  // namespace

int main() {
  set_fixed_random_seed(1);
  examples::NumpyRandomState rng(0);
  Data train = generate_synthetic_data(rng, 20000);
  Data test = generate_synthetic_data(rng, 1024);

  Function model_lr = Dense(kNumClasses);
  Variable x = input_variable({kInputDim});
  Variable y = input_variable({kNumClasses}, {.is_sparse = true});
  Variable z = model_lr(x);
  Function criterion_lr = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  std::printf("criterion_lr: %s\n", criterion_lr.to_string().c_str());
  std::printf("model_lr: %s\n", model_lr(x).to_string().c_str());

  auto learner = sgd(model_lr.parameters(), learning_parameter_schedule(0.1));
  auto progress_writer = std::make_shared<ProgressPrinter>(50);
  Trainer trainer({}, criterion_lr, {learner}, {progress_writer});  // seed 002: Trainer(None, ...)

  const size_t minibatch_size = 32;
  for (size_t i = 0; i < train.labels.size(); i += minibatch_size)
    trainer.train_minibatch(
        minibatch(train, i, std::min(i + minibatch_size, train.labels.size()), x, y));
  trainer.summarize_training_progress();

  Evaluator evaluator(criterion_lr.outputs()[1], {progress_writer});
  for (size_t i = 0; i < test.labels.size(); i += minibatch_size)
    evaluator.test_minibatch(
        minibatch(test, i, std::min(i + minibatch_size, test.labels.size()), x, y));
  evaluator.summarize_test_progress();

  // Seed 002: run a few test samples through the model and compare with their labels.
  Function model = model_lr(x);
  Value scores =
      model(std::vector<float>(test.features.begin(), test.features.begin() + 20 * kInputDim));
  auto print_list = [](const char* title, const std::vector<size_t>& v) {
    std::printf("%s [", title);
    for (size_t i = 0; i < v.size(); ++i) std::printf("%s%zu", i ? ", " : "", v[i]);
    std::printf("]\n");
  };
  print_list("Label    :", std::vector<size_t>(test.labels.begin(), test.labels.begin() + 20));
  print_list("Predicted:", scores.argmax());
  return 0;
}
