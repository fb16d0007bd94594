#include "loom/ops/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"
#include "loom/ops/reduction.h"

namespace loom {
namespace {

struct UnaryCase {
  const char* op_name;
  Function (*fn)(const Variable&, const std::string&);
  double (*reference)(double);
  double low, high;  // where the test data lie (inside the op's domain)
  std::vector<double> literal_in, literal_out;
};

const UnaryCase kUnary[] = {
    {"Negate", loom::negate, [](double x) { return -x; }, -2, 2, {2, -0.5}, {-2, 0.5}},
    {"Tanh",
     loom::tanh,
     [](double x) { return std::tanh(x); },
     -2,
     2,
     {0, 1},
     {0, 0.7615941559557649}},
    {"Sigmoid",
     loom::sigmoid,
     [](double x) { return 1 / (1 + std::exp(-x)); },
     -3,
     3,
     {0, 2},
     {0.5, 0.8807970779778823}},
    {"ReLU", loom::relu, [](double x) { return x > 0 ? x : 0; }, -2, 2, {-1, 0, 2}, {0, 0, 2}},
    {"Exp", loom::exp, [](double x) { return std::exp(x); }, -2, 2, {0, 1}, {1, 2.718281828459045}},
    {"Log",
     loom::log,
     [](double x) { return std::log(x); },
     0.2,
     3,
     {1, 2.718281828459045},
     {0, 1}},
    {"Sqrt", loom::sqrt, [](double x) { return std::sqrt(x); }, 0.2, 3, {4, 0.25}, {2, 0.5}},
    {"Square", loom::square, [](double x) { return x * x; }, -2, 2, {-3, 0.5}, {9, 0.25}},
    {"Abs", loom::abs, [](double x) { return std::abs(x); }, -2, 2, {-3, 0, 2}, {3, 0, 2}},
};

TEST(UnaryOps, ShapeInference) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.op_name);
    Variable x = input_variable({2, 3}, f64());
    Function f = c.fn(x, "out");
    EXPECT_EQ(f.op_name(), c.op_name);
    EXPECT_EQ(f.name(), "out");
    EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
    EXPECT_EQ(f.output().dtype(), kF64);
    EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
    Variable s = sequence::input_variable({4});
    EXPECT_EQ(Variable(c.fn(s, "")).type_string(), "Sequence[Tensor[4]]");
    EXPECT_EQ(Variable(c.fn(s, "")).dtype(), kF32);
    Variable p = parameter({5}, glorot_uniform(), kF64);
    EXPECT_TRUE(Variable(c.fn(p, "")).dynamic_axes().empty());
  }
}

TEST(UnaryOps, LiteralValues) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.op_name);
    const size_t n = c.literal_in.size();
    Variable x = input_variable({n}, f64());
    Value out = c.fn(x, "").eval_one({{x, Value::create_batch<double>({n}, c.literal_in)}});
    gradient_check_detail::expect_all_near(values(out), c.literal_out, 1e-15, "output");
  }
}

TEST(UnaryOps, ForwardOnBatchMatchesReference) {
  for (DataType dtype : {kF64, kF32}) {
    for (const UnaryCase& c : kUnary) {
      SCOPED_TRACE(c.op_name);
      Variable x = input_variable({2, 3}, {.dtype = dtype});
      Value in = random_batch({2, 3}, 4, dtype, 1, c.low, c.high);
      Value out = c.fn(x, "").eval_one({{x, in}});
      EXPECT_EQ(out.data().shape(), (NDShape{4, 2, 3}));
      std::vector<double> expected;
      for (double v : values(in)) expected.push_back(c.reference(v));
      gradient_check_detail::expect_all_near(values(out), expected, dtype == kF64 ? 1e-14 : 1e-6,
                                             "output");
    }
  }
}

TEST(UnaryOps, ForwardOnSequencesMatchesPerSequenceEvaluation) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.op_name);
    Variable x = sequence::input_variable({2}, f64());
    Value in = random_sequences({2}, kLengths, kF64, 2, c.low, c.high);
    Function f = c.fn(x, "");
    Value out = f.eval_one({{x, in}});
    EXPECT_EQ(out.sequence_lengths(), kLengths);
    auto in_seqs = in.as_sequences<double>();
    auto out_seqs = out.as_sequences<double>();
    for (size_t b = 0; b < kLengths.size(); ++b) {
      std::vector<double> expected;
      for (double v : in_seqs[b]) expected.push_back(c.reference(v));
      gradient_check_detail::expect_all_near(out_seqs[b], expected, 1e-14, "sequence output");
    }
    expect_sequences_match_individually(f, x, in);
  }
}

