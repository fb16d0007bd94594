// Which of the instruction sets that kernels are compiled for this CPU runs. The build targets
// x86-64-v3 (AVX2, FMA); kernels that gain from AVX-512 carry a second copy compiled for it
// (rnn.cpp, pooling.cpp) and pick one per call.
#pragma once

namespace loom::kernels {

// True where the CPU has AVX-512 F, VL, BW, DQ and CD and the environment does not cap the
// kernels below it: LOOM_MAX_CPU_ISA=avx2 keeps them on the baseline (for comparison and for the
// tests of the baseline on AVX-512 machines, as oneDNN's ONEDNN_MAX_CPU_ISA does for oneDNN).
// Read once per process.
bool use_avx512();

}  // namespace loom::kernels
