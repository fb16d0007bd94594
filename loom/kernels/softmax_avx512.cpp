// The AVX-512 copy of the softmax kernels (softmax_impl.inc), a translation unit of its own
// beside softmax.cpp's baseline copy, as elementwise_avx512.cpp is.
#include "loom/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/kernels/cpu_isa.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"

LOOM_AVX512_BEGIN
namespace loom::kernels::isa::avx512 {
#include "loom/kernels/softmax_impl.inc"
}  // namespace loom::kernels::isa::avx512
LOOM_AVX512_END