TEST(UnaryOps, GradientsOnBatchSequencesAndParameters) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.op_name);
    Variable x = input_variable({2, 3}, f64("x"));
    expect_gradients_match(c.fn(x, ""), {{x, random_batch({2, 3}, 3, kF64, 3, c.low, c.high)}},
                           {x});
    Variable s = sequence::input_variable({3}, f64("s"));
    expect_gradients_match(c.fn(s, ""),
                           {{s, random_sequences({3}, kLengths, kF64, 4, c.low, c.high)}}, {s});
    // A parameter has no dynamic axes; times a batch it broadcasts over the rows, and its
    // gradient is the sum over them.
    Parameter p = parameter(random_array({3}, kF64, 5, c.low, c.high), "p");
    expect_gradients_match(element_times(c.fn(p, ""), s),
                           {{s, random_sequences({3}, kLengths, kF64, 6)}}, {p, s});
  }
}

TEST(UnaryOps, OutputUsedTwiceAccumulatesGradients) {
  for (const UnaryCase& c : kUnary) {
    SCOPED_TRACE(c.op_name);
    Variable x = sequence::input_variable({2}, f64("x"));
    Function y = c.fn(x, "");
    ValueMap args{{x, random_sequences({2}, kLengths, kF64, 7, c.low, c.high)}};
    expect_gradients_match(element_times(y, y), args, {x});
    expect_gradients_match(plus(c.fn(x, ""), x), args, {x});
  }
}

TEST(UnaryOps, SparseInputIsDensified) {
  Variable x = input_variable({4}, {.is_sparse = true});
  Function f = loom::tanh(x);
  auto out = f.eval_one({{x, Value::one_hot(4, {1, 3})}}).data().to_vector<float>();
  float t = std::tanh(1.f);
  EXPECT_EQ(out, (std::vector<float>{0, t, 0, 0, 0, 0, 0, t}));
}

// ---- binary ops --------------------------------------------------------------------------------

struct BinaryCase {
  const char* op_name;
  Function (*fn)(const Variable&, const Variable&, const std::string&);
  double (*reference)(double, double);
  double low, high;
  std::vector<double> literal_out;  // for a = {1, -2, 3}, b = {2, 2, -1}
};

const BinaryCase kBinary[] = {
    {"Plus", loom::plus, [](double a, double b) { return a + b; }, -2, 2, {3, 0, 2}},
    {"Minus", loom::minus, [](double a, double b) { return a - b; }, -2, 2, {-1, -4, 4}},
    {"ElementTimes",
     loom::element_times,
     [](double a, double b) { return a * b; },
     -2,
     2,
     {2, -4, -3}},
    {"ElementDivide",
     loom::element_divide,
     [](double a, double b) { return a / b; },
     0.5,
     2,
     {0.5, -1, -3}},
    {"ElementMax",
     loom::element_max,
     [](double a, double b) { return std::max(a, b); },
     -2,
     2,
     {2, 2, 3}},
    {"ElementMin",
     loom::element_min,
     [](double a, double b) { return std::min(a, b); },
     -2,
     2,
     {1, -2, -1}},
};

// numpy broadcasting of a (row-major, shape as) against b, for reference results.
std::vector<double> broadcast_reference(const BinaryCase& c, const NDShape& as,
                                        const std::vector<double>& a, const NDShape& bs,
                                        const std::vector<double>& b, const NDShape& out) {
  auto index = [&](const NDShape& s, const std::vector<size_t>& idx) {
    size_t i = 0;
    for (size_t k = 0; k < s.rank(); ++k) {
      size_t d = s[k], j = idx[out.rank() - s.rank() + k];
      i = i * d + (d == 1 ? 0 : j);
    }
    return i;
  };
  std::vector<double> y(out.total_size());
  std::vector<size_t> idx(out.rank());
  for (size_t o = 0; o < y.size(); ++o) {
    for (size_t k = out.rank(), r = o; k-- > 0; r /= out[k]) idx[k] = r % out[k];
    y[o] = c.reference(a[index(as, idx)], b[index(bs, idx)]);
  }
  return y;
}

