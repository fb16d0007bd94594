// CNTK's indexing ops over the static axes of each sample: one_hot, gather and top_k. Indices
// are the values of a floating-point tensor (CNTK's convention), truncated toward zero as CNTK's
// kernels cast them (1.7 is 1); an index outside its range is an ArgumentError naming the op and
// the index when the function is evaluated. No gradient flows to indices. A negative axis counts
// from the end. Dense inputs and outputs only.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/graph/function.h"
#include "loom/ops/op_schema.h"

namespace loom {

// x's sample shape with a new axis of extent num_classes inserted at `axis` (an axis of the
// output: -1, the default, appends it), 1 at each index's class and 0 elsewhere; in x's dtype.
// Loom's ops write dense outputs: sparse_output=true is an ArgumentError.
Function one_hot(const Variable& x, size_t num_classes, bool sparse_output = false,
                 const Axis& axis = Axis(-1), const std::string& name = "");

// The slices of reference at the indices along `axis` (CNTK's default, axis=None, is the first):
// reference's shape with that axis replaced by indices' shape (numpy's take). The output is in
// reference's dtype; indices may be of either dtype. The gradient to reference adds each
// output's gradient to the slice it came from; none flows to indices. Either input may have
// dynamic axes (both: the same ones); CNTK's gather takes them on indices only.
Function gather(const Variable& reference, const Variable& indices, const Axis& axis = Axis(0),
                const std::string& name = "");

// CNTK's top_k: one primitive (TopK) of two outputs, the k largest values of x along axis in
// decreasing order (outputs()[0]) and their positions along axis (outputs()[1], in x's dtype); x's
// shape with that axis of extent k. Ties go to the lower position first, NaN ranks above every
// number. The gradient flows to the selected values; none through the positions. k > the axis'
// extent is an ArgumentError.
Function top_k(const Variable& x, size_t k, const Axis& axis = Axis(-1),
               const std::string& name = "");

// The schemas of OneHot, Gather and TopK.
std::vector<OpSchema> indexing_schemas();

}  // namespace loom
