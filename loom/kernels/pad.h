// Padding of a dense row-major tensor: CNTK's pad (constant, reflect and symmetric modes) and its
// gradient.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::kernels {

// CNTK's padding modes, by their values in CNTK (CONSTANT_PAD, REFLECT_PAD, SYMMETRIC_PAD).
enum class PadMode : int64_t { Constant = 0, Reflect = 1, Symmetric = 2 };

// For each axis of a tensor of dims `in`, padded with head[k] elements before and the output's
// remainder after: out[k] = in[k] + head[k] + foot[k]. The modes fill the padding with `value`
// (Constant), with the mirror image of the elements next to the edge, not repeating the edge
// (Reflect: head[k], foot[k] < in[k]), or repeating it (Symmetric: head[k], foot[k] <= in[k]);
// the callers check those bounds.
struct PadGeometry {
  std::vector<size_t> in, out, head;
  PadMode mode = PadMode::Constant;
};

// y (of dims out) = x (of dims in) padded.
template <typename T>
void pad_forward(const PadGeometry& g, T value, const T* x, T* y);

// dx (dims in) = (accumulate: dx +) the sum of dy (dims out) over the output elements each input
// element was copied to.
template <typename T>
void pad_backward(const PadGeometry& g, const T* dy, T* dx, bool accumulate);

}  // namespace loom::kernels
