// The op singletons of loom/ops, one accessor each, for the registry (registry.cpp) that
// finds an op by name when a model is loaded. Internal: build graphs with the functions of
// ops.h.
#pragma once

#include "loom/graph/op.h"

namespace loom {

// elementwise.cpp
const OpDef& plus_op();
const OpDef& minus_op();
const OpDef& element_times_op();
const OpDef& element_divide_op();
const OpDef& element_max_op();
const OpDef& element_min_op();
const OpDef& negate_op();
const OpDef& tanh_op();
const OpDef& sigmoid_op();
const OpDef& relu_op();
const OpDef& exp_op();
const OpDef& log_op();
const OpDef& sqrt_op();
const OpDef& square_op();
const OpDef& abs_op();
// convolution.cpp
const OpDef& convolution_op();
const OpDef& convolution_transpose_op();
// linear.cpp
const OpDef& times_op();
// losses.cpp
const OpDef& squared_error_op();
const OpDef& cross_entropy_with_softmax_op();
const OpDef& binary_cross_entropy_op();
const OpDef& classification_error_op();
// reduction.cpp
const OpDef& reduce_sum_op();
const OpDef& reduce_mean_op();
const OpDef& reduce_max_op();
// shape_ops.cpp
const OpDef& reshape_op();
const OpDef& slice_op();
const OpDef& splice_op();
const OpDef& transpose_op();
// pooling.cpp
const OpDef& pooling_op();
// random.cpp
const OpDef& dropout_op();
// normalization.cpp
const OpDef& batch_normalization_op();
const OpDef& layer_normalization_op();
// fused_rnn.cpp
const OpDef& fused_recurrence_op();
// softmax.cpp
const OpDef& softmax_op();
const OpDef& log_softmax_op();

namespace sequence {
// sequence_ops.cpp
const OpDef& first_op();
const OpDef& last_op();
const OpDef& reduce_sum_op();
const OpDef& reduce_max_op();
const OpDef& slice_op();
const OpDef& is_first_op();
const OpDef& is_last_op();
const OpDef& broadcast_as_op();
const OpDef& where_op();
const OpDef& gather_op();
const OpDef& scatter_op();
const OpDef& unpack_op();
const OpDef& unpack_mask_op();
// recurrence_ops.cpp
const OpDef& past_value_op();
const OpDef& future_value_op();
}  // namespace sequence

}  // namespace loom
