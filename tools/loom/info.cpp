// loom info MODEL: the file (format version, content, sections, checksums), the function's
// signature as Function::to_string prints it, its arguments and outputs, and its parameters
// with their paths, shapes and sizes.
#include <cstdio>
#include <string>

#include "loom/serialize/container.h"
#include "loom/serialize/model_file.h"
#include "tools/loom/commands.h"

namespace loom::tools {
namespace {

void info(const std::string& path) {
  // The container reader checks the header's and every section's CRC32C; a damaged file
  // throws a DataError saying where.
  const MappedFile file(path);
  const ContainerReader container(file.bytes(), path);
  std::string sections;
  for (const Section& s : container.sections())
    sections += (sections.empty() ? "" : ", ") + std::string(section_kind_name(s.kind));
  std::printf("File: %s\n", path.c_str());
  std::printf("Format: Loom container version %u, %s, %zu bytes, sections: %s\n",
              container.version(), content_kind_name(container.content_kind()), file.bytes().size(),
              sections.c_str());
  std::printf("Checksums: valid (CRC32C of the header and of %zu sections)\n",
              container.sections().size());

  const Function model = load_model(path);
  std::printf("Signature: %s\n", model.to_string().c_str());
  std::printf("Arguments:\n");
  for (const Variable& a : model.arguments()) std::printf("  %s\n", a.describe().c_str());
  std::printf("Outputs:\n");
  for (const Variable& o : model.outputs()) std::printf("  %s\n", o.describe().c_str());
  const std::vector<Parameter> parameters = model.parameters();
  const std::vector<std::string> paths = model.parameter_paths();
  size_t total = 0;
  for (const Parameter& p : parameters) total += p.shape().total_size();
  std::printf("Parameters: %zu tensors, %zu values\n", parameters.size(), total);
  for (size_t i = 0; i < parameters.size(); ++i)
    std::printf("  %-24s %-16s %zu\n", paths[i].c_str(), parameters[i].shape().to_string().c_str(),
                parameters[i].shape().total_size());
}

}  // namespace

void add_info_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "info", "Print a model file's format, checksum status, signature and parameters");
  auto path = std::make_shared<std::string>();
  cmd->add_option("MODEL", *path, "A model or checkpoint file")->required();
  cmd->callback([path] { info(*path); });
}

}  // namespace loom::tools
