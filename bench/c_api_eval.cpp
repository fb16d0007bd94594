// The C API's cost over Loom's C++ API: seed 002's convnet (random weights: the speed does not
// depend on them) evaluated at batch 1 and batch 64, once through ModelRunner and once through
// loom_c.h, both from the same model file. Each call does what a caller does: make the input
// from its own buffer (one copy), evaluate, copy the scores into its own buffer. The two paths
// alternate in rounds (so the machine's drift falls on both alike); each round times --calls
// calls of each; the figure is the median round. Prints microseconds per call and the ratio
// C API / ModelRunner (the goal: at most 1.05). --cpu-time measures the process's CPU time
// instead of wall time: with OMP_NUM_THREADS=1 on a loaded machine it still compares the two
// paths fairly (it leaves out the time the process waits for a core).
//
// In one process the two paths run different copies of Loom (the program's and libloom_c's),
// each with oneDNN primitives of its own, whose JIT code runs at one of two speeds about 6 %
// apart at batch 64 depending on where it lands (two ModelRunners of the program's copy, which
// share primitives, time alike). --path modelrunner|c times one path alone: alternating
// processes of each give the comparison without that placement effect.
//
//   bench_c_api_eval [--calls N] [--rounds N] [--cpu-time] [--path modelrunner|c]
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/seed_models.h"
#include "loom/loom.h"
#include "loom_c.h"

using namespace loom;

namespace {

void check(loom_status status, const char* call) {
  if (status == LOOM_OK) return;
  std::fprintf(stderr, "%s: %s\n", call, loom_last_error_message());
  std::exit(1);
}

bool cpu_time = false;

double now_us() {
  timespec t{};
  clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) * 1e-3;
}

template <typename Call>
double micros_per_call(int calls, Call&& call) {
  const double start = now_us();
  for (int i = 0; i < calls; ++i) call();
  return (now_us() - start) / calls;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 0, rounds = 9;
  std::string only;  // one path alone: "modelrunner" or "c"
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cpu-time") {
      cpu_time = true;
    } else if (arg == "--path" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "modelrunner" || std::string(argv[i + 1]) == "c")) {
      only = argv[++i];
    } else if ((arg == "--calls" || arg == "--rounds") && i + 1 < argc) {
      (arg == "--calls" ? calls : rounds) = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: bench_c_api_eval [--calls N] [--rounds N] [--cpu-time] "
                   "[--path modelrunner|c]\n");
      return 2;
    }
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("c_api_eval_" + std::to_string(getpid()) + ".loom"))
                               .string();
  save_model(bench::seed002_convnet()(input_variable({28, 28}, {.name = "features"})), path);
  const ModelRunner runner(path);
  loom_model* model = nullptr;
  check(loom_model_load(path.c_str(), &model), "loom_model_load");
  std::filesystem::remove(path);
  const Variable features = runner.arguments()[0], scores = runner.outputs()[0];
  const char* names[1] = {"features"};
  const int64_t sample[2] = {28, 28};

  std::printf("seed 002's convnet, %d rounds, median %s us per call\n", rounds,
              cpu_time ? "CPU" : "wall");
  for (const int64_t batch : {int64_t(1), int64_t(64)}) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
    std::vector<float> images(size_t(batch) * 784), out(size_t(batch) * 10);
    for (float& p : images) p = pixel(rng);
    const NDShape shape{size_t(batch), 28, 28};

    auto cpp = [&] {
      const Value in(NDArrayView::from_vector<float>(shape, images), false);
      const ValueMap result = runner.evaluate(ValueMap{{features, in}});
      const NDArrayView& z = result.at(scores).data();
      std::memcpy(out.data(), z.raw_data(), z.size() * sizeof(float));
    };
    auto c = [&] {
      loom_value* in = nullptr;
      loom_value* z = nullptr;
      check(loom_value_create_dense(LOOM_FLOAT32, sample, 2, batch, images.data(),
                                    int64_t(images.size()), &in),
            "loom_value_create_dense");
      check(loom_model_evaluate(model, 1, names, &in, 1, nullptr, &z), "loom_model_evaluate");
      check(loom_value_copy_data(z, LOOM_FLOAT32, out.data(), int64_t(out.size())),
            "loom_value_copy_data");
      check(loom_value_free(z), "loom_value_free");
      check(loom_value_free(in), "loom_value_free");
    };
    // Both paths must compute the same scores.
    cpp();
    const std::vector<float> expected = out;
    c();
    if (out != expected) {
      std::fprintf(stderr, "the C API's scores differ from ModelRunner's\n");
      return 1;
    }
    // About 0.3 s of calls a round, at least 3, unless --calls says.
    const int n = calls > 0 ? calls : std::max(3, int(3e5 / micros_per_call(5, cpp)));
    std::vector<double> cpp_us, c_us;
    for (int r = 0; r < rounds; ++r) {
      if (only != "c") cpp_us.push_back(micros_per_call(n, cpp));
      if (only != "modelrunner") c_us.push_back(micros_per_call(n, c));
    }
    if (!only.empty()) {
      std::printf("batch %3lld: %s %9.1f us\n", (long long)batch,
                  only == "c" ? "C API" : "ModelRunner", median(only == "c" ? c_us : cpp_us));
      continue;
    }
    const double a = median(cpp_us), b = median(c_us);
    std::printf("batch %3lld: ModelRunner %9.1f us  C API %9.1f us  ratio C/ModelRunner %.3f\n",
                (long long)batch, a, b, b / a);
  }
  check(loom_model_free(model), "loom_model_free");
  return 0;
}
