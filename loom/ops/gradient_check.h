// Test helpers for ops (included by tests only; needs GoogleTest): random Values, the
// finite-difference gradient check, and comparisons of float32 against float64 and of a packed
// minibatch against its sequences evaluated one at a time.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "loom/graph/function.h"
#include "loom/graph/random_state.h"
#include "loom/ops/elementwise.h"

namespace loom {

namespace gradient_check_detail {

// Uniform in [low, high]; when the range straddles 0, values within 0.05 of 0 are drawn again,
// so finite differences stay clear of the kinks of relu and abs.
inline std::vector<double> random_numbers(size_t n, uint64_t seed, double low, double high) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(low, high);
  const bool avoid_zero = low < -0.05 && high > 0.05;
  std::vector<double> v(n);
  for (double& x : v) {
    do x = u(gen);
    while (avoid_zero && std::abs(x) < 0.05);
  }
  return v;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

inline std::string label(const Variable& v) {
  return "'" + v.name() + "' (" + v.uid() + ", " + v.type_string() + ")";
}

// Elementwise comparison relative to max(1, |expected|).
inline void expect_all_near(const std::vector<double>& actual, const std::vector<double>& expected,
                            double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance * std::max(1.0, std::abs(expected[i])))
        << what << " at element " << i;
}

}  // namespace gradient_check_detail

// A tensor of the given shape with values uniform in [low, high] (never within 0.05 of 0 when
// the range contains 0). The same seed gives the same values in either data type.
inline NDArrayView random_array(const NDShape& shape, DataType dtype, uint64_t seed,
                                double low = -1, double high = 1) {
  auto v = gradient_check_detail::random_numbers(shape.total_size(), seed, low, high);
  return dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    return NDArrayView::from_vector<T>(shape, gradient_check_detail::cast<T>(v));
  });
}

// A batch of n random samples.
inline Value random_batch(const NDShape& sample, size_t n, DataType dtype, uint64_t seed,
                          double low = -1, double high = 1) {
  return Value(random_array(sample.prepend(n), dtype, seed, low, high), false);
}

// Random sequences of the given lengths (padded to the longest, with a mask).
inline Value random_sequences(const NDShape& sample, const std::vector<size_t>& lengths,
                              DataType dtype, uint64_t seed, double low = -1, double high = 1) {
  size_t total = 0;
  for (size_t len : lengths) total += len;
  const size_t n = sample.total_size();
  auto v = gradient_check_detail::random_numbers(total * n, seed, low, high);
  return dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<std::vector<T>> seqs;
    auto it = v.begin();
    for (size_t len : lengths) {
      seqs.emplace_back(it, it + std::ptrdiff_t(len * n));
      it += std::ptrdiff_t(len * n);
    }
    return Value::create_sequences<T>(sample, seqs);
  });
}

// f's output times a fixed random weight per element of its sample shape (in [0.5, 1.5]), so
// the gradient of the sum tells every output element apart. An output whose shape has a free
// dimension (each minibatch sizes it) has no fixed shape to weight: it gives y * y + y, whose
// gradient 2y + 1 differs between elements too.
inline Function weighted_output(const Function& f, uint64_t seed = 7) {
  const Variable out = f.output();
  if (out.shape().has_free()) return plus(element_times(f, f), f);
  return element_times(f, constant(random_array(out.shape(), out.dtype(), seed, 0.5, 1.5)));
}

