// Reductions over static axes of each sample (the rows of a minibatch stay apart; reductions
// over a sequence live in sequence_ops.h). A negative axis counts from the end. With keep_dims
// (CNTK's default) a reduced axis stays as extent 1, else it is dropped: reducing all static
// axes of a [2,3] sample gives [1,1], or [] without keep_dims. Dense inputs only.
#pragma once

#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/graph/function.h"

namespace loom {

Function reduce_sum(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                    bool keep_dims = true, const std::string& name = "");
Function reduce_sum(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                    const std::string& name = "");
Function reduce_mean(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                     bool keep_dims = true, const std::string& name = "");
Function reduce_mean(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                     const std::string& name = "");
// The gradient goes to the first maximal element (row-major order) of each reduced group.
Function reduce_max(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                    bool keep_dims = true, const std::string& name = "");
Function reduce_max(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                    const std::string& name = "");

}  // namespace loom
