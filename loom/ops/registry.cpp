#include "loom/ops/registry.h"

#include <string>

#include "loom/ops/assign.h"
#include "loom/ops/op_defs.h"

namespace loom {

namespace {

constexpr size_t kAny = size_t(-1);

struct Entry {
  const OpDef* op;
  size_t min_inputs, max_inputs;
};

const std::vector<Entry>& table() {
  // Calling each accessor references its translation unit, so the linker keeps all ops.
  static const std::vector<Entry> entries = {
      {&plus_op(), 2, 2},
      {&minus_op(), 2, 2},
      {&element_times_op(), 2, 2},
      {&element_divide_op(), 2, 2},
      {&element_max_op(), 2, 2},
      {&element_min_op(), 2, 2},
      {&negate_op(), 1, 1},
      {&tanh_op(), 1, 1},
      {&sigmoid_op(), 1, 1},
      {&relu_op(), 1, 1},
      {&exp_op(), 1, 1},
      {&log_op(), 1, 1},
      {&sqrt_op(), 1, 1},
      {&square_op(), 1, 1},
      {&abs_op(), 1, 1},
      {&times_op(), 2, 2},
      {&squared_error_op(), 2, 2},
      {&cross_entropy_with_softmax_op(), 2, 2},
      {&binary_cross_entropy_op(), 2, 2},
      {&classification_error_op(), 2, 2},
      {&reduce_sum_op(), 1, 1},
      {&reduce_mean_op(), 1, 1},
      {&reduce_max_op(), 1, 1},
      {&reshape_op(), 1, 1},
      {&slice_op(), 1, 1},
      {&splice_op(), 1, kAny},
      {&transpose_op(), 1, 1},
      {&softmax_op(), 1, 1},
      {&log_softmax_op(), 1, 1},
      {&sequence::first_op(), 1, 1},
      {&sequence::last_op(), 1, 1},
      {&sequence::reduce_sum_op(), 1, 1},
      {&sequence::past_value_op(), 2, 2},
      {&sequence::future_value_op(), 2, 2},
      {&assign_op(), 2, 2},
      {&convolution_op(), 2, 3},  // W, x and, from the layers, the bias
      {&convolution_transpose_op(), 2, 2},
      {&pooling_op(), 1, 1},
      {&dropout_op(), 1, 1},
      {&batch_normalization_op(), 6, 6},
      {&layer_normalization_op(), 3, 3},
      // cntk.sequence (sequence_ops.cpp)
      {&sequence::reduce_max_op(), 1, 1},
      {&sequence::slice_op(), 1, 1},
      {&sequence::is_first_op(), 1, 1},
      {&sequence::is_last_op(), 1, 1},
      {&sequence::broadcast_as_op(), 2, 2},
      {&sequence::where_op(), 1, 1},
      {&sequence::gather_op(), 2, 2},
      {&sequence::scatter_op(), 2, 2},
      {&sequence::unpack_op(), 1, 1},
      {&sequence::unpack_mask_op(), 1, 1},
      // x, b, W, H, then what the attributes ask for (fused_rnn.h)
      {&fused_recurrence_op(), 5, 15},
  };
  return entries;
}

const Entry* find_entry(std::string_view name) {
  for (const Entry& e : table())
    if (name == e.op->name()) return &e;
  return nullptr;
}

}  // namespace

const std::vector<const OpDef*>& all_ops() {
  static const std::vector<const OpDef*> ops = [] {
    std::vector<const OpDef*> v;
    for (const Entry& e : table()) v.push_back(e.op);
    return v;
  }();
  return ops;
}

const OpDef& find_op(std::string_view name) {
  const Entry* e = find_entry(name);
  if (!e) {
    const auto& ops = all_ops();
    // Names from files may hold anything: show at most 64 printable characters.
    std::string shown;
    for (char c : name.substr(0, 64)) shown += (c >= 32 && c < 127) ? c : '?';
    if (name.size() > 64) shown += "...";
    throw ArgumentError("unknown op '" + shown + "': no op of this Loom has that name (" +
                        std::to_string(ops.size()) + " ops are registered)");
  }
  return *e->op;
}

void check_op_input_count(const OpDef& op, size_t count) {
  const Entry* e = find_entry(op.name());
  LOOM_CHECK(e && e->op == &op, ArgumentError, "op ", op.name(), " is not registered");
  if (count < e->min_inputs || count > e->max_inputs) {
    std::string expected = e->min_inputs == e->max_inputs ? std::to_string(e->min_inputs)
                           : e->max_inputs == kAny ? "at least " + std::to_string(e->min_inputs)
                                                   : std::to_string(e->min_inputs) + " to " +
                                                         std::to_string(e->max_inputs);
    throw ArgumentError(detail::concat(op.name(), " takes ", expected, " input(s), not ", count));
  }
}

}  // namespace loom
