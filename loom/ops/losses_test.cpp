#include "loom/ops/losses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/linear.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/reduction.h"
#include "loom/ops/registry.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

double logsumexp(const std::vector<double>& z) {
  double m = *std::max_element(z.begin(), z.end()), s = 0;
  for (double v : z) s += std::exp(v - m);
  return m + std::log(s);
}

// Per-sample references, from the definitions in losses.h.
double squared_error_ref(const std::vector<double>& o, const std::vector<double>& t) {
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += (o[i] - t[i]) * (o[i] - t[i]);
  return s;
}
double cross_entropy_ref(const std::vector<double>& z, const std::vector<double>& t) {
  double dot = 0;
  for (size_t i = 0; i < z.size(); ++i) dot += t[i] * z[i];
  return logsumexp(z) - dot;  // CNTK's, whatever the targets sum to
}
double binary_cross_entropy_ref(const std::vector<double>& o, const std::vector<double>& t) {
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i)
    s -= t[i] * std::log(o[i]) + (1 - t[i]) * std::log(1 - o[i]);
  return s;
}
// CNTK's: top 1, 1 - t . hardmax(z) (hardmax: z's first largest entry); top N, the target's
// class is its first maximal entry, wrong unless fewer than top_n entries of z rank before it
// (larger, or equal and earlier).
double classification_error_ref(const std::vector<double>& z, const std::vector<double>& t,
                                size_t top_n) {
  if (top_n == 1) return 1 - t[size_t(std::max_element(z.begin(), z.end()) - z.begin())];
  const size_t label = size_t(std::max_element(t.begin(), t.end()) - t.begin());
  size_t ahead = 0;
  for (size_t c = 0; c < z.size(); ++c) ahead += z[c] > z[label] || (z[c] == z[label] && c < label);
  return ahead >= top_n ? 1 : 0;
}

// One-hot rows for the given classes (dense), as doubles.
std::vector<double> one_hot_rows(size_t dim, const std::vector<size_t>& classes) {
  std::vector<double> v(classes.size() * dim, 0.0);
  for (size_t r = 0; r < classes.size(); ++r) v[r * dim + classes[r]] = 1;
  return v;
}

Value batch_of(DataType dtype, const NDShape& sample, const std::vector<double>& v) {
  return dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    return Value::create_batch<T>(sample, std::vector<T>(v.begin(), v.end()));
  });
}

// A loss applied to (prediction, target) with how its test data are drawn.
struct LossCase {
  const char* op_name;
  std::function<Function(const Variable&, const Variable&)> fn;
  std::function<double(const std::vector<double>&, const std::vector<double>&)> reference;
  double low, high;                // predictions
  double target_low, target_high;  // targets
  bool differentiable;
};

const std::vector<LossCase>& loss_cases() {
  static const std::vector<LossCase> cases{
      {"SquaredError", [](auto& o, auto& t) { return squared_error(o, t); }, squared_error_ref, -2,
       2, -2, 2, true},
      // Soft, unnormalized targets: CNTK's logsumexp(z) − t·z, whatever they sum to.
      {"CrossEntropyWithSoftmax", [](auto& z, auto& t) { return cross_entropy_with_softmax(z, t); },
       cross_entropy_ref, -3, 3, 0.05, 1, true},
      {"BinaryCrossEntropy", [](auto& o, auto& t) { return binary_cross_entropy(o, t); },
       binary_cross_entropy_ref, 0.1, 0.9, 0, 1, true},
      {"ClassificationError", [](auto& z, auto& t) { return classification_error(z, t); },
       [](auto& z, auto& t) { return classification_error_ref(z, t, 1); }, -3, 3, 0, 1, false},
      {"ClassificationErrorTop2", [](auto& z, auto& t) { return classification_error(z, t, 2); },
       [](auto& z, auto& t) { return classification_error_ref(z, t, 2); }, -3, 3, 0, 1, false},
  };
  return cases;
}

// The reference applied to each sample of (prediction, target) given as flat vectors.
std::vector<double> per_sample(const LossCase& c, const std::vector<double>& o,
                               const std::vector<double>& t, size_t n) {
  std::vector<double> out;
  for (size_t r = 0; r < o.size() / n; ++r)
    out.push_back(c.reference({o.begin() + long(r * n), o.begin() + long((r + 1) * n)},
                              {t.begin() + long(r * n), t.begin() + long((r + 1) * n)}));
  return out;
}

TEST(Loss, OutputIsOneValuePerSample) {
  for (const LossCase& c : loss_cases()) {
    SCOPED_TRACE(c.op_name);
    Variable o = input_variable({2, 3}, f64()), t = input_variable({2, 3}, f64());
    Function f = c.fn(o, t);
    EXPECT_EQ(f.op_name(), std::string(c.op_name).substr(0, std::string(c.op_name).find("Top")));
    EXPECT_EQ(f.output().shape(), (NDShape{1}));
    EXPECT_EQ(f.output().dtype(), kF64);
    EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
    Variable so = sequence::input_variable({4}), st = sequence::input_variable({4});
    EXPECT_EQ(Variable(c.fn(so, st)).type_string(), "Sequence[Tensor[1]]");
  }
}

TEST(Loss, ShapeMismatchIsAnError) {
  for (const LossCase& c : loss_cases()) {
    SCOPED_TRACE(c.op_name);
    try {
      c.fn(input_variable({3}, f64()), input_variable({4}, f64()));
      ADD_FAILURE() << "expected ShapeError";
    } catch (const ShapeError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("[3]"), std::string::npos) << what;
      EXPECT_NE(what.find("[4]"), std::string::npos) << what;
    }
    EXPECT_THROW(c.fn(input_variable({3, 1}), input_variable({3})), ShapeError);
    EXPECT_THROW(c.fn(input_variable({3}), input_variable({3}, f64())), ShapeError);
    EXPECT_THROW(c.fn(sequence::input_variable({3}), input_variable({3})), ShapeError);
  }
}

TEST(Loss, BatchMatchesReference) {
  for (DataType dtype : {kF64, kF32}) {
    for (const LossCase& c : loss_cases()) {
      SCOPED_TRACE(std::string(c.op_name) + " " + to_string(dtype));
      Variable o = input_variable({2, 3}, {.dtype = dtype}),
               t = input_variable({2, 3}, {.dtype = dtype});
      Value vo = random_batch({2, 3}, 5, dtype, 1, c.low, c.high);
      Value vt = random_batch({2, 3}, 5, dtype, 2, c.target_low, c.target_high);
      Value out = c.fn(o, t).eval_one({{o, vo}, {t, vt}});
      EXPECT_EQ(out.data().shape(), (NDShape{5, 1}));
      expect_all_near(values(out), per_sample(c, values(vo), values(vt), 6),
                      dtype == kF64 ? 1e-14 : 1e-5, "output");
    }
  }
}

TEST(Loss, SequencesMatchPerSequenceComputation) {
  for (const LossCase& c : loss_cases()) {
    SCOPED_TRACE(c.op_name);
    Variable o = sequence::input_variable({4}, f64()), t = sequence::input_variable({4}, f64());
    Value vo = random_sequences({4}, kLengths, kF64, 3, c.low, c.high);
    Value vt = random_sequences({4}, kLengths, kF64, 4, c.target_low, c.target_high);
    Value out = c.fn(o, t).eval_one({{o, vo}, {t, vt}});
    EXPECT_EQ(out.sequence_lengths(), kLengths);
    auto os = vo.as_sequences<double>(), ts = vt.as_sequences<double>();
    auto outs = out.as_sequences<double>();
    for (size_t b = 0; b < kLengths.size(); ++b)
      expect_all_near(outs[b], per_sample(c, os[b], ts[b], 4), 1e-14,
                      "sequence " + std::to_string(b));
  }
}

TEST(Loss, GradientsOnBatchAndSequences) {
  for (const LossCase& c : loss_cases()) {
    if (!c.differentiable) continue;
    SCOPED_TRACE(c.op_name);
    Variable o = input_variable({2, 3}, f64("o")), t = input_variable({2, 3}, f64("t"));
    expect_gradients_match(c.fn(o, t),
                           {{o, random_batch({2, 3}, 3, kF64, 5, c.low, c.high)},
                            {t, random_batch({2, 3}, 3, kF64, 6, c.target_low, c.target_high)}},
                           {o, t});
    Variable so = sequence::input_variable({3}, f64("so"));
    Variable st = sequence::input_variable({3}, f64("st"));
    expect_gradients_match(
        c.fn(so, st),
        {{so, random_sequences({3}, kLengths, kF64, 7, c.low, c.high)},
         {st, random_sequences({3}, kLengths, kF64, 8, c.target_low, c.target_high)}},
        {so, st});
  }
}

TEST(Loss, TargetWithoutDynamicAxesBroadcastsOverSamples) {
  // A constant or parameter target (no dynamic axes) applies to every sample; a parameter
  // target's gradient sums over the samples.
  for (const LossCase& c : loss_cases()) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({3}, f64("s"));
    const Value vs = random_sequences({3}, kLengths, kF64, 9, c.low, c.high);
    const NDArrayView target = random_array({3}, kF64, 10, c.target_low, c.target_high);
    const std::vector<double> tv = target.to_vector<double>();
    auto seqs = vs.as_sequences<double>();
    auto outs = c.fn(s, constant(target)).eval_one({{s, vs}}).as_sequences<double>();
    for (size_t b = 0; b < kLengths.size(); ++b) {
      std::vector<double> tiled;
      for (size_t i = 0; i < kLengths[b]; ++i) tiled.insert(tiled.end(), tv.begin(), tv.end());
      expect_all_near(outs[b], per_sample(c, seqs[b], tiled, 3), 1e-14,
                      "sequence " + std::to_string(b));
    }
    if (!c.differentiable) continue;
    Parameter p = parameter(target.deep_clone(), "p");
    expect_gradients_match(c.fn(s, p), {{s, vs}}, {s, p});
    // The prediction may be the static one too.
    Parameter q = parameter(random_array({3}, kF64, 11, c.low, c.high), "q");
    Variable tt = sequence::input_variable({3}, f64("tt"));
    expect_gradients_match(
        c.fn(q, tt), {{tt, random_sequences({3}, kLengths, kF64, 12, c.target_low, c.target_high)}},
        {q, tt});
  }
}

