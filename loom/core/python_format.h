// Python's text forms of floats. CNTK's Python layer prints numbers with str(float) and
// str.format, and the seeds' logs are the specification, so Loom reproduces both exactly.
#pragma once

#include <string>

namespace loom {

// Python 3's repr(float) (= str(float)): the shortest digits that read back as the same
// double, in fixed notation when the decimal exponent is in [-4, 16), otherwise in exponent
// notation with at least two exponent digits: "0.1", "100.0", "0.020999999999999998",
// "1e-05", "1e+16", "-0.0", "inf", "nan".
std::string python_float_repr(double value);

// Python's format(value, "{width}.{precision}{type}") for type 'f', 'e' or 'g'. These agree
// with printf's conversions digit for digit (both round the exact binary value, ties to
// even) except that Python never prints a sign on NaN; this handles that case.
// An ArgumentError for any other type or a negative width or precision.
std::string python_format_float(double value, int width, int precision, char type);

}  // namespace loom
