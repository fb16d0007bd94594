#include "loom/ops/linear.h"

#include <gtest/gtest.h>

#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

constexpr size_t kInf = NDShape::kInferred;

// Row-major [M, K] · [K, N].
std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, size_t M,
                           size_t K, size_t N) {
  std::vector<double> c(M * N, 0.0);
  for (size_t m = 0; m < M; ++m)
    for (size_t k = 0; k < K; ++k)
      for (size_t n = 0; n < N; ++n) c[m * N + n] += a[m * K + k] * b[k * N + n];
  return c;
}

// The same Value with its data densified (a sparse one-hot Value's dense twin).
Value densified(const Value& v) {
  return Value(v.data().to_dense(), v.is_sequence(), v.mask());
}

TEST(Times, OutputShapes) {
  Variable x = input_variable({3}, f64());
  Function f = times(x, parameter({3, 2}, glorot_uniform(), kF64), 1, -1, "y");
  EXPECT_EQ(f.op_name(), "Times");
  EXPECT_EQ(f.name(), "y");
  EXPECT_EQ(f.output().shape(), (NDShape{2}));
  EXPECT_EQ(f.output().dtype(), kF64);
  EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
  // Leading axes A of x stay; trailing axes K of x meet the leading axes of W.
  Variable x23 = input_variable({2, 3});
  EXPECT_EQ(Variable(times(x23, parameter({3, 4}))).shape(), (NDShape{2, 4}));
  EXPECT_EQ(Variable(times(x23, parameter({2, 3, 4}))).shape(), (NDShape{4}));
  // output_rank 2: the last two axes of W are output axes.
  EXPECT_EQ(Variable(times(x23, parameter({3, 4, 5}), 2)).shape(), (NDShape{2, 4, 5}));
  EXPECT_EQ(Variable(times(x23, parameter({2, 3, 4, 5}), 2)).shape(), (NDShape{4, 5}));
  Variable s = sequence::input_variable({3});
  EXPECT_EQ(Variable(times(s, parameter({3, 2}))).type_string(), "Sequence[Tensor[2]]");
  EXPECT_EQ(Variable(times(parameter({4, 3}), parameter({3, 2}))).type_string(), "Tensor[4,2]");
  Variable sparse = input_variable({5}, {.is_sparse = true});
  EXPECT_EQ(Variable(times(sparse, parameter({5, 2}))).type_string(), "Tensor[2]");
}

TEST(Times, InfersInputAxesOfAParameter) {
  Variable x = input_variable({2, 3, 5}, f64());
  // 0: W takes all of x's axes (a Dense layer's default).
  Parameter w0 = parameter({kInf, 4}, glorot_uniform(), kF64);
  EXPECT_EQ(Variable(times(x, w0, 1, 0)).shape(), (NDShape{4}));
  EXPECT_EQ(w0.shape(), (NDShape{2, 3, 5, 4}));
  EXPECT_EQ(w0.value().shape(), (NDShape{2, 3, 5, 4}));
  // -1: W keeps its input rank (one axis here) and takes x's last axes of that rank.
  Parameter w1 = parameter({kInf, 4}, glorot_uniform(), kF64);
  EXPECT_EQ(Variable(times(x, w1, 1, -1)).shape(), (NDShape{2, 3, 4}));
  EXPECT_EQ(w1.shape(), (NDShape{5, 4}));
  Parameter w2 = parameter({kInf, kInf, 4}, glorot_uniform(), kF64);
  EXPECT_EQ(Variable(times(x, w2, 1, -1)).shape(), (NDShape{2, 4}));
  EXPECT_EQ(w2.shape(), (NDShape{3, 5, 4}));
  // k > 0: the first k axes of x are kept (map rank), the rest go into W.
  Parameter w3 = parameter({kInf, 4}, glorot_uniform(), kF64);
  EXPECT_EQ(Variable(times(x, w3, 1, 1)).shape(), (NDShape{2, 4}));
  EXPECT_EQ(w3.shape(), (NDShape{3, 5, 4}));
  Parameter w4 = parameter({kInf, 4, 6}, glorot_uniform(), kF64);
  EXPECT_EQ(Variable(times(x, w4, 2, 2)).shape(), (NDShape{2, 3, 4, 6}));
  EXPECT_EQ(w4.shape(), (NDShape{5, 4, 6}));
  // A second call with the now known W checks instead of inferring.
  EXPECT_EQ(Variable(times(x, w3, 1, 1)).shape(), (NDShape{2, 4}));
  expect_shape_error(
      [&] {
        times(input_variable({2, 7}, f64()), w3, 1, 1);
      },
      {"Times", "[2,7]", "[3,5,4]"});
  // The inferred parameter computes like one given its shape.
  Value in = random_batch({2, 3, 5}, 2, kF64, 1);
  expect_all_near(values(times(x, w0, 1, 0).eval_one({{x, in}})),
                  matmul(values(in), w0.value().to_vector<double>(), 2, 30, 4), 1e-14, "output");
}

