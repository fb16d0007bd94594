// loom export MODEL --onnx OUT.onnx: the model (or a checkpoint's model) as an ONNX file
// (docs/onnx.md). A model with an op ONNX export lacks fails naming the op.
// loom convert MODEL OUT: the model in Loom's own format (a CNTK model file, v2 or v1, read
// as docs/cntk-formats.md says; or a checkpoint's model).
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

void add_convert_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("convert", "Write a model file (CNTK's too) in Loom's format");
  auto model = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("MODEL", *model, "A model or checkpoint file (Loom's or CNTK's)")->required();
  cmd->add_option("OUT", *out, "The Loom model file to write")->required();
  cmd->callback([model, out] {
    save_model(load_model(*model), *out);
    std::printf("Wrote %s\n", out->c_str());
  });
}

}  // namespace loom::tools
