// ModelRunner: a loaded model lists its arguments and outputs, evaluates batches and batches of
// sequences as Function::eval does, and gives the same results when 8 threads call it at once.
// tests/CMakeLists.txt also builds this test with ThreadSanitizer (ctest -L tsan).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "loom/deploy/model_runner.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/pooling.h"
#include "loom/layers/sequential.h"
#include "loom/ops/elementwise.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// A small convnet (oneDNN convolution and pooling, then a matrix product), saved and loaded.
Function small_convnet() {
  Variable x = input_variable({1, 8, 8}, {.name = "image"});
  Function model = Sequential({Convolution2D({3, 3}, 4, {.activation = relu, .pad = true}),
                               MaxPooling({2, 2}, {.strides = {2}}), Dense(3)});
  return load_model_from_bytes(save_model_to_bytes(model(x)));
}

// Input i: a batch of 1 to 4 images whose values depend on i.
NDArrayView images(size_t i) {
  const size_t n = 1 + i % 4;
  std::vector<float> v(n * 64);
  for (size_t k = 0; k < v.size(); ++k) v[k] = float((i * 31 + k * 7) % 17) / 8.0f - 1.0f;
  return NDArrayView::from_vector(NDShape{n, 1, 8, 8}, v);
}

TEST(ModelRunner, ListsArgumentsAndOutputs) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("runner_" + std::to_string(getpid()) + ".cmf"))
          .string();
  save_model(small_convnet(), path);
  ModelRunner runner(path);
  std::filesystem::remove(path);
  ASSERT_EQ(runner.arguments().size(), 1u);
  EXPECT_EQ(runner.arguments()[0].name(), "image");
  EXPECT_EQ(runner.arguments()[0].shape(), (NDShape{1, 8, 8}));
  ASSERT_EQ(runner.outputs().size(), 1u);
  EXPECT_EQ(runner.outputs()[0].shape(), NDShape{3});
  EXPECT_EQ(runner.argument("image"), runner.arguments()[0]);
  EXPECT_EQ(runner.function().to_string(), "Composite(image: Tensor[1,8,8]) -> Tensor[3]");
}

TEST(ModelRunner, EvaluatesAsFunctionEval) {
  Function model = small_convnet();
  ModelRunner runner(model);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(runner.evaluate(images(i)).data().to_vector<float>(),
              model.eval(images(i)).data().to_vector<float>());
    EXPECT_EQ(runner.evaluate({{"image", images(i)}}).data().to_vector<float>(),
              model.eval(images(i)).data().to_vector<float>());
  }
}

TEST(ModelRunner, EvaluatesSequences) {
  Variable x = sequence::input_variable({2}, {.name = "x"});
  Function model = Dense(3)(x);
  ModelRunner runner(model);
  const Value data = Value::create_sequences<float>({2}, {{1, 2, 3, 4, 5, 6}, {7, 8}});
  const Value out = runner.evaluate(ValueMap{{x, data}}).at(model.output());
  ASSERT_TRUE(out.is_sequence());
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{3, 1}));
  EXPECT_EQ(out.as_sequences<float>(),
            model.eval(ValueMap{{x, data}}).at(model.output()).as_sequences<float>());
}

// CNTK's evaluation read a batch (Value::CreateBatch) given to a sequence input as sequences of
// one step each.
TEST(ModelRunner, ABatchForASequenceInputIsSequencesOfOneStep) {
  Variable x = sequence::input_variable({2}, {.name = "x"});
  Function model = Dense(3)(x);
  ModelRunner runner(model);
  const Value batch(NDArrayView::from_vector<float>({3, 2}, {1, 2, 3, 4, 5, 6}), false);
  const Value out = runner.evaluate(ValueMap{{x, batch}}).at(model.output());
  ASSERT_TRUE(out.is_sequence());
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{1, 1, 1}));
  const Value steps = Value::create_sequences<float>({2}, {{1, 2}, {3, 4}, {5, 6}});
  EXPECT_EQ(out.as_sequences<float>(),
            model.eval(ValueMap{{x, steps}}).at(model.output()).as_sequences<float>());
}

TEST(ModelRunner, BadDataIsAnErrorAndTheRunnerGoesOn) {
  ModelRunner runner(small_convnet());
  EXPECT_THROW(runner.evaluate(NDArrayView::from_vector(NDShape{2, 5}, std::vector<float>(10))),
               ShapeError);
  EXPECT_THROW(runner.evaluate({{"pixels", images(0)}}), ArgumentError);
  EXPECT_EQ(runner.evaluate(images(1)).data().shape(), (NDShape{2, 3}));
}

// 8 threads x 1,000 evaluations on one runner equal a single-threaded run, result for result,
// and the runner plans at most one executor per thread. The single-threaded run is on a thread
// of its own too, so that both see the same OpenMP settings.
TEST(ModelRunner, ManyThreadsGiveTheSingleThreadedResults) {
  constexpr size_t kThreads = 8, kCalls = 1000, kInputs = 64;
  ModelRunner runner(small_convnet());
  std::vector<std::vector<float>> expected(kInputs);
  std::thread([&] {
    for (size_t i = 0; i < kInputs; ++i)
      expected[i] = runner.evaluate(images(i)).data().to_vector<float>();
  }).join();
  std::vector<size_t> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (size_t c = 0; c < kCalls; ++c) {
        const size_t i = (t * 7 + c) % kInputs;
        if (runner.evaluate(images(i)).data().to_vector<float>() != expected[i]) ++mismatches[t];
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<size_t>(kThreads, 0));
  EXPECT_GE(runner.executors(), 1u);
  EXPECT_LE(runner.executors(), kThreads);
}

}  // namespace
}  // namespace loom
