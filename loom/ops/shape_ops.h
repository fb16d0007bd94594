// Ops that rearrange the static axes of each sample; the rows of a minibatch stay apart.
// Dense inputs only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/graph/function.h"

namespace loom {

// The same elements in another sample shape; one dimension may be NDShape::kInferred (it
// takes whatever the element count leaves).
Function reshape(const Variable& x, const NDShape& shape, const std::string& name = "");

// CNTK's begin_axis and end_axis of reshape: only the static axes [begin_axis, end_axis) are
// replaced by `shape` (negative counts from the end; unset: 0 and the rank).
struct ReshapeOptions {
  std::optional<int> begin_axis = std::nullopt;
  std::optional<int> end_axis = std::nullopt;
};
Function reshape(const Variable& x, const NDShape& shape, const ReshapeOptions& options,
                 const std::string& name = "");

// The static axes of extent 1 removed: all of them (axes unset, CNTK's None), or the ones
// named, each of which must have extent 1.
Function squeeze(const Variable& x, const std::optional<std::vector<int>>& axes = std::nullopt,
                 const std::string& name = "");

// A static axis of extent 1 added behind static axis `axis` (negative counts from the end), as
// CNTK's Python places it: expand_dims of a [2, 3] sample at 0 is [2, 1, 3], at -1 [2, 3, 1];
// at -(rank + 1) the new axis comes first.
Function expand_dims(const Variable& x, int axis, const std::string& name = "");

// Static axes axis1 and axis2 exchanged (CNTK's TransposeAxes).
struct SwapAxesOptions {
  int axis1 = 0;
  int axis2 = 1;
};
Function swapaxes(const Variable& x, const SwapAxesOptions& options = {},
                  const std::string& name = "");

// The sample as a matrix [d_0 ... d_(axis-1), d_axis ... d_n] (axis in [-rank, rank]; unset: 0,
// giving [1, all]).
struct FlattenOptions {
  std::optional<int> axis = std::nullopt;
};
Function flatten(const Variable& x, const FlattenOptions& options = {},
                 const std::string& name = "");

// CNTK's padding modes (loom.ops.CONSTANT_PAD, REFLECT_PAD, SYMMETRIC_PAD).
inline constexpr int kConstantPad = 0;
inline constexpr int kReflectPad = 1;
inline constexpr int kSymmetricPad = 2;
struct PadOptions {
  int mode = kConstantPad;
  double constant_value = 0;
};
// Each static axis k padded with pattern[k] = {before, after} elements: the constant, or the
// mirror image of the elements at the edge without the edge (reflect: before, after < the
// extent) or with it (symmetric: before, after <= the extent).
Function pad(const Variable& x, const std::vector<std::pair<size_t, size_t>>& pattern,
             const PadOptions& options = {}, const std::string& name = "");

// CNTK's depth_to_space of a sample [C * b * b, H, W]: [C, H * b, W * b], channel
// (i * b + j) * C + c going to position (h * b + i, w * b + j) of channel c. A reshape, a
// transpose and a reshape, as CNTK builds it.
Function depth_to_space(const Variable& x, size_t block_size, const std::string& name = "");
// The inverse: [C, H, W] to [C * b * b, H / b, W / b].
Function space_to_depth(const Variable& x, size_t block_size, const std::string& name = "");

// The same values in another data type; the gradient is cast back.
Function cast(const Variable& x, DataType dtype, const std::string& name = "");

// Ones on the diagonal of the matrix x is (its two axes counted with its batch axis), zeros
// elsewhere, in x's shape and dynamic axes; x's values are not read. Dense only (CNTK's
// sparse_output is refused, so the default is dense, where CNTK's is sparse).
inline constexpr bool kEyeLikeSparseOutput = false;
Function eye_like(const Variable& x, bool sparse_output = kEyeLikeSparseOutput,
                  const std::string& name = "");

// left times right transposed, as np.dot(left, right.T); right has rank 1 (taken as [1, n]) or 2.
Function times_transpose(const Variable& left, const Variable& right, const std::string& name = "");

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
