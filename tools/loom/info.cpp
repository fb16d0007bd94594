// loom info MODEL: the file (format version, content, sections, checksums; for CNTK's own
// files their format and version and the ops they hold), the function's signature as
// Function::to_string prints it, its arguments and outputs, and its parameters with their
// paths, shapes and sizes.
#include <cstdio>
#include <map>
#include <span>
#include <string>

#include "loom/serialize/cntk_model.h"
#include "loom/serialize/container.h"
#include "loom/serialize/model_file.h"
#include "tools/loom/commands.h"

namespace loom::tools {
namespace {

void print_function(const Function& model);

// A CNTK model file (docs/cntk-formats.md): its format and version, and its primitive
// functions by CNTK's op type, as the file lists them (blocks' inner functions included).
void print_cntk_file(const std::string& path, std::span<const uint8_t> bytes, CntkFormat format) {
  const Dictionary d =
      format == CntkFormat::V2 ? cntk_v2_dictionary(bytes, path) : cntk_v1_dictionary(bytes, path);
  std::printf("File: %s\n", path.c_str());
  std::string version = "?";
  if (d.contains("version") && d.at("version").is<uint64_t>())
    version = std::to_string(d.get<uint64_t>("version"));
  std::printf("Format: %s, CompositeFunction version %s, %zu bytes\n",
              format == CntkFormat::V2 ? "CNTK v2 (protocol buffer of CNTK.proto's Dictionary)"
                                       : "CNTK v1 (cntk.exe's legacy computation network)",
              version.c_str(), bytes.size());
  std::map<std::string, size_t> ops;
  if (d.contains("primitive_functions") && d.at("primitive_functions").is<DictionaryVector>())
    for (const DictionaryValue& v : d.get<DictionaryVector>("primitive_functions")) {
      if (!v.is<DictionaryMap>()) continue;
      const Dictionary f(v.get<DictionaryMap>());
      if (!f.contains("op")) continue;
      const DictionaryValue& op = f.at("op");
      const int64_t n = op.is<uint64_t>()  ? int64_t(op.get<uint64_t>())
                        : op.is<int64_t>() ? op.get<int64_t>()
                                           : -1;
      std::string name = cntk_op_type_name(n);
      if (n == 57 && f.contains("block_function_op_name") &&
          f.at("block_function_op_name").is<std::string>()) {
        name = "Block " + f.get<std::string>("block_function_op_name");
      }
      ++ops[name];
    }
  std::string listed;
  for (const auto& [name, count] : ops)
    listed += (listed.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  std::printf("CNTK ops: %s\n", listed.empty() ? "none" : listed.c_str());
}

void info(const std::string& path) {
  const MappedFile file(path);
  if (const CntkFormat format = cntk_format_of(file.bytes()); format != CntkFormat::None) {
    print_cntk_file(path, file.bytes(), format);
    print_function(load_model(path));
    return;
  }
  // The container reader checks the header's and every section's CRC32C; a damaged file
  // throws a DataError saying where.
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

  print_function(load_model(path));
}

void print_function(const Function& model) {
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
