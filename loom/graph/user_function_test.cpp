// User functions (CNTK's UserFunction in C++): forward and backward in the user's code, checked
// against finite differences and built-in ops, on batches and ragged sequences, in training,
// cloned, saved and loaded, with one output and with two, and with the errors a wrong
// implementation gets.
#include "loom/graph/user_function.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/graph/debugging.h"
#include "loom/learners/sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/linear.h"
#include "loom/ops/losses.h"
#include "loom/ops/reduction.h"
#include "loom/ops/sequence_ops.h"
#include "loom/serialize/model_file.h"
#include "loom/train/trainer.h"

namespace loom {
namespace {

// x^3 elementwise, over Values: the state forward keeps is its input (backward needs x^2).
class Cube : public UserFunction {
 public:
  std::string op_name() const override { return "test.Cube"; }
  std::vector<Value> forward(const std::vector<Value>& inputs, const std::vector<Variable>&, bool,
                             std::any& state) const override {
    ++forwards;
    state = inputs[0];
    return {map(inputs[0], [](double x) { return x * x * x; })};
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>&) const override {
    const Value& x = std::any_cast<const Value&>(state);
    Value g = map(x, [](double v) { return 3 * v * v; });
    multiply(g, roots[0]);
    return {g};
  }
  Dictionary serialize() const override {
    Dictionary d;
    d["version"] = int64_t{1};
    return d;
  }
  mutable int forwards = 0;

  // The Value with f applied to every element (padding too: it is dropped when packed).
  template <typename F>
  static Value map(const Value& v, F f) {
    NDArrayView out = v.data().deep_clone();
    dispatch(out.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* d = out.data<T>();
      for (size_t i = 0, n = out.shape().total_size(); i < n; ++i) d[i] = T(f(double(d[i])));
    });
    return Value(out, v.is_sequence(), v.mask());
  }
  static void multiply(Value& a, const Value& b) {
    dispatch(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* d = const_cast<T*>(a.data().data<T>());
      const T* e = b.data().data<T>();
      for (size_t i = 0, n = a.data().shape().total_size(); i < n; ++i) d[i] *= e[i];
    });
  }
};

// a * b of two inputs, with a gradient for each; counts the gradients asked for.
class Product : public UserFunction {
 public:
  std::string op_name() const override { return "test.Product"; }
  std::vector<Value> forward(const std::vector<Value>& inputs, const std::vector<Variable>&, bool,
                             std::any& state) const override {
    state = inputs;
    Value out = Cube::map(inputs[0], [](double x) { return x; });
    Cube::multiply(out, inputs[1]);
    return {out};
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>& wanted) const override {
    const auto& in = std::any_cast<const std::vector<Value>&>(state);
    std::vector<std::optional<Value>> g(2);
    for (size_t i = 0; i < 2; ++i) {
      if (!wanted[i]) continue;
      ++gradients_given;
      Value gi = Cube::map(in[1 - i], [](double x) { return x; });
      Cube::multiply(gi, roots[0]);
      g[i] = gi;
    }
    return g;
  }
  mutable int gradients_given = 0;
};

// Two outputs of different shapes from two inputs of rank-1 samples: a * b, and the sum of a's
// squares per sample (shape [1]). Counts its calls and keeps the gradients backward was given.
class ProductAndSquares : public UserFunction {
 public:
  std::string op_name() const override { return "test.ProductAndSquares"; }
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& in) const override {
    return {{in[0].shape(), in[0].dtype(), in[0].dynamic_axes()},
            {NDShape{1}, in[0].dtype(), in[0].dynamic_axes()}};
  }
  std::vector<Value> forward(const std::vector<Value>& in, const std::vector<Variable>& outputs,
                             bool, std::any& state) const override {
    ++forwards;
    EXPECT_EQ(outputs.size(), 2u);
    state = in;
    Value product = Cube::map(in[0], [](double x) { return x; });
    Cube::multiply(product, in[1]);
    return {product, squares(in[0])};
  }
  // d/da = g0 b + 2 a g1, d/db = g0 a.
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>& wanted) const override {
    ++backwards;
    given = roots;
    const auto& in = std::any_cast<const std::vector<Value>&>(state);
    NDArrayView da = in[0].data().deep_clone(), db = in[1].data().deep_clone();
    const size_t n = da.shape().dims().back();
    dispatch(da.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T *a = in[0].data().data<T>(), *b = in[1].data().data<T>();
      const T *g0 = roots[0].data().data<T>(), *g1 = roots[1].data().data<T>();
      T *pa = da.data<T>(), *pb = db.data<T>();
      for (size_t i = 0; i < da.size(); ++i) {
        pa[i] = g0[i] * b[i] + 2 * a[i] * g1[i / n];
        pb[i] = g0[i] * a[i];
      }
    });
    std::vector<std::optional<Value>> g(2);
    if (wanted[0]) g[0] = Value(da, in[0].is_sequence(), in[0].mask());
    if (wanted[1]) g[1] = Value(db, in[1].is_sequence(), in[1].mask());
    return g;
  }

  // The sum of each sample's (or step's) squares, of shape [1].
  static Value squares(const Value& a) {
    const NDArrayView& x = a.data();
    std::vector<size_t> dims = x.shape().dims();
    const size_t n = dims.back();
    dims.back() = 1;
    NDArrayView out(x.dtype(), NDShape(dims));
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* d = x.data<T>();
      T* o = out.data<T>();
      for (size_t r = 0; r < out.size(); ++r) {
        o[r] = 0;
        for (size_t k = 0; k < n; ++k) o[r] += d[r * n + k] * d[r * n + k];
      }
    });
    return Value(out, a.is_sequence(), a.mask());
  }

  mutable int forwards = 0, backwards = 0;
  mutable std::vector<Value> given;
};

