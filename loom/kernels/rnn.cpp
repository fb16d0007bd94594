#include "loom/kernels/rnn.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "loom/kernels/detail.h"
#include "loom/kernels/fast_math.h"
#include "loom/kernels/gemm.h"

namespace loom::kernels {

namespace {

template <typename T>
inline T sigm(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return 1.0f / (1.0f + fast_exp(-v));
  } else {
    return T(1) / (T(1) + std::exp(-v));
  }
}

template <typename T>
inline T tanh_of(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return 2.0f / (1.0f + fast_exp(-2.0f * v)) - 1.0f;
  } else {
    return std::tanh(v);
  }
}

template <RnnActivation A, typename T>
inline T act(T v) {
  if constexpr (A == RnnActivation::Tanh) return tanh_of(v);
  if constexpr (A == RnnActivation::Sigmoid) return sigm(v);
  if constexpr (A == RnnActivation::Relu) return v > T(0) ? v : T(0);
  if constexpr (A == RnnActivation::Identity) return v;
}

// The activation's derivative through its output y.
template <RnnActivation A, typename T>
inline T dact(T y) {
  if constexpr (A == RnnActivation::Tanh) return T(1) - y * y;
  if constexpr (A == RnnActivation::Sigmoid) return y * (T(1) - y);
  if constexpr (A == RnnActivation::Relu) return y > T(0) ? T(1) : T(0);
  if constexpr (A == RnnActivation::Identity) return T(1);
}

// Calls f with the activation (and a flag) as compile-time constants, so the row loops vectorize.
template <class F>
void with_activation(RnnActivation a, F&& f) {
  using A = RnnActivation;
  switch (a) {
    case A::Tanh:
      return f(std::integral_constant<A, A::Tanh>{});
    case A::Sigmoid:
      return f(std::integral_constant<A, A::Sigmoid>{});
    case A::Relu:
      return f(std::integral_constant<A, A::Relu>{});
    case A::Identity:
      return f(std::integral_constant<A, A::Identity>{});
  }
}

// The workspace's buffers, rows x columns each (rows = all packed rows): A the gates (forward:
// pre-activations, then activations; backward: their gradients), PH the previous output each row
// read, PC / C the previous and new cell (LSTM), RS (s_dh·h)⊙r (GRU), HT h~ before the
// projection; for backward DH the gradient of each row's output (dy plus what later steps send
// back), DC of its cell (LSTM), DD of s_dh·h, E of h~ (projection), DRS of RS (GRU).
template <typename T>
struct Buffers {
  T *A, *PH, *PC, *C, *RS, *HT, *DH, *DC, *DD, *E, *DRS;
  size_t size;
};

template <typename T>
Buffers<T> buffers(const RnnShape& s, T* ws) {
  const size_t R = s.rows(), n = s.output, c = s.cell_size;
  const bool lstm = s.cell == RnnCell::LSTM, gru = s.cell == RnnCell::GRU;
  size_t used = 0;
  auto take = [&](bool present, size_t columns) -> T* {
    if (!present) return nullptr;
    T* p = ws ? ws + used : nullptr;
    used += R * columns;
    return p;
  };
  Buffers<T> b{};
  b.A = take(true, s.gates() * c);
  b.PH = take(true, n);
  b.PC = take(lstm, c);
  b.C = take(lstm, c);
  b.RS = take(gru, n);
  b.HT = take(s.projection, c);
  b.DH = take(true, n);
  b.DC = take(lstm, c);
  b.DD = take(true, n);
  b.E = take(s.projection, c);
  b.DRS = take(gru, n);
  b.size = used;
  return b;
}

// Step i in the order of computation: step t, its first row and running ranks, and how many of
// them continue from the step computed before (whose rows start at prev_row); the others start
// from the initial state (every rank at the first step; going backwards, ranks whose sequences
// are shorter join as t falls to their last step).
struct Step {
  size_t t, row, active, prev_row, from_prev;
};

