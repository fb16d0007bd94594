#include "loom/graph/variable.h"

#include <atomic>

#include "loom/graph/graph_impl.h"

namespace loom {

std::string new_uid(const std::string& prefix) {
  static std::atomic<uint64_t> counter{0};
  return prefix + std::to_string(++counter);
}

Variable::Variable(const Function& f) {
  LOOM_CHECK(f.valid(), ArgumentError, "Variable from an empty Function");
  auto& outs = f.impl()->outputs;
  LOOM_CHECK(outs.size() == 1, ShapeError, "function ", f.to_string(), " has ", outs.size(),
             " outputs; pick one with outputs()[i]");
  impl_ = outs[0];
  keep_alive_ = f.impl();
}

namespace {
const VariableImpl& get(const std::shared_ptr<VariableImpl>& p) {
  LOOM_CHECK(p, StateError, "use of an empty Variable");
  return *p;
}
}  // namespace

VariableKind Variable::kind() const {
  return get(impl_).kind;
}
const NDShape& Variable::shape() const {
  return get(impl_).shape;
}
bool Variable::has_known_shape() const {
  return get(impl_).shape_known;
}
DataType Variable::dtype() const {
  return get(impl_).dtype;
}
const std::vector<Axis>& Variable::dynamic_axes() const {
  return get(impl_).dynamic_axes;
}
bool Variable::is_sparse() const {
  return get(impl_).is_sparse;
}
bool Variable::needs_gradient() const {
  return get(impl_).needs_gradient;
}
const std::string& Variable::name() const {
  return get(impl_).name;
}
const std::string& Variable::uid() const {
  return get(impl_).uid;
}

NDArrayView& Variable::value() const {
  LOOM_CHECK(impl_, StateError, "use of an empty Variable");
  VariableImpl& v = *impl_;
  LOOM_CHECK(v.kind == VariableKind::Parameter || v.kind == VariableKind::Constant, StateError,
             loom::describe(v), " is not a parameter or constant and has no value");
  LOOM_CHECK(v.value.has_value(), StateError, loom::describe(v),
             " has no value yet: its shape is inferred at the first call of its layer");
  return *v.value;
}

void Variable::set_value(const NDArrayView& value) const {
  NDArrayView& current = this->value();
  LOOM_CHECK(value.shape() == current.shape(), ShapeError, "set_value of ", describe(),
             ": the new value has shape ", value.shape().to_string());
  current.copy_from(value);
}

Function Variable::owner() const {
  const VariableImpl& v = get(impl_);
  LOOM_CHECK(v.kind == VariableKind::Output, StateError, "only outputs have an owner function");
  return v.blocks.empty() ? producer() : block_view(v.blocks.back());
}

Function Variable::producer() const {
  const VariableImpl& v = get(impl_);
  LOOM_CHECK(v.kind == VariableKind::Output, StateError, "only outputs have a producing function");
  auto f = v.owner.lock();
  LOOM_CHECK(f, StateError, "the function producing ", loom::describe(v), " no longer exists");
  return Function(f);
}

namespace {
std::string type_string(const VariableImpl& v) {
  if (!v.shape_known) return "Sequence[tensor]";  // CNTK: unknown shape and dynamic axes
  std::string t = std::string(v.kind == VariableKind::Parameter ? "ParameterTensor"
                              : v.is_sparse                     ? "SparseTensor"
                                                                : "Tensor") +
                  v.shape.to_string();
  if (v.dynamic_axes.size() < 2) return t;
  const Axis& axis = v.dynamic_axes[1];
  if (axis == Axis::default_dynamic_axis()) return "Sequence[" + t + "]";
  return "SequenceOver[" + axis.name() + "][" + t + "]";
}
}  // namespace

std::string Variable::type_string() const {
  return loom::type_string(get(impl_));
}

std::string describe(const VariableImpl& v) {
  std::string name = v.name.empty() ? v.uid : v.name;
  if (v.layer) name = (v.layer->name.empty() ? v.layer->block_name : v.layer->name) + "." + name;
  return name + ": " + type_string(v);
}

std::string Variable::describe() const {
  return loom::describe(get(impl_));
}

Parameter::Parameter(const Variable& v) : Variable(v) {
  LOOM_CHECK(v.is_parameter(), ArgumentError, v.describe(), " is not a parameter");
}

Constant::Constant(const Variable& v) : Variable(v) {
  LOOM_CHECK(v.is_constant(), ArgumentError, v.describe(), " is not a constant");
}

void VariableImpl::resolve_shape(const NDShape& full) {
  // An inferred axis may stand for several (a Dense layer over images maps all their axes).
  LOOM_CHECK(full.rank() == shape.rank() || (shape.has_inferred() && full.rank() > shape.rank()),
             ShapeError, describe(*this), " cannot take shape ", full.to_string());
  LOOM_CHECK(!full.has_free(), ShapeError, describe(*this), " cannot take shape ", full.to_string(),
             ": a free dimension (-3, sized by each minibatch) cannot be learned");
  for (size_t i = 0; i < full.rank() && full.rank() == shape.rank(); ++i)
    LOOM_CHECK(shape[i] == NDShape::kInferred || shape[i] == full[i], ShapeError, describe(*this),
               " cannot take shape ", full.to_string());
  if (value) return;
  shape = full;
  value = NDArrayView(dtype, shape);
  init.fill(*value, init_generator);
}

Variable input_variable(const NDShape& shape, const InputOptions& o) {
  LOOM_CHECK(!shape.has_inferred(), ShapeError, "input_variable '", o.name, "': shape ",
             shape.to_string(), " must be fully known");
  LOOM_CHECK(!o.is_sparse || shape.rank() >= 1, ShapeError, "input_variable '", o.name,
             "': a sparse input needs at least one axis");
  LOOM_CHECK(o.dynamic_axes.size() <= 2 && (o.dynamic_axes.empty() || o.dynamic_axes[0].is_batch()),
             ArgumentError, "input_variable '", o.name,
             "': dynamic axes must be {}, {batch} or {batch, sequence axis}");
  LOOM_CHECK(o.dynamic_axes.size() < 2 ||
                 (o.dynamic_axes[1].is_dynamic() && !o.dynamic_axes[1].is_batch()),
             ArgumentError, "input_variable '", o.name, "': the sequence axis ",
             o.dynamic_axes.size() < 2 ? "" : o.dynamic_axes[1].to_string(),
             " must be a dynamic axis other than the batch axis");
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Input;
  v->shape = shape;
  v->dtype = o.dtype;
  v->dynamic_axes = o.dynamic_axes;
  v->is_sparse = o.is_sparse;
  v->needs_gradient = o.needs_gradient;
  v->name = o.name;
  v->uid = new_uid("Input");
  return Variable(v);
}

Variable sequence::input_variable(const NDShape& shape, InputOptions o) {
  if (o.dynamic_axes.size() < 2) o.dynamic_axes = default_sequence_axes();
  return loom::input_variable(shape, o);
}

Variable sequence::input_variable(const NDShape& shape, const Axis& sequence_axis, InputOptions o) {
  o.dynamic_axes = {Axis::default_batch_axis(), sequence_axis};
  return loom::input_variable(shape, o);
}

namespace {
std::string lengths_string(const std::vector<size_t>& lengths) {
  std::string s = "[";
  for (size_t i = 0; i < lengths.size(); ++i) s += (i ? "," : "") + std::to_string(lengths[i]);
  return s + "]";
}
}  // namespace

void check_value_form(const Variable& v, const Value& value) {
  if (!v.has_batch_axis()) return;
  if (v.has_sequence_axis()) {
    LOOM_CHECK(value.is_sequence(), ShapeError, "value for ", v.describe(), " of shape ",
               value.shape().to_string(), " holds ", value.num_sequences(),
               " samples without a sequence axis, but the variable is a sequence: give "
               "[sequences, steps, sample...] (Value::create_sequences, Value::create)");
    return;
  }
  LOOM_CHECK(value.max_sequence_length() <= 1 && value.number_of_samples() == value.num_sequences(),
             ShapeError, "value for ", v.describe(), " of shape ", value.shape().to_string(),
             " holds ", value.num_sequences(), " sequences of ",
             lengths_string(value.sequence_lengths()),
             " steps, but the variable has no sequence axis (one step per sequence)");
}

void check_same_sequence_lengths(const Variable& a, const Value& a_value, const Variable& b,
                                 const Value& b_value) {
  const std::vector<size_t> la = a_value.sequence_lengths(), lb = b_value.sequence_lengths();
  LOOM_CHECK(la == lb, ShapeError, "inputs ", a.describe(), " and ", b.describe(),
             " share sequence axis '", a.dynamic_axes().back().name(),
             "' but their sequences differ: lengths ", lengths_string(la), " and ",
             lengths_string(lb));
}

Parameter parameter(const NDShape& shape, const Initializer& init, DataType dtype,
                    const std::string& name) {
  if (init.kind == InitKind::Array) {
    const NDShape& s = init.values->shape();
    bool fits = s.rank() == shape.rank();
    for (size_t i = 0; fits && i < s.rank(); ++i)
      fits = shape[i] == NDShape::kInferred || shape[i] == s[i];
    LOOM_CHECK(fits, ShapeError, "parameter '", name, "': the init array of shape ", s.to_string(),
               " does not fit the parameter's shape ", shape.to_string());
    NDArrayView value(dtype, s);
    RandomGenerator draws_nothing;
    init.fill(value, draws_nothing);
    return parameter(value, name);
  }
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Parameter;
  v->shape = shape;
  v->dtype = dtype;
  v->needs_gradient = true;
  v->name = name;
  v->uid = new_uid("Parameter");
  v->init = init;
  v->init_generator = init.seed ? RandomGenerator(*init.seed) : next_default_generator();
  if (!shape.has_inferred()) v->resolve_shape(shape);
  return Parameter(Variable(v));
}

Parameter parameter(const NDArrayView& value, const std::string& name) {
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Parameter;
  v->shape = value.shape();
  v->dtype = value.dtype();
  v->needs_gradient = true;
  v->name = name;
  v->uid = new_uid("Parameter");
  v->value = value.to_dense().deep_clone();
  return Parameter(Variable(v));
}

Constant constant(const NDArrayView& value, const std::string& name) {
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Constant;
  v->shape = value.shape();
  v->dtype = value.dtype();
  v->name = name;
  v->uid = new_uid("Constant");
  v->value = value.to_dense().deep_clone();
  return Constant(Variable(v));
}

Constant constant(double scalar, DataType dtype, const std::string& name) {
  NDArrayView value(dtype, NDShape{});
  value.fill(scalar);
  return constant(value, name);
}

Variable placeholder(const std::string& name) {
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Placeholder;
  v->shape_known = false;
  v->name = name;
  v->uid = new_uid("Placeholder");
  return Variable(v);
}

Variable placeholder(const NDShape& shape, DataType dtype, const std::vector<Axis>& dynamic_axes,
                     const std::string& name) {
  Variable p = placeholder(name);
  VariableImpl& v = *p.impl();
  v.shape = shape;
  v.shape_known = true;
  v.dtype = dtype;
  v.dynamic_axes = dynamic_axes;
  return p;
}

Variable output_variable(const NDShape& shape, DataType dtype,
                         const std::vector<Axis>& dynamic_axes, bool needs_gradient,
                         const std::string& name) {
  auto v = std::make_shared<VariableImpl>();
  v->kind = VariableKind::Output;
  v->shape = shape;
  v->dtype = dtype;
  v->dynamic_axes = dynamic_axes;
  v->needs_gradient = needs_gradient;
  v->name = name;
  v->uid = new_uid("Output");
  return Variable(v);
}

}  // namespace loom
