#include "loom/ops/reduction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "loom/kernels/reduce.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/op_schema.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

using Kind = kernels::ReduceOp;

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
    {"ReduceMin", Kind::Min, loom::reduce_min, loom::reduce_min},
    {"ReduceProd", Kind::Prod, loom::reduce_prod, loom::reduce_prod},
    {"ReduceLogSumExp", Kind::LogSumExp, loom::reduce_log_sum_exp, loom::reduce_log_sum_exp},
    {"ReduceL1", Kind::L1, loom::reduce_l1, loom::reduce_l1},
    {"ReduceL2", Kind::L2, loom::reduce_l2, loom::reduce_l2},
    {"ReduceSumSquare", Kind::SumSquare, loom::reduce_sum_square, loom::reduce_sum_square},
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

// The reduction of one group's values.
double reduce_group(Kind kind, const std::vector<double>& v) {
  double sum = 0, abs_sum = 0, squares = 0, product = 1;
  for (double e : v) sum += e, abs_sum += std::abs(e), squares += e * e, product *= e;
  const double max = *std::max_element(v.begin(), v.end());
  double exp_sum = 0;
  for (double e : v) exp_sum += std::exp(e - max);
  switch (kind) {
    case Kind::Sum:
      return sum;
    case Kind::Mean:
      return sum / double(v.size());
    case Kind::Max:
      return max;
    case Kind::Min:
      return *std::min_element(v.begin(), v.end());
    case Kind::Prod:
      return product;
    case Kind::LogSumExp:
      return max + std::log(exp_sum);
    case Kind::L1:
      return abs_sum;
    case Kind::L2:
      return std::sqrt(squares);
    case Kind::SumSquare:
      return squares;
    case Kind::ArgMax:
      return double(std::max_element(v.begin(), v.end()) - v.begin());
    case Kind::ArgMin:
      return double(std::min_element(v.begin(), v.end()) - v.begin());
  }
  return 0;
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
    std::vector<std::vector<double>> members(groups);
    for (size_t i = 0; i < n; ++i) {
      size_t g = 0;
      for (size_t k = 0, rest = i, stride = n; k < shape.rank(); ++k) {
        stride /= shape[k];
        const size_t idx = rest / stride;
        rest %= stride;
        if (!reduced[k]) g = g * shape[k] + idx;
      }
      members[g].push_back(x[base + i]);
    }
    for (const std::vector<double>& m : members) out.push_back(reduce_group(kind, m));
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
    expect_shape_error(
        [&] {
          c.many(x, {Axis(0), Axis(-3)}, true, "");
        },
        {c.op_name, "twice", "Tensor[2,3,4]"});
  }
}

// Over Axis::default_batch_axis() each element is reduced across the minibatch's samples: one
// result for the minibatch, without dynamic axes (CNTK's ReduceElements over the batch axis).
TEST(Reductions, OverTheBatchAxisGiveOneResultForTheMinibatch) {
  const Variable x = input_variable({2, 3}, f64("x"));
  const std::vector<std::vector<double>> samples = {
      {0.5, -1, 2, 3, -0.25, 1}, {1.5, 2, -3, 0.5, 0.75, -2}, {-0.5, 1, 1, 2, 0.5, 4}};
  std::vector<double> flat;
  for (const auto& sample : samples) flat.insert(flat.end(), sample.begin(), sample.end());
  const ValueMap args{{x, Value::create_batch<double>({2, 3}, flat)}};
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    const Function f = c.one(x, Axis::default_batch_axis(), true, "");
    EXPECT_TRUE(f.output().dynamic_axes().empty());
    EXPECT_EQ(f.output().shape(), NDShape({2, 3}));
    std::vector<double> want;
    for (size_t k = 0; k < 6; ++k)
      want.push_back(reduce_group(c.kind, {flat[k], flat[6 + k], flat[12 + k]}));
    gradient_check_detail::expect_all_near(values(f.eval_one(args)), want, 1e-12, "batch");
    // With a static axis: each row i of every sample together, the axis dropped.
    const Function g = c.many(x, {Axis(1), Axis::default_batch_axis()}, false, "");
    EXPECT_EQ(g.output().shape(), NDShape({2}));
    want.clear();
    for (size_t i = 0; i < 2; ++i) {
      std::vector<double> group;
      for (const auto& sample : samples)
        group.insert(group.end(), sample.begin() + 3 * i, sample.begin() + 3 * i + 3);
      want.push_back(reduce_group(c.kind, group));
    }
    gradient_check_detail::expect_all_near(values(g.eval_one(args)), want, 1e-12,
                                           "batch and axis 1");
  }
}

