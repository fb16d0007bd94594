#include "loom/kernels/cpu_isa.h"

#include <cstdlib>
#include <string_view>

#include "loom/core/error.h"

namespace loom::kernels {

namespace {

bool detect_avx512() {
  const char* cap = std::getenv("LOOM_MAX_CPU_ISA");
  if (cap != nullptr) {
    const std::string_view v = cap;
    if (v == "avx2") return false;
    if (v != "avx512")
      throw ArgumentError("LOOM_MAX_CPU_ISA is '" + std::string(v) +
                          "': use avx2 (the baseline kernels) or avx512 (the default where the "
                          "CPU has it)");
  }
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512cd");
}

}  // namespace

bool use_avx512() {
  static const bool value = detect_avx512();
  return value;
}

}  // namespace loom::kernels
