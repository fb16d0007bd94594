// The subcommands of the `loom` command. Each adds itself to the application; its callback
// runs the command. Misuse of the command line (a flag CLI11 rejects,
// a --map naming no argument, ...) is a UsageError: exit code 2; other loom::Errors exit 1.
#pragma once

#include <CLI/CLI.hpp>

#include "loom/core/error.h"

namespace loom::tools {

class UsageError : public ArgumentError {
 public:
  using ArgumentError::ArgumentError;
};

void add_info_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_plot_command(CLI::App& app);

}  // namespace loom::tools