Step step_at(const RnnShape& s, size_t i) {
  const size_t t = s.backwards ? s.steps - 1 - i : i;
  Step st{t, s.step_offsets[t], s.active(t), 0, 0};
  if (i > 0) {
    const size_t p = s.backwards ? t + 1 : t - 1;
    st.prev_row = s.step_offsets[p];
    st.from_prev = std::min(s.active(p), st.active);
  }
  return st;
}

// rows of `columns` at src (from_prev of them at prev, the rest at init + rank) into dst.
template <typename T>
void gather_previous(const Step& st, size_t columns, const T* prev, const T* init, T* dst) {
  std::memcpy(dst, prev + st.prev_row * columns, st.from_prev * columns * sizeof(T));
  std::memcpy(dst + st.from_prev * columns, init + st.from_prev * columns,
              (st.active - st.from_prev) * columns * sizeof(T));
}

// body(row) for rows [0, rows), over threads when the step is large enough: work counts a
// step's elements only (not their cost), so the per-step passes split only for large
// minibatches, where a thread's share outweighs waking it.
template <class Body>
void for_rows(size_t rows, size_t work, Body&& body) {
  detail::parallel_for(rows, work, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) body(r);
  });
}

// ---- forward passes over one step's rows ----

template <RnnActivation Act, bool Peep, typename T>
void lstm_rows(const Step& st, size_t cols, const RnnWeights<T>& w, T* A, const T* PC, T* C,
               T* out) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    const T sdc = w.s_dc, sc = w.s_c;
    const T *Ci = w.Ci, *Cf = w.Cf, *Co = w.Co;
    T* a = A + r * 4 * c;
    const T* pc = PC + r * c;
    T* cn = C + r * c;
    T* h = out + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) {
      const T p = pc[j];
      T ai = a[j], af = a[2 * c + j], ao = a[3 * c + j];
      if constexpr (Peep) {
        ai += Ci[j] * sdc * p;
        af += Cf[j] * sdc * p;
      }
      const T i = sigm(ai), f = sigm(af), g = act<Act>(a[c + j]);
      const T cell = f * p + i * g;
      if constexpr (Peep) ao += Co[j] * sc * cell;
      const T o = sigm(ao);
      a[j] = i;
      a[c + j] = g;
      a[2 * c + j] = f;
      a[3 * c + j] = o;
      cn[j] = cell;
      h[j] = o * act<Act>(cell);
    }
  });
}

// z and r, and RS = (s_dh·h)⊙r.
template <typename T>
void gru_gates(const Step& st, size_t cols, T scale_dh, T* A, const T* PH, T* RS) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    const T s_dh = scale_dh;
    T* a = A + r * 3 * c;
    const T* ph = PH + r * c;
    T* rs = RS + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) {
      const T z = sigm(a[j]), rr = sigm(a[c + j]);
      a[j] = z;
      a[c + j] = rr;
      rs[j] = s_dh * ph[j] * rr;
    }
  });
}

template <RnnActivation Act, typename T>
void gru_blend(const Step& st, size_t cols, T scale_dh, T* A, const T* PH, T* out) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    const T s_dh = scale_dh;
    T* a = A + r * 3 * c;
    const T* ph = PH + r * c;
    T* h = out + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) {
      const T z = a[j], cand = act<Act>(a[2 * c + j]);
      a[2 * c + j] = cand;
      h[j] = (T(1) - z) * cand + z * s_dh * ph[j];
    }
  });
}

template <RnnActivation Act, typename T>
void rnn_rows(const Step& st, size_t cols, T* A, T* out) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    T* a = A + r * c;
    T* h = out + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) h[j] = a[j] = act<Act>(a[j]);
  });
}

// ---- backward passes over one step's rows: dh is the gradient of h~ ----

