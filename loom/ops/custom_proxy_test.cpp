#include "loom/ops/custom_proxy.h"

#include <gtest/gtest.h>

#include "loom/ops/ops.h"
#include "loom/ops/ops_test_util.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

TEST(CustomProxyOp, HasTheDeclaredTypeAndNoComputation) {
  const Variable a = input_variable({3}, {.name = "a"}), b = input_variable({3}, {.name = "b"});
  const Function f = custom_proxy_op({a, b}, "MyOnnxOp", NDShape{2, 4}, DataType::Float64, "p");
  EXPECT_EQ(f.op_name(), "CustomProxyOp");
  EXPECT_EQ(f.name(), "p");
  EXPECT_EQ(f.output().shape(), NDShape({2, 4}));
  EXPECT_EQ(f.output().dtype(), DataType::Float64);
  EXPECT_EQ(f.output().dynamic_axes(), default_batch_axes());
  EXPECT_EQ(f.attributes().get<std::string>("custom_op"), "MyOnnxOp");
  expect_error<StateError>(
      [&] {
        f.eval_one({{a, random_batch({3}, 2, kF32, 1)}, {b, random_batch({3}, 2, kF32, 2)}});
      },
      {"custom_proxy_op 'MyOnnxOp'", "no computation", "ONNX"});
  // It survives save and load (a model holding one is saved before export).
  const Function loaded = load_model_from_bytes(save_model_to_bytes(f));
  EXPECT_EQ(loaded.attributes().get<std::string>("custom_op"), "MyOnnxOp");
  EXPECT_EQ(loaded.output().shape(), NDShape({2, 4}));
  expect_shape_error([&] { custom_proxy_op({a}, "X", NDShape{NDShape::kInferred}, kF32); },
                     {"custom_proxy_op 'X'", "must be known"});
}

}  // namespace
}  // namespace loom