TEST(BinaryOps, ShapeInferenceBroadcasts) {
  struct Shapes {
    NDShape a, b, out;
  };
  const Shapes cases[] = {{{2, 3}, {3}, {2, 3}},          {{2, 1}, {1, 3}, {2, 3}},
                          {{3}, {2, 3}, {2, 3}},          {{}, {2}, {2}},
                          {{4, 1, 3}, {2, 1}, {4, 2, 3}}, {{2, 3}, {2, 3}, {2, 3}}};
  for (const BinaryCase& c : kBinary) {
    SCOPED_TRACE(c.op_name);
    for (const Shapes& s : cases) {
      Variable a = input_variable(s.a, f64()), b = input_variable(s.b, f64());
      Function f = c.fn(a, b, "y");
      EXPECT_EQ(f.op_name(), c.op_name);
      EXPECT_EQ(f.output().shape(), s.out) << s.a.to_string() << " and " << s.b.to_string();
      EXPECT_EQ(f.output().dtype(), kF64);
    }
    // Dynamic axes: those of the inputs that have any.
    Variable x = input_variable({3}), s = sequence::input_variable({3});
    Parameter p = parameter({3});
    EXPECT_EQ(Variable(c.fn(x, p, "")).dynamic_axes(), default_batch_axes());
    EXPECT_EQ(Variable(c.fn(p, s, "")).dynamic_axes(), default_sequence_axes());
    EXPECT_TRUE(Variable(c.fn(p, p, "")).dynamic_axes().empty());
  }
}

TEST(BinaryOps, MismatchesAreShapeErrorsNamingOpAndShapes) {
  for (const BinaryCase& c : kBinary) {
    SCOPED_TRACE(c.op_name);
    expect_shape_error(
        [&] {
          c.fn(input_variable({2, 3}), input_variable({4}), "");
        },
        {c.op_name, "[2,3]", "[4]"});
    expect_shape_error([&] { c.fn(input_variable({2}), input_variable({2}, f64()), ""); },
                       {c.op_name, "Tensor[2]", "data types"});
    expect_shape_error([&] { c.fn(input_variable({2}), sequence::input_variable({2}), ""); },
                       {c.op_name, "Sequence[Tensor[2]]", "dynamic axes"});
  }
}

TEST(BinaryOps, LiteralValues) {
  for (const BinaryCase& c : kBinary) {
    SCOPED_TRACE(c.op_name);
    Variable a = input_variable({3}, f64()), b = input_variable({3}, f64());
    Value out = c.fn(a, b, "").eval_one({{a, Value::create_batch<double>({3}, {1, -2, 3})},
                                         {b, Value::create_batch<double>({3}, {2, 2, -1})}});
    gradient_check_detail::expect_all_near(values(out), c.literal_out, 1e-15, "output");
  }
}

TEST(BinaryOps, ForwardBroadcastsSamplesAndParameters) {
  for (DataType dtype : {kF64, kF32}) {
    for (const BinaryCase& c : kBinary) {
      SCOPED_TRACE(c.op_name);
      const double tol = dtype == kF64 ? 1e-14 : 1e-6;
      // A batch [2,3] with a parameter [3] broadcast over the samples and over axis 0.
      Variable x = input_variable({2, 3}, {.dtype = dtype});
      Parameter p = parameter(random_array({3}, dtype, 11, c.low, c.high));
      Value xv = random_batch({2, 3}, 4, dtype, 12, c.low, c.high);
      Value out = c.fn(x, p, "").eval_one({{x, xv}});
      EXPECT_EQ(out.data().shape(), (NDShape{4, 2, 3}));
      gradient_check_detail::expect_all_near(
          values(out),
          broadcast_reference(c, {4, 2, 3}, values(xv), {3}, p.value().to_vector<double>(),
                              {4, 2, 3}),
          tol, "batch op parameter");
      // Two sequence inputs [2,1] and [1,3] broadcast against each other per sample.
      Variable a = sequence::input_variable({2, 1}, {.dtype = dtype});
      Variable b = sequence::input_variable({1, 3}, {.dtype = dtype});
      Value av = random_sequences({2, 1}, kLengths, dtype, 13, c.low, c.high);
      Value bv = random_sequences({1, 3}, kLengths, dtype, 14, c.low, c.high);
      Value sout = c.fn(a, b, "").eval_one({{a, av}, {b, bv}});
      EXPECT_EQ(sout.sequence_lengths(), kLengths);
      auto as = av.as_sequences<double>(), bs = bv.as_sequences<double>();
      auto os = sout.as_sequences<double>();
      for (size_t s = 0; s < kLengths.size(); ++s) {
        const size_t L = kLengths[s];
        gradient_check_detail::expect_all_near(
            os[s], broadcast_reference(c, {L, 2, 1}, as[s], {L, 1, 3}, bs[s], {L, 2, 3}), tol,
            "sequence " + std::to_string(s));
      }
    }
  }
}

