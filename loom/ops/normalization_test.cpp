#include "loom/ops/normalization.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

#include "loom/graph/executor.h"
#include "loom/ops/convolution.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/pooling.h"

namespace loom {
namespace {

constexpr double kEps = 0.00001;

// The statistics' variables of one batch normalization.
struct Bn {
  Parameter scale, bias;
  Constant mean, var, count;
};

Bn make_bn(const NDShape& stats, DataType dtype, uint64_t seed) {
  return {parameter(random_array(stats, dtype, seed, 0.5, 1.5), "scale"),
          parameter(random_array(stats, dtype, seed + 1), "bias"),
          constant(random_array(stats, dtype, seed + 2), "running_mean"),
          constant(random_array(stats, dtype, seed + 3, 0.5, 1.5), "running_var"),
          constant(0.0, dtype, "running_count")};
}

Function apply(const Variable& x, const Bn& b, bool spatial, double time_constant = 5000,
               double blend = 0) {
  return batch_normalization(x, b.scale, b.bias, b.mean, b.var, b.count, spatial, time_constant,
                             blend, kEps);
}

std::vector<double> stored(const Variable& v) {
  return v.value().to_vector<double>();
}

// Checks the training-mode gradients of weighted_output(f) against central differences of the
// training-mode forward pass (Function::grad and Function::forward both train; eval would
// normalize by the running statistics instead).
void expect_training_gradients_match(const Function& f, const ValueMap& args,
                                     const std::vector<Variable>& wrt) {
  const Function g = weighted_output(f);
  const ValueMap analytic = g.grad(args, wrt);
  auto objective = [&] {
    double s = 0;
    for (double v : values(g.forward(args).second.at(g.output()))) s += v;
    return s;
  };
  for (const Variable& w : wrt) {
    const std::vector<double> grad = values(analytic.at(w));
    NDArrayView data = w.is_parameter() ? w.value() : args.at(w).data();
    double* p = data.data<double>();
    for (size_t i = 0; i < data.size(); ++i) {
      const double original = p[i], h = 1e-6 * std::max(1.0, std::abs(original));
      p[i] = original + h;
      const double up = objective();
      p[i] = original - h;
      const double down = objective();
      p[i] = original;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(grad[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << w.name() << " element " << i;
    }
  }
}

// Each subset of {x, scale, bias} that the gradient tests take: the first input whose gradient
// a pass wants computes all three.
const std::vector<std::vector<size_t>> kBnWrt{{0, 1, 2}, {0}, {1}, {2}, {1, 2}};

// The subset of {x, b.scale, b.bias} that kBnWrt's entry lists.
std::vector<Variable> chosen(const std::vector<size_t>& wrt, const Variable& x, const Bn& b) {
  const std::vector<Variable> all{x, b.scale, b.bias};
  std::vector<Variable> r;
  for (size_t i : wrt) r.push_back(all[i]);
  return r;
}

TEST(BatchNormalization, TrainingGradientsMatchFiniteDifferences) {
  for (bool spatial : {true, false})
    for (const std::vector<size_t>& wrt : kBnWrt) {
      SCOPED_TRACE(std::string(spatial ? "spatial" : "per element") + ", " +
                   std::to_string(wrt.size()) + " gradient(s) from " + std::to_string(wrt[0]));
      const NDShape sample = spatial ? NDShape{3, 2, 2} : NDShape{5};
      Variable x = input_variable(sample, {.dtype = kF64, .name = "x", .needs_gradient = true});
      const Bn b = make_bn(spatial ? NDShape{3} : sample, kF64, 10);
      Function f = apply(x, b, spatial);
      expect_training_gradients_match(f, {{x, random_batch(sample, 4, kF64, 1, -2, 2)}},
                                      chosen(wrt, x, b));
    }
}

TEST(BatchNormalization, TrainingNormalizesByTheMinibatch) {
  Variable x = input_variable({2, 3}, f64("x"));
  const Bn b = make_bn({2}, kF64, 20);
  const Value v = random_batch({2, 3}, 5, kF64, 2, -3, 3);
  const auto y = values(apply(x, b, true).forward({{x, v}}).second.begin()->second);
  const auto xs = values(v);
  const auto scale = stored(b.scale), bias = stored(b.bias);
  for (size_t c = 0; c < 2; ++c) {
    double m = 0, q = 0;
    for (size_t n = 0; n < 5; ++n)
      for (size_t s = 0; s < 3; ++s) m += xs[(n * 2 + c) * 3 + s] / 15;
    for (size_t n = 0; n < 5; ++n)
      for (size_t s = 0; s < 3; ++s) q += std::pow(xs[(n * 2 + c) * 3 + s] - m, 2) / 15;
    for (size_t n = 0; n < 5; ++n)
      for (size_t s = 0; s < 3; ++s) {
        const size_t i = (n * 2 + c) * 3 + s;
        EXPECT_NEAR(y[i], (xs[i] - m) / std::sqrt(q + kEps) * scale[c] + bias[c], 1e-12);
      }
  }
}

// Per-element statistics of batch [N, D] data.
void moments(const std::vector<double>& x, size_t D, std::vector<double>& mean,
             std::vector<double>& var) {
  const size_t N = x.size() / D;
  mean.assign(D, 0);
  var.assign(D, 0);
  for (size_t i = 0; i < x.size(); ++i) mean[i % D] += x[i] / double(N);
  for (size_t i = 0; i < x.size(); ++i) var[i % D] += std::pow(x[i] - mean[i % D], 2);
  for (double& v : var) v /= double(N);
}

TEST(BatchNormalization, RunningStatisticsFollowCntksRuleAndServeInference) {
  Variable x = input_variable({2}, f64("x"));
  const Bn b = make_bn({2}, kF64, 30);
  Function f = apply(x, b, false, 5000);
  const Value v1 = random_batch({2}, 3, kF64, 3, -2, 2), v2 = random_batch({2}, 3, kF64, 4, 1, 5);
  EXPECT_THROW(f.eval({{x, v1}}), StateError);  // nothing trained yet
  std::vector<double> m1, q1, m2, q2;
  moments(values(v1), 2, m1, q1);
  moments(values(v2), 2, m2, q2);
  f.forward({{x, v1}});
  // The first minibatch replaces the initial values; variance unbiased (3 / 2).
  expect_all_near(stored(b.mean), m1, 1e-14, "mean after 1");
  expect_all_near(stored(b.var), {q1[0] * 1.5, q1[1] * 1.5}, 1e-14, "variance after 1");
  EXPECT_EQ(stored(b.count), std::vector<double>{3});
  f.forward({{x, v2}});
  const double w = 1 - std::exp(-3.0 / 5000);
  std::vector<double> rm(2), rv(2);
  for (size_t d = 0; d < 2; ++d) {
    rm[d] = (1 - w) * m1[d] + w * m2[d];
    rv[d] = (1 - w) * q1[d] * 1.5 + w * q2[d] * 1.5;
  }
  expect_all_near(stored(b.mean), rm, 1e-14, "mean after 2");
  expect_all_near(stored(b.var), rv, 1e-14, "variance after 2");
  EXPECT_EQ(stored(b.count), std::vector<double>{6});

  // Inference normalizes by the running statistics and leaves them alone.
  const auto trained_mean = stored(b.mean);
  const auto y = values(f.eval_one({{x, v1}}));
  const auto xs = values(v1), scale = stored(b.scale), bias = stored(b.bias);
  for (size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(y[i],
                (xs[i] - rm[i % 2]) / std::sqrt(rv[i % 2] + kEps) * scale[i % 2] + bias[i % 2],
                1e-12);
  EXPECT_EQ(stored(b.mean), trained_mean);
  EXPECT_EQ(stored(b.count), std::vector<double>{6});
}

TEST(BatchNormalization, TimeConstantsZeroInfinityAndCumulative) {
  Variable x = input_variable({1}, f64("x"));
  const Value v1 = Value::create_batch<double>({1}, {1, 3}),
              v2 = Value::create_batch<double>({1}, {7, 9});
  auto means_after_two = [&](double time_constant) {
    const Bn b = make_bn({1}, kF64, 40);
    Function f = apply(x, b, false, time_constant);
    f.forward({{x, v1}});
    f.forward({{x, v2}});
    return stored(b.mean)[0];
  };
  EXPECT_DOUBLE_EQ(means_after_two(0), 8);                                        // last only
  EXPECT_DOUBLE_EQ(means_after_two(std::numeric_limits<double>::infinity()), 2);  // frozen
  EXPECT_DOUBLE_EQ(means_after_two(-1), 5);                                       // cumulative
}

TEST(BatchNormalization, BlendInfinityNormalizesByRunningStatistics) {
  Variable x = input_variable({2}, f64("x"));
  const Bn b = make_bn({2}, kF64, 50);
  Function f = apply(x, b, false, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::infinity());
  const Value v = random_batch({2}, 4, kF64, 5);
  f.forward({{x, v}});  // count 0: the minibatch's own statistics, which become the running ones
  const auto trained = values(f.forward({{x, v}}).second.begin()->second);
  expect_all_near(trained, values(f.eval_one({{x, v}})), 1e-14, "blend infinity");
  // Normalizing by constants, the gradient is affine.
  Variable xg = input_variable({2}, {.dtype = kF64, .name = "xg", .needs_gradient = true});
  for (const std::vector<size_t>& wrt : kBnWrt)
    expect_training_gradients_match(
        batch_normalization(xg, b.scale, b.bias, b.mean, b.var, b.count, false,
                            std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::infinity()),
        {{xg, v}}, chosen(wrt, xg, b));
}

// A finite blend time constant T (CNTK's blendTimeConstant): in training, after the first
// minibatch, the running statistics (updated by this minibatch) weigh T / (T + N) against the
// minibatch's own, in the means and in the inverse standard deviations; the gradient is CNTK's,
// which weights the batch statistics' terms by N / (T + N).
TEST(BatchNormalization, FiniteBlendTimeConstantBlendsAsCntk) {
  Variable x = input_variable({2}, {.dtype = kF64, .name = "x", .needs_gradient = true});
  const Bn b = make_bn({2}, kF64, 70);
  const double T = 8, N = 4, blend = T / (T + N);
  Function f = apply(x, b, false, 5000, T);
  const Value v1 = random_batch({2}, 4, kF64, 6, -2, 2), v2 = random_batch({2}, 4, kF64, 7, -2, 2);
  EXPECT_EQ(
      values(f.forward({{x, v1}}).second.begin()->second),
      values(apply(x, make_bn({2}, kF64, 70), false).forward({{x, v1}}).second.begin()->second));
  // The minibatch's mean and biased variance of each element, and the blended normalization.
  const std::vector<double> xs = values(v2), g = stored(b.scale), beta = stored(b.bias);
  auto expected = [&](std::vector<double>* inv_out, std::vector<double>* xhat) {
    const std::vector<double> rm = stored(b.mean), rv = stored(b.var);
    std::vector<double> y(8), inv(2);
    for (size_t c = 0; c < 2; ++c) {
      double m = 0, q = 0;
      for (size_t n = 0; n < 4; ++n) m += xs[2 * n + c] / N;
      for (size_t n = 0; n < 4; ++n) q += (xs[2 * n + c] - m) * (xs[2 * n + c] - m) / N;
      const double mean = blend * rm[c] + (1 - blend) * m;
      inv[c] = blend / std::sqrt(rv[c] + kEps) + (1 - blend) / std::sqrt(q + kEps);
      for (size_t n = 0; n < 4; ++n) {
        (*xhat)[2 * n + c] = (xs[2 * n + c] - mean) * inv[c];
        y[2 * n + c] = g[c] * (*xhat)[2 * n + c] + beta[c];
      }
    }
    *inv_out = inv;
    return y;
  };
  std::vector<double> inv, xhat(8);
  const std::vector<double> y = values(f.forward({{x, v2}}).second.begin()->second);
  expect_all_near(y, expected(&inv, &xhat), 1e-12, "blended output");
  // The gradient of Σ w y (w per element) with respect to x, as CNTK's backward computes it.
  const std::vector<double> w{0.7, 1.3};
  const Function weighted = element_times(f, constant(NDArrayView::from_vector<double>({2}, w)));
  const std::vector<double> dx = values(weighted.grad({{x, v2}}, {x}).at(x));
  expected(&inv, &xhat);  // the statistics this forward pass updated
  std::vector<double> want(8);
  for (size_t c = 0; c < 2; ++c) {
    double dscale = 0, dbias = 0;
    for (size_t n = 0; n < 4; ++n) {
      dscale += w[c] * xhat[2 * n + c];
      dbias += w[c];
    }
    for (size_t n = 0; n < 4; ++n)
      want[2 * n + c] =
          g[c] * inv[c] * (w[c] - (1 - blend) * (dbias + xhat[2 * n + c] * dscale) / N);
  }
  expect_all_near(dx, want, 1e-12, "CNTK's gradient of the blend");
}

TEST(BatchNormalization, InferredShapesAndErrors) {
  Variable x = input_variable({3, 4, 4}, f64("x"));
  Parameter scale = parameter({NDShape::kInferred}, constant_initializer(1), kF64, "scale");
  Parameter bias = parameter({NDShape::kInferred}, zeros(), kF64, "bias");
  const Bn b = make_bn({3}, kF64, 60);
  Function f = batch_normalization(x, scale, bias, b.mean, b.var, b.count, true);
  EXPECT_EQ(scale.shape(), NDShape{3});
  EXPECT_EQ(f.output().shape(), (NDShape{3, 4, 4}));

  expect_shape_error([&] { apply(x, b, false); }, {"scale", "[3,4,4]"});
  Variable plain = input_variable({3}, {.dtype = kF64, .dynamic_axes = {}});
  expect_shape_error([&] { apply(plain, b, false); }, {"no batch axis"});
  EXPECT_THROW(batch_normalization(x, b.scale, b.bias, b.scale, b.var, b.count, true),
               ArgumentError);  // a running mean that is not a Constant
  EXPECT_THROW(apply(x, b, true, 5000, -1), ArgumentError);
}

// Python's batch_normalization comes from the op table: CNTK's defaults (time constants written
// as ints) are stored as the doubles the op reads, and running_count left out (CNTK's None) is a
// constant 0 of the operand's dtype.
TEST(BatchNormalization, TheTablesDefaultsAndRunningCount) {
  Variable x = input_variable({3}, f64("x"));
  const Bn b = make_bn({3}, kF64, 61);
  const OpSchema& s = *find_schema("BatchNormalization");
  const Function f = s.apply({x, b.scale, b.bias, b.mean, b.var}, Dictionary({{"spatial", false}}));
  const Dictionary& a = f.attributes();
  EXPECT_EQ(a.get<double>("normalization_time_constant"), kBatchNormalizationTimeConstant);
  EXPECT_EQ(a.get<double>("blend_time_constant"), kBatchNormalizationBlendTimeConstant);
  EXPECT_EQ(a.get<double>("epsilon"), kBatchNormalizationEpsilon);
  EXPECT_FALSE(a.contains("use_cudnn_engine") || a.contains("disable_regularization"));
  const Variable count = f.inputs().at(5);
  ASSERT_TRUE(count.is_constant());
  EXPECT_EQ(count.dtype(), kF64);
  EXPECT_EQ(stored(count), std::vector<double>{0});
  EXPECT_EQ(s.apply({x, b.scale, b.bias, b.mean, b.var, b.count}, Dictionary({{"spatial", false}}))
                .inputs()
                .at(5),
            b.count);
  expect_argument_error(
      [&] {
        s.apply({x, b.scale, b.bias, b.mean, b.var}, {});
      },
      {"batch_normalization: argument 'spatial' is required"});
}

// A graph around one batch normalization, built in one data type: its input, the
// normalization's variables, the output and the variables to differentiate.
struct BnNet {
  Variable x;
  Bn b;
  Function out;
  std::vector<Variable> wrt;
};

// Builds the net in float32 (oneDNN) and float64 (the reference loops) with the same values and
// trains both on a few minibatches of samples of the given shape, comparing the training outputs
// and the running statistics after each; then compares the inference outputs (by the running
// statistics) and the training gradients (expect_float32_matches_float64).
void expect_bn_float32_matches_float64(const std::function<BnNet(DataType)>& make,
                                       const NDShape& sample, double tolerance = 1e-5) {
  const BnNet n32 = make(kF32), n64 = make(kF64);
  auto train = [&](const BnNet& n, DataType dt, uint64_t step) {
    const Value v = random_batch(sample, 6, dt, 300 + step, -2, 3);
    return values(n.out.forward({{n.x, v}}).second.at(n.out.output()));
  };
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("training step " + std::to_string(step));
    expect_all_near(train(n32, kF32, step), train(n64, kF64, step), tolerance, "training output");
    expect_all_near(stored(n32.b.mean), stored(n64.b.mean), tolerance, "running mean");
    expect_all_near(stored(n32.b.var), stored(n64.b.var), tolerance, "running variance");
    EXPECT_EQ(stored(n32.b.count), stored(n64.b.count));
  }
  expect_float32_matches_float64(
      [&](DataType dt) {
        const BnNet& n = dt == kF32 ? n32 : n64;
        return OpCase{n.out, {{n.x, random_batch(sample, 6, dt, 400, -2, 3)}}, n.wrt};
      },
      tolerance);
}

TEST(BatchNormalization, Float32MatchesFloat64) {
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* name;
    NDShape sample;
    bool spatial;
  };
  const Case cases[] = {
      {"spatial 2d", {3, 4, 5}, true},    {"spatial 1d, 16 channels", {16, 7}, true},
      {"spatial 3d", {2, 3, 2, 2}, true}, {"spatial, channels only", {5}, true},
      {"per element", {3, 5}, false},     {"per element, 32 features", {4, 8}, false}};
  for (const Case& c : cases)
    for (double blend : {0.0, inf, 10.0})
      for (const std::vector<size_t>& wrt : kBnWrt) {
        SCOPED_TRACE(std::string(c.name) + ", blend time constant " + std::to_string(blend) + ", " +
                     std::to_string(wrt.size()) + " gradient(s) from " + std::to_string(wrt[0]));
        expect_bn_float32_matches_float64(
            [&](DataType dt) {
              BnNet n;
              n.x = input_variable(c.sample, {.dtype = dt, .name = "x", .needs_gradient = true});
              n.b = make_bn(c.spatial ? NDShape{c.sample[0]} : c.sample, dt, 100);
              n.out = apply(n.x, n.b, c.spatial, 5000, blend);
              n.wrt = chosen(wrt, n.x, n.b);
              return n;
            },
            c.sample);
      }
}

// convolution (16 channels) -> batch normalization -> relu -> pooling: the executor keeps the
// normalization's input and output in oneDNN's blocked layout, and its gradients too; values,
// running statistics and gradients must be those of the float64 graph, which runs row-major.
TEST(BatchNormalization, BlockedLayoutBetweenOneDnnOpsMatchesFloat64) {
  const NDShape sample{3, 6, 6};
  struct Net {
    BnNet bn;
    Parameter W;
    Variable conv, normalized, relu;
  };
  auto net = [&](DataType dt) {
    Net n;
    n.bn.x = input_variable(sample, {.dtype = dt, .name = "x", .needs_gradient = true});
    n.bn.b = make_bn({16}, dt, 110);
    n.W = parameter(random_array({16, 3, 3, 3}, dt, 1, -0.5, 0.5), "W");
    n.conv = convolution(n.W, n.bn.x);
    n.normalized = apply(n.conv, n.bn.b, true);
    n.relu = relu(n.normalized);
    n.bn.out = pooling(n.relu, PoolingType::Max, {2, 2}, {.strides = {2}});
    return n;
  };
  {
    const Net n = net(kF32);
    Executor ex({n.bn.out}, {n.bn.x, n.W, n.bn.b.scale, n.bn.b.bias});
    ex.forward({{n.bn.x, random_batch(sample, 3, kF32, 5)}}, true);
    EXPECT_TRUE(ex.tensor(n.conv).blocked);
    EXPECT_TRUE(ex.tensor(n.normalized).blocked);
    // The relu runs after the pooling, which reads the normalization's output (docs/executor.md).
    EXPECT_THROW(ex.tensor(n.relu), ArgumentError);
    EXPECT_FALSE(ex.tensor(n.bn.out).blocked);  // the caller reads it
  }
  // Without x or W, the normalization's input gets no gradient: oneDNN's is discarded.
  for (const std::vector<size_t>& wrt : {std::vector<size_t>{0, 1, 2, 3}, {1}, {2}, {3}, {2, 3}}) {
    SCOPED_TRACE(std::to_string(wrt.size()) + " gradient(s) from " + std::to_string(wrt[0]));
    expect_bn_float32_matches_float64(
        [&](DataType dt) {
          Net n = net(dt);
          const std::vector<Variable> all{n.bn.x, n.W, n.bn.b.scale, n.bn.b.bias};
          for (size_t i : wrt) n.bn.wrt.push_back(all[i]);
          return n.bn;
        },
        sample, 1e-4);
  }
}

TEST(LayerNormalization, ValuesAndGradients) {
  Variable x = input_variable({2, 3}, {.dtype = kF64, .name = "x", .needs_gradient = true});
  Parameter scale = parameter(random_array({2, 3}, kF64, 70, 0.5, 1.5), "scale");
  Parameter bias = parameter(random_array({2, 3}, kF64, 71), "bias");
  Function f = layer_normalization(x, scale, bias);
  const Value v = random_batch({2, 3}, 4, kF64, 6, -2, 2);
  const auto y = values(f.eval_one({{x, v}}));
  const auto xs = values(v), g = stored(scale), b = stored(bias);
  for (size_t n = 0; n < 4; ++n) {
    double m = 0, q = 0;
    for (size_t i = 0; i < 6; ++i) m += xs[n * 6 + i] / 6;
    for (size_t i = 0; i < 6; ++i) q += std::pow(xs[n * 6 + i] - m, 2) / 6;
    for (size_t i = 0; i < 6; ++i)
      EXPECT_NEAR(y[n * 6 + i], (xs[n * 6 + i] - m) / (std::sqrt(q) + kEps) * g[i] + b[i], 1e-12);
  }
  expect_gradients_match(f, {{x, v}}, {x, scale, bias});
  // Sequences normalize each step on its own.
  Variable q = sequence::input_variable({3}, f64("q"));
  expect_sequences_match_individually(layer_normalization(q, parameter(random_array({3}, kF64, 72)),
                                                          parameter(random_array({3}, kF64, 73))),
                                      q, random_sequences({3}, kLengths, kF64, 7));
  expect_float32_matches_float64([](DataType t) {
    Variable x = input_variable({5}, {.dtype = t, .needs_gradient = true});
    Parameter s = parameter(random_array({5}, t, 80)), b = parameter(random_array({5}, t, 81));
    return OpCase{layer_normalization(x, s, b), {{x, random_batch({5}, 3, t, 8)}}, {x, s, b}};
  });
}

// ---- PyTorch cross-check (skipped where torch is not installed) ----

std::string temp_dir() {
  static const std::string dir = [] {
    auto d =
        std::filesystem::path(::testing::TempDir()) / ("loom_norm_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

void write_numbers(const std::string& path, const std::vector<double>& v) {
  std::ofstream out(path);
  out.precision(17);
  for (double x : v) out << x << "\n";
}

std::vector<double> read_numbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  return v;
}

bool have_torch() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

TEST(NormalizationVsPyTorch, BatchNormTrainingAndLayerNorm) {
  if (!have_torch()) GTEST_SKIP() << "PyTorch is not installed for /usr/bin/python3";
  const std::string dir = temp_dir();
  constexpr size_t N = 4, C = 3, H = 5, W = 5;
  Variable x = input_variable({C, H, W}, {.name = "x", .needs_gradient = true});
  const Bn b = make_bn({C}, kF32, 90);
  Parameter ls = parameter(random_array({C, H, W}, kF32, 91, 0.5, 1.5));
  Parameter lb = parameter(random_array({C, H, W}, kF32, 92));
  Function bn = apply(x, b, true), ln = layer_normalization(x, ls, lb);
  const Value v = random_batch({C, H, W}, N, kF32, 9, -2, 3);
  write_numbers(dir + "/x.txt", values(v));
  // weighted_output's weights.
  write_numbers(dir + "/w.txt", random_array({C, H, W}, kF32, 7, 0.5, 1.5).to_vector<double>());
  for (auto [name, p] : {std::pair{"scale", b.scale}, {"bias", b.bias}, {"ls", ls}, {"lb", lb}})
    write_numbers(dir + "/" + name + ".txt", stored(p));
  // The first training pass weighs its minibatch fully: the running variance is its unbiased
  // variance, as PyTorch's with momentum 1.
  const auto y = values(bn.forward({{x, v}}).second.at(bn.output()));
  const ValueMap grads = weighted_output(bn).grad({{x, v}}, {x, b.scale, b.bias});
  const auto ly = values(ln.eval_one({{x, v}}));
  const ValueMap lgrads = weighted_output(ln).grad({{x, v}}, {x, ls, lb});
  const std::string script = dir + "/norm.py";
  std::ofstream(script) << R"(import sys, torch
d = sys.argv[1]
r = lambda n: torch.tensor([float(l) for l in open(d + '/' + n + '.txt')], dtype=torch.float64)
w = r('w').reshape(3, 5, 5)
def dump(name, t):
    open(d + '/t_' + name + '.txt', 'w').write('\n'.join(repr(v) for v in t.detach().flatten().tolist()))
x = r('x').reshape(4, 3, 5, 5).requires_grad_()
s = r('scale').requires_grad_(); b = r('bias').requires_grad_()
rm = torch.zeros(3, dtype=torch.float64); rv = torch.ones(3, dtype=torch.float64)
y = torch.nn.functional.batch_norm(x, rm, rv, s, b, training=True, momentum=1.0, eps=1e-5)
(y * w).sum().backward()
for name, t in [('y', y), ('dx', x.grad), ('ds', s.grad), ('db', b.grad), ('rv', rv)]: dump(name, t)
x.grad = None
ls = r('ls').reshape(3, 5, 5).requires_grad_(); lb = r('lb').reshape(3, 5, 5).requires_grad_()
f = x.flatten(1); m = f.mean(1, keepdim=True); sd = (f - m).pow(2).mean(1, keepdim=True).sqrt()
ly = ((f - m) / (sd + 1e-5)).reshape(4, 3, 5, 5) * ls + lb
(ly * w).sum().backward()
for name, t in [('ly', ly), ('ldx', x.grad), ('lds', ls.grad), ('ldb', lb.grad)]: dump(name, t)
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script + " " + dir).c_str()), 0);
  auto torch = [&](const std::string& name) { return read_numbers(dir + "/t_" + name + ".txt"); };
  expect_all_near(y, torch("y"), 1e-5, "batch norm output");
  expect_all_near(values(grads.at(x)), torch("dx"), 1e-4, "batch norm dx");
  expect_all_near(values(grads.at(b.scale)), torch("ds"), 1e-4, "batch norm dscale");
  expect_all_near(values(grads.at(b.bias)), torch("db"), 1e-4, "batch norm dbias");
  expect_all_near(stored(b.var), torch("rv"), 1e-5, "running variance");
  expect_all_near(ly, torch("ly"), 1e-5, "layer norm output");
  expect_all_near(values(lgrads.at(x)), torch("ldx"), 1e-4, "layer norm dx");
  expect_all_near(values(lgrads.at(ls)), torch("lds"), 1e-4, "layer norm dscale");
  expect_all_near(values(lgrads.at(lb)), torch("ldb"), 1e-4, "layer norm dbias");
}

// CNTK's formula over each position's channels: x / (bias + alpha / (2 r + 1) Σ x²)^beta, the sum
// over channels c - r .. c + r; a window wider than the channels is cut to them and placed as
// CNTK's convolution places a kernel of that size (4 channels, r = 2: c - 1 .. c + 2).
TEST(LocalResponseNormalization, CntksFormula) {
  const NDShape shape{4, 2, 3};
  const Value in = random_batch(shape, 2, kF64, 11);
  const std::vector<double> x = values(in);
  for (auto [radius, below, above] : {std::tuple{1, 1, 1}, {2, 1, 2}, {0, 0, 0}}) {
    SCOPED_TRACE(radius);
    Variable v = input_variable(shape, f64("x"));
    Function f = local_response_normalization(v, radius, 2.0, 0.5, 0.75);
    EXPECT_EQ(f.op_name(), "LocalResponseNormalization");
    std::vector<double> expected(x.size());
    for (size_t n = 0; n < 2; ++n)
      for (size_t c = 0; c < 4; ++c)
        for (size_t p = 0; p < 6; ++p) {
          double sum = 0;
          for (long j = long(c) - below; j <= long(c) + above; ++j)
            if (j >= 0 && j < 4) sum += std::pow(x[(n * 4 + size_t(j)) * 6 + p], 2);
          const size_t i = (n * 4 + c) * 6 + p;
          expected[i] = x[i] / std::pow(2.0 + 0.5 / (2 * radius + 1) * sum, 0.75);
        }
    expect_all_near(values(f.eval_one({{v, in}})), expected, 1e-12, "lrn");
    expect_gradients_match(f, {{v, in}}, {v});
  }
  expect_shape_error([] { local_response_normalization(input_variable(NDShape{}), 1, 1, 1, 1); },
                     {"LocalResponseNormalization", "channel axis"});
  expect_argument_error(
      [] { local_response_normalization(input_variable({3}), 1, 1, std::nan(""), 1); },
      {"local_response_normalization", "alpha"});
}

}  // namespace
}  // namespace loom
