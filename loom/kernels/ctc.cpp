#include "loom/kernels/ctc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "loom/kernels/detail.h"

namespace loom::kernels {

namespace {

constexpr double kLogZero = -std::numeric_limits<double>::infinity();

// log(e^a + e^b), exactly (CNTK's LogAdd, with -inf for its LZERO).
double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kLogZero) return a;
  return a + std::log1p(std::exp(b - a));
}

// One thread's buffers, reused across its sequences.
struct Workspace {
  std::vector<size_t> token;  // per state: its class
  std::vector<int64_t> last;  // per state: the last frame that may hold it
  std::vector<double> log_norm, alpha, beta, occupancy, row;
};

// The loss of sequence b and its gradient rows; +inf where no alignment is allowed.
template <typename T>
double sequence_loss(const CtcBatch& batch, size_t b, const CtcLabels& l, const T* x, T* grad,
                     Workspace& w) {
  const size_t classes = batch.classes, blank = batch.blank;
  const size_t* rows = batch.rows.data() + batch.offsets[b];
  const size_t frames = batch.offsets[b + 1] - batch.offsets[b];
  if (frames == 0) return 0;
  // The states: a blank, then each token followed by a blank. A state's bound is the start of
  // the token after it (the sequence's length after the last), CNTK's phoneBound[s + 2].
  const size_t tokens = l.tokens.size(), states = 2 * tokens + 1;
  w.token.assign(states, blank);
  w.last.assign(states, std::numeric_limits<int64_t>::max());
  for (size_t s = 0; s < states; ++s) {
    const bool is_blank = s % 2 == 0;
    if (!is_blank) w.token[s] = l.tokens[s / 2];
    if (batch.delay >= 0) {
      const size_t next = s / 2 + 1;
      const int64_t bound = next < tokens ? int64_t(l.starts[next]) : int64_t(frames);
      w.last[s] = bound + batch.delay - (is_blank ? 1 : 0);
    }
  }
  // log_softmax(x_t)[c] = x_t[c] - log_norm[t].
  w.log_norm.resize(frames);
  for (size_t t = 0; t < frames; ++t) {
    const T* z = x + rows[t] * classes;
    const double m = *std::max_element(z, z + classes);
    double sum = 0;
    for (size_t c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - m);
    w.log_norm[t] = m + std::log(sum);
  }
  auto log_y = [&](size_t t, size_t s) {
    return double(x[rows[t] * classes + w.token[s]]) - w.log_norm[t];
  };
  // Whether an alignment may pass from state s - 2 to s, skipping the blank between two tokens.
  auto skips_into = [&](size_t s) { return s % 2 == 1 && s >= 2 && w.token[s] != w.token[s - 2]; };

  w.alpha.assign(frames * states, kLogZero);
  w.beta.assign(frames * states, kLogZero);
  double *alpha = w.alpha.data(), *beta = w.beta.data();
  for (size_t s = 0; s < std::min<size_t>(2, states); ++s) alpha[s] = log_y(0, s);
  for (size_t t = 1; t < frames; ++t) {
    const double* prev = alpha + (t - 1) * states;
    for (size_t s = 0; s < states; ++s) {
      if (int64_t(t) > w.last[s]) continue;
      double a = prev[s];
      if (s >= 1) a = log_add(a, prev[s - 1]);
      if (skips_into(s)) a = log_add(a, prev[s - 2]);
      alpha[t * states + s] = a + log_y(t, s);
    }
  }
  double* end = beta + (frames - 1) * states;
  for (size_t s = states - std::min<size_t>(2, states); s < states; ++s)
    end[s] = log_y(frames - 1, s);
  for (size_t t = frames - 1; t-- > 0;) {
    const double* next = beta + (t + 1) * states;
    for (size_t s = 0; s < states; ++s) {
      if (int64_t(t) > w.last[s]) continue;
      double v = next[s];
      if (s + 1 < states) v = log_add(v, next[s + 1]);
      if (s + 2 < states && skips_into(s + 2)) v = log_add(v, next[s + 2]);
      beta[t * states + s] = v + log_y(t, s);
    }
  }
  const double log_p = states > 1 ? log_add(beta[0], beta[1]) : beta[0];
  if (log_p == kLogZero) return std::numeric_limits<double>::infinity();

  // The gradient: softmax minus the posterior of each class, normalized per frame.
  w.occupancy.resize(states);
  w.row.resize(classes);
  for (size_t t = 0; t < frames; ++t) {
    const T* z = x + rows[t] * classes;
    double total = 0;
    for (size_t s = 0; s < states; ++s) {
      const size_t i = t * states + s;
      w.occupancy[s] = std::exp(alpha[i] + beta[i] - log_y(t, s) - log_p);
      total += w.occupancy[s];
    }
    for (size_t c = 0; c < classes; ++c) w.row[c] = std::exp(double(z[c]) - w.log_norm[t]);
    for (size_t s = 0; s < states; ++s) w.row[w.token[s]] -= w.occupancy[s] / total;
    T* g = grad + rows[t] * classes;
    for (size_t c = 0; c < classes; ++c) g[c] = T(w.row[c]);
  }
  return -log_p;
}

}  // namespace

template <typename T>
std::vector<CtcLabels> ctc_labels(const CtcBatch& batch, const T* graph) {
  std::vector<CtcLabels> labels(batch.num_sequences());
  for (size_t b = 0; b < labels.size(); ++b)
    for (size_t i = batch.offsets[b]; i < batch.offsets[b + 1]; ++i) {
      const T* row = graph + batch.rows[i] * batch.classes;
      const T* largest = std::max_element(row, row + batch.classes);  // the first largest
      if (*largest != T(2)) continue;
      labels[b].tokens.push_back(size_t(largest - row));
      labels[b].starts.push_back(i - batch.offsets[b]);
    }
  return labels;
}

template <typename T>
void ctc_loss(const CtcBatch& batch, const std::vector<CtcLabels>& labels, const T* features,
              double* loss, T* grad) {
  const size_t n = batch.num_sequences();
  size_t work = 0;
  for (size_t b = 0; b < n; ++b)
    work += (batch.offsets[b + 1] - batch.offsets[b]) *
            (2 * labels[b].tokens.size() + 1 + batch.classes);
  detail::parallel_for(n, work, [&](size_t begin, size_t end) {
    Workspace w;
    for (size_t b = begin; b < end; ++b)
      loss[b] = sequence_loss(batch, b, labels[b], features, grad, w);
  });
}

template std::vector<CtcLabels> ctc_labels<float>(const CtcBatch&, const float*);
template std::vector<CtcLabels> ctc_labels<double>(const CtcBatch&, const double*);
template void ctc_loss<float>(const CtcBatch&, const std::vector<CtcLabels>&, const float*, double*,
                              float*);
template void ctc_loss<double>(const CtcBatch&, const std::vector<CtcLabels>&, const double*,
                               double*, double*);

}  // namespace loom::kernels
