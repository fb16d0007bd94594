// The executor's shared buffers (ExecutorOptions::share_buffers) change no result: outputs and
// gradients are bitwise those of an executor where every variable has its own buffer, in
// training (two minibatches, the second larger, so buffers grow) and in inference.
#include <gtest/gtest.h>

#include <cstring>

#include "loom/graph/executor.h"
#include "loom/graph/graph_test_util.h"
#include "loom/graph/random_state.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/normalization.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

std::vector<uint8_t> bytes_of(const Value& v) {
  const NDArrayView& d = v.data();
  const auto* p = static_cast<const uint8_t*>(d.raw_data());
  return {p, p + d.size() * size_of(d.dtype())};
}

// What one step gives: the outputs after forward and every parameter's gradient.
std::vector<std::vector<uint8_t>> step(Executor& exec, const std::vector<Variable>& outputs,
                                       const std::vector<Parameter>& parameters,
                                       const ValueMap& arguments, bool training) {
  exec.forward(arguments, training);
  std::vector<std::vector<uint8_t>> result;
  for (const Variable& o : outputs) result.push_back(bytes_of(exec.output_value(o)));
  if (!training) return result;
  exec.backward(outputs[0]);
  for (const Parameter& p : parameters) {
    const NDArrayView g = exec.parameter_gradient(p);
    const auto* b = static_cast<const uint8_t*>(g.raw_data());
    result.emplace_back(b, b + g.size() * size_of(g.dtype()));
  }
  return result;
}

// Runs the criterion's loss and the model's output through executors with and without sharing
// on each minibatch, with the same random state (dropout masks), and compares the bytes.
void expect_sharing_changes_nothing(const Variable& z, const Variable& loss,
                                    const std::vector<ValueMap>& minibatches) {
  const Function criterion = combine({loss, z});
  const std::vector<Variable> outputs{loss, z};
  const std::vector<Parameter> parameters = criterion.parameters();
  const std::vector<Variable> wrt(parameters.begin(), parameters.end());
  Executor shared(outputs, wrt, {.share_buffers = true});
  Executor own(outputs, wrt, {.share_buffers = false});
  Executor shared_inference({z}, {}, {.share_buffers = true});
  Executor own_inference({z}, {}, {.share_buffers = false});
  for (size_t m = 0; m < minibatches.size(); ++m) {
    SCOPED_TRACE("minibatch " + std::to_string(m));
    const Dictionary random = random_state(criterion);
    const auto a = step(shared, outputs, parameters, minibatches[m], true);
    restore_random_state(criterion, random);
    const auto b = step(own, outputs, parameters, minibatches[m], true);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << "result " << i;
    EXPECT_TRUE(step(shared_inference, {z}, {}, minibatches[m], false) ==
                step(own_inference, {z}, {}, minibatches[m], false));
  }
}

TEST(BufferSharing, MLPIsBitwiseUnchanged) {
  Variable x = input_variable({12}, {.name = "x"});
  Variable y = input_variable({5}, {.is_sparse = true, .name = "y"});
  Variable z =
      Sequential({Dense(20, {.activation = relu}), Dense(20, {.activation = tanh}), Dense(5)})(x);
  std::vector<ValueMap> minibatches;
  for (size_t n : {size_t{7}, size_t{33}})
    minibatches.push_back(
        {{x, Value::create_batch<float>({12}, random_floats(12 * n, unsigned(n)))},
         {y, Value::one_hot(5, std::vector<size_t>(n, 3))}});
  expect_sharing_changes_nothing(z, cross_entropy_with_softmax(z, y), minibatches);
}

TEST(BufferSharing, ConvnetWithBatchNormDropoutAndPoolingIsBitwiseUnchanged) {
  Variable x = input_variable({1, 10, 10}, {.name = "x"});
  Variable y = input_variable({4}, {.is_sparse = true, .name = "y"});
  // 16 channels: the values between convolution, batch normalization, relu and pooling stay
  // in oneDNN's blocked layout.
  Variable z =
      Sequential({Convolution2D({3, 3}, 16, {.activation = relu, .pad = true}),
                  BatchNormalization({.map_rank = 1}), MaxPooling({2, 2}, {.strides = {2, 2}}),
                  Convolution2D({3, 3}, 16, {.activation = relu}), Dropout(0.5), Dense(4)})(x);
  std::vector<ValueMap> minibatches;
  for (size_t n : {size_t{5}, size_t{12}}) {
    std::vector<size_t> labels(n);
    for (size_t i = 0; i < n; ++i) labels[i] = i % 4;
    minibatches.push_back(
        {{x, Value::create_batch<float>({1, 10, 10}, random_floats(100 * n, unsigned(n)))},
         {y, Value::one_hot(4, labels)}});
  }
  expect_sharing_changes_nothing(z, cross_entropy_with_softmax(z, y), minibatches);
}

TEST(BufferSharing, LSTMStepLoopAndFusedAreBitwiseUnchanged) {
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "step loop");
    Variable x = sequence::input_variable({3}, {.name = "x"});
    Variable y = input_variable({2}, {.name = "y"});
    Variable h = Recurrence(LSTM(6), {.fused = fused})(x);
    Variable z = Dense(2)(sequence::last(h).output());
    std::vector<ValueMap> minibatches;
    for (const std::vector<size_t>& lengths :
         {std::vector<size_t>{3, 1, 4}, std::vector<size_t>{5, 2, 7, 1, 6}}) {
      size_t steps = 0;
      for (size_t l : lengths) steps += l;
      minibatches.push_back(
          {{x, Value::create_sequences<float>({3}, random_floats(3 * steps, unsigned(steps)),
                                              lengths)},
           {y, Value::create_batch<float>({2}, random_floats(2 * lengths.size(), 9))}});
    }
    expect_sharing_changes_nothing(z, squared_error(z, y), minibatches);
  }
}

// Views (reshape, alias, stop_gradient: OpTraits::output_views_input) take their input's buffer.
// An op that may write over its input does not write over a view whose input is still read, nor
// over a view of an argument; values and gradients are those of an executor without sharing.
TEST(BufferSharing, ViewsTakeTheirInputsBufferAndChangeNothing) {
  Variable x = input_variable({12}, {.name = "x"});
  Variable y = input_variable({12}, {.name = "y"});
  Parameter w = parameter(NDArrayView::from_vector<float>({12, 12}, random_floats(144, 1)), "w");
  Variable a = times(x, w);
  Variable r = reshape(a, {3, 4});
  Variable n = negate(r);  // r's buffer is a's, which tanh reads after it
  Variable s = plus(reshape(n, {12}), tanh(a));
  Variable v = reshape(alias(x), {12});  // the caller's data
  Variable z = plus(s, negate(stop_gradient(v)));
  std::vector<ValueMap> minibatches;
  for (size_t m : {size_t{5}, size_t{9}})
    minibatches.push_back({{x, Value::create_batch<float>({12}, random_floats(12 * m, 2 + m))},
                           {y, Value::create_batch<float>({12}, random_floats(12 * m, 3 + m))}});
  expect_sharing_changes_nothing(z, squared_error(z, y), minibatches);

  Executor exec({z}, {w});
  const std::vector<float> argument = random_floats(36, 7);
  const Value xs = Value::create_batch<float>({12}, argument);
  exec.forward({{x, xs}, {y, xs}}, true);
  exec.backward(z);
  EXPECT_EQ(exec.tensor(r).data, exec.tensor(a).data);
  EXPECT_EQ(exec.tensor(v).data, xs.data().raw_data());
  EXPECT_EQ(xs.data().to_vector<float>(), argument);  // not written
}

}  // namespace
}  // namespace loom
