// loom plot MODEL --out graph.svg|png|pdf|dot: a picture of the model's graph (CNTK's
// logging.graph.plot), rendered by graphviz's dot except for .dot.
#include <cstdio>
#include <filesystem>
#include <string>

#include "loom/deploy/graph_plot.h"
#include "loom/serialize/model_file.h"
#include "tools/loom/commands.h"

namespace loom::tools {

void add_plot_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plot", "Draw a model's graph: ops, inputs, parameters with their shapes (needs graphviz)");
  auto model = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("MODEL", *model, "A model or checkpoint file")->required();
  cmd->add_option("--out", *out, "The picture: .svg, .png or .pdf (rendered by dot) or .dot")
      ->required();
  cmd->callback([model, out] {
    const std::string ext = std::filesystem::path(*out).extension().string();
    if (ext != ".svg" && ext != ".png" && ext != ".pdf" && ext != ".dot")
      throw UsageError("--out " + *out + " should end in .svg, .png, .pdf or .dot (the format)");
    plot_graph(load_model(*model), *out);
    std::printf("Wrote %s\n", out->c_str());
  });
}

}  // namespace loom::tools
