// Executor::backward from a given root gradient: read where it lies when its rows are the root's
// (a batch, or one sequence), copied otherwise; never written, and still readable afterwards.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/graph/executor.h"
#include "loom/graph/graph_test_util.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

// dx of y = tanh(x) from dy: dy (1 - y^2).
std::vector<float> tanh_gradient(const std::vector<float>& x, const std::vector<float>& dy) {
  std::vector<float> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float y = std::tanh(x[i]);
    dx[i] = dy[i] * (1 - y * y);
  }
  return dx;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << "element " << i;
}

TEST(RootGradient, ABatchIsReadInPlaceUnchangedAndStaysReadable) {
  Variable x = input_variable({5}, {.name = "x"});
  Function y = tanh(x);
  Executor exec({y}, {x});
  const std::vector<float> xs = random_floats(35, 1);
  exec.forward({{x, Value::create_batch<float>({5}, xs)}}, true);
  for (unsigned seed : {2u, 3u}) {  // a second backward reads the new gradient, not the old
    const std::vector<float> dys = random_floats(35, seed);
    {
      const Value dy = Value::create_batch<float>({5}, dys);
      exec.backward(y, &dy);
      EXPECT_EQ(dy.data().to_vector<float>(), dys);  // not written
    }  // the caller's gradient is gone: the executor keeps what it read
    expect_near(exec.gradient_value(x).data().to_vector<float>(), tanh_gradient(xs, dys));
    EXPECT_EQ(exec.gradient_value(y).data().to_vector<float>(), dys);
  }
}

TEST(RootGradient, RaggedSequencesAndOneSequenceGiveTheSameGradients) {
  Variable x = sequence::input_variable({3}, {.name = "x"});
  Function y = tanh(x);
  const std::vector<size_t> lengths{4, 1, 3};
  const std::vector<float> xs = random_floats(24, 4), dys = random_floats(24, 5);
  Executor exec({y}, {x});
  exec.forward({{x, Value::create_sequences<float>({3}, xs, lengths)}}, true);
  const Value dy = Value::create_sequences<float>({3}, dys, lengths);
  exec.backward(y, &dy);
  const std::vector<float> want = tanh_gradient(xs, dys);
  expect_near(exec.gradient_value(x).data().to_vector<float>(), [&] {
    // Value's data is padded to the longest sequence: [3, 4, 3].
    std::vector<float> padded(36, 0);
    for (size_t s = 0, from = 0; s < lengths.size(); from += lengths[s] * 3, ++s)
      std::copy_n(want.begin() + long(from), lengths[s] * 3, padded.begin() + long(s * 12));
    return padded;
  }());
  const std::vector<float> first(xs.begin(), xs.begin() + 12),
      dy_first(dys.begin(), dys.begin() + 12);
  exec.forward({{x, Value::create_sequences<float>({3}, first, {4})}}, true);
  const Value one = Value::create_sequences<float>({3}, dy_first, {4});
  exec.backward(y, &one);
  EXPECT_EQ(one.data().to_vector<float>(), dy_first);
  expect_near(exec.gradient_value(x).data().to_vector<float>(), tanh_gradient(first, dy_first));
}

// h_t = x_t + h_(t-1): the root feeds the loop's delay, whose backward adds into the root's
// gradient, so the caller's is copied first. dx_t is the sum of dy_s for s >= t.
TEST(RootGradient, ARootInsideALoopIsCopiedBeforeTheLoopAddsToIt) {
  Variable x = sequence::input_variable({2}, {.name = "x"});
  Variable p = placeholder({2}, DataType::Float32, x.dynamic_axes(), "h_prev");
  Function h = plus(x, sequence::past_value(p), "h");
  h.replace_placeholders({{p, h}});
  Executor exec({h}, {x});
  const std::vector<float> xs = random_floats(8, 6), dys = random_floats(8, 7);
  exec.forward({{x, Value::create_sequences<float>({2}, xs, {4})}}, true);
  const Value dy = Value::create_sequences<float>({2}, dys, {4});
  exec.backward(h, &dy);
  EXPECT_EQ(dy.data().to_vector<float>(), dys);
  std::vector<float> want(8, 0);
  for (size_t t = 0; t < 4; ++t)
    for (size_t s = t; s < 4; ++s)
      for (size_t j = 0; j < 2; ++j) want[t * 2 + j] += dys[s * 2 + j];
  expect_near(exec.gradient_value(x).data().to_vector<float>(), want);
}

}  // namespace
}  // namespace loom
