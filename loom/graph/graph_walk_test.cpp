#include "loom/graph/graph_walk.h"

#include <gtest/gtest.h>

#include "loom/ops/elementwise.h"
#include "loom/ops/linear.h"

namespace loom {
namespace {

std::vector<std::string> names(const std::vector<GraphNode>& nodes) {
  std::vector<std::string> out;
  for (const GraphNode& n : nodes) out.push_back(name_of(n));
  return out;
}

TEST(GraphWalk, VisitsEachFunctionBeforeItsInputsAndEachNodeOnce) {
  Variable x = input_variable({2}, {.name = "x"});
  Parameter w = parameter(NDShape{2, 3}, constant_initializer(1.0), DataType::Float32, "W");
  Parameter b = parameter(NDShape{3}, constant_initializer(0.0), DataType::Float32, "b");
  Function z = plus(times(x, w, 1, -1, "xW"), b, "z");
  Function r = plus(relu(z, "r"), z, "out");  // z is reached twice
  auto all = depth_first_search(r, [](const GraphNode&) { return true; });
  EXPECT_EQ(names(all), (std::vector<std::string>{"out", "r", "z", "xW", "x", "W", "b"}));
  auto functions =
      depth_first_search(r, [](const GraphNode& n) { return std::holds_alternative<Function>(n); });
  EXPECT_EQ(names(functions), (std::vector<std::string>{"out", "r", "z", "xW"}));

  auto found = find_all_with_name(r, "W");
  ASSERT_EQ(found.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<Variable>(found[0]));
  EXPECT_TRUE(std::get<Variable>(found[0]).is_parameter());
  EXPECT_TRUE(find_all_with_name(r, "nothing").empty());

  auto outputs = node_outputs(r);
  ASSERT_EQ(outputs.size(), 4u);
  EXPECT_EQ(outputs[0].owner().name(), "out");
  EXPECT_EQ(outputs[3].owner().name(), "xW");
}

TEST(GraphWalk, AChainOfAnyDepthIsWalkedWithoutRecursion) {
  Variable x = input_variable({1}, {.name = "x"});
  Variable h = x;
  for (int i = 0; i < 100'000; ++i) h = negate(h);
  auto all = depth_first_search(Function(h), [](const GraphNode&) { return true; });
  EXPECT_EQ(all.size(), 100'001u);
  EXPECT_EQ(name_of(all.back()), "x");
}

}  // namespace
}  // namespace loom
