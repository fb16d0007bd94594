#include "loom/ops/reduction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "loom/ops/gradient_check.h"
#include "loom/ops/ops_test_util.h"

namespace loom {
namespace {

enum class Kind { Sum, Mean, Max };

struct ReduceCase {
  const char* op_name;
  Kind kind;
  Function (*one)(const Variable&, const Axis&, bool, const std::string&);
  Function (*many)(const Variable&, const std::vector<Axis>&, bool, const std::string&);
};

const ReduceCase kReduce[] = {
    {"ReduceSum", Kind::Sum, loom::reduce_sum, loom::reduce_sum},
    {"ReduceMean", Kind::Mean, loom::reduce_mean, loom::reduce_mean},
    {"ReduceMax", Kind::Max, loom::reduce_max, loom::reduce_max},
};

// The axis choices every test runs through, on samples of shape [2,3,4].
struct AxesCase {
  std::vector<Axis> axes;
  std::vector<bool> reduced;  // per axis of [2,3,4]
  NDShape kept, dropped;      // output shapes with and without keep_dims
};

const AxesCase kAxes[] = {
    {{Axis(0)}, {true, false, false}, {1, 3, 4}, {3, 4}},
    {{Axis(-1)}, {false, false, true}, {2, 3, 1}, {2, 3}},
    {{Axis::all_static_axes()}, {true, true, true}, {1, 1, 1}, {}},
    {{Axis(0), Axis(2)}, {true, false, true}, {1, 3, 1}, {3}},
};

Function apply(const ReduceCase& c, const Variable& x, const AxesCase& a, bool keep_dims) {
  return a.axes.size() == 1 ? c.one(x, a.axes[0], keep_dims, "") : c.many(x, a.axes, keep_dims, "");
}

// Reference reduction of consecutive samples of shape `shape` over the axes marked in
// `reduced`, outputs in row-major order of the kept axes.
std::vector<double> reference(Kind kind, const NDShape& shape, const std::vector<bool>& reduced,
                              const std::vector<double>& x) {
  const size_t n = shape.total_size();
  std::vector<double> out;
  for (size_t base = 0; base < x.size(); base += n) {
    size_t groups = 1;
    for (size_t k = 0; k < shape.rank(); ++k) groups *= reduced[k] ? 1 : shape[k];
    std::vector<double> acc(groups,
                            kind == Kind::Max ? -std::numeric_limits<double>::infinity() : 0);
    std::vector<size_t> count(groups, 0);
    for (size_t i = 0; i < n; ++i) {
      size_t g = 0;
      for (size_t k = 0, rest = i, stride = n; k < shape.rank(); ++k) {
        stride /= shape[k];
        const size_t idx = rest / stride;
        rest %= stride;
        if (!reduced[k]) g = g * shape[k] + idx;
      }
      acc[g] = kind == Kind::Max ? std::max(acc[g], x[base + i]) : acc[g] + x[base + i];
      ++count[g];
    }
    for (size_t g = 0; g < groups; ++g)
      out.push_back(kind == Kind::Mean ? acc[g] / double(count[g]) : acc[g]);
  }
  return out;
}

TEST(Reductions, ShapeInference) {
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    Variable x = input_variable({2, 3, 4}, f64());
    for (const AxesCase& a : kAxes) {
      Function kept = apply(c, x, a, true), dropped = apply(c, x, a, false);
      EXPECT_EQ(kept.op_name(), c.op_name);
      EXPECT_EQ(kept.output().shape(), a.kept);
      EXPECT_EQ(dropped.output().shape(), a.dropped);
      EXPECT_EQ(kept.output().dtype(), kF64);
      EXPECT_EQ(kept.output().dynamic_axes(), default_batch_axes());
    }
    // Defaults: all static axes, kept as 1.
    EXPECT_EQ(Variable(c.one(x, Axis::all_static_axes(), true, "")).shape(), (NDShape{1, 1, 1}));
    Variable s = sequence::input_variable({5});
    EXPECT_EQ(Variable(c.one(s, Axis(0), false, "")).type_string(), "Sequence[Tensor[]]");
    Parameter p = parameter({2, 3});
    EXPECT_TRUE(Variable(c.one(p, Axis(1), true, "")).dynamic_axes().empty());
  }
  EXPECT_EQ(Variable(reduce_sum(input_variable({2, 3}))).shape(), (NDShape{1, 1}));
  EXPECT_EQ(Variable(reduce_max(input_variable({2, 3}), Axis(1))).shape(), (NDShape{2, 1}));
}

TEST(Reductions, BadAxesAreShapeErrors) {
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    Variable x = input_variable({2, 3, 4});
    expect_shape_error([&] { c.one(x, Axis(3), true, ""); }, {c.op_name, "3", "Tensor[2,3,4]"});
    expect_shape_error([&] { c.one(x, Axis(-4), true, ""); }, {c.op_name, "-4", "Tensor[2,3,4]"});
    expect_shape_error([&] { c.one(x, Axis::default_dynamic_axis(), true, ""); },
                       {c.op_name, "not a static axis"});
    expect_shape_error(
        [&] {
          c.many(x, {Axis(0), Axis(-3)}, true, "");
        },
        {c.op_name, "twice", "Tensor[2,3,4]"});
  }
}