TEST(Times, ShapeErrorsNameTheShapes) {
  Variable x = input_variable({3}, f64("x"));
  expect_shape_error(
      [&] {
        times(x, parameter({4, 2}, glorot_uniform(), kF64));
      },
      {"Times", "[3]", "[4,2]"});
  expect_shape_error(
      [&] {
        times(input_variable({2, 3}, f64()), parameter({2, 4}, glorot_uniform(), kF64));
      },
      {"Times", "[2,3]", "[2,4]"});
  // W needs input axes besides its output axes.
  expect_shape_error(
      [&] {
        times(x, parameter({3, 2}, glorot_uniform(), kF64), 2);
      },
      {"Times", "[3,2]"});
  // W must be static.
  expect_shape_error([&] { times(x, input_variable({3, 2}, f64("w"))); }, {"Times", "[3,2]"});
  expect_shape_error([&] { times(x, parameter({3, 2})); }, {"Times", "float64", "float32"});
  // Inference needs enough axes in x, and only parameters have inferred axes.
  expect_shape_error(
      [&] {
        times(x, parameter({kInf, 2}, glorot_uniform(), kF64), 1, 1);
      },
      {"Times", "[3]"});
  expect_shape_error(
      [&] {
        times(x, parameter({kInf, kInf, 2}, glorot_uniform(), kF64), 1, -1);
      },
      {"Times", "[3]"});
}

TEST(Times, DtypeMismatchLeavesAnInferredParameterUnresolved) {
  Parameter w = parameter({kInf, 2}, glorot_uniform(), kF32);
  EXPECT_THROW(times(input_variable({3}, f64()), w, 1, 0), ShapeError);
  EXPECT_TRUE(w.shape().has_inferred());
  EXPECT_EQ(Variable(times(input_variable({4}), w, 1, 0)).shape(), (NDShape{2}));
  EXPECT_EQ(w.shape(), (NDShape{4, 2}));
}

