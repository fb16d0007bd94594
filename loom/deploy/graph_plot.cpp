#include "loom/deploy/graph_plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "loom/core/atomic_file.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"
#include "loom/ops/pooling.h"

extern char** environ;

namespace loom {

namespace {

// A DOT string literal.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return q + "\"";
}

class DotWriter {
 public:
  explicit DotWriter(const Function& f) {
    const std::vector<Parameter> params = f.parameters();
    const std::vector<std::string> paths = f.parameter_paths();
    for (size_t i = 0; i < params.size(); ++i) paths_[params[i].impl().get()] = paths[i];
    dot_ << "digraph loom {\n"
            "  graph [rankdir=TB, fontname=Helvetica];\n"
            "  node [fontname=Helvetica, fontsize=11];\n"
            "  edge [fontname=Helvetica, fontsize=9, color=gray40];\n";
    const auto functions = topological_order(f.outputs());
    // Ids first: the operand of a delay op may come after the op (a recurrent loop).
    for (const auto& fn : functions)
      for (const auto& o : fn->outputs) ids_[o.get()] = "f" + std::to_string(ids_.size());
    for (const auto& fn : functions) add_function(*fn);
    size_t k = 0;
    for (const Variable& o : f.outputs()) {
      const std::string id = "out" + std::to_string(k++);
      dot_ << "  " << id
           << " [shape=ellipse, peripheries=2, style=filled, fillcolor=lightblue, label="
           << quoted((o.name().empty() ? o.uid() : o.name()) + "\n" + o.type_string()) << "];\n";
      edge(o, id);
    }
    dot_ << "}\n";
  }
  std::string str() const { return dot_.str(); }

 private:
  void add_function(const FunctionImpl& f) {
    const VariableImpl& o = *f.outputs[0];
    std::string label = f.op->name();
    if (label == "Pooling") {  // which pooling, and its window
      const bool max = PoolingType(f.attributes.get<int64_t>("pooling_type")) == PoolingType::Max;
      label = std::string(f.attributes.get<bool>("global") ? "Global" : "") +
              (max ? "MaxPooling" : "AveragePooling");
      if (!f.attributes.get<bool>("global"))
        label += " " + f.attributes.get<NDShape>("window").to_string() + " strides " +
                 f.attributes.get<NDShape>("strides").to_string();
    }
    if (!f.name.empty()) label += "\n" + f.name;
    dot_ << "  " << ids_.at(&o) << " [shape=box, style=\"rounded,filled\", fillcolor=lightyellow, "
         << "label=" << quoted(label) << "];\n";
    for (const Variable& in : f.inputs) edge(in, ids_.at(&o));
  }

  // The node of v: its producer, or a node of its own for a leaf.
  std::string node_of(const Variable& v) {
    auto it = ids_.find(v.impl().get());
    if (it != ids_.end()) return it->second;
    const std::string id = "v" + std::to_string(ids_.size());
    ids_[v.impl().get()] = id;
    if (v.is_parameter() || v.is_constant()) {
      auto path = paths_.find(v.impl().get());
      const std::string name = path != paths_.end() ? path->second
                               : v.name().empty()   ? v.uid()
                                                    : v.name();
      dot_ << "  " << id << " [shape=box, fontsize=9, style=filled, fillcolor="
           << (v.is_parameter() ? "lightgray" : "white")
           << ", label=" << quoted(name + "\n" + v.shape().to_string()) << "];\n";
    } else {
      dot_ << "  " << id << " [shape=ellipse, style=filled, fillcolor=palegreen, label="
           << quoted((v.name().empty() ? v.uid() : v.name()) + "\n" + v.type_string()) << "];\n";
    }
    return id;
  }

  void edge(const Variable& from, const std::string& to) {
    const std::string label = from.has_known_shape() ? from.shape().to_string() : std::string("?");
    const std::string id = node_of(from);
    dot_ << "  " << id << " -> " << to;
    if (from.is_output() || from.is_input()) dot_ << " [label=" << quoted(label) << "]";
    dot_ << ";\n";
  }

  std::ostringstream dot_;
  std::unordered_map<const VariableImpl*, std::string> ids_;
  std::unordered_map<const VariableImpl*, std::string> paths_;
};

// Runs dot -T<format> on the DOT file `input`, writing `output`; dot's messages go to `log`.
void render(const std::string& input, const std::string& format, const std::string& output,
            const std::string& log) {
  const std::string type = "-T" + format, out = "-o" + output;
  std::vector<char*> argv{const_cast<char*>("dot"), const_cast<char*>(type.c_str()),
                          const_cast<char*>(out.c_str()), const_cast<char*>(input.c_str()),
                          nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  LOOM_CHECK(err != ENOENT, IOError, "cannot render ", output,
             ": graphviz's dot program is not installed (apt-get install graphviz), or write a "
             ".dot file");
  LOOM_CHECK(err == 0, IOError, "cannot render ", output,
             ": starting dot failed: ", std::strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    const std::string message((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    throw IOError(detail::concat("cannot render ", output, ": dot failed: ", message));
  }
}

}  // namespace

std::string graph_to_dot(const Function& f) {
  LOOM_CHECK(f.valid(), ArgumentError, "graph_to_dot: the function is empty");
  return DotWriter(f).str();
}

void plot_graph(const Function& f, const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  LOOM_CHECK(ext == ".dot" || ext == ".svg" || ext == ".png" || ext == ".pdf", ArgumentError,
             "plot_graph: ", path, " should end in .dot, .svg, .png or .pdf (the format)");
  const std::string dot = graph_to_dot(f);
  if (ext == ".dot") return write_file_atomically(path, {(const uint8_t*)dot.data(), dot.size()});
  // dot reads a DOT file beside the picture and writes the picture itself.
  struct Scratch {
    std::string dot, log;
    ~Scratch() {
      std::error_code ignored;
      std::filesystem::remove(dot, ignored);
      std::filesystem::remove(log, ignored);
    }
  } scratch{path + ".tmp.dot", path + ".tmp.log"};
  write_file_atomically(scratch.dot, {(const uint8_t*)dot.data(), dot.size()});
  render(scratch.dot, ext.substr(1), path, scratch.log);
}

}  // namespace loom