TEST(Loss, GradientsAccumulateOverSeveralConsumers) {
  for (const LossCase& c : loss_cases()) {
    if (!c.differentiable) continue;
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({3}, f64("s"));
    Parameter p = parameter(random_array({3}, kF64, 18, c.target_low, c.target_high), "p");
    expect_gradients_match(plus(c.fn(s, p), c.fn(s, p)),
                           {{s, random_sequences({3}, kLengths, kF64, 19, c.low, c.high)}}, {s, p});
  }
}

TEST(Loss, Float32MatchesFloat64) {
  for (const LossCase& c : loss_cases()) {
    if (!c.differentiable) continue;
    SCOPED_TRACE(c.op_name);
    expect_float32_matches_float64([&](DataType dtype) {
      Variable o = sequence::input_variable({4}, {.dtype = dtype});
      Variable t = sequence::input_variable({4}, {.dtype = dtype});
      return OpCase{c.fn(o, t),
                    {{o, random_sequences({4}, kLengths, dtype, 13, c.low, c.high)},
                     {t, random_sequences({4}, kLengths, dtype, 14, c.target_low, c.target_high)}},
                    {o, t}};
    });
  }
}

TEST(Loss, SquaredErrorByHand) {
  Variable o = input_variable({3}, f64()), t = input_variable({3}, f64());
  Value out = squared_error(o, t).eval_one({{o, batch_of(kF64, {3}, {1, 2, 3, 0, 0, 0})},
                                            {t, batch_of(kF64, {3}, {0, 2, 5, 1, -1, 2})}});
  EXPECT_EQ(values(out), (std::vector<double>{5, 6}));
  // d/do = 2 (o - t), d/dt = -2 (o - t).
  ValueMap g = squared_error(o, t).grad(
      {{o, batch_of(kF64, {3}, {1, 2, 3})}, {t, batch_of(kF64, {3}, {0, 2, 5})}}, {o, t});
  EXPECT_EQ(values(g.at(o)), (std::vector<double>{2, 0, -4}));
  EXPECT_EQ(values(g.at(t)), (std::vector<double>{-2, 0, 4}));
}

