#include "loom/core/precision.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <string>

#include "loom/core/trace.h"

namespace loom {

namespace {
std::atomic<ComputePrecision> g_default{ComputePrecision::Float32};
// 0: the CPU's answer; 1: forced unsupported; 2: forced supported.
std::atomic<int> g_forced{0};
thread_local std::optional<ComputePrecision> t_scope;

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    default:
      return "below avx2";
  }
}
}  // namespace

const char* to_string(ComputePrecision p) {
  return p == ComputePrecision::BFloat16 ? "bf16" : "float32";
}

void set_compute_precision(ComputePrecision p) {
  detail::note_unsupported_bf16(p, "set_compute_precision");
  g_default = p;
}

ComputePrecision get_compute_precision() {
  return g_default;
}

bool bf16_supported() {
  if (const int forced = g_forced) return forced == 2;
  // The ISA values are bit sets: each level contains the bits of the levels below it.
  static const bool supported = [] {
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
  }();
  return supported;
}

bool compute_in_bf16() {
  return t_scope.value_or(g_default) == ComputePrecision::BFloat16 && bf16_supported();
}

ComputePrecisionScope::ComputePrecisionScope(ComputePrecision p) : previous_(t_scope) {
  t_scope = p;
}

ComputePrecisionScope::~ComputePrecisionScope() {
  t_scope = previous_;
}

namespace detail {

void note_unsupported_bf16(ComputePrecision p, const char* who) {
  if (p != ComputePrecision::BFloat16 || bf16_supported()) return;
  warn(std::string(who) + "(bf16): this CPU has no AVX512-BF16 (oneDNN's ISA is " +
       isa_name(dnnl::get_effective_cpu_isa()) + "); computing in float32");
}

void force_bf16_support_for_testing(std::optional<bool> supported) {
  g_forced = supported ? (*supported ? 2 : 1) : 0;
}

}  // namespace detail

}  // namespace loom
