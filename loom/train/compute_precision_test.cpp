// bf16 mixed precision (loom/core/precision.h): gradients close to float32's on Dense and
// Convolution, the Trainer's setting in checkpoints, and the no-op on CPUs without bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "loom/core/precision.h"
#include "loom/core/random.h"
#include "loom/graph/graph_test_util.h"
#include "loom/io/io_test_util.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/learners/sgd.h"
#include "loom/ops/ops.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

// The gradients of sum(z * z) / 2 for z = model(x), with respect to the model's parameters
// and x, each flattened, in the calling thread's precision.
std::vector<std::vector<float>> gradients(const Function& model, const Variable& x,
                                          const Value& data) {
  const Variable z = model.output();
  const Function loss = reduce_sum(element_times(z, z), Axis::all_static_axes());
  std::vector<Variable> wrt = {x};
  for (const Parameter& p : model.parameters()) wrt.push_back(p);
  const ValueMap g = loss.grad({{x, data}}, wrt);
  std::vector<std::vector<float>> out;
  for (const Variable& v : wrt) out.push_back(g.at(v).data().to_vector<float>());
  return out;
}

// ||a - b|| / ||b||.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += double(a[i] - b[i]) * double(a[i] - b[i]);
    n += double(b[i]) * double(b[i]);
  }
  return std::sqrt(d / n);
}

// bf16 keeps 8 significant bits (a relative rounding of at most 2^-9 per input); the
// gradients through two layers chain four products (and ReLU masks that flip near 0): 2-3 %
// relative error measured, so 5 %.
constexpr double kBf16Tolerance = 5e-2;

void expect_bf16_close(const Function& model, const Variable& x, const Value& data) {
  const auto f32 = gradients(model, x, data);
  std::vector<std::vector<float>> bf16;
  {
    const ComputePrecisionScope scope(ComputePrecision::BFloat16);
    EXPECT_TRUE(compute_in_bf16());
    bf16 = gradients(model, x, data);
  }
  EXPECT_FALSE(compute_in_bf16());
  ASSERT_EQ(bf16.size(), f32.size());
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_LT(relative_error(bf16[i], f32[i]), kBf16Tolerance) << "gradient " << i;
    EXPECT_NE(bf16[i], f32[i]) << "gradient " << i << " was not computed in bf16";
  }
}

TEST(ComputePrecision, DenseGradientsInBf16AreCloseToFloat32) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  set_fixed_random_seed(3);
  // Each product is 256 x 512 x 512 or 256 x 512 x 256 multiply-adds: at least
  // kernels::kMinBf16Product, the smallest that computes in bf16.
  const Variable x = input_variable({512}, {.needs_gradient = true});
  const Function model = Dense(512, {.activation = tanh})(x);
  expect_bf16_close(Dense(256)(model.output()), x,
                    Value::create_batch<float>({512}, random_floats(256 * 512, 1)));
}

// Products below kernels::kMinBf16Product stay float32 in bf16 mode (the same numbers); one of
// that size computes in bf16.
TEST(ComputePrecision, Bf16FromMinBf16Product) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  set_fixed_random_seed(4);
  const Variable x = input_variable({64}, {.needs_gradient = true});
  const Function model = Dense(10)(Dense(48, {.activation = tanh})(x).output());
  const Value data = Value::create_batch<float>({64}, random_floats(20 * 64, 1));
  const auto f32 = gradients(model, x, data);
  const ComputePrecisionScope scope(ComputePrecision::BFloat16);
  EXPECT_EQ(gradients(model, x, data), f32);
  // A product of exactly kMinBf16Product multiply-adds (256 x 512 x 256) computes in bf16.
  const Variable x2 = input_variable({512});
  const Function dense = Dense(256)(x2);
  const Value data2 = Value::create_batch<float>({512}, random_floats(256 * 512, 2));
  const std::vector<float> bf16 = dense.eval(data2).data().to_vector<float>();
  const ComputePrecisionScope float32(ComputePrecision::Float32);
  EXPECT_NE(dense.eval(data2).data().to_vector<float>(), bf16);
}

TEST(ComputePrecision, ConvolutionGradientsInBf16AreCloseToFloat32) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  set_fixed_random_seed(5);
  // 16 channels in and 32 out: the blocked layout between the two convolutions.
  const Variable x = input_variable({16, 12, 12}, {.needs_gradient = true});
  const Function first = Convolution({3, 3}, 32, {.activation = relu, .pad = true})(x);
  expect_bf16_close(Convolution({3, 3}, 16, {.pad = true})(first.output()), x,
                    Value::create_batch<float>({16, 12, 12}, random_floats(4 * 16 * 144, 2)));
}

