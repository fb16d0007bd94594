// The arithmetic of noise contrastive estimation over a minibatch (nce_loss; loom/ops/losses.cpp
// draws the noise classes and gives their log priors and importance weights). Sample r has the
// input x_r [dim] and labels y_r (a CSR row over the classes); the k noise classes s_i are shared
// by the minibatch. With z_c = W_c·x_r + b_c, z+ = Σ_c y_rc z_c and the given l+ = Σ_c y_rc log
// P_c, l_i = log P_{s_i}, a_i (k times s_i's importance weight) and H:
//   loss_r = logaddexp(z+, l+) − z+ + Σ_i a_i logaddexp(z_{s_i}, l_i) − H.
// The noise logits are one product of the inputs with the noise classes' weight rows (gemm), the
// gradients products (gemm) and scatters into rows of the weights' gradient (sparse.h's, threads
// splitting the columns, then the noise rows in order). Conventions as in elementwise.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::kernels {

template <typename T>
struct NceBatch {
  size_t rows = 0, dim = 0, classes = 0, k = 0;
  const T* x = nullptr;        // [rows, dim]
  const T* weights = nullptr;  // [classes, dim]
  const T* biases = nullptr;   // [classes]
  // The labels, one CSR row per sample: offsets [rows + 1] from 0, classes and values.
  const int32_t* label_offsets = nullptr;
  const int32_t* label_classes = nullptr;
  const T* label_values = nullptr;
  const size_t* noise = nullptr;  // [k] the classes drawn, in [0, classes)

  size_t label_entries() const { return size_t(label_offsets[rows]); }
};

// What forward keeps for backward, in the caller's buffers: the noise classes' weight rows
// [k, dim], d loss_r / d z_{s_i} [rows, k] and d loss_r / d z+ [rows].
template <typename T>
struct NceKept {
  T* noise_weights = nullptr;
  T* dz_noise = nullptr;
  T* dz_label = nullptr;
};

// loss [rows] as above from label_log_prior [rows] (l+), noise_log_prior [k] (l_i), noise_weight
// [k] (a_i) and entropy (H); fills kept. The per-sample terms are summed in double.
template <typename T>
void nce_forward(const NceBatch<T>& b, const T* label_log_prior, const T* noise_log_prior,
                 const T* noise_weight, double entropy, T* loss, const NceKept<T>& kept);

// The elements of work the backward kernels take: rows k + k dim + the label entries.
template <typename T>
size_t nce_work_size(const NceBatch<T>& b) {
  return b.rows * b.k + b.k * b.dim + b.label_entries();
}

// The gradients from dy [rows] and what nce_forward kept (accumulate: added to g): of the
// inputs g [rows, dim], of the weights g [classes, dim] and of the biases g [classes]. work holds
// nce_work_size elements.
template <typename T>
void nce_backward_inputs(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g,
                         bool accumulate, T* work);
template <typename T>
void nce_backward_weights(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g,
                          bool accumulate, T* work);
template <typename T>
void nce_backward_biases(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g,
                         bool accumulate);

// H = Σ_c u_c log u_c over the classes with u_c = k w_c / Σ w > 0 (w [classes] the noise
// distribution's weights), the logarithms in T (vectorized for float), summed in double.
template <typename T>
double nce_entropy(size_t classes, const T* weights, size_t k);

}  // namespace loom::kernels
