// Update throughput of every built-in learner on one float32 parameter of 10 million elements,
// next to this machine's memory bandwidth measured in the same run by a threaded copy.
//
// For each learner the figure of merit is its time per update divided by the time of a
// threaded copy that moves the bytes the update must touch: per element the parameter (read and
// written), the gradient (read) and each state tensor (read and written), 4 bytes each. The copy
// has the same footprint, so on a machine whose last-level cache holds a good part of the
// working set (260 MB here) both run in the same cache regime. A fused single pass at copy speed
// scores 1.0; the target is <= 2.0. Learners that need a mean over the whole tensor
// before they can step (adagrad and rmsprop with need_ave_multiplier, CNTK's default) cannot do
// it in one pass: the table also gives the bytes their two passes read and write, and their
// one-pass variants (need_ave_multiplier=false).
//
//   bench_learners [--threads N] [--elements N] [--repeats N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <omp.h>

#include "loom/loom.h"

using namespace loom;

namespace {

struct Options {
  int threads = 0;  // 0: Loom's default (all cores)
  size_t elements = 10'000'000;
  size_t repeats = 30;
};

[[noreturn]] void usage(const char* argv0, const char* problem) {
  std::fprintf(stderr, "%s\nusage: %s [--threads N] [--elements N] [--repeats N]\n", problem,
               argv0);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(argv[0], ("missing value after " + a).c_str());
    const long long v = std::atoll(argv[++i]);
    if (v <= 0) usage(argv[0], ("bad value for " + a).c_str());
    if (a == "--threads") {
      o.threads = int(v);
    } else if (a == "--elements") {
      o.elements = size_t(v);
    } else if (a == "--repeats") {
      o.repeats = size_t(v);
    } else {
      usage(argv[0], ("unknown option " + a).c_str());
    }
  }
  return o;
}

using Clock = std::chrono::steady_clock;

// dst = src with the learners' threading: contiguous blocks, one per thread.
void threaded_copy(const float* src, float* dst, size_t n) {
  const int threads = get_max_num_cpu_threads();
#pragma omp parallel num_threads(threads)
  {
    const size_t t = size_t(omp_get_thread_num()), k = size_t(omp_get_num_threads());
    const size_t begin = n * t / k, end = n * (t + 1) / k;
    std::memcpy(dst + begin, src + begin, (end - begin) * sizeof(float));
  }
}