// Expects run to throw an E whose message holds every one of parts.
template <typename E = ShapeError>
void expect_error(const std::function<void()>& run, const std::vector<std::string>& parts) {
  try {
    run();
    ADD_FAILURE() << "no error; expected one saying " << parts[0];
  } catch (const E& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

std::vector<double> values_of(const Value& v) {
  std::vector<double> out;
  for (const auto& s : v.as_sequences<double>()) out.insert(out.end(), s.begin(), s.end());
  return out;
}

TEST(UserFunction, ForwardMatchesTheBuiltInOpsOnABatchAndOnRaggedSequences) {
  for (bool sequences : {false, true}) {
    Variable x = input_variable(
        {3}, {.dtype = DataType::Float64,
              .dynamic_axes = sequences ? default_sequence_axes() : default_batch_axes()});
    Function cube = user_function(std::make_shared<Cube>(), {x}, "cube");
    Function reference = element_times(element_times(x, x), x);
    Value data = sequences ? random_sequences({3}, {4, 1, 3}, DataType::Float64, 5)
                           : random_batch({3}, 5, DataType::Float64, 5);
    EXPECT_EQ(values_of(cube.eval_one({{x, data}})), values_of(reference.eval_one({{x, data}})));
    EXPECT_EQ(cube.op_name(), "test.Cube");
    EXPECT_NE(cube.to_string().find("cube: test.Cube("), std::string::npos) << cube.to_string();
  }
}

TEST(UserFunction, GradientsMatchFiniteDifferencesInsideAGraph) {
  Variable x = input_variable({3}, {.dtype = DataType::Float64, .needs_gradient = true});
  Parameter W = parameter({3, 2}, uniform(1, 3), DataType::Float64);
  Function f = reduce_sum(times(user_function(std::make_shared<Cube>(), {x}), W), Axis(0));
  expect_gradients_match(f, {{x, random_batch({3}, 4, DataType::Float64, 9)}}, {x, W});

  Variable s = input_variable({2}, {.dtype = DataType::Float64,
                                    .needs_gradient = true,
                                    .dynamic_axes = default_sequence_axes()});
  Function g = sequence::reduce_sum(user_function(std::make_shared<Cube>(), {s}));
  expect_gradients_match(g, {{s, random_sequences({2}, {3, 1, 2}, DataType::Float64, 4)}}, {s});
}

TEST(UserFunction, BackwardIsAskedOnceForTheWantedInputsOnly) {
  Variable a = input_variable({2}, {.dtype = DataType::Float64, .needs_gradient = true});
  Variable b = input_variable({2}, {.dtype = DataType::Float64});
  auto product = std::make_shared<Product>();
  Function f = user_function(product, {a, b});
  const Value va = random_batch({2}, 3, DataType::Float64, 1);
  const Value vb = random_batch({2}, 3, DataType::Float64, 2);
  ValueMap g = f.grad({{a, va}, {b, vb}}, {a});
  EXPECT_EQ(product->gradients_given, 1);
  EXPECT_EQ(values_of(g.at(a)), values_of(vb));  // d(sum a*b)/da = b

  Variable c = input_variable({2}, {.dtype = DataType::Float64, .needs_gradient = true});
  Function both = user_function(std::make_shared<Product>(), {a, c});
  expect_gradients_match(both, {{a, va}, {c, vb}}, {a, c});
  // a read twice: the second gradient is added to the first (a * a: 2a).
  Function square = user_function(std::make_shared<Product>(), {a, a});
  expect_gradients_match(square, {{a, va}}, {a});
}

TEST(UserFunction, TrainsWithALearner) {
  // y = W x^3 fitted to 2 x^3: the user function's gradient drives W to 2.
  Variable x = input_variable({1}, {.dtype = DataType::Float64});
  Variable t = input_variable({1}, {.dtype = DataType::Float64});
  Parameter W = parameter({1, 1}, constant_initializer(0.5), DataType::Float64);
  Function y = times(user_function(std::make_shared<Cube>(), {x}), W);
  Function loss = squared_error(y, t);
  auto learner = sgd(loss.parameters(), learning_parameter_schedule(0.05));
  Value xs = Value::create_batch<double>({1}, {0.5, 1.0, -1.0, 1.2});
  Value ts = Value::create_batch<double>({1}, {0.25, 2.0, -2.0, 3.456});
  for (int step = 0; step < 200; ++step) {
    ValueMap g = loss.grad({{x, xs}, {t, ts}}, {W});
    learner->update({{W, g.at(W).data()[0]}}, 4);
  }
  EXPECT_NEAR(W.value().data<double>()[0], 2.0, 1e-6);
}

TEST(UserFunction, ClonesShareOrCopyAndSaveAndLoadThroughADeserializer) {
  Variable x = input_variable({2}, {.name = "x"});
  auto cube = std::make_shared<Cube>();
  Function f = user_function(cube, {x}, "c");
  Function copy = f.clone(ParameterCloneMethod::Clone);
  const Value data = random_batch({2}, 3, DataType::Float32, 3);
  EXPECT_EQ(values_of(copy.eval_one({{copy.arguments()[0], data}})),
            values_of(f.eval_one({{x, data}})));
  EXPECT_EQ(user_function_of(*copy.impl()), cube);  // the default clone shares the function

  // Without a deserializer the file names the op and how to register one.
  const std::vector<uint8_t> bytes = save_model_to_bytes(f);
  expect_error<DataError>([&] { load_model_from_bytes(bytes, "cube.model"); },
                          {"cube.model", "'test.Cube'"});
  int version = 0;
  register_user_function_deserializer(
      "test.Cube",
      [&](const std::vector<Variable>& inputs, const std::string& name,
          const Dictionary& state) -> std::shared_ptr<UserFunction> {
        EXPECT_EQ(inputs.size(), 1u);
        EXPECT_EQ(name, "c");
        version = int(state.get<int64_t>("version"));
        return std::make_shared<Cube>();
      });
  EXPECT_THROW(register_user_function_deserializer("test.Cube", {}), ArgumentError);
  Function loaded = load_model_from_bytes(bytes, "cube.model");
  EXPECT_EQ(version, 1);
  EXPECT_EQ(loaded.op_name(), "test.Cube");
  EXPECT_EQ(values_of(loaded.eval_one({{loaded.arguments()[0], data}})),
            values_of(f.eval_one({{x, data}})));
}

// A user function whose forward gives a wrong shape, and one whose type differs from what the
// executor can give it.
class WrongShape : public UserFunction {
 public:
  std::string op_name() const override { return "test.WrongShape"; }
  std::vector<Value> forward(const std::vector<Value>& inputs, const std::vector<Variable>&, bool,
                             std::any&) const override {
    return {Value(NDArrayView(DataType::Float32, {inputs[0].num_sequences(), 5}), false)};
  }
  std::vector<std::optional<Value>> backward(const std::any&, const std::vector<Value>&,
                                             const std::vector<bool>&) const override {
    return {};
  }
};

class NoBatchAxis : public WrongShape {
 public:
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& inputs) const override {
    return {{inputs[0].shape(), inputs[0].dtype(), {}, false}};
  }
};

TEST(UserFunction, WrongOutputsAreErrorsNamingTheOp) {
  Variable x = input_variable({2});
  Function f = user_function(std::make_shared<WrongShape>(), {x});
  expect_error(
      [&] {
        f.eval_one({{x, random_batch({2}, 3, DataType::Float32, 1)}});
      },
      {"test.WrongShape: forward's output 0 (", ") has samples of shape [5], expected [2]"});
  expect_error([&] { user_function(std::make_shared<NoBatchAxis>(), {x}); },
               {"test.WrongShape: the outputs' dynamic axes are []; they must be an input's, or "
                "the batch axis alone of a sequence input"});
  EXPECT_THROW(user_function(nullptr, {x}), ArgumentError);
}

// Of a sequence x and a second input y, the number of steps of each of x's sequences plus y: its
// output has y's dynamic axes when y has some, else x's batch axis alone (a row per sequence).
class StepsPlus : public UserFunction {
 public:
  std::string op_name() const override { return "test.StepsPlus"; }
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& in) const override {
    const Variable& y = in[1];
    return {{NDShape{1}, y.dtype(),
             y.has_batch_axis() ? y.dynamic_axes() : std::vector{in[0].dynamic_axes()[0]}}};
  }
  std::vector<Value> forward(const std::vector<Value>& in, const std::vector<Variable>&, bool,
                             std::any&) const override {
    const std::vector<float> y = in[1].data().to_vector<float>();
    std::vector<float> out;
    for (size_t b = 0; b < in[0].num_sequences(); ++b)
      out.push_back(float(in[0].sequence_length(b)) + y[y.size() == 1 ? 0 : b]);
    return {Value::create_batch<float>({1}, out)};
  }
  std::vector<std::optional<Value>> backward(const std::any&, const std::vector<Value>& roots,
                                             const std::vector<bool>&) const override {
    return {std::nullopt, roots[0]};
  }
};

