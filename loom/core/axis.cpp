#include "loom/core/axis.h"

#include <atomic>

namespace loom {

Axis Axis::new_unique_dynamic_axis(const std::string& name) {
  static std::atomic<int> counter{0};
  return Axis(Kind::Dynamic, name + "_" + std::to_string(counter++));
}

std::string Axis::to_string() const {
  if (is_new_leading()) return "Axis.new_leading_axis()";
  return is_static() ? "Axis(" + std::to_string(index_) + ")" : "Axis('" + name_ + "')";
}

}  // namespace loom
