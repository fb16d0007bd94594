#include "loom/core/shape.h"

#include <algorithm>

#include "loom/core/error.h"

namespace loom {

size_t NDShape::total_size() const {
  size_t n = 1;
  for (size_t d : dims_) n *= d;
  return n;
}

bool NDShape::has_inferred() const {
  for (size_t d : dims_)
    if (d == kInferred) return true;
  return false;
}

bool NDShape::has_free() const {
  return std::find(dims_.begin(), dims_.end(), kFree) != dims_.end();
}

NDShape NDShape::sub_shape(size_t begin, size_t end) const {
  LOOM_CHECK(begin <= end && end <= rank(), ArgumentError, "sub_shape [", begin, ",", end,
             ") is outside shape ", to_string());
  return NDShape(std::vector<size_t>(dims_.begin() + begin, dims_.begin() + end));
}

NDShape NDShape::append(const NDShape& other) const {
  std::vector<size_t> d = dims_;
  d.insert(d.end(), other.dims_.begin(), other.dims_.end());
  return NDShape(std::move(d));
}

NDShape NDShape::prepend(size_t dim) const {
  std::vector<size_t> d{dim};
  d.insert(d.end(), dims_.begin(), dims_.end());
  return NDShape(std::move(d));
}

void NDShape::assign_prepended(size_t first, const NDShape& rest) {
  dims_.resize(rest.rank() + 1);
  dims_[0] = first;
  std::copy(rest.dims_.begin(), rest.dims_.end(), dims_.begin() + 1);
}

std::string NDShape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i] == kInferred ? "-1" : dims_[i] == kFree ? "-3" : std::to_string(dims_[i]);
  }
  return s + "]";
}

}  // namespace loom
