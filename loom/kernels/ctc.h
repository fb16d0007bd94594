// Connectionist temporal classification as CNTK computes it (ForwardBackwardNode: GammaCalculation
// ::doCTC and CPUMatrix::AssignCTCScore): the labels read off frame-aligned one-hot rows, and the
// forward-backward algorithm over the label sequence with blanks, in log space.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::kernels {

// The sequences of a minibatch in its packed tensors [rows, classes] (graph and features share
// the rows): sequence b's frames, in time order, are rows[offsets[b]] .. rows[offsets[b+1] - 1].
struct CtcBatch {
  size_t classes = 0;
  size_t blank = 0;    // the blank token's class (< classes)
  int64_t delay = -1;  // CNTK's delayConstraint (>= 0), or -1: none
  std::vector<size_t> offsets, rows;
  size_t num_sequences() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};

// One sequence's labels: tokens[k] starts at frame starts[k] (increasing).
struct CtcLabels {
  std::vector<size_t> tokens, starts;
};

// The labels of each sequence of graph, as CNTK reads them: frame t starts a label, the class of
// its first largest entry, where that entry is 2; a largest entry of 1 marks a label's later
// frames, and such frames (or any others) add none.
template <typename T>
std::vector<CtcLabels> ctc_labels(const CtcBatch& batch, const T* graph);

// Per sequence b, with y_t = softmax of frame t's features over the classes and the label
// sequence l = labels[b] (none of its tokens the blank): loss[b] = -log Σ y_1(π_1)···y_T(π_T)
// over the alignments π of l (l with a blank before, between and after its tokens, each state
// held one or more frames, a blank skipped only between different tokens), in double. With a
// delay constraint d >= 0, a state may be held up to frame f + d (f + d - 1 for a blank), f the
// start of the next token (the sequence's length after the last). grad's rows of b = d loss[b] /
// d features = y_t - posterior_t, the posterior of each class among the alignments, normalized
// per frame as CNTK's. Where no alignment is allowed, loss[b] = +inf and b's grad rows are
// unspecified. Threads split the sequences.
template <typename T>
void ctc_loss(const CtcBatch& batch, const std::vector<CtcLabels>& labels, const T* features,
              double* loss, T* grad);

}  // namespace loom::kernels
