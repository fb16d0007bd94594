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
#include "loom/ops/losses.h"
#include "loom/ops/recurrence_ops.h"
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

// Calls share executors and keep no state between them: a sequence continued from an earlier
// call is refused where the model looks across steps, and evaluated as CNTK did elsewhere.
TEST(ModelRunner, ASequenceContinuedFromAnEarlierCallIsAnErrorWhereStepsMeet) {
  Variable x = sequence::input_variable({2}, {.name = "x"});
  const NDArrayView steps = NDArrayView::from_vector<float>({2, 2}, {1, 2, 3, 4});
  const Value continued = Value::create({steps, steps}, {true, false});
  ModelRunner recurrent(plus(x, sequence::past_value(x)));
  try {
    recurrent.evaluate(ValueMap{{x, continued}});
    FAIL() << "a continued sequence was evaluated";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 of"), std::string::npos) << e.what();
  }
  EXPECT_EQ(recurrent.evaluate(ValueMap{{x, Value::create({steps, steps})}})
                .at(recurrent.outputs()[0])
                .as_sequences<float>(),
            (std::vector<std::vector<float>>{{1, 2, 4, 6}, {1, 2, 4, 6}}));

  Function stepwise = Dense(3)(x);
  ModelRunner runner(stepwise);
  EXPECT_EQ(runner.evaluate(ValueMap{{x, continued}}).at(stepwise.output()).as_sequences<float>(),
            stepwise.eval(ValueMap{{x, Value::create({steps, steps})}})
                .at(stepwise.output())
                .as_sequences<float>());
}

TEST(ModelRunner, BadDataIsAnErrorAndTheRunnerGoesOn) {
  ModelRunner runner(small_convnet());
  EXPECT_THROW(runner.evaluate(NDArrayView::from_vector(NDShape{2, 5}, std::vector<float>(10))),
               ShapeError);
  EXPECT_THROW(runner.evaluate({{"pixels", images(0)}}), ArgumentError);
  EXPECT_EQ(runner.evaluate(images(1)).data().shape(), (NDShape{2, 3}));
}

// A model with scores and a criterion: the scores alone need no labels, an inner node's output
// can be asked for (as CNTK's Evaluate allowed), and the sets share one runner.
struct Criterion {
  Variable x = input_variable({2}, {.name = "features"});
  Variable y = input_variable({3}, {.name = "labels"});
  Variable hidden, scores, loss;
  Function model;
  Criterion() {
    hidden = Dense(4, {.activation = relu, .name = "hidden"})(x).output();
    scores = Dense(3)(hidden).output();
    loss = cross_entropy_with_softmax(scores, y).output();
    model = combine({scores, loss});
  }
};

// An executor that served a call of more than kLargeCallBytes of arguments is freed after it
// (its buffers grew to that call); one that served small calls is kept for the next.
TEST(ModelRunner, AnExecutorOfALargeCallIsNotKept) {
  const Variable x = input_variable({1024}, {.name = "x"});
  ModelRunner runner(Dense(2)(x));
  const size_t large = ModelRunner::kLargeCallBytes / (1024 * sizeof(float)) + 1;
  const NDArrayView big =
      NDArrayView::from_vector(NDShape{large, 1024}, std::vector<float>(large * 1024, 0.5f));
  const Value scores = runner.evaluate(big);
  EXPECT_EQ(scores.data().shape(), (NDShape{large, 2}));
  EXPECT_EQ(runner.executors(), 0u);
  const NDArrayView small = NDArrayView::from_vector(NDShape{2, 1024}, std::vector<float>(2048));
  for (int i = 0; i < 2; ++i) runner.evaluate(small);
  EXPECT_EQ(runner.executors(), 1u);
}

