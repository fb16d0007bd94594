#include "loom/ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

// Reference softmax (or log-softmax) of data viewed as [outer, n, inner], along n.
std::vector<double> reference(const std::vector<double>& x, size_t outer, size_t n, size_t inner,
                              bool log) {
  std::vector<double> y(x.size());
  for (size_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inner; ++i) {
      auto at = [&](size_t j) { return (o * n + j) * inner + i; };
      double m = -INFINITY;
      for (size_t j = 0; j < n; ++j) m = std::max(m, x[at(j)]);
      double s = 0;
      for (size_t j = 0; j < n; ++j) s += std::exp(x[at(j)] - m);
      for (size_t j = 0; j < n; ++j)
        y[at(j)] = log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  return y;
}

struct Case {
  const char* op_name;
  Function (*fn)(const Variable&, const Axis&, const std::string&);
  bool log;
};
const Case kCases[] = {{"Softmax", loom::softmax, false}, {"LogSoftmax", loom::log_softmax, true}};

TEST(Softmax, ShapeInferenceAndErrors) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable x = input_variable({2, 3}, f64());
    Function f = c.fn(x, Axis(-1), "out");
    EXPECT_EQ(f.op_name(), c.op_name);
    EXPECT_EQ(f.name(), "out");
    EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
    EXPECT_EQ(f.output().dtype(), kF64);
    EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
    EXPECT_EQ(Variable(c.fn(sequence::input_variable({4}), Axis(0), "")).type_string(),
              "Sequence[Tensor[4]]");
    EXPECT_TRUE(Variable(c.fn(parameter({5}), Axis(-1), "")).dynamic_axes().empty());
    EXPECT_THROW(c.fn(x, Axis(2), ""), ShapeError);
    EXPECT_THROW(c.fn(x, Axis(-3), ""), ShapeError);
    EXPECT_THROW(c.fn(x, Axis::default_batch_axis(), ""), ShapeError);
    EXPECT_THROW(c.fn(x, Axis::all_axes(), ""), ShapeError);
    try {
      c.fn(x, Axis(5), "");
      FAIL() << "expected ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(c.op_name), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Tensor[2,3]"), std::string::npos) << e.what();
    }
  }
}

TEST(Softmax, ValuesByHand) {
  Variable x = input_variable({3}, f64());
  Value in = Value::create_batch<double>({3}, {1, 2, 3, 0, 0, 0});
  expect_all_near(
      values(softmax(x).eval_one({{x, in}})),
      {0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 1. / 3, 1. / 3, 1. / 3}, 1e-15,
      "softmax");
  const double l3 = std::log(3.0);
  expect_all_near(values(log_softmax(x).eval_one({{x, in}})),
                  {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806, -l3, -l3, -l3},
                  1e-15, "log_softmax");
}

TEST(Softmax, BatchMatchesReferenceAndRowsSumToOne) {
  for (DataType dtype : {kF64, kF32}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(c.op_name);
      Variable x = input_variable({5}, {.dtype = dtype});
      Value in = random_batch({5}, 4, dtype, 1, -3, 3);
      std::vector<double> out = values(c.fn(x, Axis(-1), "").eval_one({{x, in}}));
      expect_all_near(out, reference(values(in), 4, 5, 1, c.log), dtype == kF64 ? 1e-14 : 1e-6,
                      "output");
      for (size_t r = 0; r < 4; ++r) {
        double s = 0;
        for (size_t j = 0; j < 5; ++j) s += c.log ? std::exp(out[r * 5 + j]) : out[r * 5 + j];
        EXPECT_NEAR(s, 1.0, dtype == kF64 ? 1e-14 : 1e-6) << "row " << r;
      }
    }
  }
}

TEST(Softmax, StableOnLargeInputs) {
  for (DataType dtype : {kF64, kF32}) {
    SCOPED_TRACE(to_string(dtype));
    Variable x = input_variable({3}, {.dtype = dtype});
    Value in = dispatch(dtype, [](auto zero) {
      using T = decltype(zero);
      return Value::create_batch<T>({3}, {1000, 1001, 1002, -1000, -1001, -1002, 1000, 0, -1000});
    });
    const double tol = dtype == kF64 ? 1e-14 : 1e-6;
    std::vector<double> p = values(softmax(x).eval_one({{x, in}}));
    std::vector<double> lp = values(log_softmax(x).eval_one({{x, in}}));
    for (double v : p) EXPECT_TRUE(std::isfinite(v));
    for (double v : lp) EXPECT_TRUE(std::isfinite(v));
    const std::vector<double> shifted = reference({0, 1, 2}, 1, 3, 1, false);
    const std::vector<double> log_shifted = reference({0, 1, 2}, 1, 3, 1, true);
    expect_all_near({p[0], p[1], p[2]}, shifted, tol, "softmax of 1000..1002");
    expect_all_near({p[3], p[4], p[5]}, {shifted[2], shifted[1], shifted[0]}, tol,
                    "softmax of -1000..-1002");
    expect_all_near({p[6], p[7], p[8]}, {1, 0, 0}, tol, "softmax of 1000, 0, -1000");
    expect_all_near({lp[0], lp[1], lp[2]}, log_shifted, tol, "log_softmax of 1000..1002");
    // Where softmax underflows to 0, log_softmax stays exact.
    expect_all_near({lp[6], lp[7], lp[8]}, {0, -1000, -2000}, tol, "log_softmax of 1000, 0, -1000");
  }
}

