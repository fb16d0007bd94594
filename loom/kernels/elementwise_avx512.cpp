// The AVX-512 copy of the elementwise kernels (elementwise_impl.inc), a translation unit of its
// own so that the build compiles it beside elementwise.cpp's baseline copy.
#include "loom/kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>

#include "loom/core/error.h"
#include "loom/kernels/cpu_isa.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/elementwise_isa.h"
#include "loom/kernels/fast_math.h"

LOOM_AVX512_BEGIN
namespace loom::kernels::isa::avx512 {
#include "loom/kernels/elementwise_impl.inc"
}  // namespace loom::kernels::isa::avx512
LOOM_AVX512_END
