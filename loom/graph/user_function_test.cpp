// User functions (CNTK's UserFunction in C++): forward and backward in the user's code, checked
// against finite differences and built-in ops, on batches and ragged sequences, in training,
// cloned, saved and loaded, and with the errors a wrong implementation gets.
#include "loom/graph/user_function.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/learners/sgd.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/linear.h"
#include "loom/ops/losses.h"
#include "loom/ops/reduction.h"
#include "loom/ops/sequence_ops.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// x^3 elementwise, over Values: the state forward keeps is its input (backward needs x^2).
class Cube : public UserFunction {
 public:
  std::string op_name() const override { return "test.Cube"; }
  Value forward(const std::vector<Value>& inputs, bool, std::any& state) const override {
    ++forwards;
    state = inputs[0];
    return map(inputs[0], [](double x) { return x * x * x; });
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const Value& root,
                                             const std::vector<bool>&) const override {
    const Value& x = std::any_cast<const Value&>(state);
    Value g = map(x, [](double v) { return 3 * v * v; });
    multiply(g, root);
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
  Value forward(const std::vector<Value>& inputs, bool, std::any& state) const override {
    state = inputs;
    Value out = Cube::map(inputs[0], [](double x) { return x; });
    Cube::multiply(out, inputs[1]);
    return out;
  }
  std::vector<std::optional<Value>> backward(const std::any& state, const Value& root,
                                             const std::vector<bool>& wanted) const override {
    const auto& in = std::any_cast<const std::vector<Value>&>(state);
    std::vector<std::optional<Value>> g(2);
    for (size_t i = 0; i < 2; ++i) {
      if (!wanted[i]) continue;
      ++gradients_given;
      Value gi = Cube::map(in[1 - i], [](double x) { return x; });
      Cube::multiply(gi, root);
      g[i] = gi;
    }
    return g;
  }
  mutable int gradients_given = 0;
};

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
  try {
    load_model_from_bytes(bytes, "cube.model");
    FAIL() << "loaded a user function no deserializer knows";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cube.model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'test.Cube'"), std::string::npos) << e.what();
  }
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
  Value forward(const std::vector<Value>& inputs, bool, std::any&) const override {
    return Value(NDArrayView(DataType::Float32, {inputs[0].num_sequences(), 5}), false);
  }
  std::vector<std::optional<Value>> backward(const std::any&, const Value&,
                                             const std::vector<bool>&) const override {
    return {};
  }
};

class NoBatchAxis : public WrongShape {
 public:
  OutputSpec infer_output(const std::vector<Variable>& inputs) const override {
    return {inputs[0].shape(), inputs[0].dtype(), {}, false};
  }
};

TEST(UserFunction, WrongOutputsAreErrorsNamingTheOp) {
  Variable x = input_variable({2});
  Function f = user_function(std::make_shared<WrongShape>(), {x});
  try {
    f.eval_one({{x, random_batch({2}, 3, DataType::Float32, 1)}});
    FAIL() << "a wrong shape went through";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("test.WrongShape: forward's output has samples of "
                                         "shape [5], expected [2]"),
              std::string::npos)
        << e.what();
  }
  try {
    user_function(std::make_shared<NoBatchAxis>(), {x});
    FAIL() << "an output off the inputs' axes went through";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("has its inputs' dynamic axes"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(user_function(nullptr, {x}), ArgumentError);
}

}  // namespace
}  // namespace loom
