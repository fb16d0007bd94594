// Elementwise ops. Binary ops broadcast the static sample shapes as numpy does (shapes aligned
// at the last axis, an extent of 1 repeats); a tensor without dynamic axes (a parameter or
// constant) broadcasts over all samples, and its gradient is summed over them. Inputs must
// have the same data type. These ops compute on dense data: a sparse input is an
// ArgumentError when evaluated (densify it, or feed it to times() first).
#pragma once

#include <string>

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

// As in CNTK's Python API: + - / elementwise, * is element_times (times() is the matrix
// product), unary - is negate.
Function operator+(const Variable& a, const Variable& b);
Function operator-(const Variable& a, const Variable& b);
Function operator*(const Variable& a, const Variable& b);
Function operator/(const Variable& a, const Variable& b);
Function operator-(const Variable& a);

}  // namespace loom
