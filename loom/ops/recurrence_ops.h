// Delay ops, the edges of recurrences: past_value(x) at step t of a sequence is x at step
// t - time_step of the same sequence, future_value(x) x at step t + time_step; where that step is
// outside the sequence, the initial state. A graph may feed a delay op's output back into its
// operand (h = tanh(x·W + past_value(h)·U)): the executor runs such loops one step at a time
// (docs/executor.md).
//
// The initial state is a tensor without dynamic axes (a constant or parameter; it broadcasts to
// x's sample shape like an elementwise operand, and every sequence's boundary steps read it), or
// data with a batch axis only, one sample per sequence of x in the minibatch's order, of x's
// sample shape (an encoder's state: sequence b's boundary steps read sample b). Gradients: x's
// steps get those of the steps that read them; the initial state the sum over the boundary
// steps that read it.
#pragma once

#include <string>

#include "loom/graph/function.h"

namespace loom::sequence {

// The initial state defaults to the scalar constant 0 of x's data type.
Function past_value(const Variable& x, const Variable& initial_state, size_t time_step = 1,
                    const std::string& name = "");
Function past_value(const Variable& x, size_t time_step = 1, const std::string& name = "");
Function future_value(const Variable& x, const Variable& initial_state, size_t time_step = 1,
                      const std::string& name = "");
Function future_value(const Variable& x, size_t time_step = 1, const std::string& name = "");
// past_value for time_step > 0, future_value of -time_step for time_step < 0, and x itself for 0.
Function delay(const Variable& x, const Variable& initial_state, int64_t time_step = 1,
               const std::string& name = "");

}  // namespace loom::sequence
