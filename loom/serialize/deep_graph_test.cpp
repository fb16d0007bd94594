// Graphs of any depth: building, evaluating, differentiating, printing, cloning, saving,
// loading and freeing a chain of ops recurses nowhere (one nested call per op overflows an
// 8 MiB stack at a few hundred thousand ops; under ASan at far fewer).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/graph/function.h"
#include "loom/ops/ops.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// A million ops in release (about 20 s on a quiet 2-core machine: build 0.8 s, eval 3.7, grad
// 3.0, print and clone 2.3, save 2.7, load 5.5; peak 2.6 GB), fewer under ASan, whose frames are
// larger and whose allocations slower.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDepth = 50'000;
#else
constexpr size_t kDepth = 1'000'000;
#endif

Function chain(size_t depth) {
  Variable y = input_variable({2}, {.name = "x", .needs_gradient = true});
  for (size_t i = 0; i < depth; ++i) y = negate(y);
  return y.owner();
}

std::vector<float> eval_at(const Function& f, const Value& x) {
  return f.eval_one({{f.arguments().at(0), x}}).data().to_vector<float>();
}

TEST(DeepGraph, AChainDeeperThanTheStackRecursesNowhere) {
  const Value x = Value::create_batch<float>({2}, {1, 2});
  const std::vector<float> same{1, 2};  // an even number of negations
  std::vector<uint8_t> bytes;
  {
    const Function f = chain(kDepth);
    const Variable in = f.arguments().at(0);
    EXPECT_EQ(eval_at(f, x), same);
    EXPECT_EQ(f.grad({{in, x}}, {in}).at(in).data().to_vector<float>(), (std::vector<float>{1, 1}));
    EXPECT_EQ(f.to_string(), "Composite(x: Tensor[2]) -> Tensor[2]");
    EXPECT_EQ(eval_at(f.clone(ParameterCloneMethod::Share), x), same);
    bytes = save_model_to_bytes(f);
  }  // the graph and its clone are freed here
  const Function loaded = load_model_from_bytes(bytes);
  EXPECT_EQ(loaded.to_string(), "Composite(x: Tensor[2]) -> Tensor[2]");
  EXPECT_EQ(eval_at(loaded, x), same);
}

}  // namespace
}  // namespace loom