TEST(UserFunction, InputsOnDifferentDynamicAxesGiveOutputsOnTheAxesTheyDeclare) {
  Variable x = input_variable({1}, {.dynamic_axes = default_sequence_axes()});
  Variable y = input_variable({1}, {.needs_gradient = true});
  const Value xs = Value::create_sequences<float>({1}, std::vector<float>(6, 0), {4, 1, 1});
  // A sequence and a batch: the output's rows are y's.
  Function on_y = user_function(std::make_shared<StepsPlus>(), {x, y});
  EXPECT_EQ(on_y.output().dynamic_axes(), y.dynamic_axes());
  const Value ys = Value::create_batch<float>({1}, {10, 20, 30});
  EXPECT_EQ(values_of(on_y.eval_one({{x, xs}, {y, ys}})), (std::vector<double>{14, 21, 31}));
  EXPECT_EQ(values_of(on_y.grad({{x, xs}, {y, ys}}, {y}).at(y)), (std::vector<double>{1, 1, 1}));
  // A sequence and a constant: a row per sequence of x.
  Function per_sequence = user_function(std::make_shared<StepsPlus>(), {x, constant(0.5)});
  EXPECT_EQ(per_sequence.output().dynamic_axes(), default_batch_axes());
  EXPECT_EQ(values_of(per_sequence.eval_one({{x, xs}})), (std::vector<double>{4.5, 1.5, 1.5}));
  // Further ops read it as a batch.
  EXPECT_EQ(values_of(plus(per_sequence, on_y).eval_one({{x, xs}, {y, ys}})),
            (std::vector<double>{18.5, 22.5, 32.5}));
}

