// Softmax and log-softmax of each sample along one static axis (the rows of a minibatch stay
// apart). A negative axis counts from the end; Axis::all_static_axes() normalizes over all
// elements of the sample, as CNTK's softmax with axis=None does. The executor densifies sparse
// inputs.
#pragma once

#include <string>

#include "loom/core/axis.h"
#include "loom/graph/function.h"

namespace loom {

// exp(x - max) / Σ exp(x - max) along axis; stable for large inputs. By default over all static
// axes of each sample together, as CNTK's softmax(x) with axis=None.
Function softmax(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                 const std::string& name = "");
// x - logsumexp(x) along axis; finite where softmax would underflow to 0.
Function log_softmax(const Variable& x, const Axis& axis = Axis(-1), const std::string& name = "");
// 1 at the first largest element of each sample (all its static axes), 0 elsewhere; no gradient.
Function hardmax(const Variable& x, const std::string& name = "");

}  // namespace loom
