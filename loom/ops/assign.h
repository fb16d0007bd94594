// assign(ref, input): writes input's value into ref, a Parameter or Constant, and returns
// the new value. This is how an update graph keeps state (the universal learner's
// accumulators, the parameters themselves).
//
// When the write is visible (CNTK's rule, from its cntk.ops.assign documentation): every
// other use of ref in the same graph evaluation sees the value ref had before the
// evaluation; only the assign's output carries the new value, so a computation that needs
// the new value depends on the assign's output (seed 003's my_rmsprop divides by
// sqrt(assign(a, ...)), not by sqrt(a)). After the evaluation ref holds the new value.
// In Loom the write into ref's storage happens when the assign node runs, and the
// executor's view of ref is switched for the rest of that pass (forward, and backward in
// training) to a snapshot of the old value; this is observably CNTK's behaviour except that
// code reading ref's storage directly between Function::forward and Function::backward
// already sees the new value. See docs/assign.md.
//
// The write happens exactly once per evaluation of a graph that computes the assign's
// output (the executor runs each node once per pass), in any graph: Function::eval, a
// Trainer's criterion, a universal learner's update graph.
//
// Rules: ref and input have the same shape and data type (no broadcasting) and neither has
// dynamic axes. The output is differentiable with respect to input (the gradient passes
// through unchanged), never with respect to ref. Several assigns to the same ref in one
// graph: CNTK leaves the order open; in Loom the first one to run writes ref's storage (a
// later one then writes the snapshot, which is discarded), so do not rely on it.
#pragma once

#include <string>

#include "loom/graph/function.h"
#include "loom/graph/op.h"

namespace loom {

// ArgumentError when ref is not a Parameter or Constant; ShapeError when the shapes or data
// types differ or either has dynamic axes.
Function assign(const Variable& ref, const Variable& input, const std::string& name = "");

}  // namespace loom
