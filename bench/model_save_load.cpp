// Saving and loading a deep graph: a chain of N negations of one input (the graph of
// loom/serialize/deep_graph_test.cpp), written to bytes by save_model_to_bytes and read back by
// load_model_from_bytes, next to building the chain in memory (what loading must do anyway).
// Prints the best and median of each over the repeats, per op, and the bytes per op.
//
//   bench_model_save_load [--ops N (100000)] [--repeats R (5)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"

using namespace loom;

namespace {

Function chain(size_t depth) {
  Variable y = input_variable({2}, {.name = "x"});
  for (size_t i = 0; i < depth; ++i) y = negate(y);
  return y.owner();
}

template <class F>
double seconds(F&& f) {
  const auto t = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void report(const char* what, std::vector<double> s, size_t ops) {
  std::sort(s.begin(), s.end());
  std::printf("%-11s best %8.3f s  median %8.3f s  (%6.2f us/op best)\n", what, s.front(),
              s[s.size() / 2], 1e6 * s.front() / double(ops));
}

}  // namespace

int main(int argc, char** argv) {
  size_t ops = 100'000, repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--ops") {
      ops = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--repeats") {
      repeats = std::max<size_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
    } else {
      std::fprintf(stderr, "usage: bench_model_save_load [--ops N] [--repeats R]\n");
      return 2;
    }
  }
  std::vector<double> build, save, load, eval_built, eval_loaded;
  const Value x = Value::create_batch<float>({2}, {1, 2});
  auto eval = [&](const Function& f) { f.eval_one({{f.arguments().at(0), x}}); };
  size_t bytes = 0;
  for (size_t r = 0; r < repeats; ++r) {
    Function f, loaded;
    build.push_back(seconds([&] { f = chain(ops); }));
    std::vector<uint8_t> file;
    save.push_back(seconds([&] { file = save_model_to_bytes(f); }));
    bytes = file.size();
    load.push_back(seconds([&] { loaded = load_model_from_bytes(file); }));
    eval_built.push_back(seconds([&] { eval(f); }));
    eval_loaded.push_back(seconds([&] { eval(loaded); }));
  }
  std::printf("a chain of %zu ops: %zu bytes (%.1f an op)\n", ops, bytes,
              double(bytes) / double(ops));
  report("build", build, ops);
  report("save", save, ops);
  report("load", load, ops);
  report("eval built", eval_built, ops);
  report("eval loaded", eval_loaded, ops);
  return 0;
}