ValueMap two_inputs(const Variable& a, const Variable& b, bool sequences, DataType dtype) {
  if (sequences)
    return {{a, random_sequences({3}, {4, 1, 3}, dtype, 5)},
            {b, random_sequences({3}, {4, 1, 3}, dtype, 6)}};
  return {{a, random_batch({3}, 5, dtype, 5)}, {b, random_batch({3}, 5, dtype, 6)}};
}

TEST(UserFunction, TwoOutputsEvaluateAloneAndTogetherFromOneForwardCall) {
  for (bool sequences : {false, true}) {
    const InputOptions options{
        .dtype = DataType::Float64,
        .dynamic_axes = sequences ? default_sequence_axes() : default_batch_axes()};
    Variable a = input_variable({3}, options), b = input_variable({3}, options);
    auto user = std::make_shared<ProductAndSquares>();
    Function f = user_function(user, {a, b}, "ps");
    ASSERT_EQ(f.outputs().size(), 2u);
    const Variable product = f.outputs()[0], squares = f.outputs()[1];
    EXPECT_EQ(squares.shape(), NDShape{1});
    EXPECT_EQ(squares.owner().op_name(), "test.ProductAndSquares");
    const ValueMap args = two_inputs(a, b, sequences, DataType::Float64);
    const std::vector<double> expected_product = values_of(element_times(a, b).eval_one(args));
    const std::vector<double> expected_squares =
        values_of(reduce_sum(element_times(a, a), Axis(0)).eval_one(args));

    const ValueMap both = f.eval(args);
    EXPECT_EQ(user->forwards, 1);
    EXPECT_EQ(values_of(both.at(product)), expected_product);
    gradient_check_detail::expect_all_near(values_of(both.at(squares)), expected_squares, 1e-12,
                                           "both outputs: the squares");
    EXPECT_EQ(values_of(f.eval(args, {squares}).at(squares)), values_of(both.at(squares)));
    EXPECT_EQ(values_of(f.eval(args, {product}).at(product)), expected_product);
    EXPECT_EQ(user->forwards, 3);  // each output alone: one forward call each
  }
}