TEST(Times, ForwardByHand) {
  Variable x = input_variable({3}, f64());
  Parameter W = parameter(NDArrayView::from_vector<double>({3, 2}, {1, 0, 0, 1, 1, 1}));
  Value out = times(x, W).eval_one({{x, Value::create_batch<double>({3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(out.data().shape(), (NDShape{2, 2}));
  EXPECT_EQ(values(out), (std::vector<double>{4, 5, 10, 11}));
  // output_rank 2 with a leading axis A: x [2, 2] · W [2, 2, 2] per sample.
  Variable x2 = input_variable({2, 2}, f64());
  Parameter W2 = parameter(NDArrayView::from_vector<double>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  Value out2 =
      times(x2, W2, 2).eval_one({{x2, Value::create_batch<double>({2, 2}, {1, 0, 1, -1})}});
  EXPECT_EQ(out2.data().shape(), (NDShape{1, 2, 2, 2}));
  // Row [1, 0] picks W's first 2x2 block; row [1, -1] subtracts the second from the first.
  EXPECT_EQ(values(out2), (std::vector<double>{1, 2, 3, 4, -4, -4, -4, -4}));
}

TEST(Times, ForwardMatchesReferenceOnBatchAndSequences) {
  for (DataType dtype : {kF64, kF32}) {
    const double tol = dtype == kF64 ? 1e-14 : 1e-6;
    Parameter W = parameter(random_array({3, 4, 5}, dtype, 2), "W");
    Variable x = input_variable({2, 3, 4}, {.dtype = dtype});
    Value in = random_batch({2, 3, 4}, 3, dtype, 3);
    expect_all_near(values(times(x, W, 1).eval_one({{x, in}})),
                    matmul(values(in), W.value().to_vector<double>(), 6, 12, 5), tol, "batch");
    Variable s = sequence::input_variable({3}, {.dtype = dtype});
    Value seqs = random_sequences({3}, kLengths, dtype, 4);
    Function f = times(s, W, 2);
    Value out = f.eval_one({{s, seqs}});
    EXPECT_EQ(out.sequence_lengths(), kLengths);
    auto in_seqs = seqs.as_sequences<double>();
    auto out_seqs = out.as_sequences<double>();
    for (size_t b = 0; b < kLengths.size(); ++b)
      expect_all_near(out_seqs[b],
                      matmul(in_seqs[b], W.value().to_vector<double>(), kLengths[b], 3, 20), tol,
                      "sequence " + std::to_string(b));
    if (dtype == kF64) expect_sequences_match_individually(f, s, seqs);
  }
}

TEST(Times, GradientsWrtInputAndWeights) {
  Variable x = input_variable({2, 3}, f64("x"));
  Parameter W = parameter(random_array({3, 4}, kF64, 5), "W");
  expect_gradients_match(times(x, W), {{x, random_batch({2, 3}, 3, kF64, 6)}}, {x, W});
  Parameter W2 = parameter(random_array({2, 3, 2, 2}, kF64, 7), "W2");
  expect_gradients_match(times(x, W2, 2), {{x, random_batch({2, 3}, 2, kF64, 8)}}, {x, W2});
  Variable s = sequence::input_variable({3}, f64("s"));
  expect_gradients_match(times(s, W), {{s, random_sequences({3}, kLengths, kF64, 9)}}, {s, W});
  // Both operands parameters (no dynamic axes), and W used twice (gradients accumulate).
  Parameter P = parameter(random_array({2, 3}, kF64, 10), "P");
  expect_gradients_match(times(P, W), {}, {P, W});
  expect_gradients_match(plus(times(s, W), times(s, W)),
                         {{s, random_sequences({3}, kLengths, kF64, 11)}}, {s, W});
}

TEST(Times, SparseInputMatchesDensifiedInput) {
  for (DataType dtype : {kF64, kF32}) {
    SCOPED_TRACE(to_string(dtype));
    const double tol = dtype == kF64 ? 1e-14 : 1e-6;
    Parameter W = parameter(random_array({5, 3}, dtype, 12), "W");
    const Value batch = Value::one_hot(5, {4, 0, 2, 4}, dtype);
    const Value seqs = Value::one_hot_sequences(5, {{1, 3, 1}, {0}, {4, 2}}, dtype);
    ASSERT_TRUE(batch.is_sparse());
    for (const Value* v : {&batch, &seqs}) {
      const bool is_seq = v->is_sequence();
      InputOptions sparse{.dtype = dtype, .is_sparse = true};
      InputOptions dense{.dtype = dtype};
      Variable xs = is_seq ? sequence::input_variable({5}, sparse) : input_variable({5}, sparse);
      Variable xd = is_seq ? sequence::input_variable({5}, dense) : input_variable({5}, dense);
      // Weighted, so the W gradient depends on which rows each sample touches.
      const Function fs = weighted_output(times(xs, W)), fd = weighted_output(times(xd, W));
      expect_all_near(values(fs.eval_one({{xs, *v}})), values(fd.eval_one({{xd, densified(*v)}})),
                      tol, "forward");
      expect_all_near(values(fs.grad({{xs, *v}}, {W}).at(W)),
                      values(fd.grad({{xd, densified(*v)}}, {W}).at(W)), tol, "W gradient");
      // Used twice, the sparse W gradient accumulates.
      const Function twice = plus(times(xs, W), fs);
      expect_all_near(values(twice.grad({{xs, *v}}, {W}).at(W)),
                      values(plus(times(xd, W), fd).grad({{xd, densified(*v)}}, {W}).at(W)), tol,
                      "accumulated W gradient");
    }
  }
}

TEST(Times, SparseInputHasNoGradient) {
  Variable xs = input_variable({5}, {.is_sparse = true, .needs_gradient = true});
  Function f = times(xs, parameter({5, 2}));
  EXPECT_THROW(f.grad({{xs, Value::one_hot(5, {1})}}, {xs}), ArgumentError);
}

TEST(Times, Float32MatchesFloat64) {
  expect_float32_matches_float64([](DataType dtype) {
    Variable s = sequence::input_variable({2, 3}, {.dtype = dtype});
    Parameter W = parameter(random_array({3, 4}, dtype, 13), "W");
    return OpCase{times(s, W), {{s, random_sequences({2, 3}, kLengths, dtype, 14)}}, {s, W}};
  });
}

}  // namespace
}  // namespace loom