TEST(Loss, CrossEntropyWithSoftmaxByHand) {
  Variable z = input_variable({3}, f64()), t = input_variable({3}, f64());
  const Value zv = batch_of(kF64, {3}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  // One-hot class 2, one-hot class 0, soft [0.2, 0.3, 0.5], and a target of mass 2.
  const Value tv = batch_of(kF64, {3}, {0, 0, 1, 1, 0, 0, 0.2, 0.3, 0.5, 0, 2, 0});
  const double lse = 3.4076059644443806;  // log(e + e² + e³)
  expect_all_near(values(cross_entropy_with_softmax(z, t).eval_one({{z, zv}, {t, tv}})),
                  {lse - 3, lse - 1, lse - 2.3, lse - 4}, 1e-15, "output");
  // d/dz = softmax(z) − t.
  const std::vector<double> p{0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
  expect_all_near(
      values(
          cross_entropy_with_softmax(z, t)
              .grad({{z, batch_of(kF64, {3}, {1, 2, 3})}, {t, batch_of(kF64, {3}, {0, 2, 0})}}, {z})
              .at(z)),
      {p[0], p[1] - 2, p[2]}, 1e-15, "gradient");
  // Large scores stay finite.
  Value big = cross_entropy_with_softmax(z, t).eval_one(
      {{z, batch_of(kF64, {3}, {1000, 1001, 1002})}, {t, batch_of(kF64, {3}, {0, 0, 1})}});
  expect_all_near(values(big), {lse - 3}, 1e-12, "large scores");
}

TEST(Loss, CrossEntropyWithSparseTargetsMatchesDense) {
  for (DataType dtype : {kF64, kF32}) {
    SCOPED_TRACE(to_string(dtype));
    const double tol = dtype == kF64 ? 1e-14 : 1e-6;
    // A batch, and sequences of lengths 3, 1, 2.
    const Value sparse_batch = Value::one_hot(4, {3, 0, 2, 3}, dtype);
    const Value sparse_seqs = Value::one_hot_sequences(4, {{1, 3, 0}, {2}, {0, 0}}, dtype);
    for (const Value* sparse : {&sparse_batch, &sparse_seqs}) {
      const bool seq = sparse->is_sequence();
      InputOptions zo{.dtype = dtype, .name = "z"}, so{.dtype = dtype, .is_sparse = true};
      Variable z = seq ? sequence::input_variable({4}, zo) : input_variable({4}, zo);
      Variable ts = seq ? sequence::input_variable({4}, so) : input_variable({4}, so);
      Variable td = seq ? sequence::input_variable({4}, {.dtype = dtype})
                        : input_variable({4}, {.dtype = dtype});
      const Value dense(sparse->data().to_dense(), seq, sparse->mask());
      const Value zv = seq ? random_sequences({4}, kLengths, dtype, 15, -3, 3)
                           : random_batch({4}, 4, dtype, 15, -3, 3);
      const Function fs = cross_entropy_with_softmax(z, ts), fd = cross_entropy_with_softmax(z, td);
      expect_all_near(values(fs.eval_one({{z, zv}, {ts, *sparse}})),
                      values(fd.eval_one({{z, zv}, {td, dense}})), tol, "output");
      expect_all_near(values(weighted_output(fs).grad({{z, zv}, {ts, *sparse}}, {z}).at(z)),
                      values(weighted_output(fd).grad({{z, zv}, {td, dense}}, {z}).at(z)), tol,
                      "gradient");
      // The same for classification_error.
      expect_all_near(values(classification_error(z, ts).eval_one({{z, zv}, {ts, *sparse}})),
                      values(classification_error(z, td).eval_one({{z, zv}, {td, dense}})), 0,
                      "classification_error");
      if (dtype == kF64) expect_gradients_match(fs, {{z, zv}, {ts, *sparse}}, {z});
    }
  }
}

// Sparse targets of a matrix sample [3, 4] (CSR rows along its last axis, three a sample), over
// the whole sample and along each axis: what the same targets give dense.
TEST(Loss, SparseMatrixTargetsMatchDense) {
  // Samples 0 and 1: one 1 in each row of the last axis, sample 2 a row without one.
  const std::vector<int32_t> offsets{0, 1, 2, 3, 4, 5, 6, 7, 8, 8};
  const std::vector<int32_t> columns{2, 0, 3, 1, 1, 0, 3, 2};
  const std::vector<double> ones(8, 1.0);
  const Value sparse(NDArrayView::sparse_csr<double>({3, 3, 4}, offsets, columns, ones), false);
  const Value dense(sparse.data().to_dense(), false);
  const Variable z = input_variable({3, 4}, f64("z"));
  const Variable ts = input_variable({3, 4}, {.dtype = kF64, .is_sparse = true});
  const Variable td = input_variable({3, 4}, f64("t"));
  const Value zv = random_batch({3, 4}, 3, kF64, 21, -3, 3);
  for (const std::optional<int> axis : {std::optional<int>(), std::optional(0), std::optional(1)}) {
    SCOPED_TRACE(axis ? "axis " + std::to_string(*axis) : "whole sample");
    auto ce = [&](const Variable& t) {
      return axis ? cross_entropy_with_softmax(z, t, Axis(*axis))
                  : cross_entropy_with_softmax(z, t);
    };
    auto error = [&](const Variable& t) {
      return axis ? classification_error(z, t, 1, Axis(*axis)) : classification_error(z, t);
    };
    expect_all_near(values(ce(ts).eval_one({{z, zv}, {ts, sparse}})),
                    values(ce(td).eval_one({{z, zv}, {td, dense}})), 1e-14, "cross entropy");
    expect_all_near(values(weighted_output(ce(ts)).grad({{z, zv}, {ts, sparse}}, {z}).at(z)),
                    values(weighted_output(ce(td)).grad({{z, zv}, {td, dense}}, {z}).at(z)), 1e-14,
                    "gradient");
    expect_all_near(values(error(ts).eval_one({{z, zv}, {ts, sparse}})),
                    values(error(td).eval_one({{z, zv}, {td, dense}})), 0, "classification_error");
  }
}

TEST(Loss, BinaryCrossEntropyByHand) {
  Variable o = input_variable({2}, f64()), t = input_variable({2}, f64());
  const Value ov = batch_of(kF64, {2}, {0.8, 0.3, 0.5, 0.5});
  const Value tv = batch_of(kF64, {2}, {1, 0, 0.5, 1});
  expect_all_near(values(binary_cross_entropy(o, t).eval_one({{o, ov}, {t, tv}})),
                  {-std::log(0.8) - std::log(0.7), 2 * std::log(2.0)}, 1e-15, "output");
  // d/do = (1 − t)/(1 − o) − t/o; d/dt = log(1 − o) − log(o).
  ValueMap g = binary_cross_entropy(o, t).grad({{o, ov}, {t, tv}}, {o, t});
  expect_all_near(values(g.at(o)), {-1.25, 1 / 0.7, 0, -2}, 1e-15, "gradient wrt output");
  expect_all_near(values(g.at(t)), {std::log(0.2 / 0.8), std::log(0.7 / 0.3), 0, 0}, 1e-14,
                  "gradient wrt target");
}

TEST(Loss, ClassificationErrorByHandWithTopNAndTies) {
  Variable z = input_variable({3}, f64()), t = input_variable({3}, f64());
  auto eval = [&](size_t top_n, const std::vector<double>& zs, const std::vector<size_t>& labels) {
    return values(classification_error(z, t, top_n)
                      .eval_one({{z, batch_of(kF64, {3}, zs)},
                                 {t, batch_of(kF64, {3}, one_hot_rows(3, labels))}}));
  };
  const std::vector<double> zs{1, 3, 2, 5, 1, 0};
  EXPECT_EQ(eval(1, zs, {1, 2}), (std::vector<double>{0, 1}));
  EXPECT_EQ(eval(1, zs, {2, 0}), (std::vector<double>{1, 0}));
  // top 2: class 2 (second largest in row 0) counts as right; class 2 of row 1 is last.
  EXPECT_EQ(eval(2, zs, {2, 2}), (std::vector<double>{0, 1}));
  EXPECT_EQ(eval(3, zs, {0, 2}), (std::vector<double>{0, 0}));
  // Ties: among equal scores the earlier class ranks first.
  const std::vector<double> tied{2, 2, 1, 4, 4, 4};
  EXPECT_EQ(eval(1, tied, {0, 0}), (std::vector<double>{0, 0}));
  EXPECT_EQ(eval(1, tied, {1, 2}), (std::vector<double>{1, 1}));
  EXPECT_EQ(eval(2, tied, {1, 2}), (std::vector<double>{0, 1}));
  EXPECT_EQ(eval(3, tied, {2, 2}), (std::vector<double>{0, 0}));
  // A target that is not one-hot: CNTK's top-1 error is 1 - t . hardmax(z) (CNTK 105 scores
  // its autoencoder so); top-N takes the target's largest entry as its class.
  auto soft = [&](size_t top_n, const std::vector<double>& zs, const std::vector<double>& ts) {
    return values(classification_error(z, t, top_n)
                      .eval_one({{z, batch_of(kF64, {3}, zs)}, {t, batch_of(kF64, {3}, ts)}}));
  };
  EXPECT_NEAR(soft(1, {0.1, 0.9, 0.2}, {0.5, 0.8, 1})[0], 0.2, 1e-15);
  EXPECT_NEAR(soft(1, {1, 3, 2}, {0.1, 0.6, 0.3})[0], 0.4, 1e-15);
  EXPECT_EQ(soft(1, {2, 2, 1}, {0, 0.5, 0.5}), (std::vector<double>{1}));  // the first of ties
  EXPECT_EQ(soft(2, {0.1, 0.9, 0.2}, {0.5, 0.8, 1}), (std::vector<double>{0}));
  EXPECT_EQ(soft(2, {0.3, 0.9, 0.2}, {0.5, 0.8, 1}), (std::vector<double>{1}));
  EXPECT_THROW(classification_error(z, t, 0), ArgumentError);
}

TEST(Loss, ClassificationErrorIsNotDifferentiable) {
  Variable x = input_variable({2}, f64("x")), y = input_variable({3}, f64("y"));
  Parameter W = parameter(random_array({2, 3}, kF64, 16), "W");
  Function z = times(x, W);
  ValueMap args{{x, random_batch({2}, 4, kF64, 17)},
                {y, batch_of(kF64, {3}, one_hot_rows(3, {0, 1, 2, 1}))}};
  // A parameter upstream of the metric only: Function::grad reports that nothing
  // differentiable connects them.
  Function metric = classification_error(z, y);
  try {
    metric.grad(args, {W});
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("does not depend"), std::string::npos) << e.what();
  }
  EXPECT_THROW(metric.grad(args, {x}), ArgumentError);
  // Beside a loss, the metric adds nothing to the gradient.
  Function loss = cross_entropy_with_softmax(z, y);
  expect_all_near(values(plus(loss, metric).grad(args, {W}).at(W)),
                  values(loss.grad(args, {W}).at(W)), 1e-15, "gradient of loss + metric");
}

// ---- cosine_distance ---------------------------------------------------------------------------

double cosine_ref(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, xx = 0, yy = 0;
  for (size_t i = 0; i < x.size(); ++i) xy += x[i] * y[i], xx += x[i] * x[i], yy += y[i] * y[i];
  return xy / std::sqrt(xx) / std::sqrt(yy);
}

std::vector<double> slice_of(const std::vector<double>& v, size_t row, size_t n) {
  return {v.begin() + long(row * n), v.begin() + long((row + 1) * n)};
}

TEST(CosineDistance, CntkDocstringExample) {
  // cntk.losses.cosine_distance's example: 3 sequences of 2 steps of shape (2,).
  Variable x = sequence::input_variable({2}, f64()), y = sequence::input_variable({2}, f64());
  const Value a =
      Value::create_sequences<double>({2}, {{-1, -1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, -1}});
  const Value b =
      Value::create_sequences<double>({2}, {{1, 1, -1, 1}, {1, -1, 1, -1}, {-1, -1, -1, 1}});
  const Function f = cosine_distance(x, y);
  EXPECT_EQ(f.op_name(), "CosDistance");
  EXPECT_EQ(f.output().shape(), NDShape{});
  const auto out = f.eval_one({{x, a}, {y, b}}).as_sequences<double>();
  const std::vector<std::vector<double>> expected{{-1, 1}, {1, 0}, {0, -1}};
  for (size_t s = 0; s < 3; ++s) expect_all_near(out[s], expected[s], 1e-15, "sequence");
}

TEST(CosineDistance, CntkBackwardTestValues) {
  // cntk/losses/tests/cosine_distance_test.py, test_cos_distane_backward.
  Variable x = sequence::input_variable({2}, f64("x")), y = sequence::input_variable({2}, f64("y"));
  const Value a = Value::create_sequences<double>({2}, {{0.25, 0.5, 0.1, 1}});
  const Value b = Value::create_sequences<double>({2}, {{-0.5, 1.5, -0.3, -1}});
  const Function f = cosine_distance(x, y);
  expect_all_near(values(f.eval_one({{x, a}, {y, b}})), {0.707107, -0.981665}, 1e-6, "value");
  const ValueMap g = f.grad({{x, a}, {y, b}}, {x, y});
  expect_all_near(values(g.at(x)), {-1.131371, 0.565686, -0.188727, 0.018873}, 1e-6, "dx");
  expect_all_near(values(g.at(y)), {0.424264, 0.141421, -0.174876, 0.052463}, 1e-6, "dy");
}

TEST(CosineDistance, MatchesReferenceWithGradientsAndBroadcast) {
  Variable x = input_variable({2, 3}, f64("x")), y = input_variable({2, 3}, f64("y"));
  const Value a = random_batch({2, 3}, 4, kF64, 31), b = random_batch({2, 3}, 4, kF64, 32);
  const std::vector<double> va = values(a), vb = values(b);
  std::vector<double> expected;
  for (size_t r = 0; r < 4; ++r)
    expected.push_back(cosine_ref(slice_of(va, r, 6), slice_of(vb, r, 6)));
  expect_all_near(values(cosine_distance(x, y).eval_one({{x, a}, {y, b}})), expected, 1e-14,
                  "batch");
  expect_gradients_match(cosine_distance(x, y), {{x, a}, {y, b}}, {x, y});
  // A parameter operand applies to every sample; its gradient sums over them.
  Parameter p = parameter(random_array({2, 3}, kF64, 33), "p");
  expect_gradients_match(cosine_distance(x, p), {{x, a}}, {x, p});
  // cosine_distance(x, x): both gradients add up (CNTK's test_cos_distane_backward3).
  expect_gradients_match(cosine_distance(x, x), {{x, a}}, {x});
  // A zero vector gives 0 (CNTK's floor on the norm), not NaN.
  Variable z = input_variable({2}, f64());
  EXPECT_EQ(values(cosine_distance(z, z).eval_one({{z, Value::create_batch<double>({2}, {0, 0})}})),
            (std::vector<double>{0}));
}

TEST(CosineDistance, BadOperandsNameTheFunction) {
  expect_shape_error([] { cosine_distance(input_variable({3}), input_variable({4})); },
                     {"cosine_distance", "[3]", "[4]"});
  EXPECT_THROW(cosine_distance(input_variable({3}), input_variable({3}, f64())), ShapeError);
}

// ---- cosine_distance_with_negative_samples -----------------------------------------------------

// Row j: cos(x_j, y_j), then cos(x_j, y_{(j + shift + i - 1) mod rows}) for i = 1..k.
std::vector<double> negatives_ref(const std::vector<double>& x, const std::vector<double>& y,
                                  size_t n, size_t shift, size_t k) {
  const size_t rows = x.size() / n;
  std::vector<double> out;
  for (size_t j = 0; j < rows; ++j)
    for (size_t m = 0; m <= k; ++m)
      out.push_back(
          cosine_ref(slice_of(x, j, n), slice_of(y, m == 0 ? j : (j + shift + m - 1) % rows, n)));
  return out;
}

TEST(CosineDistanceWithNegativeSamples, CntkDocstringExample) {
  Variable x = sequence::input_variable({4}, f64()), y = sequence::input_variable({4}, f64());
  const std::vector<std::vector<double>> rows{{1, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 1, 1}};
  const Value q = Value::create_sequences<double>({4}, rows);
  const Function f = cosine_distance_with_negative_samples(x, y, 1, 2);
  EXPECT_EQ(f.output().shape(), NDShape{3});
  const auto out = f.eval_one({{x, q}, {y, q}}).as_sequences<double>();
  const std::vector<std::vector<double>> expected{{1, 0.5, 0}, {1, 0.5, 0.5}, {1, 0, 0.5}};
  for (size_t s = 0; s < 3; ++s) expect_all_near(out[s], expected[s], 1e-15, "sequence");
}

TEST(CosineDistanceWithNegativeSamples, CntkTestOfOneSequence) {
  // cosine_distance_test.py: 5 steps, each matching itself, half of the next, none of the one
  // after.
  Variable x = sequence::input_variable({5}, f64()), y = sequence::input_variable({5}, f64());
  const Value v = Value::create_sequences<double>(
      {5}, {{1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1}});
  const auto out =
      values(cosine_distance_with_negative_samples(x, y, 1, 2).eval_one({{x, v}, {y, v}}));
  std::vector<double> expected;
  for (int r = 0; r < 5; ++r) expected.insert(expected.end(), {1, 0.5, 0});
  expect_all_near(out, expected, 1e-15, "rows");
}

TEST(CosineDistanceWithNegativeSamples, MatchesReferenceWithGradients) {
  for (auto [shift, k] : {std::pair<size_t, size_t>{1, 2}, {2, 1}, {4, 3}}) {
    SCOPED_TRACE("shift " + std::to_string(shift) + ", " + std::to_string(k) + " negatives");
    Variable x = input_variable({3}, f64("x")), y = input_variable({3}, f64("y"));
    const Value a = random_batch({3}, 4, kF64, 41), b = random_batch({3}, 4, kF64, 42);
    const Function f = cosine_distance_with_negative_samples(x, y, shift, k);
    expect_all_near(values(f.eval_one({{x, a}, {y, b}})),
                    negatives_ref(values(a), values(b), 3, shift, k), 1e-14, "batch");
    expect_gradients_match(f, {{x, a}, {y, b}}, {x, y});
    // Over sequences the rows mix across sequences, in the packed order.
    Variable sx = sequence::input_variable({3}, f64("sx")),
             sy = sequence::input_variable({3}, f64("sy"));
    expect_gradients_match(cosine_distance_with_negative_samples(sx, sy, shift, k),
                           {{sx, random_sequences({3}, kLengths, kF64, 43)},
                            {sy, random_sequences({3}, kLengths, kF64, 44)}},
                           {sx, sy});
  }
}

TEST(CosineDistanceWithNegativeSamples, BadArgumentsNameTheFunction) {
  Variable x = input_variable({3}), y = input_variable({3});
  for (auto [shift, k] : {std::pair<size_t, size_t>{0, 2}, {1, 0}}) {
    try {
      cosine_distance_with_negative_samples(x, y, shift, k);
      ADD_FAILURE() << "expected ArgumentError";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("cosine_distance_with_negative_samples"),
                std::string::npos)
          << e.what();
    }
  }
  expect_shape_error([&] { cosine_distance_with_negative_samples(x, input_variable({4}), 1, 1); },
                     {"cosine_distance_with_negative_samples", "[3]", "[4]"});
  EXPECT_THROW(cosine_distance_with_negative_samples(x, constant(random_array({3}, kF32, 1)), 1, 1),
               ShapeError);
}

