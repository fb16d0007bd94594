// CNTK's recurrent LSTM loops in a loaded model as Loom's fused recurrence (docs/cntk-formats.md,
// "Recurrent loops"). CNTK's Recurrence(LSTM(n)) is saved as it runs in CNTK: an "LSTM" block of
// primitives (dh, dc, x) -> (h, c) whose dh and dc are PastValue (or FutureValue) of its own h
// and c. Loaded as it is, Loom's executor runs that loop one step at a time; Loom's own
// Recurrence(LSTM(n)) is one FusedRecurrence op (loom/ops/fused_rnn.h), whose inputs are the
// same parameters in CNTK's shapes and gate order. This pass finds the loops that are exactly
// CNTK's LSTM formula (blocks.py's lstm step: one bias, no peepholes, no projection, tanh,
// sigmoid or relu as the activation, optionally the self-stabilizer of dh) and replaces each by
// that op reading the same Parameter objects, so gradients reach them as before.
#pragma once

#include <cstddef>

#include "loom/graph/function.h"

namespace loom {

// Replaces, in model's graph (in place), each recognised loop by a FusedRecurrence op, and
// returns how many it replaced. A loop stays as it is unless it matches exactly: a block of op
// name "LSTM" (or, as cntk.exe's v1 files hold an LSTM, primitives in no block) whose outputs
// are CNTK's (h, c) computed as
//   a = b + x·W + S(dh)·H;  i, g, f, o = the four slices of a (CNTK's gate order)
//   c = sigmoid(f)·dc + sigmoid(i)·act(g);  h = sigmoid(o)·act(c)
// (either operand order of each sum and product), S the identity or CNTK's Stabilizer
// (softplus(k·alpha)/k · dh, alpha a scalar parameter), dh and dc the same delay op (offset 1)
// of h and c with constant initial states, x a dense vector not computed from the loop, and
// functions outside the loop reading h and nothing else of it (none of it is one of model's
// outputs, which the caller holds).
size_t fuse_cntk_recurrences(const Function& model);

}  // namespace loom
