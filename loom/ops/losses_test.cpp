#include "loom/ops/losses.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/linear.h"
#include "loom/ops/ops_test_util.h"

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
  double mass = 0, dot = 0;
  for (size_t i = 0; i < z.size(); ++i) mass += t[i], dot += t[i] * z[i];
  return mass * logsumexp(z) - dot;
}
double binary_cross_entropy_ref(const std::vector<double>& o, const std::vector<double>& t) {
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i)
    s -= t[i] * std::log(o[i]) + (1 - t[i]) * std::log(1 - o[i]);
  return s;
}
// The target's class is its first maximal entry; it is wrong unless fewer than top_n entries of
// z rank before it (larger, or equal and earlier).
double classification_error_ref(const std::vector<double>& z, const std::vector<double>& t,
                                size_t top_n) {
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
      // Soft, unnormalized targets: the loss scales logsumexp by the target's mass.
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
                  {lse - 3, lse - 1, lse - 2.3, 2 * lse - 4}, 1e-15, "output");
  // d/dz = Σt · softmax(z) − t.
  const std::vector<double> p{0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
  expect_all_near(
      values(
          cross_entropy_with_softmax(z, t)
              .grad({{z, batch_of(kF64, {3}, {1, 2, 3})}, {t, batch_of(kF64, {3}, {0, 2, 0})}}, {z})
              .at(z)),
      {2 * p[0], 2 * p[1] - 2, 2 * p[2]}, 1e-15, "gradient");
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
  // The target's class is its largest entry (soft targets too).
  EXPECT_EQ(values(classification_error(z, t).eval_one(
                {{z, batch_of(kF64, {3}, {1, 3, 2})}, {t, batch_of(kF64, {3}, {0.1, 0.6, 0.3})}})),
            (std::vector<double>{0}));
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

}  // namespace
}  // namespace loom