// ---- weighted_binary_cross_entropy -------------------------------------------------------------

double weighted_bce_ref(const std::vector<double>& p, const std::vector<double>& t,
                        const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s -= w[i] * std::log(t[i] * p[i] + (1 - t[i]) * (1 - p[i]));
  return s;
}

TEST(WeightedBinaryCrossEntropy, MatchesReferenceAndGradients) {
  Variable p = input_variable({2, 2}, f64("p")), t = input_variable({2, 2}, f64("t")),
           w = input_variable({2, 2}, f64("w"));
  const Value vp = random_batch({2, 2}, 3, kF64, 51, 0.1, 0.9),
              vt = random_batch({2, 2}, 3, kF64, 52, 0, 1),
              vw = random_batch({2, 2}, 3, kF64, 53, 0.1, 2);
  const Function f = weighted_binary_cross_entropy(p, t, w);
  EXPECT_EQ(f.op_name(), "Logistic");
  std::vector<double> expected;
  for (size_t r = 0; r < 3; ++r)
    expected.push_back(weighted_bce_ref(slice_of(values(vp), r, 4), slice_of(values(vt), r, 4),
                                        slice_of(values(vw), r, 4)));
  expect_all_near(values(f.eval_one({{p, vp}, {t, vt}, {w, vw}})), expected, 1e-14, "output");
  expect_gradients_match(f, {{p, vp}, {t, vt}, {w, vw}}, {p, t, w});
  // A parameter weight (one per element, shared by the samples).
  Parameter pw = parameter(random_array({2, 2}, kF64, 54, 0.1, 2), "pw");
  expect_gradients_match(weighted_binary_cross_entropy(p, t, pw), {{p, vp}, {t, vt}}, {p, t, pw});
}

TEST(WeightedBinaryCrossEntropy, UnitWeightsOnZeroOneTargetsAreBinaryCrossEntropy) {
  Variable p = input_variable({3}, f64()), t = input_variable({3}, f64()),
           w = input_variable({3}, f64());
  const Value vp = Value::create_batch<double>({3}, {0.8, 0.3, 0.5, 0.1, 0.6, 0.9});
  const Value vt = Value::create_batch<double>({3}, {1, 0, 1, 0, 1, 1});
  const Value ones = Value::create_batch<double>({3}, std::vector<double>(6, 1.0));
  expect_all_near(
      values(weighted_binary_cross_entropy(p, t, w).eval_one({{p, vp}, {t, vt}, {w, ones}})),
      values(binary_cross_entropy(p, t).eval_one({{p, vp}, {t, vt}})), 1e-15, "unit weights");
  // By hand: weights 2 and 0.5 on −log(0.8) and −log(0.7); the third element weighs 0.
  const Value vw = Value::create_batch<double>({3}, {2, 0.5, 0, 1, 1, 1});
  const auto out =
      values(weighted_binary_cross_entropy(p, t, w).eval_one({{p, vp}, {t, vt}, {w, vw}}));
  EXPECT_NEAR(out[0], -2 * std::log(0.8) - 0.5 * std::log(0.7), 1e-15);
  // Gradient wrt the output: −w (2t − 1) / r.
  const ValueMap g = weighted_binary_cross_entropy(p, t, w).grad({{p, vp}, {t, vt}, {w, vw}}, {p});
  expect_all_near(slice_of(values(g.at(p)), 0, 3), {-2 / 0.8, 0.5 / 0.7, 0}, 1e-15, "gradient");
}

TEST(WeightedBinaryCrossEntropy, BadOperandsNameTheFunction) {
  expect_shape_error(
      [] {
        weighted_binary_cross_entropy(input_variable({3}), input_variable({3}),
                                      input_variable({1}));
      },
      {"weighted_binary_cross_entropy", "[3]", "[1]"});
}

// ---- lambda_rank and ndcg_at_1 -----------------------------------------------------------------

// CNTK's LambdaRank value for one minibatch (its groups consecutive): (1 − mean NDCG)·100·N.
double lambda_rank_value_ref(const std::vector<double>& s, const std::vector<double>& gain,
                             const std::vector<double>& group) {
  double sum = 0;
  size_t groups = 0;
  for (size_t b = 0; b < s.size();) {
    size_t e = b;
    while (e < s.size() && group[e] == group[b]) ++e;
    std::vector<size_t> order(e - b);
    std::iota(order.begin(), order.end(), b);
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
      return s[i] == s[j] ? gain[i] < gain[j] : s[i] > s[j];
    });
    double ideal = 0, actual = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      ideal += gain[b + k] / std::log(2.0 + double(k));
      actual += gain[order[k]] / std::log(2.0 + double(k));
    }
    if (ideal != 0) sum += actual / ideal;
    ++groups;
    b = e;
  }
  return (1 - sum / double(groups)) * 100 * double(s.size());
}

struct RankingInputs {
  Variable score, gain, group;
  ValueMap args(const std::vector<double>& s, const std::vector<double>& g,
                const std::vector<double>& q) const {
    return {{score, Value::create_batch<double>({1}, s)},
            {gain, Value::create_batch<double>({1}, g)},
            {group, Value::create_batch<double>({1}, q)}};
  }
};

RankingInputs ranking_inputs() {
  return {input_variable({1}, f64("score")), input_variable({1}, f64("gain")),
          input_variable({1}, f64("group"))};
}

double sum_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}

TEST(LambdaRank, CntkDocstringExampleGradient) {
  const RankingInputs in = ranking_inputs();
  const Function f = lambda_rank(in.score, in.gain, in.group);
  const ValueMap args = in.args({1, 2, 3, 4}, {7, 1, 3, 1}, {1, 1, 2, 2});
  expect_all_near(values(f.grad(args, {in.score}).at(in.score)),
                  {-0.2121461, 0.2121461, -0.14861868, 0.14861868}, 1e-6, "gradient");
  // CNTK's one number for the minibatch: a scalar without dynamic axes.
  EXPECT_EQ(f.output().shape(), NDShape{});
  EXPECT_TRUE(f.output().dynamic_axes().empty());
  const std::vector<double> out = values(f.eval_one(args));
  const double v = lambda_rank_value_ref({1, 2, 3, 4}, {7, 1, 3, 1}, {1, 1, 2, 2});
  expect_all_near(out, {v}, 1e-12, "value");
  EXPECT_NEAR(v, (58.038055419921875 + 40.65847396850586) / 2 * 2, 1e-5);
}