TEST(BinaryOps, Gradients) {
  for (const BinaryCase& c : kBinary) {
    SCOPED_TRACE(c.op_name);
    // Batch with a parameter broadcast over rows and an axis: its gradient sums over both.
    Variable x = input_variable({2, 3}, f64("x"));
    Parameter p = parameter(random_array({3}, kF64, 21, c.low, c.high), "p");
    ValueMap xargs{{x, random_batch({2, 3}, 3, kF64, 22, c.low, c.high)}};
    expect_gradients_match(c.fn(x, p, ""), xargs, {x, p});
    expect_gradients_match(c.fn(p, x, ""), xargs, {x, p});
    // Two sequence inputs broadcasting against each other.
    Variable a = sequence::input_variable({2, 1}, f64("a"));
    Variable b = sequence::input_variable({1, 3}, f64("b"));
    expect_gradients_match(c.fn(a, b, ""),
                           {{a, random_sequences({2, 1}, kLengths, kF64, 23, c.low, c.high)},
                            {b, random_sequences({1, 3}, kLengths, kF64, 24, c.low, c.high)}},
                           {a, b});
    // Static operands only: no dynamic axes anywhere.
    Parameter q = parameter(random_array({2, 1}, kF64, 25, c.low, c.high), "q");
    expect_gradients_match(c.fn(q, p, ""), {}, {q, p});
  }
}

TEST(BinaryOps, InputUsedTwiceAccumulatesGradients) {
  for (const BinaryCase& c : kBinary) {
    SCOPED_TRACE(c.op_name);
    Variable x = sequence::input_variable({3}, f64("x"));
    Parameter p = parameter(random_array({3}, kF64, 31, c.low, c.high), "p");
    // op(x, x) ties everywhere for max and min, where the derivative is one-sided; they use x
    // twice through op(op(x, p), p) only.
    ValueMap args{{x, random_sequences({3}, kLengths, kF64, 32, c.low, c.high)}};
    if (std::string(c.op_name) != "ElementMax" && std::string(c.op_name) != "ElementMin")
      expect_gradients_match(c.fn(x, x, ""), args, {x});
    expect_gradients_match(c.fn(c.fn(x, p, ""), p, ""), args, {x, p});
  }
}

