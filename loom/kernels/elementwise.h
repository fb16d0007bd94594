// Elementwise kernels over raw row-major buffers: unary maps, numpy-style broadcasting binary
// ops, and their gradients. T is float or double. Buffers belong to the caller; nothing here
// allocates. Large loops are split over OpenMP threads, small ones stay on the calling thread;
// for a fixed thread count results are bit-identical run to run.
#pragma once

#include <cstddef>
#include <vector>

namespace loom::kernels {

// A shape in row-major order (the last axis is contiguous); {} is a scalar. The same type as
// NDShape::dims(), so an executor passes shapes without copying.
using Dims = std::vector<size_t>;

enum class UnaryOp { Negate, Tanh, Sigmoid, Relu, Exp, Log, Sqrt, Square, Abs, Copy };
enum class BinaryOp { Plus, Minus, Times, Divide, Max, Min };

// y[i] = op(x[i]) for i < n. y may be x.
template <typename T>
void unary(UnaryOp op, size_t n, const T* x, T* y);

// dx[i] = dy[i] * op'(x[i]) (accumulate: dx[i] += ...), with the derivative written through the
// forward output y where that is cheaper: Tanh 1-y², Sigmoid y(1-y), Exp y, Sqrt 0.5/y, Relu
// y > 0 (so the executor may reuse x's buffer); through x for Log 1/x, Square 2x, Abs sign(x)
// (0 at 0); Negate -1 and Copy 1 use
// neither. An input the op does not use may be null.
template <typename T>
void unary_backward(UnaryOp op, size_t n, const T* x, const T* y, const T* dy, T* dx,
                    bool accumulate);

// y = a op b with broadcasting: a_dims, b_dims and out_dims have the same rank, and each input
// axis has the output's extent or 1 (then it is repeated). Max(a, b) picks a on ties. y may be
// an input of the output's shape. Throws ShapeError on mismatched dims.
template <typename T>
void binary(BinaryOp op, const Dims& out_dims, const Dims& a_dims, const T* a, const Dims& b_dims,
            const T* b, T* y);

// Gradient of binary() with respect to input `which` (0 = a, 1 = b), summed over the axes that
// input was broadcast along, into dx of that input's shape: Plus +dy, Minus ±dy, Times dy·other,
// Divide dy/b and -dy·a/b², Max dy where a >= b (to a) or b > a (to b), Min dy where a <= b (to
// a) or b < a (to b). Plus and Minus read neither input (either may be null), Times only the
// other one, Divide (to a) only b.
template <typename T>
void binary_backward(BinaryOp op, int which, const Dims& out_dims, const Dims& a_dims, const T* a,
                     const Dims& b_dims, const T* b, const T* dy, T* dx, bool accumulate);

}  // namespace loom::kernels