TEST(UserFunction, CheckedModeChecksEveryOutput) {
  Variable a = input_variable({3}), b = input_variable({3});
  Function f = user_function(std::make_shared<ProductAndSquares>(), {a, b}, "ps");
  const ValueMap args = two_inputs(a, b, false, DataType::Float32);
  // a = 1e30, b = 0: the product is 0, the sum of squares overflows to infinity.
  NDArrayView va = args.at(a).data(), vb = args.at(b).data();
  va.data<float>()[0] = 1e30f;
  vb.data<float>()[0] = 0;
  EXPECT_TRUE(std::isfinite(f.eval(args).at(f.outputs()[0]).data().to_vector<float>()[0]));
  set_checked_mode(true);
  expect_error<DataError>(
      [&] { f.eval(args); },
      {"test.ProductAndSquares operation unexpectedly produced infinite values"});
  set_checked_mode(false);
}

TEST(UserFunction, GradientsOfBothOutputsReachOneBackwardCallAndMatchFiniteDifferences) {
  for (bool sequences : {false, true}) {
    const InputOptions options{
        .dtype = DataType::Float64,
        .needs_gradient = true,
        .dynamic_axes = sequences ? default_sequence_axes() : default_batch_axes()};
    Variable a = input_variable({3}, options), b = input_variable({3}, options);
    Parameter W = parameter({1, 2}, uniform(1, 3), DataType::Float64);
    auto user = std::make_shared<ProductAndSquares>();
    Function f = user_function(user, {a, b});
    const Variable product = f.outputs()[0], squares = f.outputs()[1];
    const ValueMap args = two_inputs(a, b, sequences, DataType::Float64);
    // A loss of both outputs: sum(product^2) + squares W.
    Function loss = plus(reduce_sum(element_times(product, product), Axis(0)), times(squares, W));
    expect_gradients_match(loss, args, {a, b, W});
    const int backwards = user->backwards;
    loss.grad(args, {a});
    EXPECT_EQ(user->backwards, backwards + 1);

    // A loss of one output: the other's gradient is zeros.
    expect_gradients_match(times(squares, W), args, {a, b, W});
    for (double g : user->given[0].data().to_vector<double>()) EXPECT_EQ(g, 0.0);
    expect_gradients_match(combine({product}), args, {a, b});
    for (double g : user->given[1].data().to_vector<double>()) EXPECT_EQ(g, 0.0);
  }
}

TEST(UserFunction, ATrainerTrainsThroughTwoOutputs) {
  // h = x W, fitted so that h * x matches t, with the squares of h as a penalty.
  Variable x = input_variable({2}, {.dtype = DataType::Float64, .name = "x"});
  Variable t = input_variable({2}, {.dtype = DataType::Float64, .name = "t"});
  Parameter W = parameter({2, 2}, constant_initializer(0.1), DataType::Float64);
  auto user = std::make_shared<ProductAndSquares>();
  Function f = user_function(user, {times(x, W), x});
  Function loss = plus(squared_error(f.outputs()[0], t),
                       element_times(f.outputs()[1], constant(0.001, DataType::Float64)));
  Trainer trainer(f, loss, {sgd(loss.parameters(), learning_parameter_schedule(0.05))});
  const Value xs = Value::create_batch<double>({2}, {1, 2, -1, 0.5, 0.5, -2});
  const Value ts = Value::create_batch<double>({2}, {2, 8, 2, 0.5, 0.5, 8});  // h = 2x
  double first = 0;
  for (int step = 0; step < 300; ++step) {
    trainer.train_minibatch({{x, xs}, {t, ts}});
    if (step == 0) first = trainer.previous_minibatch_loss_average();
  }
  EXPECT_LT(trainer.previous_minibatch_loss_average(), first / 50);
  EXPECT_EQ(user->forwards, 300);
  EXPECT_EQ(user->backwards, 300);
}

