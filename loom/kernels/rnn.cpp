#include "loom/kernels/rnn.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "loom/kernels/cpu_isa.h"
#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"
#include "loom/kernels/gemm.h"

namespace loom::kernels {

namespace {

namespace baseline {
#include "loom/kernels/rnn_impl.inc"
}  // namespace baseline

// The gate passes are a third of an LSTM's time and vectorize twice as wide, with twice the
// registers, on AVX-512 (bench/README.md, lstm).
LOOM_AVX512_BEGIN
namespace avx512 {
#include "loom/kernels/rnn_impl.inc"
}  // namespace avx512
LOOM_AVX512_END

}  // namespace

size_t rnn_workspace_size(const RnnShape& s) {
  return baseline::buffers<float>(s, nullptr).size;
}

template <typename T>
const T* rnn_cell_states(const RnnShape& s, const T* workspace) {
  return baseline::buffers(s, const_cast<T*>(workspace)).C;
}

template <typename T>
void rnn_forward(const RnnShape& s, const RnnWeights<T>& w, const T* x, const T* h0, const T* c0,
                 T* y, T* workspace) {
  if (use_avx512()) {
    avx512::forward(s, w, x, h0, c0, y, workspace);
  } else {
    baseline::forward(s, w, x, h0, c0, y, workspace);
  }
}

template <typename T>
void rnn_backward(const RnnShape& s, const RnnWeights<T>& w, const T* x, const T* dy, T* workspace,
                  RnnGradients<T>& g) {
  if (use_avx512()) {
    avx512::backward(s, w, x, dy, workspace, g);
  } else {
    baseline::backward(s, w, x, dy, workspace, g);
  }
}

#define LOOM_RNN_INSTANTIATE(T)                                                                \
  template const T* rnn_cell_states<T>(const RnnShape&, const T*);                             \
  template void rnn_forward<T>(const RnnShape&, const RnnWeights<T>&, const T*, const T*,      \
                               const T*, T*, T*);                                              \
  template void rnn_backward<T>(const RnnShape&, const RnnWeights<T>&, const T*, const T*, T*, \
                                RnnGradients<T>&);
LOOM_RNN_INSTANTIATE(float)
LOOM_RNN_INSTANTIATE(double)
#undef LOOM_RNN_INSTANTIATE

}  // namespace loom::kernels
