// Delay ops, the edges of recurrences: past_value(x) at step t of a sequence is x at step
// t - time_step of the same sequence, future_value(x) x at step t + time_step; where that step is
// outside the sequence, the initial state. A graph may feed a delay op's output back into its
// operand (h = tanh(x·W + past_value(h)·U)): the executor runs such loops one step at a time
// (docs/executor.md).
//
// The initial state is a tensor without dynamic axes (a constant or parameter; it broadcasts to
// x's sample shape like an elementwise operand, and every sequence's boundary steps read it);
// or per-sequence data of x's sample shape, for sequence b of x the minibatch's sample b (data
// with a batch axis only: an encoder's state) or sequence b (past_value reads its last
// time_step steps, future_value its first; a sequence of one step serves them all). Gradients:
// x's steps get those of the steps that read them, the initial state's elements the sum over
// the boundary steps that read them.
//
// A sequence that continues one of the previous minibatch (truncated BPTT: its mask starts
// Valid, and it keeps its index) reads, before its start here, past_value's operand of the
// previous minibatch of the same executor instead of the initial state; no gradient flows
// back there.
#pragma once

#include <string>

#include "loom/graph/function.h"

namespace loom::sequence {

// CNTK's default time_step of past_value, future_value and delay (the Delay layer's T).
inline constexpr size_t kDelayTimeStep = 1;

// The initial state defaults to the scalar constant 0 of x's data type.
Function past_value(const Variable& x, const Variable& initial_state,
                    size_t time_step = kDelayTimeStep, const std::string& name = "");
Function past_value(const Variable& x, size_t time_step = kDelayTimeStep,
                    const std::string& name = "");
Function future_value(const Variable& x, const Variable& initial_state,
                      size_t time_step = kDelayTimeStep, const std::string& name = "");
Function future_value(const Variable& x, size_t time_step = kDelayTimeStep,
                      const std::string& name = "");
// past_value for time_step > 0, future_value of -time_step for time_step < 0, and x itself
// for 0 (an alias of x when named, as CNTK's delay).
Function delay(const Variable& x, const Variable& initial_state, int64_t time_step = kDelayTimeStep,
               const std::string& name = "");
// The same with the initial state 0.
Function delay(const Variable& x, int64_t time_step = kDelayTimeStep, const std::string& name = "");

}  // namespace loom::sequence
