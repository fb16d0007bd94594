// Axis: a static axis of a tensor (by index), or a dynamic axis whose length depends on the
// data: the batch axis, and sequence axes (the default one, or user-named ones for data
// such as seq2seq whose two sequences have unrelated lengths).
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace loom {

class Axis {
 public:
  // Static axis by index into the static shape; negative counts from the end (-1: last).
  explicit Axis(int static_index) : kind_(Kind::Static), index_(static_index) {}

  static Axis default_batch_axis() { return Axis(Kind::Dynamic, "defaultBatchAxis"); }
  static Axis default_dynamic_axis() { return Axis(Kind::Dynamic, "defaultDynamicAxis"); }
  // A sequence axis of its own, unrelated in length to the default one.
  static Axis new_unique_dynamic_axis(const std::string& name);
  // The dynamic axis of exactly this name (a loaded model restores the axes it was saved with).
  static Axis dynamic_axis_named(const std::string& name) { return Axis(Kind::Dynamic, name); }
  static Axis all_static_axes() { return Axis(Kind::AllStatic, "AllStaticAxes"); }
  static Axis all_axes() { return Axis(Kind::All, "AllAxes"); }
  // CNTK's NewLeadingAxis: splice stacks its inputs along a new first axis.
  static Axis new_leading_axis() { return Axis(kNewLeadingIndex); }
  bool is_new_leading() const { return is_static() && index_ == kNewLeadingIndex; }

  bool is_static() const { return kind_ == Kind::Static; }
  bool is_dynamic() const { return kind_ == Kind::Dynamic; }
  bool is_batch() const { return is_dynamic() && name_ == "defaultBatchAxis"; }
  // CNTK's kinds: every dynamic axis but the batch axis is a sequence axis, ordered as static
  // axes are.
  bool is_sequence() const { return is_dynamic() && !is_batch(); }
  bool is_ordered() const { return is_static() || is_sequence(); }
  bool is_all_static() const { return kind_ == Kind::AllStatic; }
  bool is_all() const { return kind_ == Kind::All; }
  int static_index() const { return index_; }
  const std::string& name() const { return name_; }
  std::string to_string() const;

  bool operator==(const Axis&) const = default;

 private:
  static constexpr int kNewLeadingIndex = std::numeric_limits<int>::min();
  enum class Kind { Static, Dynamic, AllStatic, All };
  Axis(Kind k, std::string name) : kind_(k), name_(std::move(name)) {}
  Kind kind_;
  int index_ = 0;
  std::string name_;
};

// The dynamic axes of an input variable, outermost first: {batch} for a batch of samples,
// {batch, sequence} for a batch of sequences.
inline std::vector<Axis> default_batch_axes() {
  return {Axis::default_batch_axis()};
}
inline std::vector<Axis> default_sequence_axes() {
  return {Axis::default_batch_axis(), Axis::default_dynamic_axis()};
}
// CNTK's UnknownDynamicAxes: the axes of a placeholder that its first use decides.
inline std::vector<Axis> unknown_dynamic_axes() {
  return {Axis::dynamic_axis_named("UnknownAxes")};
}

}  // namespace loom