TEST(LambdaRank, CntkLossesTestValues) {
  // cntk/losses/tests/losses_test.py: one group of two samples.
  struct Case {
    std::vector<double> grad;
    double value;
    std::vector<double> score, gain;
  };
  for (const Case& c : {Case{{-0.2121461, 0.2121461}, 58.038055419921875, {1, 2}, {7, 1}},
                        Case{{-0.14861868, 0.14861868}, 40.65847396850586, {3, 4}, {3, 1}}}) {
    const RankingInputs in = ranking_inputs();
    const Function f = lambda_rank(in.score, in.gain, in.group);
    const ValueMap args = in.args(c.score, c.gain, {1, 1});
    expect_all_near(values(f.eval_one(args)), {c.value}, 1e-5, "value");
    expect_all_near(values(f.grad(args, {in.score}).at(in.score)), c.grad, 1e-7, "gradient");
  }
}

TEST(LambdaRank, MatchesReferenceOnGroupsTiesAndZeroGains) {
  const RankingInputs in = ranking_inputs();
  const Function f = lambda_rank(in.score, in.gain, in.group);
  // Three groups: ranked right, reversed, with equal scores (the smaller gain ranks first) and
  // a group of zero gains (NDCG 0).
  const std::vector<double> s{3, 2, 1, 0.5, 1, 2, 4, 4, 1, 0, 0};
  const std::vector<double> g{3, 2, 0, 3, 1, 0, 2, 1, 0, 0, 0};
  const std::vector<double> q{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3};
  const std::vector<double> out = values(f.eval_one(in.args(s, g, q)));
  const double v = lambda_rank_value_ref(s, g, q);
  expect_all_near(out, {v}, 1e-12, "value");
  // The gradient of a group in the ideal order still pushes the pairs apart; a group of equal
  // gains gets none.
  const auto grad = values(f.grad(in.args(s, g, q), {in.score}).at(in.score));
  EXPECT_LT(grad[0], 0);
  EXPECT_GT(grad[2], 0);
  EXPECT_EQ(grad[9], 0);
  EXPECT_EQ(grad[10], 0);
  for (size_t b : {size_t{0}, size_t{3}, size_t{6}})
    EXPECT_NEAR(grad[b] + grad[b + 1] + grad[b + 2], 0, 1e-15) << "group at " << b;
  // The output's gradient scales LambdaRank's: twice the loss, twice the gradient.
  const auto twice = values(plus(f, f).grad(in.args(s, g, q), {in.score}).at(in.score));
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(twice[i], 2 * grad[i], 1e-15);
}

TEST(LambdaRank, SequencesAreTheMinibatchInOrder) {
  // Sequences one after another make the list of samples; here each sequence is one group.
  Variable s = sequence::input_variable({1}, f64()), g = sequence::input_variable({1}, f64()),
           q = sequence::input_variable({1}, f64());
  const Function f = lambda_rank(s, g, q);
  const ValueMap args{{s, Value::create_sequences<double>({1}, {{1, 2, 5}, {3, 4}})},
                      {g, Value::create_sequences<double>({1}, {{7, 1, 0}, {3, 1}})},
                      {q, Value::create_sequences<double>({1}, {{1, 1, 1}, {2, 2}})}};
  const double v = lambda_rank_value_ref({1, 2, 5, 3, 4}, {7, 1, 0, 3, 1}, {1, 1, 1, 2, 2});
  expect_all_near(values(f.eval_one(args)), {v}, 1e-12, "value");
  const RankingInputs in = ranking_inputs();
  const auto batch_grad =
      values(lambda_rank(in.score, in.gain, in.group)
                 .grad(in.args({1, 2, 5, 3, 4}, {7, 1, 0, 3, 1}, {1, 1, 1, 2, 2}), {in.score})
                 .at(in.score));
  const auto seq_grad = f.grad(args, {s}).at(s).as_sequences<double>();
  std::vector<double> joined = seq_grad[0];
  joined.insert(joined.end(), seq_grad[1].begin(), seq_grad[1].end());
  expect_all_near(joined, batch_grad, 1e-15, "gradient");
}

TEST(NdcgAt1, CntkDocstringAndTestValues) {
  const RankingInputs in = ranking_inputs();
  const Function f = ndcg_at_1(in.score, in.gain, in.group);
  EXPECT_EQ(f.op_name(), "NDCG");
  EXPECT_EQ(f.output().shape(), NDShape{});
  EXPECT_TRUE(f.output().dynamic_axes().empty());
  // The docstring: two groups, both ranked right at the top: 100 · 4 (CNTK: array(400.0)).
  const auto out = values(f.eval_one(in.args({2, 1, 3, 1}, {7, 1, 3, 1}, {1, 1, 2, 2})));
  expect_all_near(out, {400}, 1e-12, "docstring");
  // metrics_test.py: 200 and 300 for one group of 2 and 3 samples.
  EXPECT_NEAR(sum_of(values(f.eval_one(in.args({2, 1}, {7, 1}, {1, 1})))), 200, 1e-12);
  EXPECT_NEAR(sum_of(values(f.eval_one(in.args({4, 2, 1}, {3, 2, 1}, {1, 1, 1})))), 300, 1e-12);
  // Wrong at the top: gain 1 of 7 in one group, right in the other; a group of gain 0 counts 0.
  EXPECT_NEAR(
      sum_of(values(f.eval_one(in.args({1, 2, 3, 1, 5}, {7, 1, 3, 1, 0}, {1, 1, 2, 2, 3})))),
      (1.0 / 7 + 1 + 0) / 3 * 100 * 5, 1e-12);
  // Equal scores: the smaller gain ranks first (CNTK's sort).
  EXPECT_NEAR(sum_of(values(f.eval_one(in.args({1, 1}, {4, 2}, {0, 0})))), 50 * 2, 1e-12);
}

TEST(NdcgAt1, IsNotDifferentiable) {
  const RankingInputs in = ranking_inputs();
  Parameter w = parameter(random_array({1}, kF64, 61), "w");
  const Function f = ndcg_at_1(element_times(in.score, w), in.gain, in.group);
  EXPECT_THROW(f.grad(in.args({1, 2}, {2, 1}, {0, 0}), {w}), ArgumentError);
}

TEST(Ranking, BadOperandsNameTheFunction) {
  using Builder =
      Function (*)(const Variable&, const Variable&, const Variable&, const std::string&);
  for (auto [fn, builder] :
       {std::pair<const char*, Builder>{"lambda_rank", &lambda_rank}, {"ndcg_at_1", &ndcg_at_1}}) {
    SCOPED_TRACE(fn);
    expect_shape_error(
        [b = builder] { b(input_variable({2}), input_variable({1}), input_variable({1}), ""); },
        {fn, "output", "one number per sample"});
    expect_shape_error(
        [b = builder] {
          b(input_variable({1}), constant(random_array({1}, kF32, 1)), input_variable({1}), "");
        },
        {fn, "gain", "dynamic axes"});
  }
}

// ---- edit_distance_error -----------------------------------------------------------------------

TEST(EditDistanceError, CntkMetricsTestCases) {
  // cntk/metrics/tests/metrics_test.py: a batch of samples of shape (2,), each a sequence of
  // one step whose label is its argmax; the values are CNTK's minibatch totals.
  struct Case {
    std::vector<double> a, b;
    EditDistanceOptions options;
    double result;
  };
  const std::vector<Case> cases{
      {{1, 2}, {1, 2}, {0, 0, 0, false, {}}, 0.0},
      {{1, 3, 2, 0}, {2, 0, 2, 0}, {0, 0, 0, false, {}}, 1.0},
      {{1, 3, 2, 0}, {2, 0, 2, 0}, {1, 0, 0, false, {}}, 2.0},
      {{1, 3, 2, 0}, {2, 0, 2, 0}, {0, 1, 1, false, {}}, 1.0},
      {{1, 3, 2, 0}, {2, 0, 2, 0}, {0, 1, 1, true, {1}}, 1.0},
  };
  for (const Case& c : cases) {
    Variable a = input_variable({2}, f64()), b = input_variable({2}, f64());
    const Function f = edit_distance_error(a, b, c.options);
    EXPECT_EQ(f.op_name(), "EditDistanceError");
    EXPECT_EQ(f.output().shape(), NDShape{});
    EXPECT_TRUE(f.output().dynamic_axes().empty());
    const auto out = values(f.eval_one(
        {{a, Value::create_batch<double>({2}, c.a)}, {b, Value::create_batch<double>({2}, c.b)}}));
    expect_all_near(out, {c.result}, 1e-15, "value");
  }
}

std::vector<double> one_hot_steps(const std::vector<size_t>& labels, size_t dim) {
  std::vector<double> v(labels.size() * dim, 0.0);
  for (size_t t = 0; t < labels.size(); ++t) v[t * dim + labels[t]] = 1;
  return v;
}

// The classic edit distance (all penalties 1).
size_t levenshtein(const std::vector<size_t>& a, const std::vector<size_t>& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row.back();
}