struct Case {
  const char* name;
  // Bytes per element a fused single pass must read and write: parameter (r+w), gradient (r),
  // each state tensor (r+w).
  size_t must_touch;
  // Bytes per element Loom's implementation moves (more when it needs two passes).
  size_t moves;
  std::function<std::shared_ptr<Learner>(std::vector<Parameter>)> make;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.threads) set_max_num_cpu_threads(o.threads);
  const size_t n = o.elements;
  const size_t minibatch = 256;

  // Copies of several sizes: the plain 10M-float copy, one far larger than the last-level
  // cache (DRAM bandwidth), and, per learner, one moving the bytes the learner must touch with
  // the same footprint (so both run in the same cache regime: with a large L3 a 10M-float
  // learner is partly cache-resident).
  const size_t big = std::max<size_t>(n, 128'000'000);  // 2 x 512 MB
  std::vector<float> src(big), dst(big);
  for (size_t i = 0; i < big; ++i) src[i] = float(i % 1000) * 1e-3f;
  threaded_copy(src.data(), dst.data(), big);  // first touch
  auto copy_time = [&](size_t m) {
    const auto t0 = Clock::now();
    threaded_copy(src.data(), dst.data(), m);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  double copy_n = std::numeric_limits<double>::infinity(), copy_big = copy_n;
  for (size_t r = 0; r < o.repeats; ++r) {
    copy_n = std::min(copy_n, copy_time(n));
    if (r < 5) copy_big = std::min(copy_big, copy_time(big));
  }

  std::vector<float> gv(n);
  for (size_t i = 0; i < n; ++i) gv[i] = std::sin(float(i) * 1e-3f) * 0.01f;
  const NDArrayView gradient = NDArrayView::from_vector<float>({n}, gv);

  const double inf = std::numeric_limits<double>::infinity();
  const auto lr = learning_parameter_schedule(0.001);
  const auto mom = momentum_schedule(0.9);
  // 4 bytes per access; p r+w = 8, g r = 4, each state r+w = 8.
  const std::vector<Case> cases = {
      {"sgd", 12, 12, [&](auto p) { return sgd(std::move(p), lr); }},
      {"momentum_sgd", 20, 20, [&](auto p) { return momentum_sgd(std::move(p), lr, mom); }},
      {"nesterov", 20, 20, [&](auto p) { return nesterov(std::move(p), lr, mom); }},
      // pass 1: g r, a r+w; pass 2: p r+w, g r, a r
      {"adagrad", 20, 28, [&](auto p) { return adagrad(std::move(p), lr); }},
      // state avar, sign, step; pass 1: g r, 3 states r+w; pass 2: p r+w, g r, avar r, step r
      {"rmsprop", 36, 48,
       [&](auto p) { return rmsprop(std::move(p), lr, 0.95, 1.2, 0.7, inf, 1e-6); }},
      // CNTK's need_ave_multiplier=false: one pass.
      {"adagrad/1pass", 20, 20, [&](auto p) { return adagrad(std::move(p), lr, false); }},
      {"rmsprop/1pass", 36, 36,
       [&](auto p) { return rmsprop(std::move(p), lr, 0.95, 1.2, 0.7, inf, 1e-6, false); }},
      {"fsadagrad", 28, 28, [&](auto p) { return fsadagrad(std::move(p), lr, mom); }},
      {"adam", 28, 28, [&](auto p) { return adam(std::move(p), lr, mom); }},
      {"adamax", 28, 28,
       [&](auto p) {
         return adam(std::move(p), lr, mom, default_variance_momentum_schedule(), 1e-8, true);
       }},
      {"adadelta", 28, 28, [&](auto p) { return adadelta(std::move(p), lr); }},
  };

  std::printf("Learner update throughput: %zu float32 parameters, minibatch %zu, %d thread(s)\n", n,
              minibatch, get_max_num_cpu_threads());
  std::printf("copy of %zu floats (read + written): %.2f GB/s; of %zu floats (DRAM): %.2f GB/s\n\n",
              n, 8.0 * double(n) / copy_n / 1e9, big, 8.0 * double(big) / copy_big / 1e9);
  std::printf("%-13s %9s %8s %7s %7s %10s %9s %s\n", "learner", "ms/update", "GB/s", "B/elem",
              "B/elem", "same-bytes", "ratio vs", "");
  std::printf("%-13s %9s %8s %7s %7s %10s %9s %s\n", "", "", "(must)", "must", "moved", "copy GB/s",
              "copy", "");
  int misses = 0;
  for (const Case& c : cases) {
    Parameter p = parameter(NDArrayView(DataType::Float32, {n}));
    auto learner = c.make({p});
    std::unordered_map<Variable, NDArrayView> grads{{p, gradient}};
    learner->update(grads, minibatch);  // warm-up: first touch of the state
    // The copy that moves the same bytes: must_touch * n bytes = m floats read + m written.
    const size_t m = c.must_touch * n / 8;
    // The machine is shared: copy and update timings alternate and each keeps its best, so a
    // busy moment slows neither figure alone.
    double t = inf, tc = inf;
    for (size_t r = 0; r < o.repeats; ++r) {
      tc = std::min(tc, copy_time(m));
      const auto t0 = Clock::now();
      learner->update(grads, minibatch);
      t = std::min(t, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double must_bytes = double(c.must_touch) * double(n);
    const double ratio = t / tc;
    const bool ok = ratio <= 2.0;
    misses += ok ? 0 : 1;
    std::printf("%-13s %9.3f %8.2f %7zu %7zu %10.2f %9.2f %s\n", c.name, t * 1e3,
                must_bytes / t / 1e9, c.must_touch, c.moves, must_bytes / tc / 1e9, ratio,
                ok ? "" : "  > 2x");
  }
  std::printf(
      "\nratio = time per update / time of a copy moving the bytes the update must touch "
      "(same footprint); target <= 2.\n");
  std::printf("%d learner(s) above 2x.\n", misses);
  return 0;
}
