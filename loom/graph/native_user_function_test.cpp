// Native user functions: a factory in a library loaded at run time (tests/support/
// native_scale_plugin.cpp) makes a user function, of one output or two, that evaluates,
// differentiates, saves and loads; the errors of a wrong library, factory or op id.
#include "loom/graph/native_user_function.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "loom/graph/user_function.h"
#include "loom/ops/elementwise.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// Registered once per process: op ids are unique.
void register_scale() {
  static const bool registered = [] {
    register_native_user_function("test.Scale", LOOM_NATIVE_SCALE_PLUGIN, "create_scale_function");
    register_native_user_function("test.ScaleAndSquare", LOOM_NATIVE_SCALE_PLUGIN,
                                  "create_scale_and_square_function");
    return true;
  }();
  (void)registered;
}

Dictionary scale(double s) {
  Dictionary d;
  d["scale"] = s;
  return d;
}

TEST(NativeUserFunction, EvaluatesDifferentiatesSavesAndLoads) {
  register_scale();
  Variable x = input_variable({3}, {.name = "x", .needs_gradient = true});
  Function f = native_user_function("test.Scale", {x}, scale(2.5), "scaled");
  EXPECT_EQ(f.name(), "scaled");
  EXPECT_EQ(f.op_name(), "test.NativeScale");
  const Value data = Value::create_batch<float>({3}, {1, -2, 4, 0.5f, 0, 8});
  EXPECT_EQ(f.eval(data).data().to_vector<float>(),
            (std::vector<float>{2.5f, -5, 10, 1.25f, 0, 20}));
  EXPECT_EQ(f.grad({{x, data}}, {x}).at(x).data().to_vector<float>(), std::vector<float>(6, 2.5f));

  // The model file keeps the op id, library, factory and attributes: loading makes it again.
  const Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  EXPECT_EQ(loaded.eval(data).data().to_vector<float>(), f.eval(data).data().to_vector<float>());
  EXPECT_EQ(loaded.output().owner().op_name(), "test.NativeScale");
  // Its attributes are those it was made with, loaded too (CNTK's Function.attributes).
  EXPECT_EQ(f.output().owner().attributes().get<double>("scale"), 2.5);
  EXPECT_EQ(loaded.output().owner().attributes().get<double>("scale"), 2.5);
  Dictionary reserved = scale(2);
  reserved["native"] = 1;
  EXPECT_THROW(native_user_function("test.Scale", {x}, reserved), ArgumentError);
}

TEST(NativeUserFunction, TwoOutputsEvaluateDifferentiateSaveAndLoad) {
  register_scale();
  Variable x = input_variable({2}, {.name = "x", .needs_gradient = true});
  Function f = native_user_function("test.ScaleAndSquare", {x}, scale(3), "both");
  ASSERT_EQ(f.outputs().size(), 2u);
  const Variable scaled = f.outputs()[0], squared = f.outputs()[1];
  const Value data = Value::create_batch<float>({2}, {1, -2, 0.5f, 4});
  const ValueMap values = f.eval({{x, data}});
  EXPECT_EQ(values.at(scaled).data().to_vector<float>(), (std::vector<float>{3, -6, 1.5f, 12}));
  EXPECT_EQ(values.at(squared).data().to_vector<float>(), (std::vector<float>{1, 4, 0.25f, 16}));
  // d/dx of the sum of both outputs: 3 + 2x.
  const Function sum = plus(scaled, squared);
  EXPECT_EQ(sum.grad({{x, data}}, {x}).at(x).data().to_vector<float>(),
            (std::vector<float>{5, -1, 4, 11}));

  const Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  ASSERT_EQ(loaded.outputs().size(), 2u);
  const ValueMap reloaded = loaded.eval({{loaded.argument("x"), data}});
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(reloaded.at(loaded.outputs()[k]).data().to_vector<float>(),
              values.at(f.outputs()[k]).data().to_vector<float>());
  EXPECT_EQ(loaded.outputs()[1].owner().op_name(), "test.NativeScaleAndSquare");
}

TEST(NativeUserFunction, BadLibrariesFactoriesAndOpIdsAreErrors) {
  register_scale();
  EXPECT_THROW(register_native_user_function("test.Scale", LOOM_NATIVE_SCALE_PLUGIN,
                                             "create_scale_function"),
               ArgumentError);  // registered already
  EXPECT_THROW(register_native_user_function("test.Missing", "/nonexistent/libnothing", "f"),
               IOError);
  EXPECT_THROW(
      register_native_user_function("test.NoFactory", LOOM_NATIVE_SCALE_PLUGIN, "no_such_factory"),
      ArgumentError);
  Variable x = input_variable({3}, {.name = "x"});
  EXPECT_THROW(native_user_function("test.Unregistered", {x}), ArgumentError);
  // The factory refuses two operands (it returns null).
  EXPECT_THROW(native_user_function("test.Scale", {x, x}), ArgumentError);
}

TEST(NativeUserFunction, ALibraryNamedWithoutAFolderIsFoundOnTheSearchPath) {
  const std::filesystem::path plugin(LOOM_NATIVE_SCALE_PLUGIN);
  const std::string file = plugin.filename().string();
  EXPECT_THROW(register_native_user_function("test.Found", file, "create_scale_function"), IOError);
  add_native_user_function_search_path(plugin.parent_path().string());
  register_native_user_function("test.Found", file, "create_scale_function");
  Variable x = input_variable({1}, {.name = "x"});
  EXPECT_EQ(native_user_function("test.Found", {x}, scale(4))
                .eval(Value::create_batch<float>({1}, {2}))
                .data()
                .to_vector<float>(),
            std::vector<float>{8});
}

TEST(NativeUserFunction, SaysWhichOpIdsAreRegistered) {
  register_scale();
  EXPECT_TRUE(is_native_user_function_registered("test.Scale"));
  EXPECT_TRUE(is_native_user_function_registered("test.ScaleAndSquare"));
  EXPECT_FALSE(is_native_user_function_registered("test.Unregistered"));
  // A registration that failed registered nothing.
  EXPECT_THROW(register_native_user_function("test.BadLibrary", "/nonexistent/libnothing", "f"),
               IOError);
  EXPECT_FALSE(is_native_user_function_registered("test.BadLibrary"));
}

}  // namespace
}  // namespace loom