TEST(EditDistanceError, SequencesSquashAndIgnore) {
  // The docstring's strings with '-' as label 0: s1 = "1-12-" and s2 = "-11--122" are both "112"
  // once squashed and without '-'.
  Variable a = sequence::input_variable({3}, f64()), b = sequence::input_variable({3}, f64());
  const std::vector<size_t> s1{1, 0, 1, 2, 0, 0, 0, 0}, s2{0, 1, 1, 0, 0, 1, 2, 2};
  auto eval = [&](const std::vector<std::vector<size_t>>& as,
                  const std::vector<std::vector<size_t>>& bs, const EditDistanceOptions& o) {
    std::vector<std::vector<double>> va, vb;
    for (const auto& s : as) va.push_back(one_hot_steps(s, 3));
    for (const auto& s : bs) vb.push_back(one_hot_steps(s, 3));
    return edit_distance_error(a, b, o).eval_one({{a, Value::create_sequences<double>({3}, va)},
                                                  {b, Value::create_sequences<double>({3}, vb)}});
  };
  EXPECT_EQ(sum_of(values(eval({s1}, {s2}, {.squash_inputs = true, .tokens_to_ignore = {0}}))), 0);
  // Without squashing or ignoring, the classic distance over b's 8 labels, times 8 steps / 8.
  const Value plain = eval({s1}, {s2}, {});
  expect_all_near(values(plain), {double(levenshtein(s1, s2))}, 1e-15, "plain");
  // Two sequences: errors sum and so do the steps and the reference lengths (here 8 + 3 both).
  // Squashed and without '-': s1 and s2 are both "112" (no error) and x's "21" is 2 edits from
  // y's "12": CNTK's errors · 11 steps / (3 + 2) reference labels.
  const std::vector<size_t> x{2, 1, 1}, y{1, 2, 2};
  expect_all_near(values(eval({s1, x}, {s2, y}, {})),
                  {double(levenshtein(s1, s2) + levenshtein(x, y))}, 1e-15, "two");
  const EditDistanceOptions squashed{.squash_inputs = true, .tokens_to_ignore = {0}};
  expect_all_near(values(eval({s1, x}, {s2, y}, squashed)),
                  {double(levenshtein({2, 1}, {1, 2})) * 11 / 5}, 1e-15, "two squashed");
}

TEST(EditDistanceError, TiesPickSubstitutionThenDeletion) {
  // Penalties 0: every path costs 0 and CNTK's tie-breaking picks substitutions.
  Variable a = sequence::input_variable({3}, f64()), b = sequence::input_variable({3}, f64());
  auto total = [&](const std::vector<size_t>& x, const std::vector<size_t>& y,
                   const EditDistanceOptions& o) {
    return sum_of(values(edit_distance_error(a, b, o).eval_one(
               {{a, Value::create_sequences<double>({3}, {one_hot_steps(x, 3)})},
                {b, Value::create_sequences<double>({3}, {one_hot_steps(y, 3)})}}))) *
           double(y.size()) / double(x.size());  // CNTK's total · |y| / steps = the error count
  };
  EXPECT_NEAR(total({0, 1, 2}, {2, 1, 0}, {0, 0, 0}), 2, 1e-12);  // two substitutions
  // A substitution costing 3 loses to a deletion and an insertion (2 edits).
  EXPECT_NEAR(total({0, 1, 2}, {2, 1, 0}, {3, 1, 1}), 4, 1e-12);
}

TEST(EditDistanceError, BadArgumentsNameTheFunction) {
  Variable a = input_variable({3}), b = input_variable({3});
  try {
    edit_distance_error(a, b, {.sub_pen = -1});
    ADD_FAILURE() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("edit_distance_error"), std::string::npos) << e.what();
  }
  expect_shape_error([&] { edit_distance_error(a, input_variable({2})); },
                     {"edit_distance_error", "[3]", "[2]"});
  Parameter w = parameter(random_array({3}, kF32, 71), "w");
  EXPECT_THROW(
      edit_distance_error(element_times(a, w), b)
          .grad({{a, random_batch({3}, 2, kF32, 72)}, {b, random_batch({3}, 2, kF32, 73)}}, {w}),
      ArgumentError);
}

// ---- fmeasure ----------------------------------------------------------------------------------

double fmeasure_ref(const std::vector<double>& o, const std::vector<double>& t, double beta) {
  double c = 0, so = 0, st = 0;
  for (size_t i = 0; i < o.size(); ++i) c += o[i] * t[i], so += o[i], st += t[i];
  const double p = c / so, r = c / st, b2 = beta * beta;
  return 1 - (1 + b2) * p * r / (b2 * p + r);
}

