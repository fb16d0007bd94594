// What the benchmarks that run PyTorch beside Loom share: each side's row runs as a child process
// (this program again, or the reference script under /usr/bin/python3), its output echoed and
// its last "key=value" lines read, its peak RSS taken from wait4; under several environment
// settings the fastest run is kept.
#pragma once

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace bench {

struct Measurement {
  bool ran = false;
  double sps = 0;
  long peak_rss_kb = 0;
  std::string why;                 // when !ran
  std::vector<std::string> lines;  // everything the child printed
};

// Runs argv as a child, echoes its output indented, and reads the number after `key` from it
// into sps: the child ran when it printed that line.
inline Measurement run_child(const std::vector<std::string>& args,
                             const std::string& key = "samples_per_second=") {
  Measurement m;
  int out[2];
  if (pipe(out) != 0) {
    m.why = std::string("pipe: ") + std::strerror(errno);
    return m;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  std::fflush(stdout);
  const int err = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (err != 0) {
    close(out[0]);
    m.why = "cannot start " + args[0] + ": " + std::strerror(err);
    return m;
  }
  FILE* in = fdopen(out[0], "r");
  char line[4096];
  std::string last;
  while (std::fgets(line, sizeof line, in)) {
    std::printf("    %s", line);
    if (std::strncmp(line, key.c_str(), key.size()) == 0)
      m.sps = std::atof(line + key.size()), m.ran = true;
    last.assign(line, std::strcspn(line, "\n"));
    m.lines.push_back(last);
  }
  std::fclose(in);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  m.peak_rss_kb = usage.ru_maxrss;  // kilobytes on Linux
  if (!m.ran)
    m.why = WIFEXITED(status) && WEXITSTATUS(status) == 3 ? "no PyTorch" : "failed: " + last;
  return m;
}

// Environment variables a child runs with, and a name for them.
struct Setting {
  std::string label;
  std::vector<std::pair<std::string, std::string>> env;
};
struct Best {
  Measurement m;
  std::string setting;
};

// Runs args once per setting (with its variables set, the others of all settings unset) and
// keeps the fastest run.
inline Best run_best(const std::string& what, const std::vector<Setting>& settings,
                     const std::vector<std::string>& args) {
  Best best;
  for (const Setting& s : settings) {
    for (const Setting& other : settings)
      for (const auto& [name, value] : other.env) unsetenv(name.c_str());
    for (const auto& [name, value] : s.env) setenv(name.c_str(), value.c_str(), 1);
    std::printf("%s, %s:\n", what.c_str(), s.label.c_str());
    Measurement m = run_child(args);
    if (!best.m.ran || (m.ran && m.sps > best.m.sps)) best = {m, s.label};
  }
  for (const Setting& s : settings)
    for (const auto& [name, value] : s.env) unsetenv(name.c_str());
  return best;
}

// The reference script `name` beside this source (the build runs from anywhere), or at
// ../../bench from the binary; "" when neither exists.
inline std::string reference_script(const char* argv0, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path beside_source = fs::path(__FILE__).parent_path() / name;
  if (fs::exists(beside_source)) return beside_source.string();
  const fs::path from_binary = fs::absolute(argv0).parent_path() / ".." / ".." / "bench" / name;
  return fs::exists(from_binary) ? from_binary.string() : "";
}

inline std::string cell(const Measurement& m, double value, const char* format) {
  if (!m.ran) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// A memory figure of this process from /proc/self/status in MiB, e.g. key "VmRSS:" (resident
// now) or "VmHWM:" (the peak resident so far).
inline double status_mib(const char* key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::string(key).size())) / 1024.0;
  return 0;
}

// The options every side-by-side row benchmark takes; a program derives its own from it.
struct RowOptions {
  std::vector<std::string> rows;  // the parent's rows (the program's default when none named)
  std::string row;                // child mode: the one row to run
  double seconds = 5;
  bool reference = true;
  int accuracy_epochs = 0;  // > 0: the accuracy comparison instead of the speed rows
  int seeds = 1;            // runs per side in the accuracy comparison
};

// Prints problem, the usage text and the row names, and exits with status 2.
[[noreturn]] inline void row_usage(const std::string& problem, const std::string& usage,
                                   const std::vector<std::string>& names) {
  std::fprintf(stderr, "%s\n%s\nrows:", problem.c_str(), usage.c_str());
  for (const std::string& n : names) std::fprintf(stderr, " %s", n.c_str());
  std::fprintf(stderr, "\n");
  std::exit(2);
}

// Parses --rows a,b,..., --row NAME, --seconds S, --no-reference, --accuracy EPOCHS and
// --seeds K into an Options derived from RowOptions; the program's own flags go to
// extra(options, flag, value) (value() reads the flag's argument), which returns false for an
// unknown flag. Row names are checked against `names`; rows stay empty when none are named.
template <class Options, class Extra>
Options parse_row_options(int argc, char** argv, const std::vector<std::string>& names,
                          const std::string& usage, Extra extra) {
  Options o;
  auto fail = [&](const std::string& problem) { row_usage(problem, usage, names); };
  auto known = [&](const std::string& name) {
    for (const std::string& n : names)
      if (n == name) return true;
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value after " + a);
      return argv[++i];
    };
    auto positive = [&](const char* what) {
      const int v = std::atoi(value().c_str());
      if (v < 1) fail(a + " needs a positive " + what);
      return v;
    };
    if (a == "--rows") {
      std::stringstream list(value());
      for (std::string name; std::getline(list, name, ',');) o.rows.push_back(name);
    } else if (a == "--row") {
      o.row = value();
    } else if (a == "--seconds") {
      o.seconds = std::atof(value().c_str());
      if (!(o.seconds > 0)) fail("--seconds needs a positive number");
    } else if (a == "--accuracy") {
      o.accuracy_epochs = positive("number of epochs");
    } else if (a == "--seeds") {
      o.seeds = positive("integer");
    } else if (a == "--no-reference") {
      o.reference = false;
    } else if (!extra(o, a, value)) {
      fail("unknown option " + a);
    }
  }
  for (const std::string& name : o.rows)
    if (!known(name)) fail("unknown row " + name);
  if (!o.row.empty() && !known(o.row)) fail("unknown row " + o.row);
  return o;
}

// The first "<prefix><number>" among lines, or a negative number.
inline double find_value(const std::vector<std::string>& lines, const std::string& prefix) {
  for (const std::string& l : lines)
    if (l.rfind(prefix, 0) == 0) return std::atof(l.c_str() + prefix.size());
  return -1;
}

}  // namespace bench
