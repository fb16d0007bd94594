// The op registry: every op of the op table (op_schema.h) by its name ("Plus", "Times", ...),
// for loading models. registry.cpp collects the table from each op family explicitly, so a
// program that only loads models still links every op from the static library.
#pragma once

#include <string_view>
#include <vector>

#include "loom/graph/op.h"

namespace loom {

// The op called name; a loom::Error naming it when no op has that name.
const OpDef& find_op(std::string_view name);
// An ArgumentError unless op takes count inputs (ops index their inputs without checking how
// many there are: a graph from a file must be checked before shape inference runs).
void check_op_input_count(const OpDef& op, size_t count);
// Every registered op, in table order.
const std::vector<const OpDef*>& all_ops();

}  // namespace loom
