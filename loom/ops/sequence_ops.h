// Ops over the sequence axis (CNTK's cntk.sequence module; semantics in
// shared/RECURRENCE.md §3). Dense inputs only (sparse data is densified by the executor).
//
// Per-sequence results (first, last, reduce_sum, reduce_max, a one-step slice) have the batch
// axis only: sample b belongs to sequence b of the minibatch.
//
// Empty sequences: CNTK has none; Loom has them (a Value may hold a sequence of length 0, and
// gather, where and slice may select no step of a sequence). An empty sequence stays in the
// minibatch, so sequence b still lines up with sample b of other inputs; its per-sequence
// results are zeros, with zero gradient (docs/decisions.md).
#pragma once

#include <string>
#include <utility>

#include "loom/graph/function.h"

namespace loom::sequence {

// The first element of each sequence (slice(x, 0, 1)).
Function first(const Variable& x, const std::string& name = "");
// The last element of each sequence, whatever its length (slice(x, -1, 0)).
Function last(const Variable& x, const std::string& name = "");
// The sum of the elements of each sequence.
Function reduce_sum(const Variable& x, const std::string& name = "");
// The elementwise maximum over the steps of each sequence. The gradient goes to the first step
// holding the maximum, as ReduceMax's does along a static axis.
Function reduce_max(const Variable& x, const std::string& name = "");
// The softmax over the steps of each sequence, elementwise: exp(x - max) / sum of exp(x - max),
// the max and the sum taken over the sequence and broadcast back along it (CNTK's
// Sequence::Softmax).
Function softmax(const Variable& x, const std::string& name = "");

// Steps [begin, end) of each sequence, Python-style: begin < 0 counts from the end, end <= 0
// counts from the end with end == 0 meaning "to the end"; ranges are clipped to each sequence.
// (0, 0) is x itself. When end - begin == 1 exactly one step is taken and the result has no
// sequence axis (first and last are such slices). Otherwise the result is on an axis derived
// from x's, named as CNTK names it ("<axis>_fixedSliceOf_<n>" when end - begin = n > 1,
// "<axis>_times_1_minus_<n>" when the length shrinks by n): two slices with the same derived
// axis combine elementwise (slice(x, 1, 0) - slice(x, 0, -1)). A range that is empty for every
// length (end <= begin with both counted from the same side) is an ArgumentError.
Function slice(const Variable& x, int begin_index, int end_index, const std::string& name = "");

// 1 at the first (is_first) or last (is_last) step of each sequence, 0 elsewhere: a scalar
// sample per step, on x's axes. No gradient.
Function is_first(const Variable& x, const std::string& name = "");
Function is_last(const Variable& x, const std::string& name = "");

// op, which has no sequence axis, given ref's sequence axis: every step of sequence b gets
// sample b of op (op with a batch axis) or op itself (op without dynamic axes). The gradient
// of op sums over the steps. An op already on ref's axes passes through. ref gets no gradient.
Function broadcast_as(const Variable& op, const Variable& ref, const std::string& name = "");
// A scalar constant of ref's data type broadcast to ref's steps (CNTK's broadcast_as(1, x)).
Function broadcast_as(double value, const Variable& ref, const std::string& name = "");

// The step indices t (as numbers of cond's type) of each sequence where cond is nonzero, on a
// new sequence axis "whereNodeDynamicAxis_conditionVar_<cond's uid>". cond is a scalar
// sequence. A value c repeats its step: the count accumulates the values, and t is emitted
// while the emitted count is below the accumulated one (times 1 - epsilon of cond's type),
// and always once for the first positive count, as CNTK does (1.2 on 10 steps gives
// 0 0 1 2 3 4 5 5 6 7 8 9 ... per its docstring). No gradient.
Function where(const Variable& cond, const std::string& name = "");
// The steps of x that where(cond) selects, in order (a value of 2 repeats a step), on where's
// new axis. cond is a scalar sequence on x's axes. The gradient adds back into those steps.
Function gather(const Variable& x, const Variable& cond, const std::string& name = "");
// The same on an axis derived from x's, CNTK's new_sequence_axis_typeinfo = (scale, add) (write
// std::pair{scale, add}: braces alone would also make a name string). It promises that each
// result sequence is scale * length + add steps long and names the axis as slice does, so
// results on one derived axis combine. (0, 1) promises one step per sequence and gives a result
// without a sequence axis (a ShapeError at run time if cond selects another number); (1, 0) is
// x's own axis; (0, n <= 0) is an ArgumentError.
Function gather(const Variable& x, const Variable& cond,
                std::pair<size_t, int> new_sequence_axis_typeinfo, const std::string& name = "");
// The inverse of gather: the result has cond's axes and lengths; step k of sequence b of x goes
// to the k-th step where(cond) selects in sequence b (repeated steps add up), zeros elsewhere.
// Each sequence of x must have as many steps as where(cond) selects in it (a ShapeError at
// run time otherwise).
Function scatter(const Variable& x, const Variable& cond, const std::string& name = "");

// Each sequence of x as one padded sample without a sequence axis, CNTK's sequence.unpack: the
// result's outputs are the data [T, x's sample...] ("UnpackSequence") and the mask [T]
// ("UnpackSequenceMask": 1 where sequence b has step t, else 0), T the longest sequence of the
// minibatch; steps past a sequence's end hold padding_value. T is a free dimension (shown as -3,
// NDShape::kFree) that ops downstream carry (times, elementwise ops, reductions); a parameter
// cannot take it. no_mask_output gives the data alone. The gradient goes to x's steps, none
// from the padding; the mask has none. An empty sequence gives T steps of padding and a mask of
// zeros; a minibatch of empty sequences gives T = 0.
inline constexpr bool kUnpackNoMaskOutput = false;  // CNTK's default
Function unpack(const Variable& x, double padding_value, bool no_mask_output = kUnpackNoMaskOutput,
                const std::string& name = "");

}  // namespace loom::sequence
