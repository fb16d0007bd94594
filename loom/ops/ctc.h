// CNTK's connectionist temporal classification (CTC) criterion, in CNTK's form: labels_to_graph
// turns frame-aligned labels into the "graph" that forward_backward, the criterion, reads. The
// labels have the features' sequence axis: each frame's row is one-hot, 2 where a label starts
// (its first frame) and 1 on its later frames; a label sequence shorter than its features is
// padded by repeating its last label with the value 1 (CNTK's HTKMLFDeserializer writes them so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/graph/function.h"
#include "loom/ops/op_schema.h"

namespace loom {

// labels unchanged, as the graph forward_backward reads (CNTK's LabelsToGraph is a copy, its
// gradient passed through).
Function labels_to_graph(const Variable& labels, const std::string& name = "");

// CNTK's forward_backward keyword arguments, with its defaults.
struct ForwardBackwardOptions {
  // Alignments hold a label at most this many frames past the start of the next label in the
  // graph (a blank one frame less); -1: no constraint.
  int64_t delay_constraint = -1;
};
// The CTC loss of each sequence: −log P(labels | features), the probability summed over the
// alignments of the graph's label sequence (the class of each frame whose largest entry is 2,
// in order) with blanks, the class probabilities softmax of each frame's features (network
// outputs: no softmax before). graph must be labels_to_graph(labels), with features' dynamic
// axes and sample size; blank_token_id (< the sample size) is the blank's class. The value is
// CNTK's: the sum over the minibatch's sequences, a scalar without dynamic axes (shape []), which
// the Trainer divides by the minibatch's frames (graph's samples). The gradient goes to features
// (softmax − the CTC posterior, per frame), none to graph. DataError
// for a label that is the blank, or a sequence whose labels no alignment fits (a label repeated
// on the next frame leaves no frame for the blank between).
Function forward_backward(const Variable& graph, const Variable& features, size_t blank_token_id,
                          const ForwardBackwardOptions& options = {}, const std::string& name = "");

// The schemas of LabelsToGraph and ForwardBackward.
std::vector<OpSchema> ctc_schemas();

}  // namespace loom