// Gate gradients into A; DC's rows change from the gradient of the new cell (what the next step
// and the output sent) to that of the previous cell.
template <RnnActivation Act, bool Peep, typename T>
void lstm_rows_backward(const Step& st, size_t cols, const RnnWeights<T>& w, const T* dH, T* A,
                        const T* PC, const T* C, T* DC) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    const T sdc = w.s_dc, sc = w.s_c;
    const T *Ci = w.Ci, *Cf = w.Cf, *Co = w.Co;
    T* a = A + r * 4 * c;
    const T* dh = dH + r * c;
    const T* pc = PC + r * c;
    const T* cn = C + r * c;
    T* dc_row = DC + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) {
      const T i = a[j], g = a[c + j], f = a[2 * c + j], o = a[3 * c + j];
      const T ac = act<Act>(cn[j]);
      const T dao = dh[j] * ac * o * (T(1) - o);
      T dc = dc_row[j] + dh[j] * o * dact<Act>(ac);
      if constexpr (Peep) dc += dao * Co[j] * sc;
      const T dai = dc * g * i * (T(1) - i);
      const T dag = dc * i * dact<Act>(g);
      const T daf = dc * pc[j] * f * (T(1) - f);
      T dp = dc * f;
      if constexpr (Peep) dp += sdc * (dai * Ci[j] + daf * Cf[j]);
      a[j] = dai;
      a[c + j] = dag;
      a[2 * c + j] = daf;
      a[3 * c + j] = dao;
      dc_row[j] = dp;
    }
  });
}

// The gradients of z and of the candidate's pre-activation, and DD = dh⊙z (the blend's part of
// the gradient of s_dh·h).
template <RnnActivation Act, typename T>
void gru_blend_backward(const Step& st, size_t cols, T scale_dh, const T* dH, T* A, const T* PH,
                        T* DD) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    const T s_dh = scale_dh;
    T* a = A + r * 3 * c;
    const T* dh = dH + r * c;
    const T* ph = PH + r * c;
    T* dd = DD + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) {
      const T z = a[j], cand = a[2 * c + j];
      dd[j] = dh[j] * z;
      a[j] = dh[j] * (s_dh * ph[j] - cand) * z * (T(1) - z);
      a[2 * c + j] = dh[j] * (T(1) - z) * dact<Act>(cand);
    }
  });
}

// The gradient of r from DRS, the gradient of RS; DD gains RS's part.
template <typename T>
void gru_reset_backward(const Step& st, size_t cols, T scale_dh, T* A, const T* PH, const T* DRS,
                        T* DD) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    const T s_dh = scale_dh;
    T* a = A + r * 3 * c;
    const T* ph = PH + r * c;
    const T* drs = DRS + r * c;
    T* dd = DD + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) {
      const T rr = a[c + j];
      a[c + j] = drs[j] * s_dh * ph[j] * rr * (T(1) - rr);
      dd[j] += drs[j] * rr;
    }
  });
}

template <RnnActivation Act, typename T>
void rnn_rows_backward(const Step& st, size_t cols, const T* dH, T* A) {
  for_rows(st.active, st.active * cols, [&](size_t r) {
    const size_t c = cols;  // locals: stores through the rows cannot change them
    T* a = A + r * c;
    const T* dh = dH + r * c;
    LOOM_OMP_SIMD()
    for (size_t j = 0; j < c; ++j) a[j] = dh[j] * dact<Act>(a[j]);
  });
}

// sum over i < n of a[i] * b[i], in double.
template <typename T>
double dot(size_t n, const T* a, const T* b) {
  double s = 0;
  LOOM_OMP_SIMD(reduction(+ : s))
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// dst[i] += alpha * src[i].
template <typename T>
void add_scaled(size_t n, T alpha, const T* src, T* dst) {
  LOOM_OMP_SIMD()
  for (size_t i = 0; i < n; ++i) dst[i] += alpha * src[i];
}

}  // namespace

size_t rnn_workspace_size(const RnnShape& s) {
  return buffers<float>(s, nullptr).size;
}

template <typename T>
const T* rnn_cell_states(const RnnShape& s, const T* workspace) {
  return buffers(s, const_cast<T*>(workspace)).C;
}

