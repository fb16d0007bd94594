// The fused recurrence: a whole Recurrence(LSTM), Recurrence(GRU) or Recurrence(RNNStep) over a
// sequence as one op ("FusedRecurrence"), which Recurrence builds when its step function is one
// of those layers (loom/layers/recurrent.h); kernels in loom/kernels/rnn.h. Its output is the
// sequence of h, exactly what the step loop of past_value/future_value gives, and its inputs are
// that layer's own parameters in CNTK's shapes and gate order, so a model has the same
// Parameters (names, shapes, values) on either path.
//
// Inputs, in this order, those in brackets only where the attributes say so:
//   x, b, W, H, [H1: GRU], [Ci, Cf, Co: use_peepholes], [P: projection],
//   [alpha_dh, alpha_dc: LSTM with peepholes, alpha_c: the same, alpha_h: projection:
//    self_stabilization], h0, [c0: LSTM]
// Attributes: "cell" ("LSTM", "GRU", "RNNStep"), "activation" ("Tanh", "Sigmoid", "ReLU", or
// "" for none), "go_backwards", "use_peepholes", "projection", "self_stabilization" (bool),
// "steepness" (double: a stabilizer's factor is softplus(steepness·alpha) / steepness).
// h0 and c0 are the initial states: tensors without dynamic axes (constants or parameters) of
// shape [], [1] or the state's.
//
// As for past_value, a sequence that continues one of the previous minibatch (not go_backwards)
// starts from that sequence's final states kept by the same executor, with no gradient back.
#pragma once

#include <string>

#include "loom/graph/function.h"

namespace loom {

struct FusedRecurrenceInputs {
  std::string cell = {};        // "LSTM", "GRU" or "RNNStep"
  std::string activation = {};  // as the attribute
  bool go_backwards = false;
  Variable b = {}, W = {}, H = {}, H1 = {}, Ci = {}, Cf = {}, Co = {}, P = {};  // empty: absent
  // The self-stabilizers' parameters (empty without self-stabilization, and those the cell does
  // not use): of the previous output, the previous cell, the cell in o's peephole, h~.
  Variable alpha_dh = {}, alpha_dc = {}, alpha_c = {}, alpha_h = {};
  double steepness = 4;
  Variable h0 = {}, c0 = {};
};

Function fused_recurrence(const Variable& x, const FusedRecurrenceInputs& inputs,
                          const std::string& name = "");

// A self-stabilizer's factor softplus(k·alpha) / k (CNTK's Stabilizer, k its steepness), by
// which it multiplies what it stabilizes.
double stabilizer_factor(double alpha, double steepness);

// Whether f applies the FusedRecurrence op, which keeps each sequence's final state for the
// next minibatch of the same executor (where a sequence may continue).
bool is_fused_recurrence(const FunctionImpl& f);

// The parts of a FusedRecurrence op from its inputs (x first) and attributes: the inverse of
// fused_recurrence (ONNX export reads a call this way).
FusedRecurrenceInputs fused_recurrence_inputs(const std::vector<Variable>& inputs,
                                              const Dictionary& attributes);

}  // namespace loom
