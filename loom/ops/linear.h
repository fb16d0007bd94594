// Matrix products.
#pragma once

#include "loom/graph/function.h"

namespace loom {

// times(x, W): contracts the trailing axes of x with the leading axes of W; the last
// output_rank axes of W are the output axes. x [A..., K...] times W [K..., O...] gives
// [A..., O...] per sample. A W whose input axes are inferred learns them from x at the first
// call: infer_input_rank_to_map 0 maps all of x's axes (a Dense layer's default), -1 keeps
// W's input rank, k > 0 keeps the first k axes of x as A (map rank).
// A sparse x (one-hot data) stays sparse: the product is a sparse x dense kernel.
// CNTK's defaults of output_rank and infer_input_rank_to_map (the builder's and Python's).
inline constexpr size_t kTimesOutputRank = 1;
inline constexpr int kTimesInferInputRankToMap = -1;
Function times(const Variable& x, const Variable& W, size_t output_rank = kTimesOutputRank,
               int infer_input_rank_to_map = kTimesInferInputRankToMap,
               const std::string& name = "");

}  // namespace loom
