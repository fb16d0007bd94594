// Shorthands the ops' unit tests share (included by tests only; needs GoogleTest): the data
// types, the sequence lengths the tests pack, a Value's data as doubles, float64 input options,
// and the checks of an error's type and message. Includes gradient_check.h.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <typeinfo>
#include <vector>

#include "loom/core/error.h"
#include "loom/ops/gradient_check.h"

namespace loom {

inline constexpr DataType kF32 = DataType::Float32;
inline constexpr DataType kF64 = DataType::Float64;
// Lengths of the sequences the tests make (packed as 3, 2, 1).
inline const std::vector<size_t> kLengths{3, 1, 2};

using gradient_check_detail::expect_all_near;

inline std::vector<double> values(const Value& v) {
  return v.data().to_vector<double>();
}

// Options of a float64 input variable.
inline InputOptions f64(const std::string& name = "") {
  return {.dtype = kF64, .name = name};
}

// Expects f to throw an E whose message contains every one of parts.
template <class E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected " << typeid(E).name();
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' missing in: " << e.what();
  }
}

inline void expect_shape_error(const std::function<void()>& f,
                               const std::vector<std::string>& parts) {
  expect_error<ShapeError>(f, parts);
}

inline void expect_argument_error(const std::function<void()>& f,
                                  const std::vector<std::string>& parts) {
  expect_error<ArgumentError>(f, parts);
}

}  // namespace loom