// Function::eval follows the process-wide setting; the difference to float32 is printed.
TEST(ComputePrecision, EvalInBf16IsCloseToFloat32) {
  if (!bf16_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  set_fixed_random_seed(9);
  // 16 input channels: the convolution computes in bf16 (kernels::kMinBf16Channels).
  const Variable x = input_variable({16, 14, 14});
  const Function conv = Convolution({5, 5}, 32, {.activation = relu, .pad = true})(x);
  const Function model = Dense(10)(conv.output());
  const Value data = Value::create_batch<float>({16, 14, 14}, random_floats(8 * 16 * 196, 6));
  const std::vector<float> f32 = model.eval(data).data().to_vector<float>();
  set_compute_precision(ComputePrecision::BFloat16);
  const std::vector<float> bf16 = model.eval(data).data().to_vector<float>();
  set_compute_precision(ComputePrecision::Float32);
  const double error = relative_error(bf16, f32);
  std::printf("eval in bf16: relative difference to float32 %.2e\n", error);
  EXPECT_LT(error, kBf16Tolerance);
  EXPECT_NE(bf16, f32);
}

// A trainer's precision is saved with its checkpoint and restored with it.
TEST(ComputePrecision, TrainerCheckpointKeepsThePrecision) {
  auto make = [] {
    set_fixed_random_seed(7);
    const Variable x = input_variable({4}, {.name = "x"});
    const Variable y = input_variable({2}, {.name = "y"});
    const Function model = Dense(2)(x);
    const Function loss = squared_error(model.output(), y);
    auto trainer = std::make_unique<Trainer>(
        model, loss, std::vector{sgd(model.parameters(), learning_parameter_schedule(0.1))});
    trainer->train_minibatch({{x, Value::create_batch<float>({4}, random_floats(8, 3))},
                              {y, Value::create_batch<float>({2}, random_floats(4, 4))}});
    return trainer;
  };
  const std::string path = testing_io::test_dir() + "/precision.ckp";
  auto bf16 = make();
  EXPECT_EQ(bf16->compute_precision(), ComputePrecision::Float32);  // the process default
  bf16->set_compute_precision(ComputePrecision::BFloat16);
  bf16->save_checkpoint(path);
  auto restored = make();
  restored->restore_from_checkpoint(path);
  EXPECT_EQ(restored->compute_precision(), ComputePrecision::BFloat16);

  // A trainer without its own setting saves the process-wide one.
  set_compute_precision(ComputePrecision::BFloat16);
  auto global = make();
  global->save_checkpoint(path);
  set_compute_precision(ComputePrecision::Float32);
  EXPECT_EQ(global->compute_precision(), ComputePrecision::Float32);
  restored = make();
  restored->restore_from_checkpoint(path);
  EXPECT_EQ(restored->compute_precision(), ComputePrecision::BFloat16);
  EXPECT_EQ(make()->compute_precision(), ComputePrecision::Float32);
}

// Without bf16 support the setting is kept, a message says float32 is used, and results are
// float32's bit for bit.
TEST(ComputePrecision, UnsupportedCpuComputesInFloat32WithAMessage) {
  set_fixed_random_seed(3);
  const Variable x = input_variable({64}, {.needs_gradient = true});
  const Function model = Dense(16)(x);
  const Value data = Value::create_batch<float>({64}, random_floats(8 * 64, 1));
  const auto f32 = gradients(model, x, data);

  detail::force_bf16_support_for_testing(false);
  ::testing::internal::CaptureStderr();
  set_compute_precision(ComputePrecision::BFloat16);
  const std::string message = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(message.find("set_compute_precision(bf16): this CPU has no AVX512-BF16"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("computing in float32"), std::string::npos) << message;
  EXPECT_EQ(get_compute_precision(), ComputePrecision::BFloat16);
  EXPECT_FALSE(compute_in_bf16());
  const auto unsupported = gradients(model, x, data);
  set_compute_precision(ComputePrecision::Float32);
  detail::force_bf16_support_for_testing(std::nullopt);
  EXPECT_EQ(unsupported, f32);
}

}  // namespace
}  // namespace loom