// Packed sequences count by their rows, which the executor reads, not by their padded form
// (which the runner does not make): one long sequence and two of one step are 6 MB packed,
// 18 MB padded.
TEST(ModelRunner, PackedSequencesCountByTheirRows) {
  const Variable x = sequence::input_variable({1024}, {.name = "x"});
  Function model = Dense(2)(x);
  ModelRunner runner(model);
  const size_t long_steps = 1500;
  const std::vector<float> step(1024, 0.5f);
  const std::vector<float> long_sequence(long_steps * 1024, 0.25f);
  const Value data = Value::create_sequences<float>({1024}, {long_sequence, step, step});
  ASSERT_TRUE(data.is_packed());
  ASSERT_LE(data.packed_rows().size() * sizeof(float), ModelRunner::kLargeCallBytes);
  ASSERT_GT(3 * long_steps * 1024 * sizeof(float), ModelRunner::kLargeCallBytes);
  const Value out = runner.evaluate(ValueMap{{x, data}}).at(model.output());
  EXPECT_EQ(out.sequence_lengths(), (std::vector<size_t>{long_steps, 1, 1}));
  EXPECT_EQ(out.as_sequences<float>(),
            model.eval(ValueMap{{x, data}}).at(model.output()).as_sequences<float>());
  EXPECT_EQ(runner.executors(), 1u);  // kept: the call was small
}

TEST(ModelRunner, ChosenOutputsComputeOnlyWhatTheyNeed) {
  const Criterion c;
  ModelRunner runner(c.model);
  const Value features = Value::create_batch<float>({2}, {1, -2, 0.5f, 3});
  const Value labels = Value::create_batch<float>({3}, {0, 1, 0, 1, 0, 0});
  const ValueMap all = c.model.eval(ValueMap{{c.x, features}, {c.y, labels}});

  EXPECT_EQ(runner.arguments({c.scores}), std::vector<Variable>{c.x});
  EXPECT_EQ(runner.arguments({c.loss, c.scores}), (std::vector<Variable>{c.x, c.y}));
  const ValueMap scores = runner.evaluate(ValueMap{{c.x, features}}, {c.scores});
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores.at(c.scores).data().to_vector<float>(),
            all.at(c.scores).data().to_vector<float>());
  // Values for arguments the outputs do not need are ignored; the order asked for is free.
  const ValueMap both =
      runner.evaluate(ValueMap{{c.x, features}, {c.y, labels}}, {c.loss, c.scores, c.loss});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both.at(c.loss).data().to_vector<float>(), all.at(c.loss).data().to_vector<float>());
  const ValueMap hidden = runner.evaluate(ValueMap{{c.x, features}, {c.y, labels}}, {c.hidden});
  EXPECT_EQ(hidden.at(c.hidden).data().shape(), (NDShape{2, 4}));
  EXPECT_EQ(runner.executors(), 3u);  // all outputs (planned at load), scores, hidden

  EXPECT_THROW(runner.evaluate(ValueMap{{c.x, features}}, {c.loss}), ArgumentError);  // labels
  EXPECT_THROW(runner.evaluate(ValueMap{{c.x, features}}, {}), ArgumentError);
  const Variable foreign = Dense(3)(input_variable({2})).output();
  EXPECT_THROW(runner.evaluate(ValueMap{{c.x, features}}, {foreign}), ArgumentError);
  EXPECT_THROW(runner.arguments({c.x}), ArgumentError);  // an input: computed by no function
  EXPECT_EQ(runner.evaluate(ValueMap{{c.x, features}}, {c.scores}).size(), 1u);  // goes on
}

// Threads asking for different sets of outputs at once (the tsan preset runs this too).
TEST(ModelRunner, ThreadsAskingForDifferentOutputsShareTheRunner) {
  constexpr size_t kThreads = 4, kCalls = 200;
  const Criterion c;
  ModelRunner runner(c.model);
  const Value features = Value::create_batch<float>({2}, {1, -2, 0.5f, 3});
  const Value labels = Value::create_batch<float>({3}, {0, 1, 0, 1, 0, 0});
  const ValueMap all = c.model.eval(ValueMap{{c.x, features}, {c.y, labels}});
  std::vector<size_t> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const Variable wanted = t % 2 ? c.loss : c.scores;
      for (size_t k = 0; k < kCalls; ++k) {
        const ValueMap out = runner.evaluate(ValueMap{{c.x, features}, {c.y, labels}}, {wanted});
        if (out.at(wanted).data().to_vector<float>() != all.at(wanted).data().to_vector<float>())
          ++mismatches[t];
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<size_t>(kThreads, 0));
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