// Checks Function::grad of weighted_output(f) (the gradient of the sum over all elements and
// samples) against central finite differences of the same sum computed by eval, perturbing
// every element of every wrt input Value and parameter value by 1e-6 relative. Meant for
// float64 graphs; wrt inputs must be dense. A graph with random ops (dropout) is evaluated in
// training passes that all start from the same random state, so that they draw the same: the
// gradient is checked with the draws held.
inline void expect_gradients_match(const Function& f, const ValueMap& arguments,
                                   const std::vector<Variable>& wrt, double tolerance = 1e-6) {
  const Function g = weighted_output(f);
  const Variable out = g.output();
  const Dictionary draws = random_state(g);
  const bool random = draws.size() > 0;
  if (random) restore_random_state(g, draws);
  const ValueMap analytic = g.grad(arguments, wrt);
  ValueMap args;  // copies, so perturbing them leaves the caller's Values alone
  for (const auto& [v, value] : arguments)
    args.emplace(v, Value(value.data().deep_clone(), value.is_sequence(), value.mask()));
  auto objective = [&] {
    if (random) restore_random_state(g, draws);
    const Value value =
        random ? g.forward(args, {out}).second.at(out) : g.eval(args, {out}).at(out);
    const auto all = value.data().to_vector<double>();
    double s = 0;
    for (double x : all) s += x;  // padding is zero in eval's result
    return s;
  };
  for (const Variable& w : wrt) {
    ASSERT_TRUE(analytic.count(w)) << gradient_check_detail::label(w);
    const Value& grad_value = analytic.at(w);
    const std::vector<double> grad = grad_value.data().to_vector<double>();
    NDArrayView data = w.is_parameter() ? w.value() : args.at(w).data();
    ASSERT_FALSE(data.is_sparse())
        << "gradient check of sparse " << gradient_check_detail::label(w);
    // An input's Value may be padded further than the gradient Value eval gives back.
    const bool seq = !w.is_parameter() && args.at(w).is_sequence();
    const size_t sample = w.shape().total_size();
    const size_t steps = seq ? data.shape()[1] : 1,
                 grad_steps = seq ? grad_value.data().shape()[1] : 1;
    dispatch(data.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = data.data<T>();
      for (size_t i = 0; i < data.size(); ++i) {
        const size_t b = i / (steps * sample), t = i / sample % steps, k = i % sample;
        const double a = t < grad_steps ? grad[(b * grad_steps + t) * sample + k] : 0.0;
        const T original = p[i];
        const T up = T(original + 1e-6 * std::max(1.0, std::abs(double(original))));
        const T down = T(2 * original - up);
        p[i] = up;
        const double f_up = objective();
        p[i] = down;
        const double f_down = objective();
        p[i] = original;
        const double numeric = (f_up - f_down) / (double(up) - double(down));
        EXPECT_NEAR(a, numeric, tolerance * std::max(1.0, std::abs(numeric)))
            << "gradient of " << gradient_check_detail::label(w) << " at element " << i
            << ": analytic " << a << ", numeric " << numeric;
      }
    });
  }
}

// A graph built in one data type with its arguments and the variables to differentiate.
struct OpCase {
  Function f;
  ValueMap arguments;
  std::vector<Variable> wrt;
};

// Builds the case in float32 and float64 (make should use the same seeds for both) and
// checks that the float32 outputs and gradients (of weighted_output) match the float64 ones.
inline void expect_float32_matches_float64(const std::function<OpCase(DataType)>& make,
                                           double tolerance = 1e-5) {
  const OpCase c32 = make(DataType::Float32), c64 = make(DataType::Float64);
  ASSERT_EQ(c32.f.output().dtype(), DataType::Float32);
  ASSERT_EQ(c64.f.output().dtype(), DataType::Float64);
  gradient_check_detail::expect_all_near(c32.f.eval_one(c32.arguments).data().to_vector<double>(),
                                         c64.f.eval_one(c64.arguments).data().to_vector<double>(),
                                         tolerance, "float32 output");
  ASSERT_EQ(c32.wrt.size(), c64.wrt.size());
  const ValueMap g32 = weighted_output(c32.f).grad(c32.arguments, c32.wrt);
  const ValueMap g64 = weighted_output(c64.f).grad(c64.arguments, c64.wrt);
  for (size_t i = 0; i < c32.wrt.size(); ++i)
    gradient_check_detail::expect_all_near(
        g32.at(c32.wrt[i]).data().to_vector<double>(),
        g64.at(c64.wrt[i]).data().to_vector<double>(), tolerance,
        "float32 gradient of " + gradient_check_detail::label(c32.wrt[i]));
}

