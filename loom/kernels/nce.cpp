#include "loom/kernels/nce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"
#include "loom/kernels/gemm.h"
#include "loom/kernels/sparse.h"

namespace loom::kernels {
namespace {

// The elements of work a row's exp and log1p cost, against a simple loop's one.
constexpr size_t kLogisticCost = 8;

// e = exp(−|z − l|), from which logaddexp(z, l) = max(z, l) + log1p(e) and σ(z − l) below take
// their exponential; l = −inf gives z and 1.
template <typename T>
inline T exp_gap(T z, T l) {
  return fast_exp(-std::abs(z - l));
}
template <typename T>
inline T log_add_exp(T z, T l, T e) {
  return std::max(z, l) + fast_log1p(e);
}
template <typename T>
inline T sigmoid(T z, T l, T e) {
  const T s = T(1) / (T(1) + e);
  return z >= l ? s : e * s;
}

template <typename T>
T dot(size_t n, const T* a, const T* b) {
  T sum = 0;
  LOOM_OMP_SIMD(reduction(+ : sum))
  for (size_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// work [rows, k] = dy_r dz_noise[r, i], the gradient of the noise logits.
template <typename T>
void noise_logit_gradient(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g) {
  for (size_t r = 0; r < b.rows; ++r) {
    const T* dz = kept.dz_noise + r * b.k;
    LOOM_OMP_SIMD()
    for (size_t i = 0; i < b.k; ++i) g[r * b.k + i] = dy[r] * dz[i];
  }
}

// values [label entries] = dy_r dz_label_r y_rc, the gradient of the label logits per entry.
template <typename T>
void label_logit_gradient(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* values) {
  for (size_t r = 0; r < b.rows; ++r)
    for (int32_t e = b.label_offsets[r]; e < b.label_offsets[r + 1]; ++e)
      values[e] = dy[r] * kept.dz_label[r] * b.label_values[e];
}

}  // namespace

template <typename T>
void nce_forward(const NceBatch<T>& b, const T* label_log_prior, const T* noise_log_prior,
                 const T* noise_weight, double entropy, T* loss, const NceKept<T>& kept) {
  std::vector<T> noise_bias(b.k);
  for (size_t i = 0; i < b.k; ++i) {
    std::memcpy(kept.noise_weights + i * b.dim, b.weights + b.noise[i] * b.dim, b.dim * sizeof(T));
    noise_bias[i] = b.biases[b.noise[i]];
  }
  // The noise logits without their biases, where their gradient goes next.
  gemm(false, true, b.rows, b.k, b.dim, T(1), b.x, b.dim, kept.noise_weights, b.dim, T(0),
       kept.dz_noise, b.k);
  const size_t work = b.rows * b.k * kLogisticCost + b.label_entries() * b.dim;
  detail::parallel_for(b.rows, work, [&](size_t begin, size_t end) {
    // Locals, not the closure's references, which the stores into dz might alias: with those the
    // loop over the noise classes did not vectorize.
    const T *bias = noise_bias.data(), *log_prior = noise_log_prior, *weight = noise_weight;
    for (size_t r = begin; r < end; ++r) {
      const T* x = b.x + r * b.dim;
      T z_label = 0;
      for (int32_t e = b.label_offsets[r]; e < b.label_offsets[r + 1]; ++e) {
        const size_t c = size_t(b.label_classes[e]);
        z_label += b.label_values[e] * (dot(b.dim, b.weights + c * b.dim, x) + b.biases[c]);
      }
      const T l = label_log_prior[r], e = exp_gap(z_label, l);
      kept.dz_label[r] = sigmoid(z_label, l, e) - T(1);
      T* dz = kept.dz_noise + r * b.k;
      double noise = 0;
      LOOM_OMP_SIMD(reduction(+ : noise))
      for (size_t i = 0; i < b.k; ++i) {
        const T z = dz[i] + bias[i], l_i = log_prior[i], e_i = exp_gap(z, l_i);
        noise += double(weight[i] * log_add_exp(z, l_i, e_i));
        dz[i] = weight[i] * sigmoid(z, l_i, e_i);
      }
      loss[r] = T(double(log_add_exp(z_label, l, e) - z_label) + noise - entropy);
    }
  });
}

template <typename T>
void nce_backward_inputs(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g,
                         bool accumulate, T* work) {
  T* dz = work;
  T* label = work + b.rows * b.k + b.k * b.dim;
  noise_logit_gradient(b, kept, dy, dz);
  label_logit_gradient(b, kept, dy, label);
  gemm(false, false, b.rows, b.dim, b.k, T(1), dz, b.k, kept.noise_weights, b.dim,
       T(accumulate ? 1 : 0), g, b.dim);
  csr_gemm(b.rows, b.dim, b.label_offsets, b.label_classes, label, b.weights, b.dim, T(1), T(1), g,
           b.dim);
}

template <typename T>
void nce_backward_weights(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g,
                          bool accumulate, T* work) {
  T* dz = work;
  T* noise = work + b.rows * b.k;  // [k, dim]: Σ_r dz[r, i] x_r
  T* label = noise + b.k * b.dim;
  noise_logit_gradient(b, kept, dy, dz);
  label_logit_gradient(b, kept, dy, label);
  // Clears g unless accumulating, then scatters the label rows' terms.
  csr_transpose_gemm(b.rows, b.classes, b.dim, b.label_offsets, b.label_classes, label, b.x, b.dim,
                     T(1), T(accumulate ? 1 : 0), g, b.dim);
  gemm(true, false, b.k, b.dim, b.rows, T(1), dz, b.k, b.x, b.dim, T(0), noise, b.dim);
  for (size_t i = 0; i < b.k; ++i) {  // in order: a class drawn twice gets both
    T* row = g + b.noise[i] * b.dim;
    const T* add = noise + i * b.dim;
    LOOM_OMP_SIMD()
    for (size_t d = 0; d < b.dim; ++d) row[d] += add[d];
  }
}

template <typename T>
void nce_backward_biases(const NceBatch<T>& b, const NceKept<T>& kept, const T* dy, T* g,
                         bool accumulate) {
  if (!accumulate) std::fill_n(g, b.classes, T(0));
  for (size_t r = 0; r < b.rows; ++r) {
    for (int32_t e = b.label_offsets[r]; e < b.label_offsets[r + 1]; ++e)
      g[b.label_classes[e]] += dy[r] * kept.dz_label[r] * b.label_values[e];
    for (size_t i = 0; i < b.k; ++i) g[b.noise[i]] += dy[r] * kept.dz_noise[r * b.k + i];
  }
}

template <typename T>
double nce_entropy(size_t classes, const T* weights, size_t k) {
  double total = 0;
  LOOM_OMP_SIMD(reduction(+ : total))
  for (size_t c = 0; c < classes; ++c) total += double(weights[c]);
  const T scale = T(double(k) / total);
  double h = 0;
  LOOM_OMP_SIMD(reduction(+ : h))
  for (size_t c = 0; c < classes; ++c) {
    const T u = scale * weights[c];
    // fast_log wants normal numbers; u log u below the smallest is nothing beside H anyway.
    h += u > T(0) ? double(u * fast_log(std::max(u, std::numeric_limits<T>::min()))) : 0.0;
  }
  return h;
}

#define LOOM_INSTANTIATE(T)                                                                        \
  template void nce_forward<T>(const NceBatch<T>&, const T*, const T*, const T*, double, T*,       \
                               const NceKept<T>&);                                                 \
  template void nce_backward_inputs<T>(const NceBatch<T>&, const NceKept<T>&, const T*, T*, bool,  \
                                       T*);                                                        \
  template void nce_backward_weights<T>(const NceBatch<T>&, const NceKept<T>&, const T*, T*, bool, \
                                        T*);                                                       \
  template void nce_backward_biases<T>(const NceBatch<T>&, const NceKept<T>&, const T*, T*, bool); \
  template double nce_entropy<T>(size_t, const T*, size_t);
LOOM_INSTANTIATE(float)
LOOM_INSTANTIATE(double)
#undef LOOM_INSTANTIATE

}  // namespace loom::kernels