TEST(UserFunction, TwoOutputsCloneAndSaveAndLoad) {
  Variable a = input_variable({3}, {.name = "a"}), b = input_variable({3}, {.name = "b"});
  Function f = user_function(std::make_shared<ProductAndSquares>(), {a, b}, "ps");
  const ValueMap args = two_inputs(a, b, false, DataType::Float32);
  const ValueMap expected = f.eval(args);
  auto values = [](const Function& g, const ValueMap& by_name_of) {
    ValueMap in;
    for (const auto& [v, value] : by_name_of) in.emplace(g.argument(v.name()), value);
    std::vector<std::vector<double>> out;
    for (const Variable& o : g.outputs()) out.push_back(values_of(g.eval(in, {o}).at(o)));
    return out;
  };
  const std::vector<std::vector<double>> original = values(f, args);
  ASSERT_EQ(original.size(), 2u);
  EXPECT_EQ(original[1], values_of(expected.at(f.outputs()[1])));

  Function copy = f.clone(ParameterCloneMethod::Clone);
  ASSERT_EQ(copy.outputs().size(), 2u);
  EXPECT_EQ(values(copy, args), original);

  register_user_function_deserializer(
      "test.ProductAndSquares",
      [](const std::vector<Variable>& inputs, const std::string& name,
         const Dictionary&) -> std::shared_ptr<UserFunction> {
        EXPECT_EQ(inputs.size(), 2u);
        EXPECT_EQ(name, "ps");
        return std::make_shared<ProductAndSquares>();
      });
  Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  ASSERT_EQ(loaded.outputs().size(), 2u);
  EXPECT_EQ(loaded.outputs()[1].shape(), NDShape{1});
  EXPECT_EQ(loaded.outputs()[0].uid(), f.outputs()[0].uid());
  EXPECT_EQ(values(loaded, args), original);
}

// ProductAndSquares gone wrong in one way.
enum class Fault { NoOutputs, OneOutputUnbound, OneValue, WrongShape, WrongGradient };
class Faulty : public ProductAndSquares {
 public:
  explicit Faulty(Fault fault) : fault_(fault) {}
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& in) const override {
    if (fault_ == Fault::NoOutputs) return {};
    std::vector<OutputSpec> specs = ProductAndSquares::infer_outputs(in);
    if (fault_ == Fault::OneOutputUnbound && !in[0].has_known_shape()) specs.pop_back();
    return specs;
  }
  std::vector<Value> forward(const std::vector<Value>& in, const std::vector<Variable>& outputs,
                             bool training, std::any& state) const override {
    std::vector<Value> values = ProductAndSquares::forward(in, outputs, training, state);
    if (fault_ == Fault::OneValue) values.pop_back();
    if (fault_ == Fault::WrongShape) values[1] = values[0];
    return values;
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>& wanted) const override {
    std::vector<std::optional<Value>> g = ProductAndSquares::backward(state, roots, wanted);
    if (fault_ == Fault::WrongGradient) g[0] = roots[1];
    return g;
  }

 private:
  Fault fault_;
};

TEST(UserFunction, WrongOutputsOfSeveralAreErrorsNamingTheOpTheOutputAndTheShapes) {
  Variable a = input_variable({3}, {.needs_gradient = true}), b = input_variable({3});
  const ValueMap args = two_inputs(a, b, false, DataType::Float32);
  auto made = [&](Fault fault) { return user_function(std::make_shared<Faulty>(fault), {a, b}); };
  expect_error([&] { made(Fault::NoOutputs); },
               {"test.ProductAndSquares: infer_outputs gave no outputs"});
  expect_error([&] { made(Fault::OneValue).eval(args); },
               {"test.ProductAndSquares: forward gave 1 values for 2 outputs"});
  expect_error(
      [&] { made(Fault::WrongShape).eval(args); },
      {"test.ProductAndSquares: forward's output 1 (", ") has samples of shape [3], expected [1]"});
  // Made on placeholders, a user function has the outputs infer_outputs gave then.
  Variable p = placeholder(), q = placeholder();
  Function unbound = user_function(std::make_shared<Faulty>(Fault::OneOutputUnbound), {p, q});
  EXPECT_EQ(unbound.outputs().size(), 1u);
  expect_error(
      [&] {
        unbound.replace_placeholders({{p, a}, {q, b}});
      },
      {"test.ProductAndSquares: infer_outputs gave 2 outputs for the inputs bound to its "
       "placeholders; it gave 1 when the function was made"});
  expect_error(
      [&] {
        const Function f = made(Fault::WrongGradient);
        plus(reduce_sum(f.outputs()[0], Axis(0)), f.outputs()[1]).grad(args, {a});
      },
      {"test.ProductAndSquares: backward's gradient of input 0 (",
       ") has samples of shape [1], expected [3]"});
}

