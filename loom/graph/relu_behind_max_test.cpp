// The executor runs max pooling of a relu as relu of the max pooling (docs/executor.md, "Relu
// after max pooling"). That changes no result: in double (the reference loops, one layout)
// outputs and gradients are bitwise those of the same graph with the relus' outputs asked for
// too, which keeps each relu where it was; in float (oneDNN, blocked layouts, where asking for
// an output changes its layout and so the sums' order) bitwise those of the graph written with
// the relus after the poolings.
#include <gtest/gtest.h>

#include <cmath>

#include "loom/graph/executor.h"
#include "loom/graph/graph_test_util.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/pooling.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

// Inputs on a coarse grid (multiples of 1/4 in [-1, 1]): many windows tie for their maximum,
// many hold only values <= 0, and the relus' outputs have runs of zeros.
std::vector<double> coarse_numbers(size_t n, uint64_t seed) {
  std::vector<double> v;
  for (float f : random_floats(n, seed)) v.push_back(std::round(f * 4) / 4);
  return v;
}

// 16 channels (blocked in float) with overlapping, padded windows (3x3, stride 2); then 5
// channels, row-major, two max poolings in a row (the relu moves behind both); beside them, on
// x, 4 channels and an average pooling, which keeps its relu. relu_after: each relu written after
// its max poolings.
struct Convnet {
  Variable x, y, z, loss;
  std::vector<Variable> relus;

  Convnet(DataType dtype, bool relu_after) {
    x = input_variable({2, 9, 9}, {.dtype = dtype, .name = "x", .needs_gradient = true});
    y = input_variable({3}, {.dtype = dtype, .name = "y"});
    const auto relu_then = [&](const Variable& v, auto&& pool) {
      if (relu_after) return Variable(relu(pool(v)));
      relus.push_back(relu(v));
      return pool(relus.back());
    };
    Variable p1 = relu_then(Convolution2D({3, 3}, 16, {.pad = true, .dtype = dtype})(x),
                            [](const Variable& v) {
                              return Variable(MaxPooling({3, 3}, {.strides = {2}, .pad = true})(v));
                            });
    Variable p2 = relu_then(Convolution2D({2, 2}, 5, {.dtype = dtype})(p1), [](const Variable& v) {
      return Variable(MaxPooling({2, 2})(MaxPooling({2, 2})(v)));
    });
    relus.push_back(relu(Convolution2D({3, 3}, 4, {.pad = true, .dtype = dtype})(x)));
    z = Variable(Dense(3, {.dtype = dtype})(p2)) +
        Variable(
            Dense(3, {.dtype = dtype})(AveragePooling({3, 3}, {.strides = {3}})(relus.back())));
    loss = cross_entropy_with_softmax(z, y);
  }

  // Training (loss, z, the gradients of every parameter and of x) and inference (z), in an
  // executor asked for the relus' outputs too when keep_relus; the parameters' values from
  // `like` when given.
  std::vector<std::vector<double>> results(bool keep_relus, const Convnet* like, size_t n) const {
    const std::vector<Parameter> parameters = combine({loss}).parameters();
    if (like) {
      const std::vector<Parameter> theirs = combine({like->loss}).parameters();
      for (size_t i = 0; i < parameters.size(); ++i) parameters[i].set_value(theirs[i].value());
    }
    std::vector<Variable> outputs{loss, z};
    if (keep_relus) outputs.insert(outputs.end(), relus.begin(), relus.end());
    std::vector<Variable> wrt(parameters.begin(), parameters.end());
    wrt.push_back(x);
    std::vector<double> labels(3 * n, 0);
    for (size_t i = 0; i < n; ++i) labels[3 * i + i % 3] = 1;
    const ValueMap arguments{{x, batch({2, 9, 9}, coarse_numbers(2 * 81 * n, n))},
                             {y, batch({3}, labels)}};
    Executor training(outputs, wrt);
    training.forward(arguments, true);
    std::vector<std::vector<double>> r{training.output_value(loss).data().to_vector<double>(),
                                       training.output_value(z).data().to_vector<double>()};
    training.backward(loss);
    for (const Parameter& p : parameters)
      r.push_back(training.parameter_gradient(p).to_vector<double>());
    r.push_back(training.gradient_value(x).data().to_vector<double>());
    Executor inference(std::vector<Variable>{z}, {});
    inference.forward(arguments, false);
    r.push_back(inference.output_value(z).data().to_vector<double>());
    return r;
  }

  Value batch(const NDShape& shape, const std::vector<double>& v) const {
    if (x.dtype() == DataType::Float64) return Value::create_batch<double>(shape, v);
    return Value::create_batch<float>(shape, std::vector<float>(v.begin(), v.end()));
  }
};

void expect_equal(const std::vector<std::vector<double>>& a,
                  const std::vector<std::vector<double>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "result " << i;
}

TEST(ReluBehindMax, DoubleIsBitwiseThatOfTheRelusInPlace) {
  const Convnet net(DataType::Float64, false);
  for (size_t n : {size_t{3}, size_t{8}}) {
    SCOPED_TRACE("minibatch " + std::to_string(n));
    expect_equal(net.results(false, nullptr, n), net.results(true, nullptr, n));
  }
}

TEST(ReluBehindMax, FloatIsBitwiseThatOfTheRelusWrittenAfter) {
  const Convnet net(DataType::Float32, false), after(DataType::Float32, true);
  for (size_t n : {size_t{3}, size_t{8}}) {
    SCOPED_TRACE("minibatch " + std::to_string(n));
    expect_equal(net.results(false, nullptr, n), after.results(false, &net, n));
  }
}

TEST(ReluBehindMax, MovesOnlyAReluBetweenValuesNothingElseReads) {
  std::vector<Variable> x;
  for (int i = 0; i < 4; ++i) x.push_back(input_variable({16, 6, 6}));
  Variable moved = relu(x[0]);
  Variable also_read = relu(x[1]);
  Variable average = relu(x[2]);
  Variable operand_read = relu(x[3]);
  const std::vector<Variable> outputs{
      MaxPooling({2, 2})(moved), MaxPooling({2, 2})(also_read).output() + reduce_sum(also_read),
      AveragePooling({2, 2})(average),
      MaxPooling({2, 2})(operand_read).output() + reduce_sum(x[3])};
  Executor exec(outputs);
  ValueMap arguments;
  for (const Variable& v : x)
    arguments.emplace(v, Value::create_batch<float>({16, 6, 6}, random_floats(16 * 36 * 2, 5)));
  exec.forward(arguments, false);
  // The moved relu has no value of its own; the others keep theirs.
  EXPECT_THROW(exec.tensor(moved), ArgumentError);
  for (const Variable& kept : {also_read, average, operand_read})
    EXPECT_NO_THROW(exec.tensor(kept));
}

}  // namespace
}  // namespace loom