TEST(Reductions, LiteralValues) {
  Variable x = input_variable({2, 3}, f64());
  ValueMap args{{x, Value::create_batch<double>({2, 3}, {1, 5, 3, 4, 2, 6})}};
  auto eval = [&](const Function& f) { return values(f.eval_one(args)); };
  EXPECT_EQ(eval(reduce_sum(x, Axis(0))), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(eval(reduce_sum(x, Axis(1))), (std::vector<double>{9, 12}));
  EXPECT_EQ(eval(reduce_sum(x)), (std::vector<double>{21}));
  EXPECT_EQ(eval(reduce_mean(x, Axis(-1))), (std::vector<double>{3, 4}));
  EXPECT_EQ(eval(reduce_mean(x)), (std::vector<double>{3.5}));
  EXPECT_EQ(eval(reduce_max(x, Axis(0))), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(eval(reduce_max(x, Axis(1))), (std::vector<double>{5, 6}));
  EXPECT_EQ(eval(reduce_max(x, {Axis(0), Axis(1)}, false)), (std::vector<double>{6}));
  EXPECT_EQ(reduce_max(x, {Axis(0), Axis(1)}, false).eval_one(args).data().shape(), (NDShape{1}));
}

TEST(Reductions, ForwardOnBatchAndSequencesMatchesReference) {
  for (DataType dtype : {kF64, kF32}) {
    for (const ReduceCase& c : kReduce) {
      for (const AxesCase& a : kAxes) {
        SCOPED_TRACE(std::string(c.op_name) + " over " + a.kept.to_string());
        const double tol = dtype == kF64 ? 1e-14 : 1e-6;
        Variable x = input_variable({2, 3, 4}, {.dtype = dtype});
        Value xv = random_batch({2, 3, 4}, 3, dtype, 1);
        Value out = apply(c, x, a, false).eval_one({{x, xv}});
        EXPECT_EQ(out.data().shape(), a.dropped.prepend(3));
        gradient_check_detail::expect_all_near(
            values(out), reference(c.kind, {2, 3, 4}, a.reduced, values(xv)), tol, "batch");
        Variable s = sequence::input_variable({2, 3, 4}, {.dtype = dtype});
        Value sv = random_sequences({2, 3, 4}, kLengths, dtype, 2);
        Function f = apply(c, s, a, true);
        auto outs = f.eval_one({{s, sv}}).as_sequences<double>();
        auto ins = sv.as_sequences<double>();
        for (size_t b = 0; b < kLengths.size(); ++b)
          gradient_check_detail::expect_all_near(outs[b],
                                                 reference(c.kind, {2, 3, 4}, a.reduced, ins[b]),
                                                 tol, "sequence " + std::to_string(b));
        if (dtype == kF64) expect_sequences_match_individually(f, s, sv);
      }
    }
  }
}

TEST(Reductions, Gradients) {
  for (const ReduceCase& c : kReduce) {
    for (const AxesCase& a : kAxes) {
      SCOPED_TRACE(std::string(c.op_name) + " over " + a.kept.to_string());
      Variable x = input_variable({2, 3, 4}, f64("x"));
      expect_gradients_match(apply(c, x, a, false), {{x, random_batch({2, 3, 4}, 3, kF64, 3)}},
                             {x});
      Variable s = sequence::input_variable({2, 3, 4}, f64("s"));
      ValueMap sargs{{s, random_sequences({2, 3, 4}, kLengths, kF64, 4)}};
      expect_gradients_match(apply(c, s, a, true), sargs, {s});
      // A parameter broadcast over the rows before the reduction: its gradient sums over them.
      Parameter p = parameter(random_array({3, 1}, kF64, 5), "p");
      expect_gradients_match(apply(c, element_times(s, p), a, true), sargs, {s, p});
      // A parameter reduced on its own (no dynamic axes).
      Parameter q = parameter(random_array({2, 3, 4}, kF64, 6), "q");
      expect_gradients_match(apply(c, q, a, false), {}, {q});
    }
  }
}

TEST(Reductions, InputUsedTwiceAccumulatesGradients) {
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    Variable s = sequence::input_variable({2, 3}, f64("s"));
    // [2,1] broadcast against [2,3]: s reaches the output directly and through the reduction.
    Function f = element_times(c.one(s, Axis(1), true, ""), s);
    expect_gradients_match(f, {{s, random_sequences({2, 3}, kLengths, kF64, 7)}}, {s});
  }
}

TEST(Reductions, Float32MatchesFloat64) {
  for (const ReduceCase& c : kReduce) {
    for (const AxesCase& a : kAxes) {
      SCOPED_TRACE(std::string(c.op_name) + " over " + a.kept.to_string());
      expect_float32_matches_float64([&](DataType dtype) {
        Variable s = sequence::input_variable({2, 3, 4}, {.dtype = dtype});
        return OpCase{
            apply(c, s, a, true), {{s, random_sequences({2, 3, 4}, kLengths, dtype, 8)}}, {s}};
      });
    }
  }
}

}  // namespace
}  // namespace loom