template <typename T>
void rnn_forward(const RnnShape& s, const RnnWeights<T>& w, const T* x, const T* h0, const T* c0,
                 T* y, T* workspace) {
  const Buffers<T> B = buffers(s, workspace);
  const size_t R = s.rows(), n = s.output, c = s.cell_size, gc = s.gates() * c;
  const size_t hc = s.recurrent_gates() * c;
  detail::parallel_for(R, R * gc, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) std::memcpy(B.A + r * gc, w.b, gc * sizeof(T));
  });
  gemm(false, false, R, gc, s.input, T(1), x, s.input, w.W, gc, T(1), B.A, gc);
  T* const hidden = s.projection ? B.HT : y;  // h~ (n == c without a projection)
  for (size_t i = 0; i < s.steps; ++i) {
    const Step st = step_at(s, i);
    const size_t m = st.active, row = st.row;
    T* a = B.A + row * gc;
    T* ph = B.PH + row * n;
    gather_previous(st, n, y, h0, ph);
    gemm(false, false, m, hc, n, w.s_dh, ph, n, w.H, hc, T(1), a, gc);
    with_activation(s.activation, [&](auto act_c) {
      constexpr RnnActivation Act = decltype(act_c)::value;
      switch (s.cell) {
        case RnnCell::LSTM:
          gather_previous(st, c, B.C, c0, B.PC + row * c);
          if (s.peepholes) {
            lstm_rows<Act, true>(st, c, w, a, B.PC + row * c, B.C + row * c, hidden + row * c);
          } else {
            lstm_rows<Act, false>(st, c, w, a, B.PC + row * c, B.C + row * c, hidden + row * c);
          }
          break;
        case RnnCell::GRU:
          gru_gates(st, c, w.s_dh, a, ph, B.RS + row * n);
          gemm(false, false, m, c, n, T(1), B.RS + row * n, n, w.H1, c, T(1), a + 2 * c, gc);
          gru_blend<Act>(st, c, w.s_dh, a, ph, hidden + row * c);
          break;
        case RnnCell::RNNStep:
          rnn_rows<Act>(st, c, a, hidden + row * c);
          break;
      }
    });
    if (s.projection)
      gemm(false, false, m, n, c, w.s_h, B.HT + row * c, c, w.P, n, T(0), y + row * n, n);
  }
}