// ProductAndSquares with its outputs the other way round: the squares ([1]), then the product,
// of free dimensions where the inputs have them.
class SquaresAndProduct : public ProductAndSquares {
 public:
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& in) const override {
    std::vector<OutputSpec> specs = ProductAndSquares::infer_outputs(in);
    return {specs[1], specs[0]};
  }
  std::vector<Value> forward(const std::vector<Value>& in, const std::vector<Variable>& outputs,
                             bool training, std::any& state) const override {
    std::vector<Value> values = ProductAndSquares::forward(in, outputs, training, state);
    return {values[1], values[0]};
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>& wanted) const override {
    return ProductAndSquares::backward(state, {roots[1], roots[0]}, wanted);
  }
};

TEST(UserFunction, AnyOutputMayHaveFreeDimensions) {
  const InputOptions options{.dtype = DataType::Float64, .needs_gradient = true};
  Variable a = input_variable(NDShape{NDShape::kFree}, options);
  Variable b = input_variable(NDShape{NDShape::kFree}, options);
  Function f = user_function(std::make_shared<SquaresAndProduct>(), {a, b});
  EXPECT_EQ(f.outputs()[1].shape(), NDShape{NDShape::kFree});
  for (size_t n : {3, 5}) {  // each minibatch sizes the product
    const ValueMap args = {{a, random_batch({n}, 4, DataType::Float64, 5)},
                           {b, random_batch({n}, 4, DataType::Float64, 6)}};
    const ValueMap both = f.eval(args);
    EXPECT_EQ(both.at(f.outputs()[1]).sample_shape(), NDShape{n});
    EXPECT_EQ(values_of(both.at(f.outputs()[1])), values_of(element_times(a, b).eval_one(args)));
    gradient_check_detail::expect_all_near(
        values_of(both.at(f.outputs()[0])),
        values_of(reduce_sum(element_times(a, a), Axis(0)).eval_one(args)), 1e-12, "squares");
    // d/db of the sum of the product is a.
    EXPECT_EQ(values_of(Function(reduce_sum(f.outputs()[1], Axis(0))).grad(args, {b}).at(b)),
              values_of(args.at(a)));
  }
}

TEST(UserFunction, MadeOnPlaceholdersItHasTheOutputsInferOutputsGives) {
  // As CNTK's, infer_outputs is asked on the placeholders (for how many outputs there are), and
  // again for their types once they are bound.
  Variable p = placeholder(), q = placeholder();
  Function f = user_function(std::make_shared<ProductAndSquares>(), {p, q}, "ps");
  ASSERT_EQ(f.outputs().size(), 2u);
  EXPECT_FALSE(f.outputs()[1].has_known_shape());
  Variable a = input_variable({3}, {.dtype = DataType::Float64});
  Variable b = input_variable({3}, {.dtype = DataType::Float64});
  f.replace_placeholders({{p, a}, {q, b}});
  EXPECT_EQ(f.outputs()[1].shape(), NDShape{1});
  const ValueMap args = two_inputs(a, b, false, DataType::Float64);
  EXPECT_EQ(values_of(f.eval(args).at(f.outputs()[0])),
            values_of(element_times(a, b).eval_one(args)));
}

// ProductAndSquares whose outputs have names of their own, and whose squares need no gradient.
class NamedOutputs : public ProductAndSquares {
 public:
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& in) const override {
    std::vector<OutputSpec> specs = ProductAndSquares::infer_outputs(in);
    specs[0].name = "product";
    specs[1].name = "squares";
    specs[1].needs_gradient = false;
    return specs;
  }
};

// Cube of an output that needs no gradient: backward must not be called.
class CubeWithoutGradient : public Cube {
 public:
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& in) const override {
    std::vector<OutputSpec> specs = Cube::infer_outputs(in);
    specs[0].needs_gradient = false;
    return specs;
  }
  std::vector<std::optional<Value>> backward(const std::any&, const std::vector<Value>&,
                                             const std::vector<bool>&) const override {
    ADD_FAILURE() << "backward of an output that needs no gradient";
    return {};
  }
};

