// Reductions (CNTK's reduce_* and argmax/argmin) over static axes of each sample: a negative
// axis counts from the end; Axis::all_static_axes() reduces them all. With keep_dims (CNTK's
// default) a reduced static axis stays as extent 1, else it is dropped: reducing all static axes
// of a [2,3] sample gives [1,1], or [] without keep_dims. As in CNTK, the reduce_* ops also take
// Axis::default_batch_axis() (over the samples of a batch without a sequence axis: the output has
// no dynamic axes and the static shape the static axes give) and Axis::all_axes() (over every
// element of the minibatch: ones of the sample's rank, or [] without keep_dims). A sequence axis
// is an ArgumentError (sequence_ops.h reduces sequences). Dense inputs only.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/core/dictionary.h"
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
// The gradient goes to the first maximal (minimal) element, in row-major order, of each group.
Function reduce_max(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                    bool keep_dims = true, const std::string& name = "");
Function reduce_max(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                    const std::string& name = "");
Function reduce_min(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                    bool keep_dims = true, const std::string& name = "");
Function reduce_min(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                    const std::string& name = "");
// Its gradient is the product of the other elements, also where x holds zeros.
Function reduce_prod(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                     bool keep_dims = true, const std::string& name = "");
Function reduce_prod(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                     const std::string& name = "");
// log(sum(exp(x))), computed shifted by the max (no overflow).
Function reduce_log_sum_exp(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                            bool keep_dims = true, const std::string& name = "");
Function reduce_log_sum_exp(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                            const std::string& name = "");
// sum(|x|); its gradient sign(x), 0 at 0.
Function reduce_l1(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                   bool keep_dims = true, const std::string& name = "");
Function reduce_l1(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                   const std::string& name = "");
// sqrt(sum(x^2)); its gradient x / reduce_l2(x), 0 where that is 0.
Function reduce_l2(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                   bool keep_dims = true, const std::string& name = "");
Function reduce_l2(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                   const std::string& name = "");
Function reduce_sum_square(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                           bool keep_dims = true, const std::string& name = "");
Function reduce_sum_square(const Variable& x, const std::vector<Axis>& axes, bool keep_dims = true,
                           const std::string& name = "");

// The position of the first max (min) along axis, kept as extent 1; over all static axes the
// position in the sample's row-major order (numpy's flat index). In x's dtype; no gradient.
Function argmax(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                const std::string& name = "");
Function argmin(const Variable& x, const Axis& axis = Axis::all_static_axes(),
                const std::string& name = "");

// The static axes (ascending indices into a sample of rank `rank`) that a reduction function's
// attributes reduce, and whether it keeps them as extent 1, whichever attribute keys the function
// was built or saved with (reduction.cpp): for code that reads reductions (the ONNX exporter).
std::vector<size_t> reduced_static_axes(const Dictionary& attributes, size_t rank);
bool reduction_keeps_dims(const Dictionary& attributes);
// Whether a reduction reduces the minibatch's samples too (the batch axis or all axes): its
// output has no dynamic axes.
bool reduction_reduces_rows(const Dictionary& attributes);

}  // namespace loom
