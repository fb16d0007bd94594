// Elementwise ops. Binary ops broadcast the static sample shapes as numpy does (shapes aligned
// at the last axis, an extent of 1 repeats); a tensor without dynamic axes (a parameter or
// constant) broadcasts over all samples, and its gradient is summed over them. Inputs must
// have the same data type. These ops compute on dense data: a sparse input is an
// ArgumentError when evaluated (densify it, or feed it to times() first).
#pragma once

#include <string>
#include <vector>

#include "loom/graph/function.h"

namespace loom {

Function plus(const Variable& a, const Variable& b, const std::string& name = "");
Function minus(const Variable& a, const Variable& b, const std::string& name = "");
Function element_times(const Variable& a, const Variable& b, const std::string& name = "");
Function element_divide(const Variable& a, const Variable& b, const std::string& name = "");
// On ties the gradient goes to a.
Function element_max(const Variable& a, const Variable& b, const std::string& name = "");
Function element_min(const Variable& a, const Variable& b, const std::string& name = "");

Function negate(const Variable& x, const std::string& name = "");
Function tanh(const Variable& x, const std::string& name = "");
Function sigmoid(const Variable& x, const std::string& name = "");
Function relu(const Variable& x, const std::string& name = "");
Function exp(const Variable& x, const std::string& name = "");
Function log(const Variable& x, const std::string& name = "");
Function sqrt(const Variable& x, const std::string& name = "");
Function square(const Variable& x, const std::string& name = "");
// The gradient at 0 is 0.
Function abs(const Variable& x, const std::string& name = "");

// CNTK's elementwise math, with its arithmetic where it departs from IEEE (log of inputs below
// 1e-37 is -85.1, sqrt of a negative input 0, reciprocal of 0 is 0, pow CNTK's safe power; see
// kernels/elementwise.h). Floor, ceil, round, the comparisons and the logic ops have a zero
// gradient.
Function floor(const Variable& x, const std::string& name = "");
Function ceil(const Variable& x, const std::string& name = "");
// Halves round up: floor(x + 0.5) (-2.5 -> -2), as CNTK.
Function round(const Variable& x, const std::string& name = "");
Function reciprocal(const Variable& x, const std::string& name = "");
Function sin(const Variable& x, const std::string& name = "");
Function cos(const Variable& x, const std::string& name = "");
Function tan(const Variable& x, const std::string& name = "");
Function asin(const Variable& x, const std::string& name = "");
Function acos(const Variable& x, const std::string& name = "");
Function atan(const Variable& x, const std::string& name = "");
Function sinh(const Variable& x, const std::string& name = "");
Function cosh(const Variable& x, const std::string& name = "");
Function asinh(const Variable& x, const std::string& name = "");
Function atanh(const Variable& x, const std::string& name = "");

struct EluOptions {
  double alpha = 1.0;
};
// x where x >= 0, else alpha (e^x - 1).
Function elu(const Variable& x, const EluOptions& options = {}, const std::string& name = "");
struct SeluOptions {
  double scale = 1.0507009873554804934193349852946;
  double alpha = 1.6732632423543772848170429916717;
};
// scale · elu(x, alpha).
Function selu(const Variable& x, const SeluOptions& options = {}, const std::string& name = "");
struct LeakyReluOptions {
  double alpha = 0.01;
};
// x where x >= 0, else alpha x.
Function leaky_relu(const Variable& x, const LeakyReluOptions& options = {},
                    const std::string& name = "");
struct SoftplusOptions {
  double steepness = 1.0;
};
// log(1 + e^(steepness x)) / steepness; steepness 0 is an ArgumentError.
Function softplus(const Variable& x, const SoftplusOptions& options = {},
                  const std::string& name = "");
// x / (1 + |x|).
Function softsign(const Variable& x, const std::string& name = "");
// max(0, min(1, alpha x + beta)).
Function hard_sigmoid(const Variable& x, double alpha, double beta, const std::string& name = "");
// 1 where x > 0, else -1; the gradient passes unchanged where |x| <= 1, else 0 (CNTK's
// straight_through_impl).
Function straight_through(const Variable& x, const std::string& name = "");
// x; no gradient flows back through it.
Function stop_gradient(const Variable& x, const std::string& name = "");
// Zeros / ones with x's shape, type and dynamic axes; no gradient.
Function zeros_like(const Variable& x, const std::string& name = "");
Function ones_like(const Variable& x, const std::string& name = "");
// x under another name: a node of its own (CNTK's alias), the gradient passed through.
Function alias(const Variable& x, const std::string& name = "");
// The elementwise sum and mean of one or more operands, broadcasting (CNTK builds them from
// plus and a division: so does Loom).
Function sum(const std::vector<Variable>& operands, const std::string& name = "");
Function mean(const std::vector<Variable>& operands, const std::string& name = "");

// CNTK's safe power: x^0 = 1, 0^y = 0, a negative base needs an integer exponent (else NaN);
// the exponent's gradient is 0 where the base is <= 0.
Function pow(const Variable& base, const Variable& exponent, const std::string& name = "");
// log(e^a + e^b), stable for large inputs.
Function log_add_exp(const Variable& a, const Variable& b, const std::string& name = "");
// 1 or 0, broadcasting.
Function equal(const Variable& a, const Variable& b, const std::string& name = "");
Function not_equal(const Variable& a, const Variable& b, const std::string& name = "");
Function less(const Variable& a, const Variable& b, const std::string& name = "");
Function less_equal(const Variable& a, const Variable& b, const std::string& name = "");
Function greater(const Variable& a, const Variable& b, const std::string& name = "");
Function greater_equal(const Variable& a, const Variable& b, const std::string& name = "");
// Logic on x > 0 as true (CNTK builds these from Greater(x, 0): a negative input is false).
Function element_and(const Variable& a, const Variable& b, const std::string& name = "");
Function element_or(const Variable& a, const Variable& b, const std::string& name = "");
Function element_xor(const Variable& a, const Variable& b, const std::string& name = "");
Function element_not(const Variable& x, const std::string& name = "");
// x where x >= 0, else alpha x, with alpha learnable and broadcast (CNTK's order: alpha first).
Function param_relu(const Variable& alpha, const Variable& x, const std::string& name = "");
// value_if_true where flag != 0, else value_if_false, broadcasting; flag gets no gradient.
Function element_select(const Variable& flag, const Variable& value_if_true,
                        const Variable& value_if_false, const std::string& name = "");
// x clamped to [min_value, max_value] (broadcasting); the gradient reaches x where it is inside,
// the bounds get none.
Function clip(const Variable& x, const Variable& min_value, const Variable& max_value,
              const std::string& name = "");

// As in CNTK's Python API: + - / elementwise, * is element_times (times() is the matrix
// product), unary - is negate.
Function operator+(const Variable& a, const Variable& b);
Function operator-(const Variable& a, const Variable& b);
Function operator*(const Variable& a, const Variable& b);
Function operator/(const Variable& a, const Variable& b);
Function operator-(const Variable& a);

}  // namespace loom