TEST(UserFunction, OutputsAreNamedAndNeedGradientsAsInferOutputsSays) {
  Variable a = input_variable({3}, {.dtype = DataType::Float64, .needs_gradient = true});
  Variable b = input_variable({3}, {.dtype = DataType::Float64, .needs_gradient = true});
  auto user = std::make_shared<NamedOutputs>();
  Function f = user_function(user, {a, b}, "ps");
  const Variable product = f.outputs()[0], squares = f.outputs()[1];
  EXPECT_EQ(product.name(), "product");
  EXPECT_EQ(squares.name(), "squares");
  EXPECT_TRUE(product.needs_gradient());
  EXPECT_FALSE(squares.needs_gradient());
  Function copy = f.clone(ParameterCloneMethod::Share);
  EXPECT_EQ(copy.outputs()[1].name(), "squares");
  EXPECT_FALSE(copy.outputs()[1].needs_gradient());
  // Without names of their own, outputs take the function's.
  EXPECT_EQ(user_function(std::make_shared<ProductAndSquares>(), {a, b}, "ps").outputs()[1].name(),
            "ps");

  // The squares pass no gradient: backward gets zeros for them, and d/da of the product's sum
  // plus the squares is b alone.
  const ValueMap args = two_inputs(a, b, false, DataType::Float64);
  const Function loss = plus(reduce_sum(product, Axis(0)), squares);
  EXPECT_EQ(values_of(loss.grad(args, {a}).at(a)), values_of(args.at(b)));
  EXPECT_EQ(user->backwards, 1);
  for (double g : user->given[1].data().to_vector<double>()) EXPECT_EQ(g, 0.0);

  // No output needs a gradient: backward is not called and the input's gradient is zeros.
  Function cube = user_function(std::make_shared<CubeWithoutGradient>(), {a});
  for (double g : values_of(cube.grad(args, {a}).at(a))) EXPECT_EQ(g, 0.0);
}

// Product whose backward gives input 0's gradient only.
class ProductWithoutSecondGradient : public Product {
 public:
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>& wanted) const override {
    std::vector<std::optional<Value>> g = Product::backward(state, roots, wanted);
    g[1].reset();
    return g;
  }
};

TEST(UserFunction, AnInputBackwardGivesNoGradientForGetsZeros) {
  // CNTK's test_udf_no_gradient_for_some_inputs.
  Variable a = input_variable({3}, {.dtype = DataType::Float64, .needs_gradient = true});
  Variable b = input_variable({3}, {.dtype = DataType::Float64, .needs_gradient = true});
  Function f = user_function(std::make_shared<ProductWithoutSecondGradient>(), {a, b});
  const ValueMap args = two_inputs(a, b, false, DataType::Float64);
  const ValueMap g = f.grad(args, {a, b});
  EXPECT_EQ(values_of(g.at(a)), values_of(args.at(b)));
  for (double v : values_of(g.at(b))) EXPECT_EQ(v, 0.0);
}

// x * x of a sequence input, computed on its packed rows; its outputs and gradients are packed
// Values on the input's layout, and it keeps them to see whether they were padded.
class PackedSquare : public UserFunction {
 public:
  std::string op_name() const override { return "test.PackedSquare"; }
  std::vector<Value> forward(const std::vector<Value>& inputs, const std::vector<Variable>&, bool,
                             std::any& state) const override {
    state = inputs[0];
    return {keep(times(inputs[0], inputs[0], 1))};
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>&) const override {
    return {keep(times(std::any_cast<const Value&>(state), roots[0], 2))};
  }
  mutable std::vector<Value> given;

 private:
  // a * b * k, row by row, on a's layout (the executor gives b on the same lengths).
  static Value times(const Value& a, const Value& b, double k) {
    NDArrayView out = a.packed_rows().deep_clone();
    const std::vector<double> other = b.packed_rows().to_vector<double>();
    for (size_t i = 0; i < other.size(); ++i) out.data<double>()[i] *= k * other[i];
    return Value::packed(out, a.packed_layout());
  }
  Value keep(Value v) const { return given.emplace_back(std::move(v)); }
};

// Packed Values a user function gives (outputs, and gradients written into an input's and
// added to it) are read from their rows, never padded.
TEST(UserFunction, ThePackedValuesItGivesAreReadFromTheirRows) {
  Variable x = input_variable({2}, {.dtype = DataType::Float64,
                                    .needs_gradient = true,
                                    .dynamic_axes = default_sequence_axes()});
  auto square = std::make_shared<PackedSquare>();
  Function y = plus(user_function(square, {x}), user_function(square, {x}));
  const ValueMap args{{x, random_sequences({2}, {3, 1, 2}, DataType::Float64, 7)}};
  const std::vector<double> xs = values_of(args.at(x)), ys = values_of(y.eval_one(args)),
                            gs = values_of(y.grad(args, {x}).at(x));
  ASSERT_EQ(ys.size(), xs.size());
  ASSERT_EQ(gs.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(ys[i], 2 * xs[i] * xs[i]);
    EXPECT_EQ(gs[i], 4 * xs[i]);  // one gradient written, the other added to it
  }
  ASSERT_EQ(square->given.size(), 6u);  // two forwards in eval, two in grad, two gradients
  for (const Value& v : square->given) EXPECT_FALSE(v.has_padded_form());
}

}  // namespace
}  // namespace loom
