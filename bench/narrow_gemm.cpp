// gemm<float>'s narrow kernel (kernels::gemm_narrow, N <= 16, AVX-512) against the oneDNN sgemm
// it replaces, on the same operands: per shape, the median over --rounds rounds of the mean time
// per call, the two taken alternately in each round (which one goes first alternates too), so
// both see the same machine load. oneDNN runs on the threads gemm<float> gave it (one per 2M
// multiply-adds, as ThreadsForProduct in gemm.cpp). Operands are 64-byte aligned, as Loom's
// tensors are; --cold takes A from memory (a new copy each call), as a minibatch comes.
// Default shapes: the logistic regression's forward product and weight gradient
// (bench/logistic_regression.cpp: 32x784 by 784x10, 784x32 by 32x10), the forward with B
// stored transposed, and the output layer's two of the MLPs in bench/mnist.cpp (784-200-200-10,
// minibatch 64 and 256). --sweep adds tables of the speedup over a grid of sizes (NN and TN, N
// from 1 to 16): the crossover that narrow_wins in kernels/gemm.cpp encodes.
//
//   bench_narrow_gemm [--threads N] [--rounds N] [--cold] [--sweep] [--shape TA TB M N K]...
//   (TA, TB: 0 or 1, for op(A) = Aᵀ, op(B) = Bᵀ)
#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "loom/core/threads.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/gemm.h"

using namespace loom;

namespace {

struct Shape {
  bool ta, tb;
  size_t M, N, K;
};

[[noreturn]] void usage(const char* argv0, const std::string& problem) {
  std::fprintf(
      stderr,
      "%s\nusage: %s [--threads N] [--rounds N] [--cold] [--sweep] [--shape TA TB M N K]...\n",
      problem.c_str(), argv0);
  std::exit(2);
}

// 64-byte aligned, as Loom's tensors are.
struct Matrix {
  explicit Matrix(size_t n, unsigned seed)
      : data(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (size_t i = 0; i < n; ++i) data[i] = dist(gen);
  }
  ~Matrix() { std::free(data); }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  float* data;
};

using Clock = std::chrono::steady_clock;

bool cold = false;  // --cold

// Times one shape, prints its line unless !print, and returns oneDNN's time over the narrow
// kernel's.
double run(const Shape& s, int rounds, bool print = true) {
  const size_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N, ldc = s.N;
  const size_t a_size = (s.ta ? s.K : s.M) * lda;
  // --cold: each call takes the next of enough copies of A to fill 256 MB (far more than the
  // L3), so A comes from memory.
  const size_t copies = cold ? std::max<size_t>(1, (size_t{64} << 20) / a_size) : 1;
  Matrix A(a_size * copies, 1), B((s.tb ? s.N : s.K) * ldb, 2);
  Matrix c_old(s.M * ldc, 3), c_new(s.M * ldc, 3);
  size_t calls_made = 0;
  auto next_a = [&] { return A.data + calls_made++ % copies * a_size; };
  const size_t macs = s.M * s.N * s.K;
  const int max_threads = omp_get_max_threads();
  const int threads = int(std::clamp<size_t>(
      macs / kernels::detail::kMacsPerElement / kernels::detail::kGrain, 1, size_t(max_threads)));
  const auto d = [](size_t v) { return static_cast<dnnl_dim_t>(v); };
  auto onednn = [&](const float* a) {
    omp_set_num_threads(threads);
    dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', d(s.M), d(s.N), d(s.K), 1.0f, a, d(lda), B.data,
               d(ldb), 0.0f, c_old.data, d(ldc));
    omp_set_num_threads(max_threads);
  };
  auto narrow = [&](const float* a) {
    kernels::gemm_narrow(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a, lda, B.data, ldb, 0.0f, c_new.data,
                         ldc);
  };
  onednn(A.data);
  narrow(A.data);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < s.M * ldc; ++i) {
    diff = std::max(diff, double(std::abs(c_old.data[i] - c_new.data[i])));
    scale = std::max(scale, double(std::abs(c_old.data[i])));
  }
  // Calls per round: about 50 µs of oneDNN at 100 GFLOP/s, at least one.
  const int calls = int(std::max<size_t>(1, 2500000 / std::max<size_t>(macs, 1)));
  std::vector<double> t_old, t_new;
  for (int r = 0; r < rounds; ++r) {
    for (int which = 0; which < 2; ++which) {
      const bool old_path = (which == 0) == (r % 2 == 0);
      const auto t0 = Clock::now();
      for (int i = 0; i < calls; ++i) old_path ? onednn(next_a()) : narrow(next_a());
      const double us = std::chrono::duration<double>(Clock::now() - t0).count() * 1e6 / calls;
      (old_path ? t_old : t_new).push_back(us);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  };
  const double o = median(t_old), n = median(t_new);
  if (print)
    std::printf("%c%c %6zu %3zu %6zu %4d %11.2f %11.2f %8.2fx %10.1e\n", s.ta ? 'T' : 'N',
                s.tb ? 'T' : 'N', s.M, s.N, s.K, threads, o, n, o / n, diff / std::max(scale, 1.0));
  return o / n;
}

