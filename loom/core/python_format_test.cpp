#include "loom/core/python_format.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>

#include "loom/core/error.h"

namespace loom {
namespace {

// Expected strings are Python 3's repr() of the same double.
TEST(PythonFloatRepr, MatchesPythonRepr) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const struct {
    double value;
    const char* repr;
  } cases[] = {
      {0.1, "0.1"},
      {0.7 * 0.03, "0.020999999999999998"},
      {0.1 + 0.2, "0.30000000000000004"},
      {0.001, "0.001"},
      {0.0005, "0.0005"},
      {6.25e-05, "6.25e-05"},
      {3.125e-05, "3.125e-05"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {0.00012345, "0.00012345"},
      {1e16, "1e+16"},
      {1234567890123456.0, "1234567890123456.0"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {100.0, "100.0"},
      {1.0, "1.0"},
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {-2.5, "-2.5"},
      {0.9990239141819757, "0.9990239141819757"},
      {1.5e300, "1.5e+300"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {2.2250738585072014e-308, "2.2250738585072014e-308"},
      {inf, "inf"},
      {-inf, "-inf"},
      {nan, "nan"},
      {-nan, "nan"},
  };
  for (const auto& c : cases) EXPECT_EQ(python_float_repr(c.value), c.repr) << c.repr;
}

// Over doubles with random bit patterns: the text reads back as the same double, and has
// the shape Python gives it (fixed with a '.' exactly when the exponent is in [-4, 16)).
TEST(PythonFloatRepr, RoundTripsRandomDoubles) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    const double value = std::bit_cast<double>(rng());
    if (!std::isfinite(value)) continue;
    const std::string text = python_float_repr(value);
    ASSERT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
    const int exponent =
        value == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(value))));
    // log10 can land one off at exact powers of ten; skip the ambiguous boundary values.
    if (exponent <= -5 || exponent >= 17 || (exponent >= -3 && exponent <= 14)) {
      const bool exponent_form = text.find('e') != std::string::npos;
      EXPECT_EQ(exponent_form, exponent < -4 || exponent >= 16) << text;
      if (!exponent_form) {
        EXPECT_NE(text.find('.'), std::string::npos) << text;
      }
    }
  }
}

TEST(PythonFloatRepr, ShortestDigits) {
  // Values whose shortest form is short must not grow digits.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> mantissa(1, 999999), exponent(-30, 30);
  for (int i = 0; i < 20000; ++i) {
    const std::string source = std::to_string(mantissa(rng)) + "e" + std::to_string(exponent(rng));
    const double value = std::strtod(source.c_str(), nullptr);
    const std::string text = python_float_repr(value);
    size_t digits = 0;
    for (char ch : text.substr(0, text.find('e'))) digits += ch >= '1' && ch <= '9' ? 1 : 0;
    EXPECT_LE(digits, 6u) << source << " -> " << text;
  }
}

TEST(PythonFormatFloat, MatchesPythonFormat) {
  // Python: format(v, '8.3g'), format(v, '0.6f'), ...
  EXPECT_EQ(python_format_float(3.58, 8, 3, 'g'), "    3.58");
  EXPECT_EQ(python_format_float(0.0876, 8, 3, 'g'), "  0.0876");
  EXPECT_EQ(python_format_float(1.1, 8, 3, 'g'), "     1.1");
  EXPECT_EQ(python_format_float(16352, 8, 3, 'g'), "1.64e+04");
  EXPECT_EQ(python_format_float(0.5625, 8, 3, 'g'), "   0.562");  // a tie rounds to even
  EXPECT_EQ(python_format_float(1e-05, 8, 3, 'g'), "   1e-05");
  EXPECT_EQ(python_format_float(0.0, 8, 3, 'g'), "       0");
  EXPECT_EQ(python_format_float(123456789.0, 8, 3, 'g'), "1.23e+08");
  EXPECT_EQ(python_format_float(0.307924, 0, 6, 'f'), "0.307924");
  EXPECT_EQ(python_format_float(114.0 / 1600 * 100, 0, 2, 'f'), "7.12");
  EXPECT_EQ(python_format_float(8703.2, 5, 1, 'f'), "8703.2");
  EXPECT_EQ(python_format_float(0.0, 5, 1, 'f'), "  0.0");
  EXPECT_EQ(python_format_float(1234.5, 0, 3, 'e'), "1.234e+03");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(python_format_float(-nan, 8, 3, 'g'), "     nan");
  EXPECT_EQ(python_format_float(nan, 0, 6, 'f'), "nan");
  EXPECT_EQ(python_format_float(-std::numeric_limits<double>::infinity(), 8, 3, 'g'), "    -inf");
  EXPECT_THROW(python_format_float(1.0, 0, 2, 'd'), ArgumentError);
  EXPECT_THROW(python_format_float(1.0, -1, 2, 'f'), ArgumentError);
}

}  // namespace
}  // namespace loom
