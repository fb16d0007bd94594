// Graph pictures: the DOT text names the ops, inputs, parameters and shapes; plot_graph writes
// DOT itself and SVG through graphviz's dot, and says what is wrong otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "loom/deploy/graph_plot.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/pooling.h"
#include "loom/layers/sequential.h"
#include "loom/ops/ops.h"

namespace loom {
namespace {

Function convnet() {
  Variable x = input_variable({1, 8, 8}, {.name = "image"});
  return Sequential({Convolution2D({3, 3}, 4, {.activation = relu, .pad = true}),
                     MaxPooling({2, 2}, {.strides = {2}}), Dense(3)})(x);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(GraphPlot, DotNamesOpsParametersAndShapes) {
  const std::string dot = graph_to_dot(convnet());
  for (const char* part :
       {"digraph loom {", "label=\"Convolution\"", "label=\"ReLU\"", "MaxPooling [2,2] strides [2]",
        "label=\"Times\"", "image\\nTensor[1,8,8]", "Convolution2D.W\\n[4,1,3,3]",
        "Dense.W\\n[4,4,4,3]", "label=\"[4,8,8]\"", "peripheries=2"})
    EXPECT_NE(dot.find(part), std::string::npos) << "no " << part << " in\n" << dot;
  // Names with quotes are escaped.
  Variable q = input_variable(2, {.name = "say \"hi\""});
  EXPECT_NE(graph_to_dot(relu(q)).find("say \\\"hi\\\""), std::string::npos);
}

TEST(GraphPlot, WritesDotAndRendersSvg) {
  const std::string dir = ::testing::TempDir();
  const Function model = convnet();
  plot_graph(model, dir + "loom_plot.dot");
  EXPECT_EQ(read(dir + "loom_plot.dot"), graph_to_dot(model));
  plot_graph(model, dir + "loom_plot.svg");
  const std::string svg = read(dir + "loom_plot.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("Convolution2D.W"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "loom_plot.svg.tmp.dot"));
  std::filesystem::remove(dir + "loom_plot.dot");
  std::filesystem::remove(dir + "loom_plot.svg");
}

TEST(GraphPlot, ReportsWhatIsWrong) {
  EXPECT_THROW(plot_graph(convnet(), "graph.txt"), ArgumentError);
  EXPECT_THROW(plot_graph(convnet(), "/nonexistent/folder/graph.svg"), IOError);
  // Without dot on the PATH.
  const std::string path = std::getenv("PATH");
  setenv("PATH", "/nonexistent", 1);
  try {
    plot_graph(convnet(), ::testing::TempDir() + "loom_plot_nodot.svg");
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("apt-get install graphviz"), std::string::npos)
        << e.what();
  }
  setenv("PATH", path.c_str(), 1);
}

}  // namespace
}  // namespace loom
