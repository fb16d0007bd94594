// Ops that rearrange the static axes of each sample; the rows of a minibatch stay apart.
// Dense inputs only.
#pragma once

#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/graph/function.h"

namespace loom {

// The same elements in another sample shape; one dimension may be NDShape::kInferred (it
// takes whatever the element count leaves).
Function reshape(const Variable& x, const NDShape& shape, const std::string& name = "");

// Elements [begin, end) along a static axis, as CNTK counts them: a negative begin or end
// counts from the end, and end 0 means the end of the axis (slice(x, a, -1, 0) is the last
// element). Out of range is a ShapeError.
Function slice(const Variable& x, const Axis& axis, int begin, int end,
               const std::string& name = "");

// Concatenation along a static axis; the inputs agree in every other dimension, in data type
// and in dynamic axes (a tensor without dynamic axes is not broadcast over samples here).
Function splice(const std::vector<Variable>& inputs, const Axis& axis = Axis(-1),
                const std::string& name = "");

// Output axis k is input axis perm[k] (as numpy.transpose); negative entries count from the
// end. An empty perm reverses the axes (the matrix transpose for rank 2).
Function transpose(const Variable& x, const std::vector<int>& perm = {},
                   const std::string& name = "");

}  // namespace loom
