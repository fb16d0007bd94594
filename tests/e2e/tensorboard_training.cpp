// A logistic regression trained in an explicit loop with a ProgressPrinter and a
// TensorBoardProgressWriter side by side (both every 3rd minibatch), then tested with both:
// tensorboard_training_test.py compares the event file with the printed lines. Two epochs of
// 10 minibatches of 8 samples, 3 test minibatches; the event file goes to ./logdir.
#include <cmath>
#include <memory>

#include "loom/loom.h"

using namespace loom;

namespace {

// Minibatch number `index` of 8 points (cos, sin) labelled by the sign of their sum.
ValueMap minibatch(size_t index, const Variable& x, const Variable& y) {
  std::vector<float> features;
  std::vector<size_t> labels;
  for (size_t i = index * 8; i < index * 8 + 8; ++i) {
    const float a = std::cos(0.9f * float(i)), b = std::sin(0.7f * float(i));
    features.insert(features.end(), {a, b});
    labels.push_back(a + b > 0 ? 1 : 0);
  }
  return {{x, Value::create_batch<float>({2}, features)}, {y, Value::one_hot(2, labels)}};
}

}  // namespace

int main() {
  set_fixed_random_seed(1);
  Variable x = input_variable({2});
  Variable y = input_variable({2}, {.is_sparse = true});
  Variable z = Dense(2)(x);
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  auto printer = std::make_shared<ProgressPrinter>(3);
  auto tensorboard = std::make_shared<TensorBoardProgressWriter>(
      TensorBoardProgressWriterOptions{.freq = 3, .log_dir = "logdir", .model = criterion});
  auto learner = sgd(Function(z).parameters(), learning_parameter_schedule(0.1));
  Trainer trainer(z, criterion, {learner}, {printer, tensorboard});
  for (size_t epoch = 0; epoch < 2; ++epoch) {
    for (size_t i = 0; i < 10; ++i) trainer.train_minibatch(minibatch(epoch * 10 + i, x, y));
    trainer.summarize_training_progress();
  }
  Evaluator evaluator(criterion.outputs()[1], {printer, tensorboard});
  for (size_t i = 20; i < 23; ++i) evaluator.test_minibatch(minibatch(i, x, y));
  evaluator.summarize_test_progress();
  tensorboard->write_value("learning_rate", learner->learning_rate(), 20);
  tensorboard->close();
  return 0;
}