TEST(Operators, MapToTheElementwiseOps) {
  Variable a = input_variable({2}, f64()), b = input_variable({2}, f64());
  EXPECT_EQ((a + b).op_name(), "Plus");
  EXPECT_EQ((a - b).op_name(), "Minus");
  EXPECT_EQ((a * b).op_name(), "ElementTimes");
  EXPECT_EQ((a / b).op_name(), "ElementDivide");
  EXPECT_EQ((-a).op_name(), "Negate");
  Function f = (a + b) * a - b / (-a);
  ValueMap args{{a, Value::create_batch<double>({2}, {1, 2})},
                {b, Value::create_batch<double>({2}, {3, -4})}};
  // (1+3)*1 - 3/(-1) = 7; (2-4)*2 - (-4)/(-2) = -6
  gradient_check_detail::expect_all_near(values(f.eval_one(args)), {7, -6}, 1e-15, "output");
  expect_gradients_match(f, args, {a, b});
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// f applied to a batch of one sample holding `in`, in float32 (CNTK's default type).
std::vector<double> apply_f32(const std::function<Function(const Variable&)>& f,
                              const std::vector<float>& in) {
  Variable x = input_variable({in.size()});
  return values(f(x).eval_one({{x, Value::create_batch<float>({in.size()}, in)}}));
}

TEST(CntkArithmetic, ClampsAndRoundingAsCntk) {
  EXPECT_EQ(apply_f32([](const Variable& x) { return log(x); }, {0, -1, 1e-38f, 1}),
            (std::vector<double>{-85.1f, -85.1f, -85.1f, 0}));
  EXPECT_EQ(apply_f32([](const Variable& x) { return sqrt(x); }, {-1, 0, 4}),
            (std::vector<double>{0, 0, 2}));
  EXPECT_EQ(apply_f32([](const Variable& x) { return reciprocal(x); }, {0, 2, -4}),
            (std::vector<double>{0, 0.5, -0.25}));
  EXPECT_EQ(apply_f32([](const Variable& x) { return round(x); }, {-2.5f, -1.5f, 0.5f, 2.5f, 0.4f}),
            (std::vector<double>{-2, -1, 1, 3, 0}));
  EXPECT_EQ(apply_f32([](const Variable& x) { return ceil(x); }, {-2.5f, 0.5f, 2}),
            (std::vector<double>{-2, 1, 2}));
  EXPECT_EQ(apply_f32([](const Variable& x) { return element_not(x); }, {-1, 0, 2}),
            (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(apply_f32([](const Variable& x) { return straight_through(x); }, {-0.5f, 0, 3}),
            (std::vector<double>{-1, -1, 1}));
  // CNTK's documented softplus values, at steepness 1 and 4.
  expect_all_near(apply_f32([](const Variable& x) { return softplus(x); }, {-1, -0.5f, 0, 1, 2}),
                  {0.313262, 0.474077, 0.693147, 1.313262, 2.126928}, 1e-6, "softplus");
  expect_all_near(apply_f32([](const Variable& x) { return softplus(x, {.steepness = 4}); },
                            {-1, -0.5f, 0, 1, 2}),
                  {0.004537, 0.031732, 0.173287, 1.004537, 2.000084}, 1e-6, "softplus steepness 4");
  EXPECT_THROW(softplus(input_variable({2}), {.steepness = 0}), ArgumentError);
}

TEST(CntkArithmetic, SafePower) {
  auto pow_of = [](float base, float exponent) {
    Variable b = input_variable({1});
    return values(
        pow(b, constant(exponent)).eval_one({{b, Value::create_batch<float>({1}, {base})}}))[0];
  };
  EXPECT_EQ(pow_of(-2, 3), -8);
  EXPECT_EQ(pow_of(-2, 2), 4);
  EXPECT_EQ(pow_of(0, 0), 1);
  EXPECT_EQ(pow_of(0, -1), 0);
  EXPECT_EQ(pow_of(4, 0.5f), 2);
  EXPECT_TRUE(std::isnan(pow_of(-2, 0.5f)));
}

TEST(CntkArithmetic, ComparisonsLogicSelectAndClip) {
  Variable a = input_variable({4}), b = input_variable({4});
  const ValueMap args{{a, Value::create_batch<float>({4}, {1, 2, 3, -1})},
                      {b, Value::create_batch<float>({4}, {1, 3, 2, 0})}};
  auto eval = [&](const Function& f) { return values(f.eval_one(args)); };
  EXPECT_EQ(eval(equal(a, b)), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(eval(less(a, b)), (std::vector<double>{0, 1, 0, 1}));
  EXPECT_EQ(eval(greater_equal(a, b)), (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(eval(element_and(a, b)), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(eval(element_or(a, b)), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(eval(element_xor(a, b)), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(eval(element_select(less(a, b), a, b)), (std::vector<double>{1, 2, 2, -1}));
  EXPECT_EQ(eval(clip(a, constant(0.0), constant(2.5))), (std::vector<double>{1, 2, 2.5, 0}));
}

// stop_gradient passes no gradient, straight_through passes it where |x| <= 1: gradients that
// are by design not the forward's derivative (the conformance harness skips their finite
// differences).
TEST(CntkArithmetic, GradientsByDesign) {
  Variable x = input_variable({4}, {.needs_gradient = true});
  const ValueMap args{{x, Value::create_batch<float>({4}, {-2, -0.5f, 0.5f, 1.5f})}};
  EXPECT_EQ(values(reduce_sum(straight_through(x)).grad(args, {x}).at(x)),
            (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(values((stop_gradient(x) * x).grad(args, {x}).at(x)),
            (std::vector<double>{-2, -0.5f, 0.5f, 1.5f}));
}

}  // namespace
}  // namespace loom