// For op(A) = A and = Aᵀ and each N, a table of the speedup over M (rows) and K (columns).
void sweep(int rounds) {
  const size_t ms[] = {8, 16, 32, 64, 128, 256, 512, 1024, 4096};
  const size_t ks[] = {16, 32, 64, 128, 256, 784, 1024, 2048, 4096};
  for (bool ta : {false, true})
    for (size_t n : {1, 2, 4, 8, 10, 12, 16}) {
      std::printf("\n%s, N = %zu: oneDNN time / narrow time\n%6s", ta ? "TN" : "NN", n, "M \\ K");
      for (size_t k : ks) std::printf(" %6zu", k);
      std::printf("\n");
      for (size_t m : ms) {
        std::printf("%6zu", m);
        for (size_t k : ks) {
          std::fflush(stdout);
          std::printf(" %6.2f", run({ta, false, m, n, k}, rounds, false));
        }
        std::printf("\n");
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 101;
  bool sweep_grid = false;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto number = [&]() -> long {
      if (i + 1 >= argc) usage(argv[0], "missing value after " + a);
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0) usage(argv[0], a + " needs a non-negative integer");
      return v;
    };
    if (a == "--threads") {
      set_max_num_cpu_threads(int(number()));
    } else if (a == "--rounds") {
      rounds = std::max(1, int(number()));
    } else if (a == "--cold") {
      cold = true;
    } else if (a == "--sweep") {
      sweep_grid = true;
    } else if (a == "--shape") {
      Shape s;
      s.ta = number() != 0;
      s.tb = number() != 0;
      s.M = size_t(number());
      s.N = size_t(number());
      s.K = size_t(number());
      if (s.N == 0 || s.N > 16 || s.M == 0 || s.K == 0)
        usage(argv[0], "--shape needs M, K > 0 and 0 < N <= 16");
      shapes.push_back(s);
    } else {
      usage(argv[0], "unknown option " + a);
    }
  }
  if (shapes.empty() && !sweep_grid) {
    shapes = {{false, false, 32, 10, 784}, {true, false, 784, 10, 32}, {false, true, 32, 10, 784},
              {false, false, 64, 10, 200}, {true, false, 200, 10, 64}, {false, false, 256, 10, 200},
              {true, false, 200, 10, 256}};
  }
  float probe = 0;
  if (!kernels::gemm_narrow(false, false, 1, 1, 1, 1.0f, &probe, 1, &probe, 1, 0.0f, &probe, 1)) {
    std::printf("gemm_narrow does not run here (no AVX-512, or LOOM_MAX_CPU_ISA=avx2)\n");
    return 0;
  }
  std::printf("narrow gemm against oneDNN, %d thread(s), median of %d rounds, µs per call\n",
              omp_get_max_threads(), rounds);
  std::printf("op      M   N      K  thr      oneDNN      narrow  speedup   max diff\n");
  for (const Shape& s : shapes) run(s, rounds);
  if (sweep_grid) sweep(rounds);
  return 0;
}