TEST(Softmax, AxisOtherThanLast) {
  const NDShape shape{2, 3, 4};
  // axis -> [outer, n, inner] of the packed [rows=2] + shape tensor.
  struct AxisCase {
    Axis axis;
    size_t outer, n, inner;
  };
  const AxisCase axes[] = {{Axis(0), 2, 2, 12},
                           {Axis(1), 4, 3, 4},
                           {Axis(-2), 4, 3, 4},
                           {Axis(2), 12, 4, 1},
                           {Axis::all_static_axes(), 2, 24, 1}};
  for (DataType dtype : {kF64, kF32}) {
    for (const Case& c : kCases) {
      for (const AxisCase& a : axes) {
        SCOPED_TRACE(std::string(c.op_name) + " " + a.axis.to_string());
        Variable x = input_variable(shape, {.dtype = dtype});
        Value in = random_batch(shape, 2, dtype, 2, -4, 4);
        std::vector<double> out = values(c.fn(x, a.axis, "").eval_one({{x, in}}));
        expect_all_near(out, reference(values(in), a.outer, a.n, a.inner, c.log),
                        dtype == kF64 ? 1e-14 : 1e-6, "output");
      }
    }
  }
}

TEST(Softmax, SequencesMatchPerSequenceComputation) {
  for (const Case& c : kCases) {
    for (Axis axis : {Axis(-1), Axis(0)}) {
      SCOPED_TRACE(std::string(c.op_name) + " " + axis.to_string());
      Variable x = sequence::input_variable({3, 2}, f64());
      Value in = random_sequences({3, 2}, kLengths, kF64, 3, -2, 2);
      Function f = c.fn(x, axis, "");
      Value out = f.eval_one({{x, in}});
      EXPECT_EQ(out.sequence_lengths(), kLengths);
      auto in_seqs = in.as_sequences<double>();
      auto out_seqs = out.as_sequences<double>();
      for (size_t b = 0; b < kLengths.size(); ++b) {
        const bool last = axis == Axis(-1);
        expect_all_near(
            out_seqs[b],
            reference(in_seqs[b], kLengths[b] * (last ? 3 : 1), last ? 2 : 3, last ? 1 : 2, c.log),
            1e-14, "sequence " + std::to_string(b));
      }
      expect_sequences_match_individually(f, x, in);
    }
  }
}

TEST(Softmax, GradientsOnBatchSequencesAndParameters) {
  for (const Case& c : kCases) {
    for (Axis axis : {Axis(-1), Axis(0), Axis(1), Axis::all_static_axes()}) {
      SCOPED_TRACE(std::string(c.op_name) + " " + axis.to_string());
      Variable x = input_variable({2, 3, 2}, f64("x"));
      expect_gradients_match(c.fn(x, axis, ""), {{x, random_batch({2, 3, 2}, 2, kF64, 4, -2, 2)}},
                             {x});
      Variable s = sequence::input_variable({3, 2}, f64("s"));
      expect_gradients_match(c.fn(s, axis, ""),
                             {{s, random_sequences({3, 2}, kLengths, kF64, 5, -2, 2)}}, {s});
    }
    // A parameter has no dynamic axes: its softmax broadcasts over the rows of s.
    Variable s = sequence::input_variable({2, 3}, f64("s"));
    Parameter p = parameter(random_array({2, 3}, kF64, 6, -2, 2), "p");
    expect_gradients_match(element_times(c.fn(p, Axis(0), ""), s),
                           {{s, random_sequences({2, 3}, kLengths, kF64, 7)}}, {p, s});
  }
}

TEST(Softmax, GradientsAccumulateOverSeveralConsumers) {
  // x feeds a softmax along the last axis (kernel writes in place) and one along the first
  // (transposed through scratch): both backward paths must add to x's gradient.
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.op_name);
    Variable x = sequence::input_variable({3, 4}, f64("x"));
    ValueMap args{{x, random_sequences({3, 4}, kLengths, kF64, 8, -2, 2)}};
    expect_gradients_match(plus(c.fn(x, Axis(-1), ""), c.fn(x, Axis(0), "")), args, {x});
    expect_gradients_match(plus(c.fn(x, Axis(0), ""), c.fn(x, Axis(-1), "")), args, {x});
    Function y = c.fn(x, Axis(0), "");
    expect_gradients_match(element_times(y, y), args, {x});
  }
}

TEST(Softmax, Float32MatchesFloat64) {
  for (const Case& c : kCases) {
    for (Axis axis : {Axis(-1), Axis(0)}) {
      SCOPED_TRACE(std::string(c.op_name) + " " + axis.to_string());
      expect_float32_matches_float64([&](DataType dtype) {
        Variable x = sequence::input_variable({3, 4}, {.dtype = dtype});
        return OpCase{
            c.fn(x, axis, ""), {{x, random_sequences({3, 4}, kLengths, dtype, 9, -3, 3)}}, {x}};
      });
    }
  }
}

TEST(Softmax, SparseInputIsDensified) {
  Variable x = input_variable({3}, {.is_sparse = true});
  const std::vector<double> row = reference({1, 0, 0}, 1, 3, 1, false);
  expect_all_near(values(softmax(x).eval_one({{x, Value::one_hot(3, {0, 2})}})),
                  {row[0], row[1], row[2], row[1], row[2], row[0]}, 1e-6, "output");
}

}  // namespace
}  // namespace loom
