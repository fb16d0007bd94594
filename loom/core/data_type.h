#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

enum class DataType : uint8_t { Float32 = 1, Float64 = 2 };

inline size_t size_of(DataType t) {
  return t == DataType::Float32 ? 4 : 8;
}
inline const char* to_string(DataType t) {
  return t == DataType::Float32 ? "float32" : "float64";
}

template <typename T>
constexpr DataType data_type_of();
template <>
constexpr DataType data_type_of<float>() {
  return DataType::Float32;
}
template <>
constexpr DataType data_type_of<double>() {
  return DataType::Float64;
}

// Calls f with a value of the C++ type that t names: dispatch(t, [&](auto zero) { using T =
// decltype(zero); ... }).
template <typename F>
decltype(auto) dispatch(DataType t, F&& f) {
  if (t == DataType::Float32) return f(float{});
  return f(double{});
}

}  // namespace loom
