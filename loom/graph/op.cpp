#include "loom/graph/op.h"

#include "loom/graph/graph_impl.h"

namespace loom {

const SequenceLayout* OpDef::output_layout(std::span<const Tensor* const> inputs, const Dictionary&,
                                           LayoutCache&) const {
  const SequenceLayout* layout = nullptr;
  for (const Tensor* t : inputs) {
    if (!t->layout) continue;
    if (!layout) {
      layout = t->layout;
    } else {
      LOOM_CHECK(layout == t->layout || layout->same_shape_as(*t->layout), ShapeError, name(),
                 ": inputs have different numbers of samples or sequence lengths (", layout->rows(),
                 " and ", t->layout->rows(), " samples)");
    }
  }
  return layout;
}

std::vector<NDShape> OpDef::output_shapes(const std::vector<Variable>& inputs,
                                          std::span<const Tensor* const> tensors,
                                          const Dictionary& attributes) const {
  std::vector<Variable> typed = inputs;
  for (size_t i = 0; i < typed.size(); ++i)
    if (typed[i].shape().has_free())
      typed[i] = placeholder(tensors[i]->sample_shape(), typed[i].dtype(), typed[i].dynamic_axes());
  std::vector<NDShape> shapes;
  for (OutputSpec& spec : infer(typed, attributes)) shapes.push_back(std::move(spec.shape));
  return shapes;
}

void OpDef::forward_step(OpCall&, size_t) const {
  throw StateError(detail::concat(name(), " is not a delay op and has no forward_step"));
}

void OpDef::backward_step(OpCall&, size_t, Tensor&, size_t) const {
  throw StateError(detail::concat(name(), " is not a delay op and has no backward_step"));
}

void resolve_parameter_shape(const Variable& parameter, const NDShape& shape) {
  parameter.impl()->resolve_shape(shape);
}

namespace {
std::string describe(const std::vector<Variable>& inputs) {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") +
         (inputs[i].name().empty() ? inputs[i].type_string() : inputs[i].describe());
  return s;
}
}  // namespace

std::vector<Axis> common_dynamic_axes(const char* op, const std::vector<Variable>& inputs) {
  const std::vector<Axis>* axes = nullptr;
  for (auto& in : inputs) {
    if (in.dynamic_axes().empty()) continue;
    if (!axes) {
      axes = &in.dynamic_axes();
    } else {
      LOOM_CHECK(*axes == in.dynamic_axes(), ShapeError, op,
                 ": inputs have different dynamic axes: ", describe(inputs));
    }
  }
  return axes ? *axes : std::vector<Axis>{};
}

DataType common_dtype(const char* op, const std::vector<Variable>& inputs) {
  for (auto& in : inputs)
    LOOM_CHECK(in.dtype() == inputs[0].dtype(), ShapeError, op,
               ": inputs have different data types: ", describe(inputs));
  return inputs.empty() ? DataType::Float32 : inputs[0].dtype();
}

NDShape broadcast_shapes(const char* op, const std::vector<Variable>& inputs) {
  size_t rank = 0;
  for (auto& in : inputs) rank = std::max(rank, in.shape().rank());
  std::vector<size_t> out(rank, 1);
  for (auto& in : inputs) {
    const NDShape& s = in.shape();
    for (size_t i = 0; i < s.rank(); ++i) {
      size_t& o = out[rank - s.rank() + i];
      size_t d = s[i];
      LOOM_CHECK(d == o || d == 1 || o == 1, ShapeError, op,
                 ": shapes cannot be broadcast: ", describe(inputs));
      if (d != 1) o = d;
    }
  }
  return NDShape(out);
}

}  // namespace loom
