// Loading CNTK's v2 model files, timed against what any reader must do: read the file's bytes
// and parse its protocol buffer. Steps, each the best of several repeats (a shared machine's
// timings vary): read (read_file_bytes), parse (read + protobuf-lite's ParseFromArray),
// dictionary (read + cntk_v2_dictionary: the parse and the conversion into a loom::Dictionary
// with the values copied into NDArrayViews) and load (load_model: all of it, and the graph built
// with shape inference). The target: load under 2x parse.
//
//   bench_cntk_load [FILE...] [--repeats R (20)]
//   (default: the three v2 files of ../shared/cntk-models beside the source tree)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "loom/serialize/cntk_model.h"
#include "loom/serialize/cntk_v2.pb.h"
#include "loom/serialize/container.h"
#include "loom/serialize/model_file.h"

using namespace loom;

namespace {

double best_of(int repeats, const std::function<void()>& step) {
  double best = std::numeric_limits<double>::max();
  for (int i = 0; i < repeats; ++i) {
    auto t = std::chrono::steady_clock::now();
    step();
    best =
        std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
      repeats = std::max(1, std::atoi(argv[++i]));
    else
      files.push_back(argv[i]);
  }
  if (files.empty()) {
    std::string source = __FILE__;
    const std::string dir = source.substr(0, source.rfind('/')) + "/../../shared/cntk-models/";
    for (const char* f :
         {"v2_atis_slot_tagger.cmf", "v2_initial_policy_network.dnn", "v2_load_and_eval.dnn"})
      files.push_back(dir + f);
  }
  std::printf("%-32s %10s %10s %10s %10s %10s %8s\n", "file", "bytes", "read ms", "parse ms",
              "dict ms", "load ms", "load/parse");
  for (const std::string& path : files) {
    size_t size = 0;
    const double read = best_of(repeats, [&] { size = read_file_bytes(path).size(); });
    const double parse = best_of(repeats, [&] {
      const std::vector<uint8_t> bytes = read_file_bytes(path);
      cntk_proto::Dictionary message;
      if (!message.ParseFromArray(bytes.data(), int(bytes.size()))) std::abort();
    });
    const double dict = best_of(repeats, [&] {
      const std::vector<uint8_t> bytes = read_file_bytes(path);
      (void)cntk_v2_dictionary(bytes, path);
    });
    const double load = best_of(repeats, [&] { (void)load_model(path); });
    std::printf("%-32s %10zu %10.3f %10.3f %10.3f %10.3f %8.2fx\n",
                path.substr(path.rfind('/') + 1).c_str(), size, 1e3 * read, 1e3 * parse, 1e3 * dict,
                1e3 * load, load / parse);
  }
  return 0;
}
