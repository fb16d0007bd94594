#include "loom/ops/row_map.h"

namespace loom::row_map {

const SequenceLayout* broadcast_layout(const char* op, const Tensor& x, const char* x_name,
                                       const SequenceLayout& layout, const char* layout_name) {
  const SequenceLayout* l = x.layout;
  LOOM_CHECK(!l || l->num_sequences() == layout.num_sequences(), ShapeError, op, ": ", x_name,
             " has ", l->num_sequences(), " samples but ", layout_name, " has ",
             layout.num_sequences(), " sequences");
  LOOM_CHECK(!l || l->max_length() <= 1 || l->same_shape_as(layout), ShapeError, op, ": ", x_name,
             "'s sequences differ in length from ", layout_name, "'s");
  return &layout;
}

void fill_broadcast_map(const Tensor& x, const SequenceLayout& layout, std::span<size_t> map) {
  // A sequence operand has layout's lengths; a batch operand has all lengths 1 (where layout's
  // are all 1 too, both read row b).
  const bool sequence = x.dynamic() && x.layout->same_shape_as(layout);
  for (size_t b = 0; b < layout.num_sequences(); ++b)
    for (size_t t = 0; t < layout.lengths[b]; ++t)
      map[layout.row(b, t)] = !x.dynamic() ? 0 : sequence ? x.layout->row(b, t) : b;
}

}  // namespace loom::row_map