template <typename T>
void rnn_backward(const RnnShape& s, const RnnWeights<T>& w, const T* x, const T* dy, T* workspace,
                  RnnGradients<T>& g) {
  const Buffers<T> B = buffers(s, workspace);
  const size_t R = s.rows(), N = s.sequences(), n = s.output, c = s.cell_size;
  const size_t gc = s.gates() * c, hc = s.recurrent_gates() * c;
  const bool lstm = s.cell == RnnCell::LSTM;
  std::memcpy(B.DH, dy, R * n * sizeof(T));
  if (lstm) std::fill_n(B.DC, R * c, T(0));
  if (g.h0) std::fill_n(g.h0, N * n, T(0));
  if (g.c0) std::fill_n(g.c0, N * c, T(0));
  double ds_h = 0;
  for (size_t i = s.steps; i-- > 0;) {
    const Step st = step_at(s, i);
    const size_t m = st.active, row = st.row;
    T* a = B.A + row * gc;
    T* dd = B.DD + row * n;
    const T* ph = B.PH + row * n;
    const T* dh = B.DH + row * n;
    if (s.projection) {  // the gradient of h~: s_h · dh·Pᵀ
      T* e = B.E + row * c;
      gemm(false, true, m, c, n, T(1), B.DH + row * n, n, w.P, n, T(0), e, c);
      ds_h += dot(m * c, e, B.HT + row * c);
      for (size_t k = 0; k < m * c; ++k) e[k] *= w.s_h;
      dh = e;
    }
    with_activation(s.activation, [&](auto act_c) {
      constexpr RnnActivation Act = decltype(act_c)::value;
      switch (s.cell) {
        case RnnCell::LSTM: {
          T* dc = B.DC + row * c;
          if (s.peepholes) {
            lstm_rows_backward<Act, true>(st, c, w, dh, a, B.PC + row * c, B.C + row * c, dc);
          } else {
            lstm_rows_backward<Act, false>(st, c, w, dh, a, B.PC + row * c, B.C + row * c, dc);
          }
          gemm(false, true, m, n, hc, T(1), a, gc, w.H, hc, T(0), dd, n);
          add_scaled(st.from_prev * c, T(1), dc, B.DC + st.prev_row * c);
          if (g.c0)
            std::memcpy(g.c0 + st.from_prev * c, dc + st.from_prev * c,
                        (m - st.from_prev) * c * sizeof(T));
          break;
        }
        case RnnCell::GRU: {
          T* drs = B.DRS + row * n;
          gru_blend_backward<Act>(st, c, w.s_dh, dh, a, ph, dd);
          gemm(false, true, m, n, c, T(1), a + 2 * c, gc, w.H1, c, T(0), drs, n);
          gru_reset_backward(st, c, w.s_dh, a, ph, drs, dd);
          gemm(false, true, m, n, hc, T(1), a, gc, w.H, hc, T(1), dd, n);
          break;
        }
        case RnnCell::RNNStep:
          rnn_rows_backward<Act>(st, c, dh, a);
          gemm(false, true, m, n, hc, T(1), a, gc, w.H, hc, T(0), dd, n);
          break;
      }
    });
    // dd is the gradient of s_dh·h: the previous outputs get s_dh times it.
    add_scaled(st.from_prev * n, w.s_dh, dd, B.DH + st.prev_row * n);
    if (g.h0)
      add_scaled((m - st.from_prev) * n, w.s_dh, dd + st.from_prev * n, g.h0 + st.from_prev * n);
  }
  g.s_h = T(ds_h);
  g.s_dh = T(dot(R * n, B.DD, B.PH));
  if (g.x) gemm(false, true, R, s.input, gc, T(1), B.A, gc, w.W, gc, T(0), g.x, s.input);
  if (g.W) gemm(true, false, s.input, gc, R, T(1), x, s.input, B.A, gc, T(0), g.W, gc);
  if (g.b) {
    std::fill_n(g.b, gc, T(0));
    for (size_t r = 0; r < R; ++r) add_scaled(gc, T(1), B.A + r * gc, g.b);
  }
  if (g.H) gemm(true, false, n, hc, R, w.s_dh, B.PH, n, B.A, gc, T(0), g.H, hc);
  if (g.H1) gemm(true, false, n, c, R, T(1), B.RS, n, B.A + 2 * c, gc, T(0), g.H1, c);
  if (g.P) gemm(true, false, c, n, R, w.s_h, B.HT, c, B.DH, n, T(0), g.P, n);
  if (lstm && s.peepholes) {
    T *dCi = g.Ci, *dCf = g.Cf, *dCo = g.Co;
    double ds_dc = 0, ds_c = 0;
    for (T* d : {dCi, dCf, dCo})
      if (d) std::fill_n(d, c, T(0));
    for (size_t r = 0; r < R; ++r) {
      const T* a = B.A + r * gc;
      const T* pc = B.PC + r * c;
      const T* cn = B.C + r * c;
      for (size_t j = 0; j < c; ++j) {
        const T dai = a[j], daf = a[2 * c + j], dao = a[3 * c + j];
        if (dCi) dCi[j] += dai * w.s_dc * pc[j];
        if (dCf) dCf[j] += daf * w.s_dc * pc[j];
        if (dCo) dCo[j] += dao * w.s_c * cn[j];
        ds_dc += double((dai * w.Ci[j] + daf * w.Cf[j]) * pc[j]);
        ds_c += double(dao * w.Co[j] * cn[j]);
      }
    }
    g.s_dc = T(ds_dc);
    g.s_c = T(ds_c);
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