// Evaluates f on a minibatch of sequences and on each sequence alone, and checks that outputs
// and gradients with respect to wrt agree: the packing of the minibatch must not show in the
// results. The arguments are sequences, or one sample per sequence (an input without the
// sequence axis), dense or sparse; alone, sequence b takes sequence or sample b of each (sparse
// stays sparse). An output whose first axis is free (sequence::unpack's, the minibatch's longest
// sequence) is longer in the minibatch than alone by `padding` values. An output without dynamic
// axes is taken as the sum over the sequences (CNTK's one number of a minibatch criterion:
// forward_backward's): it must be the sum of the outputs alone.
inline void expect_sequences_match_individually(const Function& f, const ValueMap& arguments,
                                                const std::vector<Variable>& wrt,
                                                double tolerance = 1e-12, double padding = 0) {
  const Function g = weighted_output(f);
  auto output_and_gradients = [&](const ValueMap& args) {
    std::vector<std::vector<std::vector<double>>> gradients;
    const ValueMap grad = wrt.empty() ? ValueMap{} : g.grad(args, wrt);
    for (const Variable& w : wrt) gradients.push_back(grad.at(w).as_sequences<double>());
    return std::pair{f.eval_one(args).as_sequences<double>(), gradients};
  };
  // Sequence (or sample) b of v, alone; of sparse v, its CSR rows, sparse.
  auto item = [](const Value& v, size_t b) {
    return dispatch(v.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if (v.is_sparse()) {
        const NDArrayView& a = v.data();
        const size_t steps = v.is_sequence() ? v.sequence_length(b) : 1,
                     rows_per_step = v.sample_shape().total_size() / a.csr_cols(),
                     first = b * v.max_sequence_length() * rows_per_step,
                     last = first + steps * rows_per_step;
        const std::vector<int32_t>& offsets = a.csr_row_offsets();
        std::vector<int32_t> rows;
        for (size_t r = first; r <= last; ++r) rows.push_back(offsets[r] - offsets[first]);
        const auto begin = size_t(offsets[first]), end = size_t(offsets[last]);
        const NDArrayView x = NDArrayView::sparse_csr<T>(
            v.sample_shape().prepend(steps), std::move(rows),
            {a.csr_col_indices().begin() + ptrdiff_t(begin),
             a.csr_col_indices().begin() + ptrdiff_t(end)},
            std::vector<T>(a.csr_values<T>() + begin, a.csr_values<T>() + end));
        return v.is_sequence() ? Value::create({x}) : Value(x, false);
      }
      const std::vector<T> x = v.as_sequences<T>().at(b);
      return v.is_sequence() ? Value::create_sequences<T>(v.sample_shape(), {x})
                             : Value::create_batch<T>(v.sample_shape(), x);
    });
  };
  const auto [outputs, gradients] = output_and_gradients(arguments);
  const bool sum = f.output().dynamic_axes().empty();
  std::vector<double> total(sum ? outputs.at(0).size() : 0, 0.0);
  const size_t n = sum ? arguments.begin()->second.num_sequences() : outputs.size();
  for (size_t b = 0; b < n; ++b) {
    ValueMap alone;
    for (const auto& [v, value] : arguments) alone.emplace(v, item(value, b));
    const auto [output, gradient] = output_and_gradients(alone);
    const std::string what = "sequence " + std::to_string(b) + " evaluated alone: ";
    if (sum) {
      for (size_t i = 0; i < total.size(); ++i) total[i] += output[0][i];
    } else {
      std::vector<double> packed = outputs[b];
      if (f.output().shape().rank() && f.output().shape()[0] == NDShape::kFree &&
          packed.size() > output[0].size()) {
        for (size_t i = output[0].size(); i < packed.size(); ++i)
          EXPECT_EQ(packed[i], padding) << what << "padding at element " << i;
        packed.resize(output[0].size());
      }
      gradient_check_detail::expect_all_near(packed, output[0], tolerance, what + "output");
    }
    for (size_t i = 0; i < wrt.size(); ++i)
      gradient_check_detail::expect_all_near(
          gradients[i][b], gradient[i][0], tolerance,
          what + "gradient of " + gradient_check_detail::label(wrt[i]));
  }
  if (sum)
    gradient_check_detail::expect_all_near(outputs[0], total, tolerance,
                                           "the sum of the sequences evaluated alone");
}

// The same for f whose only argument is the sequence input x (its gradient with
// `with_gradients`, for an f differentiable in x).
inline void expect_sequences_match_individually(const Function& f, const Variable& x,
                                                const Value& sequences, double tolerance = 1e-12,
                                                bool with_gradients = true, double padding = 0) {
  expect_sequences_match_individually(f, {{x, sequences}},
                                      with_gradients ? std::vector{x} : std::vector<Variable>{},
                                      tolerance, padding);
}

}  // namespace loom
