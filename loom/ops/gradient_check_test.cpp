// The checks in gradient_check.h must catch what they are for: a wrong gradient, and an op
// whose result depends on how the minibatch is packed.
#include "loom/ops/gradient_check.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "loom/graph/op.h"

namespace loom {
namespace {

// y = 2x + (the packed row index when `leak_rows`), with the gradient dx = dy (wrong: it
// should be 2 dy).
class BuggyOp : public OpDef {
 public:
  explicit BuggyOp(bool leak_rows) : leak_rows_(leak_rows) {}
  const char* name() const override { return "Buggy"; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& in, const Dictionary&) const override {
    return {{in[0].shape(), in[0].dtype(), in[0].dynamic_axes(), false}};
  }
  void forward(OpCall& call) const override {
    const Tensor& x = *call.inputs[0];
    const size_t n = x.size() / std::max<size_t>(x.rows(), 1);
    for (size_t i = 0; i < x.size(); ++i)
      call.output->ptr<double>()[i] = 2 * x.ptr<double>()[i] + (leak_rows_ ? double(i / n) : 0);
  }
  void backward(OpCall& call, size_t, Tensor& dx, bool accumulate) const override {
    for (size_t i = 0; i < dx.size(); ++i)
      dx.ptr<double>()[i] =
          (accumulate ? dx.ptr<double>()[i] : 0) + call.output_gradient->ptr<double>()[i];
  }

 private:
  bool leak_rows_;
};

const BuggyOp kWrongGradient(false);
const BuggyOp kLeaksRows(true);

// Runs check and expects it to report at least one failure whose message contains `text`.
void expect_failures(const std::function<void()>& check, const std::string& text) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  ASSERT_GT(results.size(), 0) << "the check reported nothing";
  for (int i = 0; i < results.size(); ++i)
    EXPECT_NE(std::string(results.GetTestPartResult(i).message()).find(text), std::string::npos)
        << results.GetTestPartResult(i).message();
}

TEST(GradientCheck, CatchesAWrongGradient) {
  Variable x = sequence::input_variable({2}, {.dtype = DataType::Float64, .name = "x"});
  Function f = make_primitive(kWrongGradient, {x});
  ValueMap args{{x, random_sequences({2}, {3, 1, 2}, DataType::Float64, 1)}};
  expect_failures([&] { expect_gradients_match(f, args, {x}); }, "gradient of 'x'");
}

TEST(GradientCheck, CatchesAResultThatDependsOnThePacking) {
  Variable x = sequence::input_variable({2}, {.dtype = DataType::Float64, .name = "x"});
  Function f = make_primitive(kLeaksRows, {x});
  expect_failures(
      [&] {
        expect_sequences_match_individually(f, x,
                                            random_sequences({2}, {3, 1, 2}, DataType::Float64, 2));
      },
      "evaluated alone: output");
}

TEST(GradientCheck, RandomValuesAreReproducibleAndAvoidZero) {
  Value a = random_sequences({3}, {3, 1, 2}, DataType::Float64, 9);
  Value b = random_sequences({3}, {3, 1, 2}, DataType::Float32, 9);
  EXPECT_EQ(a.sequence_lengths(), (std::vector<size_t>{3, 1, 2}));
  auto av = a.as_sequences<double>(), bv = b.as_sequences<double>();
  for (size_t s = 0; s < av.size(); ++s)
    for (size_t i = 0; i < av[s].size(); ++i) {
      EXPECT_NEAR(av[s][i], bv[s][i], 1e-7);
      EXPECT_GE(std::abs(av[s][i]), 0.05);
      EXPECT_LE(std::abs(av[s][i]), 1.0);
    }
}

}  // namespace
}  // namespace loom