TEST(FMeasure, CntkTestValue) {
  // cntk/losses/tests/fmeasure_test.py: a 1x5x5 mask against another: 0.5.
  Variable o = input_variable({1, 5, 5}, f64()), t = input_variable({1, 5, 5}, f64());
  const std::vector<double> a{1, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1,
                              0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<double> b{1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0,
                              1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1};
  const Value out = fmeasure(o, t).eval_one({{o, Value::create_batch<double>({1, 5, 5}, a)},
                                             {t, Value::create_batch<double>({1, 5, 5}, b)}});
  EXPECT_EQ(out.data().shape(), (NDShape{1, 1, 1, 1}));
  EXPECT_NEAR(values(out)[0], 0.5, 1e-15);
}

TEST(FMeasure, MatchesReferenceWithGradients) {
  for (double beta : {1.0, 0.5, 2.0}) {
    SCOPED_TRACE(beta);
    Variable o = input_variable({6}, f64("o")), t = input_variable({6}, f64("t"));
    const Value vo = random_batch({6}, 3, kF64, 81, 0.05, 1),
                vt = random_batch({6}, 3, kF64, 82, 0, 1);
    const Function f = fmeasure(o, t, {beta}, "f");
    EXPECT_EQ(f.name(), "f");
    EXPECT_EQ(f.output().shape(), (NDShape{1}));
    std::vector<double> expected;
    for (size_t r = 0; r < 3; ++r)
      expected.push_back(
          fmeasure_ref(slice_of(values(vo), r, 6), slice_of(values(vt), r, 6), beta));
    expect_all_near(values(f.eval_one({{o, vo}, {t, vt}})), expected, 1e-14, "output");
    expect_gradients_match(f, {{o, vo}, {t, vt}}, {o, t});
  }
  // Rank 3: one value per class (the first axis).
  Variable o = input_variable({2, 2, 3}, f64("o")), t = input_variable({2, 2, 3}, f64("t"));
  const Value vo = random_batch({2, 2, 3}, 2, kF64, 83, 0.05, 1),
              vt = random_batch({2, 2, 3}, 2, kF64, 84, 0, 1);
  const Function f = fmeasure(o, t);
  EXPECT_EQ(f.output().shape(), (NDShape{2, 1, 1}));
  std::vector<double> expected;
  for (size_t r = 0; r < 4; ++r)
    expected.push_back(fmeasure_ref(slice_of(values(vo), r, 6), slice_of(values(vt), r, 6), 1));
  expect_all_near(values(f.eval_one({{o, vo}, {t, vt}})), expected, 1e-14, "per class");
  expect_gradients_match(f, {{o, vo}, {t, vt}}, {o, t});
}

TEST(FMeasure, BadOperandsNameTheFunction) {
  expect_shape_error(
      [] {
        fmeasure(input_variable({3}), input_variable({1, 3}));
      },
      {"fmeasure", "rank"});
  EXPECT_THROW(fmeasure(input_variable({3}), input_variable({3}), {std::nan("")}), ArgumentError);
}

// ---- nce_loss ----------------------------------------------------------------------------------

double log_add_exp_ref(double a, double b) {
  if (std::isinf(a) && a < 0) return b;
  if (std::isinf(b) && b < 0) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}

struct NceCase {
  size_t classes = 6, dim = 3, rows = 4;
  Parameter W, b;
  Variable x, y;
  Value xv, yv;
  NceCase(DataType dtype = kF64, bool sparse = false)
      : W(parameter(random_array({6, 3}, dtype, 91), "W")),
        b(parameter(random_array({6, 1}, dtype, 92), "b")),
        x(input_variable({3}, {.dtype = dtype, .name = "x", .needs_gradient = true})),
        y(input_variable({6}, {.dtype = dtype, .is_sparse = sparse})),
        xv(random_batch({3}, 4, dtype, 93)),
        yv(Value::one_hot(6, {2, 0, 5, 2}, dtype)) {}
  // z_c = W_c·x + b_c for row r.
  double logit(size_t r, size_t c) const {
    const auto w = W.value().to_vector<double>(), bias = b.value().to_vector<double>();
    const auto xs = values(xv);
    double z = bias[c];
    for (size_t d = 0; d < dim; ++d) z += w[c * dim + d] * xs[r * dim + d];
    return z;
  }
};

TEST(NceLoss, DeterministicNoiseMatchesReferenceWithGradients) {
  // All noise on class 2: every draw is class 2, so the loss is known exactly.
  NceCase c;
  const Constant noise = constant(NDArrayView::from_vector<double>({6}, {0, 0, 2, 0, 0, 0}));
  const Function f = nce_loss(c.W, c.b, c.x, c.y, noise, {.num_samples = 4});
  EXPECT_EQ(f.op_name(), "NCE");
  EXPECT_EQ(f.output().shape(), (NDShape{1}));
  const std::vector<size_t> labels{2, 0, 5, 2};
  const double log4 = std::log(4.0), inf = std::numeric_limits<double>::infinity();
  std::vector<double> expected;
  for (size_t r = 0; r < 4; ++r) {
    const double z = c.logit(r, labels[r]), lp = labels[r] == 2 ? log4 : -inf;
    expected.push_back(log_add_exp_ref(z, lp) - z + 4 * log_add_exp_ref(c.logit(r, 2), log4) -
                       4 * log4);
  }
  const Value dense(c.yv.data().to_dense(), false);
  expect_all_near(values(f.eval_one({{c.x, c.xv}, {c.y, dense}})), expected, 1e-13, "output");
  expect_gradients_match(f, {{c.x, c.xv}, {c.y, dense}}, {c.x, c.W, c.b});
  // Sparse labels give the same.
  NceCase s(kF64, true);
  const Function fs = nce_loss(s.W, s.b, s.x, s.y, noise, {.num_samples = 4});
  expect_all_near(values(fs.eval_one({{s.x, s.xv}, {s.y, s.yv}})), expected, 1e-13, "sparse");
  const ValueMap gs = fs.grad({{s.x, s.xv}, {s.y, s.yv}}, {s.W, s.x});
  const ValueMap gd = f.grad({{c.x, c.xv}, {c.y, dense}}, {c.W, c.x});
  expect_all_near(values(gs.at(s.W)), values(gd.at(c.W)), 1e-13, "sparse dW");
  expect_all_near(values(gs.at(s.x)), values(gd.at(c.x)), 1e-13, "sparse dx");
}

TEST(NceLoss, MeanOverDrawsIsTheExpectedLoss) {
  // With duplicates the importance weights are 1/k: E[loss] = pos + k Σ_c q_c
  // logaddexp(z_c, log k q_c) − H.
  NceCase c;
  const std::vector<double> w{1, 2, 3, 4, 5, 6};
  const Constant noise = constant(NDArrayView::from_vector<double>({6}, w));
  const size_t k = 3;
  const Function f = nce_loss(c.W, c.b, c.x, c.y, noise, {.num_samples = k});
  const std::vector<size_t> labels{2, 0, 5, 2};
  std::vector<double> expected;
  for (size_t r = 0; r < 4; ++r) {
    double neg = 0, entropy = 0;
    for (size_t cl = 0; cl < 6; ++cl) {
      const double q = w[cl] / 21, lp = std::log(double(k) * q);
      neg += double(k) * q * log_add_exp_ref(c.logit(r, cl), lp);
      entropy += double(k) * q * lp;
    }
    const double z = c.logit(r, labels[r]);
    expected.push_back(log_add_exp_ref(z, std::log(double(k) * w[labels[r]] / 21)) - z + neg -
                       entropy);
  }
  const Value dense(c.yv.data().to_dense(), false);
  std::vector<double> mean(4, 0.0);
  const int draws = 4000;
  for (int i = 0; i < draws; ++i) {
    const auto v = values(f.eval_one({{c.x, c.xv}, {c.y, dense}}));
    for (size_t r = 0; r < 4; ++r) mean[r] += v[r] / draws;
  }
  expect_all_near(mean, expected, 0.02, "mean over draws");
  // Without duplicates, the draws are distinct and the loss stays finite.
  const auto v =
      values(nce_loss(c.W, c.b, c.x, c.y, noise, {.num_samples = 6, .allow_duplicates = false})
                 .eval_one({{c.x, c.xv}, {c.y, dense}}));
  for (double e : v) EXPECT_TRUE(std::isfinite(e));
}

TEST(NceLoss, SeedsRepeatTheSequenceOfDraws) {
  NceCase c;
  const Constant noise = constant(NDArrayView::from_vector<double>({6}, {1, 2, 3, 4, 5, 6}));
  const Value dense(c.yv.data().to_dense(), false);
  // The outputs of three evaluations of a fresh function.
  auto three = [&](std::optional<uint64_t> seed) {
    const Function f = nce_loss(c.W, c.b, c.x, c.y, noise, {.num_samples = 2, .seed = seed});
    std::vector<std::vector<double>> out;
    for (int i = 0; i < 3; ++i) out.push_back(values(f.eval_one({{c.x, c.xv}, {c.y, dense}})));
    return out;
  };
  const auto a = three(7), b = three(7);
  EXPECT_EQ(a, b);                            // the same seed, the same sequence of draws
  EXPECT_TRUE(a[0] != a[1] || a[1] != a[2]);  // drawn anew each minibatch, as CNTK's
  bool differ = false;
  for (uint64_t seed = 8; seed < 16 && !differ; ++seed) differ = three(seed) != a;
  EXPECT_TRUE(differ);
}

// The seed is the op table's (ParamType::Seed): a uint64 "seed", left out for auto_select.
// Older files hold random_seed, -1 for auto_select: such a function loads and draws from its
// generator, the one saved with it.
TEST(NceLoss, HoldsTheSeedAsEveryRandomOpAndLoadsTheFormerAttribute) {
  NceCase c;
  const Constant noise = constant(NDArrayView::from_vector<double>({6}, {1, 2, 3, 4, 5, 6}));
  const std::vector<Variable> inputs{c.W, c.b, c.x, c.y, noise};
  EXPECT_FALSE(nce_loss(c.W, c.b, c.x, c.y, noise).attributes().contains("seed"));
  EXPECT_EQ(nce_loss(c.W, c.b, c.x, c.y, noise, {.seed = uint64_t{1} << 63})
                .attributes()
                .get<uint64_t>("seed"),
            uint64_t{1} << 63);
  const Function former = make_primitive(
      find_op("NCE"), inputs,
      Dictionary(
          {{"num_samples", int64_t{2}}, {"allow_duplicates", true}, {"random_seed", int64_t{-1}}}));
  const Function loaded = load_model_from_bytes(save_model_to_bytes(former));
  const Value dense(c.yv.data().to_dense(), false);
  ValueMap arguments{{c.x, c.xv}, {c.y, dense}}, loaded_arguments;
  for (const Variable& a : loaded.arguments())
    loaded_arguments.emplace(a, a.name() == "x" ? c.xv : dense);
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(values(loaded.eval_one(loaded_arguments)), values(former.eval_one(arguments)))
        << "draw " << i;
}

TEST(NceLoss, InfersTheWeightsInputDimension) {
  Parameter W = parameter(NDShape{6, NDShape::kInferred}, glorot_uniform(), DataType::Float32, "W");
  Variable x = input_variable({3}), y = input_variable({6});
  const Function f = nce_loss(W, parameter(random_array({6, 1}, kF32, 1)), x, y,
                              constant(random_array({6}, kF32, 2, 0.1, 1)));
  EXPECT_EQ(W.shape(), (NDShape{6, 3}));
  EXPECT_EQ(f.output().shape(), (NDShape{1}));
}

TEST(NceLoss, BadOperandsNameTheFunction) {
  Variable x = input_variable({3}), y = input_variable({6});
  const Constant noise = constant(random_array({6}, kF32, 2, 0.1, 1));
  const Parameter W = parameter(random_array({6, 3}, kF32, 1)),
                  b = parameter(random_array({6, 1}, kF32, 3));
  expect_shape_error(
      [&] {
        nce_loss(parameter(random_array({5, 3}, kF32, 1)), b, x, y, noise);
      },
      {"nce_loss", "weights"});
  expect_shape_error([&] { nce_loss(W, parameter(random_array({6}, kF32, 3)), x, y, noise); },
                     {"nce_loss", "biases"});
  expect_shape_error([&] { nce_loss(W, b, x, input_variable({5}), noise); },
                     {"nce_loss", "labels"});
  expect_shape_error([&] { nce_loss(W, b, input_variable({4}), y, noise); },
                     {"nce_loss", "inputs"});
  EXPECT_THROW(nce_loss(W, b, x, y, noise, {.num_samples = 0}), ArgumentError);
  EXPECT_THROW(nce_loss(W, b, x, y, noise, {.num_samples = 7, .allow_duplicates = false}),
               ArgumentError);
  // Fewer nonzero noise weights than distinct draws: an ArgumentError when it runs.
  const Function f =
      nce_loss(W, b, x, y, constant(NDArrayView::from_vector<float>({6}, {1, 0, 0, 0, 0, 0})),
               {.num_samples = 2, .allow_duplicates = false});
  EXPECT_THROW(f.eval_one({{x, random_batch({3}, 2, kF32, 4)}, {y, Value::one_hot(6, {0, 1})}}),
               ArgumentError);
}

// ---- cross_entropy_with_softmax and classification_error along an axis -------------------------

TEST(LossAlongAxis, CrossEntropyWithSoftmaxIsCntksComposite) {
  Variable z = input_variable({2, 3}, f64("z")), t = input_variable({2, 3}, f64("t"));
  const Value zv = random_batch({2, 3}, 2, kF64, 101, -2, 2),
              tv = random_batch({2, 3}, 2, kF64, 102, 0, 1);
  const auto zs = values(zv), ts = values(tv);
  for (int axis : {1, -1, 0, -2}) {
    SCOPED_TRACE(axis);
    const Function f = cross_entropy_with_softmax(z, t, Axis(axis));
    const size_t i = size_t(axis < 0 ? axis + 2 : axis);
    EXPECT_EQ(f.output().shape(), i == 1 ? (NDShape{2, 1}) : (NDShape{1, 3}));
    std::vector<double> expected;
    for (size_t r = 0; r < 2; ++r)
      for (size_t k = 0; k < (i == 1 ? 2 : 3); ++k) {
        std::vector<double> zz, tt;
        for (size_t m = 0; m < (i == 1 ? 3 : 2); ++m) {
          const size_t e = r * 6 + (i == 1 ? k * 3 + m : m * 3 + k);
          zz.push_back(zs[e]), tt.push_back(ts[e]);
        }
        double dot = 0;
        for (size_t m = 0; m < zz.size(); ++m) dot += tt[m] * zz[m];
        expected.push_back(logsumexp(zz) - dot);  // no Σt factor: CNTK's composite
      }
    expect_all_near(values(f.eval_one({{z, zv}, {t, tv}})), expected, 1e-14, "output");
    expect_gradients_match(f, {{z, zv}, {t, tv}}, {z, t});
  }
  // A vector sample along its axis is the op without an axis, as model files have held it.
  Variable v = input_variable({3}), u = input_variable({3});
  EXPECT_EQ(cross_entropy_with_softmax(v, u, Axis(-1)).op_name(), "CrossEntropyWithSoftmax");
  EXPECT_FALSE(cross_entropy_with_softmax(v, u, Axis(-1)).attributes().contains("axis"));
}

TEST(LossAlongAxis, ClassificationErrorIsCntksComposite) {
  // metrics_test.py's cases: rows of a [3, 4] sample along axis 1.
  Variable z = input_variable({3, 4}, f64()), t = input_variable({3, 4}, f64());
  const Value zv = Value::create_batch<double>({3, 4}, {1, 2, 3, 4, 6, 2, 7, 4, 1, 5, 3, 4});
  auto eval = [&](const std::vector<double>& target) {
    return values(classification_error(z, t, 1, Axis(1))
                      .eval_one({{z, zv}, {t, Value::create_batch<double>({3, 4}, target)}}));
  };
  expect_all_near(eval({0, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0}), {1.0 / 3}, 1e-15, "one wrong");
  expect_all_near(eval({0, 0, 0.5, 0.5, 0, 0, 1, 0, 0, 1, 0, 0}), {1.0 / 3}, 1e-15, "soft");
  expect_all_near(eval({0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0}), {0}, 1e-15, "all right");
  EXPECT_EQ(classification_error(z, t, 1, Axis(1)).output().shape(), (NDShape{1, 1}));
  Variable v = input_variable({3}), u = input_variable({3});
  EXPECT_EQ(classification_error(v, u, 2, Axis(0)).op_name(), "ClassificationError");
}

TEST(LossAlongAxis, LargeSamplesAreTheCompositeOnEveryAxis) {
  // 8 samples of [3, 5, 70]: blocks split over threads, columns past a run of 64 (inner 70),
  // slices in the middle of the sample (axis 1). cross_entropy_with_softmax is the composite of
  // Loom's reductions, gradients included, with targets per sample or shared (a parameter, whose
  // gradient sums the samples'); classification_error of one-hot targets is the fraction of
  // slices whose first largest score is not at the target.
  const NDShape shape{3, 5, 70};
  const size_t rows = 8, size = shape.total_size();
  Variable z = input_variable(shape, f64("z")), t = input_variable(shape, f64("t"));
  const Value zv = random_batch(shape, rows, kF64, 105, -3, 3);
  const Value tv = random_batch(shape, rows, kF64, 106, 0, 1);
  const Variable shared = parameter(random_array(shape, kF64, 107, 0, 1), "shared");
  const std::vector<double> zs = values(zv);
  for (int axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    for (const Variable& target : {t, shared}) {
      const ValueMap args = target == t ? ValueMap{{z, zv}, {t, tv}} : ValueMap{{z, zv}};
      const Function f = cross_entropy_with_softmax(z, target, Axis(axis));
      const Function composite = minus(reduce_log_sum_exp(z, Axis(axis)),
                                       reduce_sum(element_times(target, z), Axis(axis)));
      expect_all_near(values(f.eval_one(args)), values(composite.eval_one(args)), 1e-12, "output");
      const ValueMap g = weighted_output(f).grad(args, {z, target});
      const ValueMap expected = weighted_output(composite).grad(args, {z, target});
      for (const Variable& v : {z, target})
        expect_all_near(values(g.at(v)), values(expected.at(v)), 1e-12, "gradient");
    }

    // One-hot targets along the axis: slice j of sample r has its 1 at entry (j + r) % n.
    const size_t k = size_t(axis), n = shape[k];
    size_t inner = 1;
    for (size_t a = k + 1; a < shape.rank(); ++a) inner *= shape[a];
    std::vector<double> one_hot(rows * size, 0.0), wrong(rows, 0.0);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t e = 0; e < size; ++e) {
        const size_t o = e / (n * inner), c = e / inner % n, i = e % inner;
        if (c != (o * inner + i + r) % n) continue;
        one_hot[r * size + e] = 1;
        size_t best = 0;  // the slice's first largest score
        for (size_t b = 1; b < n; ++b)
          if (zs[r * size + (o * n + b) * inner + i] > zs[r * size + (o * n + best) * inner + i])
            best = b;
        wrong[r] += best != c;
      }
      wrong[r] /= double(size / n);
    }
    expect_all_near(
        values(classification_error(z, t, 1, Axis(axis))
                   .eval_one({{z, zv}, {t, Value::create_batch<double>(shape, one_hot)}})),
        wrong, 1e-15, "classification_error");
  }
}

