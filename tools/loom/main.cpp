// loom: inspect, evaluate, serve, export and convert models from the command line (Loom's,
// and CNTK's own model files).
//
//   loom info MODEL
//   loom eval MODEL --data FILE ... [--map ARG=STREAM] [--labels STREAM] [--bf16] --output FILE
//   loom serve MODEL --port P [--name NAME] [--max-batch N] [--batch-delay-ms D]
//   loom export MODEL --onnx OUT.onnx
//   loom convert MODEL OUT
//   loom plot MODEL --out graph.svg|png|pdf|dot
//
// Exit codes: 0 success, 1 a failure (a damaged model, unreadable data, a port in use), 2 a
// command line that is wrong (its message says how).
#include <cstdio>

#include "tools/loom/commands.h"

int main(int argc, char** argv) {
  CLI::App app("loom: inspect, evaluate, serve, export and draw Loom models", "loom");
  app.require_subcommand(1);
  loom::tools::add_info_command(app);
  loom::tools::add_eval_command(app);
  loom::tools::add_serve_command(app);
  loom::tools::add_export_command(app);
  loom::tools::add_convert_command(app);
  loom::tools::add_plot_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help (code 0) or the message
    return code == 0 ? 0 : 2;
  } catch (const loom::tools::UsageError& e) {
    std::fprintf(stderr, "loom: %s\nRun with --help for more information.\n", e.what());
    return 2;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