// Over Axis::all_axes() every element of the minibatch is one group: the packed sequences' own
// elements, no padding (negative values: a padding zero would be the max).
TEST(Reductions, OverAllAxesReduceEveryElementOfTheMinibatch) {
  const Variable x = sequence::input_variable({2}, f64("x"));
  const std::vector<std::vector<double>> seqs = {
      {-1, -2, -0.5, -3, -1.5, -0.25}, {-2, -1}, {-0.75, -4, -1, -0.5}};
  std::vector<double> all;
  for (const auto& seq : seqs) all.insert(all.end(), seq.begin(), seq.end());
  const ValueMap args{{x, Value::create_sequences<double>({2}, seqs)}};
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    const Function kept = c.one(x, Axis::all_axes(), true, "");
    const Function dropped = c.one(x, Axis::all_axes(), false, "");
    EXPECT_TRUE(kept.output().dynamic_axes().empty());
    EXPECT_EQ(kept.output().shape(), NDShape({1}));
    EXPECT_EQ(dropped.output().shape(), NDShape({}));
    const std::vector<double> want{reduce_group(c.kind, all)};
    gradient_check_detail::expect_all_near(values(kept.eval_one(args)), want, 1e-12, "kept");
    gradient_check_detail::expect_all_near(values(dropped.eval_one(args)), want, 1e-12, "dropped");
  }
  // The mean's gradient is 1 / (the minibatch's element count) at every element.
  const ValueMap g = reduce_mean(x, Axis::all_axes()).grad(args, {x});
  const Value& dx = g.at(x);
  for (size_t s = 0; s < seqs.size(); ++s)
    for (size_t k = 0; k < seqs[s].size(); ++k)
      EXPECT_DOUBLE_EQ(dx.data().to_vector<double>()[s * 6 + k], 1.0 / 12);
}

TEST(Reductions, DynamicAxesTheyDoNotTake) {
  const Variable batch = input_variable({2, 3}), seq = sequence::input_variable({2, 3});
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    expect_argument_error([&] { c.one(seq, Axis::default_dynamic_axis(), true, ""); },
                          {c.op_name, "defaultDynamicAxis", "sequence.reduce_sum"});
    expect_shape_error(
        [&] {
          c.many(seq, {Axis(0), Axis::default_batch_axis()}, true, "");
        },
        {c.op_name, "batch axis", "a sequence"});
    expect_shape_error([&] { c.one(parameter(NDShape{2}), Axis::default_batch_axis(), true, ""); },
                       {c.op_name, "no dynamic axes"});
  }
  expect_argument_error([&] { argmax(batch, Axis::default_batch_axis()); },
                        {"Argmax", "static axis"});
  expect_argument_error(
      [&] {
        find_schema("Argmin")->apply({batch},
                                     Dictionary({{"axis", axis_attribute(Axis::all_axes())}}));
      },
      {"Argmin", "AllAxes"});
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