TEST(LossAlongAxis, OverPlaceholdersAsOverInputs) {
  // A criterion made over placeholders (Python's @Function) knows its sample's rank only once
  // they are replaced: it gives what the criterion over the inputs gives, along the axis of a
  // [2, 3] sample and over a vector sample.
  for (const NDShape& shape : {NDShape{2, 3}, NDShape{3}}) {
    Variable z = input_variable(shape, f64("z")), t = input_variable(shape, f64("t"));
    const ValueMap args = {{z, random_batch(shape, 2, kF64, 103, -2, 2)},
                           {t, random_batch(shape, 2, kF64, 104, 0, 1)}};
    const std::vector<std::function<Function(const Variable&, const Variable&)>> criteria = {
        [](const Variable& a, const Variable& b) {
          return cross_entropy_with_softmax(a, b, Axis(0));
        },
        [](const Variable& a, const Variable& b) {
          return classification_error(a, b, 1, Axis(-1));
        }};
    for (const auto& make : criteria) {
      Variable pz = placeholder("pz"), pt = placeholder("pt");
      Function bound = make(pz, pt);
      bound.replace_placeholders({{pz, z}, {pt, t}});
      const Function typed = make(z, t);
      EXPECT_EQ(bound.output().shape(), typed.output().shape());
      expect_all_near(values(bound.eval_one(args)), values(typed.eval_one(args)), 0,
                      typed.op_name());
    }
  }
}

TEST(LossAlongAxis, BadAxesNameTheFunction) {
  Variable z = input_variable({2, 3}), t = input_variable({2, 3});
  for (const Axis& axis : {Axis(2), Axis(-3), Axis::default_batch_axis()}) {
    for (const char* fn : {"cross_entropy_with_softmax", "classification_error"}) {
      try {
        std::string(fn) == "classification_error" ? classification_error(z, t, 1, axis)
                                                  : cross_entropy_with_softmax(z, t, axis);
        ADD_FAILURE() << "expected ArgumentError";
      } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find(fn), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_THROW(classification_error(z, t, 2, Axis(1)), ArgumentError);
  expect_shape_error(
      [&] {
        cross_entropy_with_softmax(z, input_variable({2, 4}), Axis(1));
      },
      {"cross_entropy_with_softmax", "[2,3]", "[2,4]"});
}

// ---- hierarchical_softmax_layer ----------------------------------------------------------------

std::vector<double> softmax_ref(std::vector<double> v) {
  const double m = *std::max_element(v.begin(), v.end());
  double s = 0;
  for (double& e : v) s += (e = std::exp(e - m));
  for (double& e : v) e /= s;
  return v;
}

TEST(HierarchicalSoftmax, MatchesReferenceWithGradients) {
  for (auto [label_dim, classes] : {std::pair<size_t, size_t>{10, 0}, {7, 3}}) {
    SCOPED_TRACE(label_dim);
    Variable x = input_variable({4}, f64("x")), label = input_variable({1}, f64("label"));
    const HierarchicalSoftmax h = hierarchical_softmax_layer(x, label, label_dim, classes);
    const size_t c = classes ? classes : 4, n = (label_dim + c - 1) / c;
    EXPECT_EQ(h.class_probs.output().shape(), NDShape{c});
    ASSERT_EQ(h.all_probs.size(), c);
    std::map<std::string, std::vector<double>> p;
    for (const Parameter& q : h.output_prob.parameters())
      p[q.name()] = q.value().to_vector<double>();
    ASSERT_EQ(p.size(), 4u);
    const Value xv = random_batch({4}, 3, kF64, 111);
    const std::vector<double> labels{0, double(label_dim - 1), 5};
    const ValueMap args{{x, xv}, {label, Value::create_batch<double>({1}, labels)}};
    const auto out = values(h.output_prob.eval_one(args));
    const auto xs = values(xv);
    double total = 0;
    for (size_t r = 0; r < 3; ++r) {
      std::vector<double> z1(c);
      for (size_t j = 0; j < c; ++j) {
        z1[j] = p["hsoftmax_b1"][j];
        for (size_t d = 0; d < 4; ++d) z1[j] += xs[r * 4 + d] * p["hsoftmax_w1"][d * c + j];
      }
      const auto cp = softmax_ref(z1);
      const size_t cls = size_t(std::floor((labels[r] + 0.5) / double(n)));
      const size_t in = size_t(std::round(labels[r] - double(cls * n)));
      std::vector<double> z2(n);
      for (size_t k = 0; k < n; ++k) {
        z2[k] = p["hsoftmax_b2s"][cls * n + k];
        for (size_t d = 0; d < 4; ++d)
          z2[k] += xs[r * 4 + d] * p["hsoftmax_w2s"][(cls * 4 + d) * n + k];
      }
      EXPECT_NEAR(out[r], softmax_ref(z2)[in] * cp[cls], 1e-14);
    }
    for (const Function& f : h.all_probs) total += sum_of(values(f.eval_one({{x, xv}})));
    EXPECT_NEAR(total, 3, 1e-12);  // each sample's label probabilities sum to 1
    std::vector<Variable> wrt{x};
    for (const Parameter& q : h.output_prob.parameters()) wrt.push_back(q);
    expect_gradients_match(h.output_prob, args, wrt);
  }
  EXPECT_THROW(hierarchical_softmax_layer(input_variable({2, 2}), input_variable({1}), 4),
               ShapeError);
  EXPECT_THROW(hierarchical_softmax_layer(input_variable({2}), input_variable({1}), 0),
               ArgumentError);
}

}  // namespace
}  // namespace loom
