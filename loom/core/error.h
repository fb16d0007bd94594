// Error types. Every bad input a user can cause ends in one of these, with a message that
// says what was wrong, where (variable, file and byte offset) and what was expected.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A shape, type or dynamic-axis mismatch between variables, values or arguments.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A malformed data file: the message names the file and the byte offset.
class DataError : public Error {
 public:
  using Error::Error;
};

// A file that cannot be opened, read or written.
class IOError : public Error {
 public:
  using Error::Error;
};

// An option or argument outside its allowed range.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// A call that is not valid in the object's current state.
class StateError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}
}  // namespace detail

}  // namespace loom

// Throws ErrorType with the streamed message parts when the condition is false.
#define LOOM_CHECK(cond, ErrorType, ...)                               \
  do {                                                                 \
    if (!(cond)) throw ErrorType(::loom::detail::concat(__VA_ARGS__)); \
  } while (0)
