#include "loom/core/python_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "loom/core/error.h"

namespace loom {

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";

  // Shortest round-trip digits in scientific form, "[-]d[.ddd]e(+|-)XX"; both this and
  // Python's repr pick the candidate nearest the exact value, so the digits agree.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view text(buf, static_cast<size_t>(result.ptr - buf));
  const bool negative = text.front() == '-';
  if (negative) text.remove_prefix(1);
  const size_t e_pos = text.find('e');
  std::string digits(1, text[0]);
  if (e_pos > 1) digits.append(text.substr(2, e_pos - 2));
  int exponent = 0;
  const char* exponent_text = text.data() + e_pos + (text[e_pos + 1] == '+' ? 2 : 1);
  std::from_chars(exponent_text, text.data() + text.size(), exponent);

  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out.append(".").append(digits, 1);
    out.append(text.substr(e_pos));  // to_chars writes Python's form: sign, >= 2 digits
  } else if (exponent < 0) {
    out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
  } else {
    const size_t integer_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= integer_digits) {
      out.append(digits).append(integer_digits - digits.size(), '0').append(".0");
    } else {
      out.append(digits, 0, integer_digits).append(".").append(digits, integer_digits);
    }
  }
  return out;
}

std::string python_format_float(double value, int width, int precision, char type) {
  LOOM_CHECK(type == 'f' || type == 'e' || type == 'g', ArgumentError,
             "python_format_float supports the types f, e and g, not '", type, "'");
  LOOM_CHECK(width >= 0 && precision >= 0, ArgumentError,
             "python_format_float needs a width and precision >= 0, got ", width, " and ",
             precision);
  if (std::isnan(value)) {
    std::string text = "nan";
    if (text.size() < static_cast<size_t>(width)) {
      text.insert(0, static_cast<size_t>(width) - text.size(), ' ');
    }
    return text;
  }
  // Literal formats keep printf's argument checking.
  auto print = [&](char* dst, size_t size) {
    switch (type) {
      case 'f':
        return std::snprintf(dst, size, "%*.*f", width, precision, value);
      case 'e':
        return std::snprintf(dst, size, "%*.*e", width, precision, value);
      default:
        return std::snprintf(dst, size, "%*.*g", width, precision, value);
    }
  };
  std::string text(static_cast<size_t>(print(nullptr, 0)), '\0');
  print(text.data(), text.size() + 1);
  return text;
}

}  // namespace loom
