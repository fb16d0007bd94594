// NDArrayView's numpy-like reading helpers: item access, argmax and numpy's text form.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <ostream>

#include "loom/core/ndarray_view.h"

namespace loom {

NDArrayView NDArrayView::operator[](size_t i) const {
  LOOM_CHECK(shape_.rank() > 0 && i < shape_[0], ArgumentError, "item ", i,
             " of a tensor of shape ", shape_.to_string());
  if (is_sparse()) return to_dense()[i];
  const NDShape item = shape_.sub_shape(1);
  const size_t bytes = item.total_size() * size_of(dtype_);
  auto storage =
      std::make_shared<Buffer>(static_cast<char*>(buffer_->data()) + i * bytes, bytes, buffer_);
  return over(dtype_, item, std::move(storage));
}

size_t NDArrayView::argmax() const {
  LOOM_CHECK(size() > 0, ArgumentError, "argmax of an empty tensor of shape ", shape_.to_string());
  const auto v = to_vector<double>();
  return size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

namespace {

constexpr size_t kLineWidth = 75, kThreshold = 1000, kEdgeItems = 3, kMaxDecimals = 8;
constexpr size_t kEllipsis = size_t(-1);  // stands for "...," among an axis's indices

// x with kMaxDecimals decimals, trailing zeros dropped (numpy 1.13's "%.8f" and "%.8e").
std::string digits(double x, std::chars_format form) {
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof(buf), x, form, int(kMaxDecimals));
  std::string s(buf, r.ptr);
  const size_t e = std::min(s.find('e'), s.size());
  size_t last = e;
  while (s[last - 1] == '0') --last;
  return s.erase(last, e - last);
}

// One number split at its point: "-12" "." "5" / "1" "." "5e-05"; no point for nan and inf.
struct Parts {
  std::string whole, fraction;
  bool finite;
};

Parts split(double x, bool exponent) {
  if (!std::isfinite(x)) return {std::isnan(x) ? "nan" : x < 0 ? "-inf" : "inf", "", false};
  std::string s = digits(x, exponent ? std::chars_format::scientific : std::chars_format::fixed);
  const size_t e = std::min(s.find('e'), s.size());
  const size_t point = std::min(s.find('.'), e);
  std::string fraction = point < e ? s.substr(point + 1, e - point - 1) : "";
  return {s.substr(0, point), fraction + s.substr(e), true};
}

// The indices of an axis of dimension n that are shown.
std::vector<size_t> shown(size_t n, bool summarize) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      idx.push_back(kEllipsis);
      i = n - kEdgeItems;
    }
    idx.push_back(i);
  }
  return idx;
}

std::string format_array(const std::vector<double>& data, const NDShape& shape) {
  const size_t rank = shape.rank();
  const bool summarize = shape.total_size() > kThreshold;
  std::vector<std::vector<size_t>> axes;
  for (size_t d = 0; d < rank; ++d) axes.push_back(shown(shape[d], summarize));
  std::vector<size_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * shape[d];

  // The shown elements' offsets, in order, to choose one format for all of them.
  std::vector<size_t> offsets;
  auto collect = [&](auto&& self, size_t d, size_t offset) -> void {
    if (d == rank) return offsets.push_back(offset);
    for (size_t i : axes[d])
      if (i != kEllipsis) self(self, d + 1, offset + i * strides[d]);
  };
  collect(collect, 0, 0);
  // numpy: exponent form when the magnitudes reach 1e8, go below 1e-4 or span over 1e3.
  double lo = INFINITY, hi = 0;
  for (size_t o : offsets) {
    const double a = std::fabs(data[o]);
    if (std::isfinite(a) && a != 0) lo = std::min(lo, a), hi = std::max(hi, a);
  }
  const bool exponent = hi > 0 && (hi >= 1e8 || lo < 1e-4 || hi / lo > 1e3);
  std::vector<Parts> parts;
  size_t whole_width = 0, fraction_width = 0, mantissa_width = 0;
  for (size_t o : offsets) {
    parts.push_back(split(data[o], exponent));
    const Parts& p = parts.back();
    // numpy 1.13, which the seeds print with, keeps a column for the sign.
    whole_width = std::max(whole_width, p.whole.size() + (p.whole[0] == '-' ? 0 : 1));
    const size_t mantissa = std::min(p.fraction.find('e'), p.fraction.size());
    fraction_width = std::max(fraction_width, p.fraction.size());
    mantissa_width = std::max(mantissa_width, mantissa);
  }
  // Exponent form pads the mantissas with zeros ("1.0e+00"), fixed form with spaces ("1.  ").
  auto text = [&](const Parts& p) {
    if (!p.finite)
      return std::string(whole_width + 1 + fraction_width - p.whole.size(), ' ') + p.whole;
    std::string s = std::string(whole_width - p.whole.size(), ' ') + p.whole + ".";
    if (!exponent) return s + p.fraction + std::string(fraction_width - p.fraction.size(), ' ');
    const size_t mantissa = p.fraction.find('e');
    return s + p.fraction.substr(0, mantissa) + std::string(mantissa_width - mantissa, '0') +
           p.fraction.substr(mantissa);
  };
  if (rank == 0) return text(parts[0]);

  size_t next = 0;  // the next element of parts
  auto render = [&](auto&& self, size_t d) -> std::string {
    const std::string indent(d + 1, ' ');
    const auto& idx = axes[d];
    std::string s = "[";
    // The last axis: numbers on lines that leave room for the closing brackets (as numpy).
    for (size_t k = 0, column = d + 1; d + 1 == rank && k < idx.size(); ++k) {
      const std::string word = idx[k] == kEllipsis ? "...," : text(parts[next++]);
      if (k && column + 1 + word.size() > kLineWidth - d - 1) {
        s += "\n" + indent;
        column = d + 1;
      } else if (k) {
        s += " ";
        ++column;
      }
      s += word;
      column += word.size();
    }
    for (size_t k = 0; d + 1 < rank && k < idx.size(); ++k) {
      if (k) s += std::string(rank - d - 1, '\n') + indent;
      s += idx[k] == kEllipsis ? "...," : self(self, d + 1);
    }
    return s + "]";
  };
  return render(render, 0);
}

}  // namespace

std::string NDArrayView::to_string() const {
  return format_array(to_vector<double>(), shape_);
}

std::ostream& operator<<(std::ostream& out, const NDArrayView& a) {
  return out << a.to_string();
}

}  // namespace loom
