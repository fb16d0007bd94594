// CNTK's recurrent loops in a loaded model as Loom's fused recurrence (docs/cntk-formats.md,
// "Recurrent loops"). CNTK's Recurrence(LSTM(n)) is saved as it runs in CNTK: an "LSTM" block of
// primitives (dh, dc, x) -> (h, c) whose dh and dc are PastValue (or FutureValue) of its own h
// and c; Recurrence(GRU(n)) and Recurrence(RNNStep(n)) likewise, blocks (dh, x) -> h. Loaded as
// it is, Loom's executor runs such a loop one step at a time; Loom's own Recurrence of these
// cells is one FusedRecurrence op (loom/ops/fused_rnn.h), whose inputs are the same parameters
// in CNTK's shapes and gate order. This pass finds the loops that are exactly CNTK's formulas
// (blocks.py's lstm, gru and rnn_step: one bias, no peepholes, no projection, tanh, sigmoid or
// relu as the activation, optionally the self-stabilizer of dh) and replaces each by that op
// reading the same Parameter objects, so gradients reach them as before.
#pragma once

#include <cstddef>

#include "loom/graph/function.h"

namespace loom {

// Replaces, in model's graph (in place), each recognised loop by a FusedRecurrence op, and
// returns how many it replaced. A loop stays as it is unless it matches exactly: a block of op
// name "LSTM", "GRU" or "RNNStep" (or, as cntk.exe's v1 files hold a loop, primitives in no
// block) whose outputs are CNTK's computed as
//   LSTM (h, c): a = b + x·W + S(dh)·H;  i, g, f, o = the four slices of a (CNTK's gate order)
//                c = sigmoid(f)·dc + sigmoid(i)·act(g);  h = sigmoid(o)·act(c)
//   GRU h:       ax = b + x·W;  ah = S(dh)·H;  z, r, g = the slices of ax; of ah, z and r
//                z' = sigmoid(z + ah_z);  r' = sigmoid(r + ah_r)
//                h = (1 - z')·act(g + (S(dh)·r')·H1) + z'·S(dh)
//   RNNStep h:   h = act(b + x·W + S(dh)·H)
// (either operand order of each sum and product, the three-term sums in any grouping), S the
// identity or CNTK's Stabilizer (softplus(k·alpha)/k · dh, alpha a scalar parameter), dh (and
// dc) the same delay op (offset 1) of h (and c) with constant initial states, x a dense vector
// not computed from the loop, and functions outside the loop reading h and nothing else of it
// (none of it is one of model's outputs, which the caller holds).
size_t fuse_cntk_recurrences(const Function& model);

}  // namespace loom
