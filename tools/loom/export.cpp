// loom export MODEL --onnx OUT.onnx: the model (or a checkpoint's model) as an ONNX file
// (docs/onnx.md). A model with an op ONNX export lacks fails naming the op.
#include <cstdio>
#include <string>

#include "loom/deploy/onnx.h"
#include "loom/serialize/model_file.h"
#include "tools/loom/commands.h"

namespace loom::tools {

void add_export_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("export", "Write a model file as an ONNX model (opset 13)");
  auto model = std::make_shared<std::string>();
  auto onnx = std::make_shared<std::string>();
  cmd->add_option("MODEL", *model, "A model or checkpoint file")->required();
  cmd->add_option("--onnx", *onnx, "The ONNX file to write")->required();
  cmd->callback([model, onnx] {
    save_model(load_model(*model), *onnx, ModelFormat::ONNX);
    std::printf("Wrote %s\n", onnx->c_str());
  });
}

}  // namespace loom::tools
