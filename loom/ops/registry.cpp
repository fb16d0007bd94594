#include "loom/ops/registry.h"

#include <string>

#include "loom/graph/debugging.h"
#include "loom/ops/crop.h"
#include "loom/ops/ctc.h"
#include "loom/ops/indexing.h"
#include "loom/ops/op_schema.h"

namespace loom {

DictionaryValue axis_attribute(const Axis& axis) {
  if (axis.is_static()) return int64_t{axis.static_index()};
  return axis.name();
}

Axis attribute_axis(const DictionaryValue& value) {
  if (value.is<int64_t>()) return Axis(int(value.get<int64_t>()));
  LOOM_CHECK(value.is<std::string>(), ArgumentError, "an axis attribute holds ", value.type_name(),
             ", not an axis index or name");
  const std::string& name = value.get<std::string>();
  if (name == Axis::all_static_axes().name()) return Axis::all_static_axes();
  if (name == Axis::all_axes().name()) return Axis::all_axes();
  return Axis::dynamic_axis_named(name);
}

OnnxMapping::~OnnxMapping() = default;

OpSchema internal_op(const OpDef& op, size_t min_inputs, size_t max_inputs,
                     std::vector<ConformanceCase> conformance) {
  OpSchema s{&op, min_inputs, max_inputs};
  s.conformance = std::move(conformance);
  return s;
}

const std::vector<OpSchema>& op_table() {
  // Calling each family's function references its translation unit, so the linker keeps all
  // ops of the static library.
  static const std::vector<OpSchema> table = [] {
    std::vector<OpSchema> all;
    for (auto family : {elementwise_schemas, linear_schemas, losses_schemas, reduction_schemas,
                        shape_schemas, softmax_schemas, sequence_schemas, recurrence_schemas,
                        assign_schemas, convolution_schemas, pooling_schemas, random_schemas,
                        normalization_schemas, fused_rnn_schemas, indexing_schemas, crop_schemas,
                        ctc_schemas, dynamic_axes_schemas, custom_proxy_schemas})
      for (OpSchema& s : family()) all.push_back(std::move(s));
    // debug_model's nodes (loom/graph/debugging.h), so that a model holding them loads.
    all.push_back(internal_op(debug_op(), 1, 1, {{.inputs = {{.shape = {3}}}}}));
    return all;
  }();
  return table;
}

std::string OpSchema::name() const {
  return op ? op->name() : std::string(module) + "." + python;
}

const OpSchema* find_schema(std::string_view name) {
  for (const OpSchema& s : op_table())
    if (s.op ? name == s.op->name() : name == s.name()) return &s;
  return nullptr;
}

const OpSchema& schema_of(const OpDef& op) {
  const OpSchema* s = find_schema(op.name());
  LOOM_CHECK(s && s->op == &op, ArgumentError, "op ", op.name(), " is not in the op table");
  return *s;
}

Function OpSchema::apply(std::vector<Variable> inputs, const Dictionary& attributes,
                         const std::string& name, const PythonVariant* variant) const {
  check_input_count(*this, inputs.size());
  Dictionary all = attributes;
  const char* function = variant ? variant->python : python ? python : op->name();
  for (const OpParam& p : variant ? variant->params : params) {
    if (is_tensor(p.type) || p.type == ParamType::Seed || p.none_default ||
        all.contains(p.attribute_key()))
      continue;
    const DictionaryValue& d = p.default_value;
    LOOM_CHECK(d.has_value(), ArgumentError, function, ": argument '", p.name, "' is required");
    all[p.attribute_key()] = p.type == ParamType::Double && d.is<int64_t>()
                                 ? DictionaryValue(double(d.get<int64_t>()))
                                 : d;
  }
  if (variant)
    for (const auto& [key, value] : variant->fixed.map()) all[key] = value;
  if (build) return build(std::move(inputs), all, name);
  return make_primitive(*op, std::move(inputs), std::move(all), name);
}

const std::vector<const OpDef*>& all_ops() {
  static const std::vector<const OpDef*> ops = [] {
    std::vector<const OpDef*> v;
    for (const OpSchema& s : op_table())
      if (s.op) v.push_back(s.op);
    return v;
  }();
  return ops;
}

const OpDef& find_op(std::string_view name) {
  const OpSchema* s = find_schema(name);
  if (!s || !s->op) {  // a composite's name is no op's
    // Names from files may hold anything: show at most 64 printable characters.
    std::string shown;
    for (char c : name.substr(0, 64)) shown += (c >= 32 && c < 127) ? c : '?';
    if (name.size() > 64) shown += "...";
    throw ArgumentError("unknown op '" + shown + "': no op of this Loom has that name (" +
                        std::to_string(op_table().size()) + " ops are registered)");
  }
  return *s->op;
}

void check_op_input_count(const OpDef& op, size_t count) {
  check_input_count(schema_of(op), count);
}

void check_input_count(const OpSchema& s, size_t count) {
  if (count < s.min_inputs || count > s.max_inputs) {
    std::string expected = s.min_inputs == s.max_inputs ? std::to_string(s.min_inputs)
                           : s.max_inputs == SIZE_MAX   ? "at least " + std::to_string(s.min_inputs)
                                                        : std::to_string(s.min_inputs) + " to " +
                                                            std::to_string(s.max_inputs);
    throw ArgumentError(detail::concat(s.name(), " takes ", expected, " input(s), not ", count));
  }
}

}  // namespace loom