TEST(Reductions, LiteralValuesOfTheOpsAddedWithTheTable) {
  Variable x = input_variable({2, 3}, f64());
  ValueMap args{{x, Value::create_batch<double>({2, 3}, {1, -5, 3, 4, -2, 6})}};
  auto eval = [&](const Function& f) { return values(f.eval_one(args)); };
  EXPECT_EQ(eval(reduce_min(x, Axis(0))), (std::vector<double>{1, -5, 3}));
  EXPECT_EQ(eval(reduce_min(x)), (std::vector<double>{-5}));
  EXPECT_EQ(eval(reduce_prod(x, Axis(1))), (std::vector<double>{-15, -48}));
  EXPECT_EQ(eval(reduce_l1(x, Axis(-1))), (std::vector<double>{9, 12}));
  expect_all_near(eval(reduce_l2(x, Axis(0))), {std::sqrt(17.0), std::sqrt(29.0), std::sqrt(45.0)},
                  1e-15, "reduce_l2");
  EXPECT_EQ(eval(reduce_sum_square(x)), (std::vector<double>{91}));
  expect_all_near(eval(reduce_log_sum_exp(x, Axis(1))),
                  {std::log(std::exp(1) + std::exp(-5) + std::exp(3)),
                   std::log(std::exp(4) + std::exp(-2) + std::exp(6))},
                  1e-15, "reduce_log_sum_exp");
  EXPECT_EQ(eval(argmax(x, Axis(1))), (std::vector<double>{2, 2}));
  EXPECT_EQ(eval(argmax(x, Axis(0))), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(eval(argmax(x)), (std::vector<double>{5}));  // the flat position
  EXPECT_EQ(eval(argmin(x, Axis(-1))), (std::vector<double>{1, 1}));
  EXPECT_EQ(eval(argmin(x)), (std::vector<double>{1}));
}

TEST(Reductions, ArgmaxAndArgminKeepTheAxisTakeTheFirstOfTiesAndHaveNoGradient) {
  Variable x = input_variable({2, 3, 4});
  EXPECT_EQ(Variable(argmax(x, Axis(1))).shape(), (NDShape{2, 1, 4}));
  EXPECT_EQ(Variable(argmin(x)).shape(), (NDShape{1, 1, 1}));
  Variable t = input_variable({2, 3}, f64("t"));
  ValueMap args{{t, Value::create_batch<double>({2, 3}, {3, 3, 1, 2, 2, 2})}};
  EXPECT_EQ(values(argmax(t, Axis(1)).eval_one(args)), (std::vector<double>{0, 0}));
  EXPECT_EQ(values(argmin(t, Axis(1)).eval_one(args)), (std::vector<double>{2, 0}));
  EXPECT_FALSE(find_schema("Argmax")->op->traits({}).differentiable.contains(0));
  // t * argmax(t): only the product rule's first term, argmax(t) broadcast.
  EXPECT_EQ(values(element_times(t, argmax(t, Axis(1))).grad(args, {t}).at(t)),
            (std::vector<double>{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(values(element_times(t, argmin(t, Axis(1))).grad(args, {t}).at(t)),
            (std::vector<double>{2, 2, 2, 0, 0, 0}));
}

// The C++ builders and the table (Python) write CNTK's parameters; ReduceSum, ReduceMean and
// ReduceMax in model files from before the op table hold other keys ("axes", "all_static_axes",
// "keep_dims"), which still load and give the same function.
TEST(Reductions, ModelFileKeysAndTableParametersGiveTheSameFunction) {
  Variable x = input_variable({2, 3, 4}, f64("x"));
  ValueMap args{{x, random_batch({2, 3, 4}, 3, kF64, 9)}};
  auto file_keys = [](DictionaryVector axes, bool all, bool keep_dims) {
    return Dictionary(
        {{"axes", std::move(axes)}, {"all_static_axes", all}, {"keep_dims", keep_dims}});
  };
  for (const ReduceCase& c : kReduce) {
    SCOPED_TRACE(c.op_name);
    const OpSchema& schema = *find_schema(c.op_name);
    struct Case {
      Function built, applied;
      Dictionary old_keys;
      std::vector<size_t> axes;
      bool keep_dims;
    };
    const Case cases[] = {
        {c.one(x, Axis(-1), false, ""),
         schema.apply({x}, Dictionary({{"axis", int64_t{-1}}, {"keepdims", false}})),
         file_keys({int64_t{-1}}, false, false),
         {2},
         false},
        {c.one(x, Axis::all_static_axes(), true, ""),
         schema.apply({x}, {}),
         file_keys({}, true, true),
         {0, 1, 2},
         true},
        {c.many(x, {Axis(0), Axis(2)}, true, ""),
         schema.apply({x}, Dictionary({{"axis", DictionaryVector{int64_t{0}, int64_t{2}}}})),
         file_keys({int64_t{0}, int64_t{2}}, false, true),
         {0, 2},
         true},
    };
    for (const auto& [built, applied, old_keys, axes, keep_dims] : cases) {
      const Function old = make_primitive(*schema.op, {x}, old_keys);
      EXPECT_TRUE(built.attributes().contains("axis"));
      EXPECT_TRUE(applied.attributes().contains("axis"));
      const std::vector<double> want = values(applied.eval_one(args));
      for (const Function& f : {built, applied, old}) {
        EXPECT_EQ(reduced_static_axes(f.attributes(), 3), axes);
        EXPECT_EQ(reduction_keeps_dims(f.attributes()), keep_dims);
        EXPECT_FALSE(reduction_reduces_rows(f.attributes()));
        EXPECT_EQ(f.output().shape(), applied.output().shape());
        EXPECT_EQ(values(f.eval_one(args)), want);
        const Function loaded = load_model_from_bytes(save_model_to_bytes(f));
        EXPECT_EQ(values(loaded.eval_one({{loaded.arguments()[0], args.begin()->second}})), want);
      }
    }
  }
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

}  // namespace
}  // namespace loom
