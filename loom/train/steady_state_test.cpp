// A steady training loop allocates nothing: the executor plans once and reuses its buffers,
// learners update in place. Counted with a replaced global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "loom/graph/executor.h"
#include "loom/layers/dense.h"
#include "loom/learners/momentum_sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/losses.h"
#include "loom/train/trainer.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_allocations{0};
}  // namespace

// The replacements pair malloc with free; g++ cannot see that new and delete match here.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t n) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Every unaligned form is replaced, so no block crosses between these and the runtime's own
// (std::stable_sort's temporary buffer uses the nothrow form).
void* operator new[](size_t n) {
  return operator new(n);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (g_counting) ++g_allocations;
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& tag) noexcept {
  return operator new(n, tag);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace loom {
namespace {

TEST(SteadyState, TrainingLoopDoesNotAllocate) {
  Variable x = input_variable({20});
  Variable y = input_variable({5}, {.is_sparse = true});
  Function hidden = Dense(16, {.activation = tanh}), out = Dense(5);
  Variable z = out(hidden(x));
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  std::vector<Parameter> params = hidden.parameters();
  for (auto& p : out.parameters()) params.push_back(p);
  auto learner = momentum_sgd(params, learning_parameter_schedule(0.1), momentum_schedule(0.9));
  Trainer trainer(z, criterion, {learner});
  std::vector<ValueMap> batches;
  for (size_t b = 0; b < 4; ++b) {
    std::vector<float> xs(32 * 20);
    std::vector<size_t> labels(32);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float((i * 7 + b) % 13) / 13.f;
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = (i + b) % 5;
    ValueMap m;
    m.emplace(x, Value::create_batch<float>({20}, xs));
    m.emplace(y, Value::one_hot(5, labels));
    batches.push_back(std::move(m));
  }
  for (auto& m : batches) trainer.train_minibatch(m);  // warm up: plans and buffers
  g_allocations = 0;
  g_counting = true;
  for (int step = 0; step < 20; ++step) trainer.train_minibatch(batches[step % batches.size()]);
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_EQ(trainer.total_number_of_samples_seen(), 24u * 32u);
}

// Packed sequences (inputs and root gradients) are read where they lie, with their own layouts:
// a forward and backward over minibatches of other lengths allocates nothing either.
TEST(SteadyState, PackedSequencesDoNotAllocate) {
  Variable x = sequence::input_variable({8}, {.name = "x"});
  Function y = plus(element_times(x, tanh(x)), stop_gradient(x));
  Executor exec({y}, {x});
  std::vector<std::pair<ValueMap, Value>> batches;  // the input, and a gradient of y
  for (const std::vector<size_t>& lengths :
       std::vector<std::vector<size_t>>{{3, 0, 5, 2}, {1, 4}, {6, 6, 6}}) {
    size_t steps = 0;
    for (size_t n : lengths) steps += n;
    std::vector<float> xs(steps * 8);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 11) / 11.f;
    ValueMap m;
    m.emplace(x, Value::create_sequences<float>({8}, xs, lengths));
    batches.emplace_back(std::move(m), Value::create_sequences<float>({8}, xs, lengths));
  }
  const auto step = [&](const std::pair<ValueMap, Value>& batch) {
    exec.forward(batch.first, true);
    exec.backward(y, &batch.second);
  };
  for (auto& batch : batches) step(batch);  // warm up: buffers
  g_allocations = 0;
  g_counting = true;
  for (size_t i = 0; i < 9; ++i) step(batches[i % batches.size()]);
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0u);
}

}  // namespace
}  // namespace loom
