// Ops that move data between static and dynamic axes, or give data other dynamic axes (CNTK's
// to_sequence, to_sequence_like, unpack_batch, to_batch and reconcile_dynamic_axes). Shapes are
// in Python's order: a sample [T, d...] has its leading axis T first.
#pragma once

#include <string>

#include "loom/graph/function.h"

namespace loom {

inline constexpr const char* kToSequenceAxisPrefix = "toSequence_";

// Each sample [T, d...] of x (which has the batch axis only) as a sequence of T samples [d...]
// on a new sequence axis named sequence_axis_name_prefix + x's uid. With sequence_lengths (a
// number per sample, on x's axes), sequence b holds the first (size_t) sequence_lengths[b] steps
// (0 to T; an error beyond); the rest of the sample is not read and gets gradient 0.
Function to_sequence(const Variable& x,
                     const std::string& sequence_axis_name_prefix = kToSequenceAxisPrefix,
                     const std::string& name = "");
Function to_sequence(const Variable& x, const Variable& sequence_lengths,
                     const std::string& sequence_axis_name_prefix = kToSequenceAxisPrefix,
                     const std::string& name = "");
// The same with the sequence lengths and dynamic axes of dynamic_axes_like (a sequence): x's
// sample b is sequence b, whose length must not exceed T.
Function to_sequence_like(const Variable& x, const Variable& dynamic_axes_like,
                          const std::string& name = "");

// x's batch axis as a leading static axis: samples [d...] become one tensor [N, d...] without
// dynamic axes, N the minibatch's sample count (a free dimension). x has the batch axis only.
Function unpack_batch(const Variable& x, const std::string& name = "");
// The inverse: x [N, d...] without dynamic axes as a batch of N samples [d...].
Function to_batch(const Variable& x, const std::string& name = "");

// x with the dynamic axes of dynamic_axes_as, checked when the minibatch arrives: x's sequences
// must have dynamic_axes_as's lengths (the same data on axes declared apart), or x is one sample
// per sequence (broadcast along each sequence), or x has no dynamic axes (broadcast to every
// sample).
Function reconcile_dynamic_axes(const Variable& x, const Variable& dynamic_axes_as,
                                const std::string& name = "");

}  // namespace loom
