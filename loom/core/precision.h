// The precision float32 matrix products and convolutions compute in: float32, or bfloat16
// mixed precision (bf16 inputs and weights, float32 accumulation and results) on CPUs with
// AVX512-BF16 (oneDNN's avx512_core_bf16 kernels, AMX where the CPU has it). Parameters,
// learner state, reductions, batch-normalization statistics and losses stay float32 whatever
// the setting; float64 computations are never affected.
#pragma once

#include <optional>

namespace loom {

enum class ComputePrecision { Float32, BFloat16 };

const char* to_string(ComputePrecision p);

// The process-wide default, which Function::eval, Evaluator, ModelRunner and a Trainer without
// a precision of its own compute in. BFloat16 on a CPU without bf16 support is a no-op: it is
// remembered, a message says that float32 is used instead, and computations stay float32.
void set_compute_precision(ComputePrecision p);
ComputePrecision get_compute_precision();

// Whether this CPU runs bf16 products natively (oneDNN's ISA is avx512_core_bf16 or above).
bool bf16_supported();

// Whether float32 products and convolutions on the calling thread compute in bf16 now: the
// innermost ComputePrecisionScope's precision, else the process-wide default, and a supported
// CPU.
bool compute_in_bf16();

// Sets the calling thread's precision until the scope ends (Trainer uses it for its own).
class ComputePrecisionScope {
 public:
  explicit ComputePrecisionScope(ComputePrecision p);
  ~ComputePrecisionScope();
  ComputePrecisionScope(const ComputePrecisionScope&) = delete;
  ComputePrecisionScope& operator=(const ComputePrecisionScope&) = delete;

 private:
  std::optional<ComputePrecision> previous_;
};

namespace detail {
// Prints the "no bf16 on this CPU" message when p is BFloat16 and the CPU lacks support; `who`
// names the setting (set_compute_precision, Trainer::set_compute_precision).
void note_unsupported_bf16(ComputePrecision p, const char* who);
// Tests: overrides what bf16_supported() reports (nullopt: the CPU's answer again).
void force_bf16_support_for_testing(std::optional<bool> supported);
}  // namespace detail

}  // namespace loom
