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

// CNTK's arithmetic (its TensorOps.h) where it differs from IEEE: Log clamps inputs below 1e-37
// to log 1e-37 = -85.1 and its gradient is dy·e^-y; Sqrt of a negative input is 0; Reciprocal
// of 0 is 0; Pow is CNTK's safe power (x^0 = 1, 0^y = 0, a negative base needs an integer
// exponent, else NaN). Logical ops take x > 0 as true (CNTK builds them from Greater(x, 0)) and,
// as comparisons, give 1 or 0 with a zero gradient. Round rounds halves up (floor(x + 0.5)).
enum class UnaryOp {
  Negate,
  Tanh,
  Sigmoid,
  Relu,
  Exp,
  Log,
  Sqrt,
  Square,
  Abs,
  Copy,
  Floor,
  Ceil,
  Round,
  Reciprocal,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Atanh,
  Elu,              // x >= 0 ? x : alpha (e^x - 1)
  Selu,             // beta · (x >= 0 ? x : alpha (e^x - 1)), beta the scale
  LeakyRelu,        // x >= 0 ? x : alpha x
  Softplus,         // log(1 + e^(alpha x)) / alpha, alpha the steepness
  Softsign,         // x / (1 + |x|)
  HardSigmoid,      // max(0, min(1, alpha x + beta))
  StraightThrough,  // x > 0 ? 1 : -1, gradient dy where |x| <= 1
  StopGradient,     // x, gradient 0
  Not,              // x > 0 ? 0 : 1
  ZerosLike,        // 0, gradient 0
  OnesLike,         // 1, gradient 0
};
enum class BinaryOp {
  Plus,
  Minus,
  Times,
  Divide,
  Max,
  Min,
  Pow,
  LogPlus,  // log(e^a + e^b)
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  And,
  Or,
  Xor,
  PRelu,  // b >= 0 ? b : a·b (a the learnable slope, b the operand: CNTK's param_relu order)
};

// The constants of the unary ops that take them (see UnaryOp).
struct UnaryParams {
  double alpha = 0, beta = 0;
};

// y[i] = op(x[i]) for i < n. y may be x.
template <typename T>
void unary(UnaryOp op, size_t n, const T* x, T* y, const UnaryParams& params = {});

// dx[i] = dy[i] * op'(x[i]) (accumulate: dx[i] += ...), with the derivative written through the
// forward output y where that is cheaper (unary_backward_reads says which of x and y an op
// reads). An input the op does not use may be null.
template <typename T>
void unary_backward(UnaryOp op, size_t n, const T* x, const T* y, const T* dy, T* dx,
                    bool accumulate, const UnaryParams& params = {});

struct UnaryReads {
  bool input = false, output = false;
};
// Which of x and y unary_backward reads for op.
UnaryReads unary_backward_reads(UnaryOp op);

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

// Whether binary_backward reads the inputs (false for Plus, Minus and the ops of zero gradient).
bool binary_backward_reads_inputs(BinaryOp op);

enum class TernaryOp {
  Select,  // c != 0 ? a : b (c the condition)
  Clip,    // c < a ? a : (c > b ? b : c), CNTK's order: a the minimum, b the maximum, c the data
};

// y = op(c, a, b) with broadcasting (every dims of out_dims' rank, each axis its extent or 1).
template <typename T>
void ternary(TernaryOp op, const Dims& out_dims, const Dims& c_dims, const T* c, const Dims& a_dims,
             const T* a, const Dims& b_dims, const T* b, T* y);

// dx (+)= the sum over the axes x was broadcast along of (keep ? dy : 0), where keep is, per
// output element: Select, x = a: c != 0; Select, x = b: c == 0; Clip, x = c (the data): y == c.
// cond (c) has cond_dims; y is the forward output (Clip only).
template <typename T>
void ternary_backward(TernaryOp op, int which, const Dims& out_dims, const Dims& cond_dims,
                      const T* cond, const T* y, const Dims& x_dims, const T* dy, T* dx,
                      bool accumulate);

}  // namespace loom::kernels
