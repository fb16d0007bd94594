// Which of the instruction sets that kernels are compiled for this CPU runs. The build targets
// x86-64-v3 (AVX2, FMA); kernels that gain from AVX-512 carry a second copy compiled for it
// (gemm.cpp, rnn.cpp, pooling.cpp) and pick one per call.
#pragma once

// Functions defined between LOOM_AVX512_BEGIN and LOOM_AVX512_END are compiled for AVX-512 (the
// instruction sets use_avx512 checks); call them only where it returns true. GCC takes a target
// region; Clang, which builds the fuzz targets, an attribute on every function of the region.
// clang-format off
#if defined(__clang__)
#define LOOM_AVX512_BEGIN _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512vl,avx512bw,avx512dq,avx512cd\"))), apply_to = function)")
#define LOOM_AVX512_END _Pragma("clang attribute pop")
#else
#define LOOM_AVX512_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512vl,avx512bw,avx512dq,avx512cd,prefer-vector-width=512\")")
#define LOOM_AVX512_END _Pragma("GCC pop_options")
#endif
// clang-format on

namespace loom::kernels {

// True where the CPU has AVX-512 F, VL, BW, DQ and CD and the environment does not cap the
// kernels below it: LOOM_MAX_CPU_ISA=avx2 keeps them on the baseline (for comparison and for the
// tests of the baseline on AVX-512 machines, as oneDNN's ONEDNN_MAX_CPU_ISA does for oneDNN).
// Read once per process.
bool use_avx512();

}  // namespace loom::kernels
