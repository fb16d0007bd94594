#include "loom/graph/user_function.h"

#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "loom/core/error.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/native_user_function.h"
#include "loom/graph/tensor.h"

namespace loom {

std::vector<OutputSpec> UserFunction::infer_outputs(const std::vector<Variable>& inputs) const {
  LOOM_CHECK(!inputs.empty(), ShapeError, op_name(),
             ": a user function without inputs must say its outputs' types (infer_outputs)");
  const Variable& x = inputs[0];
  return {{x.shape(), x.dtype(), x.dynamic_axes(), false}};
}

std::shared_ptr<UserFunction> UserFunction::clone(const std::vector<Variable>&) const {
  return std::const_pointer_cast<UserFunction>(shared_from_this());
}

namespace {

std::string axes_string(const std::vector<Axis>& axes) {
  std::string s = "[";
  for (const Axis& a : axes) s += (s.size() > 1 ? ", " : "") + a.to_string();
  return s + "]";
}

// What one application keeps from forward to backward: the user's state, and the gradients of
// all wanted inputs, which the user's backward gives at once and the executor asks for one by
// one.
struct CallState {
  std::any user;
  std::vector<std::optional<Value>> gradients;
};

// The op of one user function (each user function primitive owns its own).
class UserOpDef final : public OpDef {
 public:
  explicit UserOpDef(std::shared_ptr<UserFunction> user) : user_(std::move(user)) {}
  const std::shared_ptr<UserFunction>& user() const { return user_; }
  // How many outputs the function was made with, which inference must give again once
  // placeholders among its inputs are bound.
  void set_outputs(size_t n) { outputs_ = n; }

  const char* name() const override { return kUserFunctionOp; }

  std::vector<OutputSpec> infer(const std::vector<Variable>& inputs,
                                const Dictionary&) const override {
    std::vector<OutputSpec> specs = infer_unbound(inputs, {});
    const std::string op = user_->op_name();
    LOOM_CHECK(outputs_ == 0 || specs.size() == outputs_, ShapeError, op, ": infer_outputs gave ",
               specs.size(), " outputs for the inputs bound to its placeholders; it gave ",
               outputs_, " when the function was made");
    // The outputs declare their dynamic axes (CNTK's): one input's (their rows are that
    // input's), or the batch axis alone of a sequence input (a row per sequence); none where no
    // input has any. The inputs' axes may differ (a sequence and a batch).
    const std::vector<Axis>& axes = specs[0].dynamic_axes;
    rows_ = rows_for(axes, inputs);
    for (size_t k = 0; k < specs.size(); ++k) {
      const OutputSpec& spec = specs[k];
      LOOM_CHECK(!spec.is_sparse, ShapeError, op, ": output ", k,
                 " is sparse; a user function's outputs are dense");
      LOOM_CHECK(spec.dtype == DataType::Float32 || spec.dtype == DataType::Float64, ShapeError, op,
                 ": output ", k, " is ", to_string(spec.dtype),
                 "; a user function's outputs are float32 or float64");
      LOOM_CHECK(spec.dynamic_axes == axes, ShapeError, op, ": output ", k,
                 " has the dynamic axes ", axes_string(spec.dynamic_axes), ", output 0 ",
                 axes_string(axes), "; a user function's outputs share their dynamic axes");
    }
    return specs;
  }

  const SequenceLayout* output_layout(std::span<const Tensor* const> inputs, const Dictionary&,
                                      LayoutCache& layouts) const override {
    if (!rows_.input) return nullptr;
    const SequenceLayout* l = inputs[*rows_.input]->layout;
    return rows_.per_sequence ? layouts.batch(l->num_sequences()) : l;
  }

  // CNTK's: infer_outputs, also on inputs of unknown shape.
  std::vector<OutputSpec> infer_unbound(const std::vector<Variable>& inputs,
                                        const Dictionary&) const override {
    std::vector<OutputSpec> specs = user_->infer_outputs(inputs);
    LOOM_CHECK(!specs.empty(), ShapeError, user_->op_name(), ": infer_outputs gave no outputs");
    return specs;
  }

  // An output with free dimensions (CNTK's FreeDimension) must be sized before forward runs:
  // it takes them from the first input of its rank whose other dimensions agree (user code
  // sees its inputs' types, not this minibatch's sizes).
  std::vector<NDShape> output_shapes(const std::vector<Variable>& inputs,
                                     std::span<const Tensor* const> tensors,
                                     const Dictionary&) const override {
    std::vector<NDShape> shapes;
    for (const OutputSpec& spec : user_->infer_outputs(inputs))
      shapes.push_back(sized(spec.shape, tensors));
    return shapes;
  }

  void forward(OpCall& call) const override {
    const FunctionImpl& f = *call.function;
    std::vector<Value> inputs;
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      LOOM_CHECK(!call.inputs[i]->is_sparse(), ArgumentError, user_->op_name(), ": input ", i,
                 " is sparse; a user function reads dense values");
      inputs.push_back(to_value(*call.inputs[i], f.inputs[i].has_sequence_axis()));
    }
    auto& state = *call.user_state;
    state = CallState{};
    CallState& s = std::any_cast<CallState&>(state);
    const std::vector<Variable> outputs(f.outputs.begin(), f.outputs.end());
    const std::vector<Value> values = user_->forward(inputs, outputs, call.is_training, s.user);
    LOOM_CHECK(values.size() == outputs.size(), ShapeError, user_->op_name(), ": forward gave ",
               values.size(), " values for ", outputs.size(), " outputs");
    for (size_t k = 0; k < values.size(); ++k)
      write(values[k], *call.outputs[k], false, outputs[k].has_sequence_axis(),
            "forward's output " + output_label(f, k));
  }

  void backward(OpCall& call, size_t index, Tensor& input_gradient,
                bool accumulate) const override {
    const FunctionImpl& f = *call.function;
    // Where no output needs a gradient (output_variable(needs_gradient=False)), the inputs'
    // gradients are zeros without calling the user's backward, as CNTK's.
    bool any_needed = false;
    for (const auto& o : f.outputs) any_needed = any_needed || !o->stops_gradient;
    if (!any_needed) return zeros(input_gradient, accumulate);
    CallState& s = std::any_cast<CallState&>(*call.user_state);
    const std::vector<bool>& wanted = *call.gradient_wanted;
    size_t first = 0;
    while (!wanted[first]) ++first;
    if (index == first) {
      std::vector<Value> roots;
      for (size_t k = 0; k < f.outputs.size(); ++k) {
        const Value& root = roots.emplace_back(
            to_value(*call.output_gradients[k], f.outputs[k]->dynamic_axes.size() > 1));
        if (f.outputs[k]->stops_gradient)  // zeros, where the new value holds its elements
          NDArrayView(root.is_packed() ? root.packed_rows() : root.data()).fill(0);
      }
      s.gradients = user_->backward(s.user, roots, wanted);
      LOOM_CHECK(s.gradients.size() == wanted.size(), ArgumentError, user_->op_name(),
                 ": backward gave ", s.gradients.size(), " gradients for ", wanted.size(),
                 " inputs");
    }
    // An input backward gave no gradient for gets zeros, as CNTK's.
    if (!s.gradients[index]) return zeros(input_gradient, accumulate);
    write(*s.gradients[index], input_gradient, accumulate, f.inputs[index].has_sequence_axis(),
          "backward's gradient of input " + std::to_string(index) + " (" +
              f.inputs[index].describe() + ")");
    s.gradients[index].reset();
  }

  OpTraits traits(const Dictionary&) const override {
    // Opaque code: it reads everything, and it sees whole sequences, never one step.
    return {.runs_step_by_step = false};
  }

 private:
  // Whose rows the outputs have: those of input `input` (none: no dynamic axes), or one per
  // sequence of it.
  struct Rows {
    std::optional<size_t> input;
    bool per_sequence = false;
  };

  // The rows of outputs with dynamic axes `axes`; a ShapeError when no input gives them.
  Rows rows_for(const std::vector<Axis>& axes, const std::vector<Variable>& inputs) const {
    std::string have;
    bool any_dynamic = false;
    for (const Variable& in : inputs) {
      have += " " + axes_string(in.dynamic_axes());
      any_dynamic = any_dynamic || in.has_batch_axis();
    }
    if (!axes.empty()) {
      for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].dynamic_axes() == axes) return {i};
      for (size_t i = 0; i < inputs.size(); ++i)
        if (axes.size() == 1 && inputs[i].has_sequence_axis() &&
            inputs[i].dynamic_axes()[0] == axes[0])
          return {i, true};
    }
    LOOM_CHECK(axes.empty() && !any_dynamic, ShapeError, user_->op_name(),
               ": the outputs' dynamic axes are ", axes_string(axes),
               "; they must be an input's, or the batch axis alone of a sequence input (none "
               "only where no input has any); the inputs have",
               have);
    return {};
  }

  // A gradient of zeros: written, or nothing added.
  static void zeros(Tensor& gradient, bool accumulate) {
    if (!accumulate) std::memset(gradient.data, 0, gradient.size() * size_of(gradient.dtype));
  }

  // A declared output shape with its free dimensions taken from the first input of its rank
  // whose other dimensions agree.
  NDShape sized(const NDShape& declared, std::span<const Tensor* const> tensors) const {
    if (!declared.has_free()) return declared;
    for (const Tensor* t : tensors) {
      const NDShape actual = t->sample_shape();
      bool fits = actual.rank() == declared.rank();
      for (size_t d = 0; fits && d < declared.rank(); ++d)
        fits = declared[d] == NDShape::kFree || declared[d] == actual[d];
      if (fits) return actual;
    }
    throw ShapeError(user_->op_name() + ": an output of shape " + declared.to_string() +
                     " takes its free dimensions from an input of the same rank; none fits");
  }

  // How messages name output k: its index, and its name where it has one.
  static std::string output_label(const FunctionImpl& f, size_t k) {
    return std::to_string(k) + " (" + Variable(f.outputs[k]).describe() + ")";
  }

  // Copies value (the user's, in its variable's form) into t (packed), or adds it; a ShapeError
  // naming what it is when its form differs from t's.
  void write(const Value& value, Tensor& t, bool accumulate, bool as_sequence,
             const std::string& what) const {
    const std::string op = user_->op_name();
    LOOM_CHECK(!value.is_sparse(), ShapeError, op, ": ", what, " is sparse; give it dense");
    LOOM_CHECK(value.dtype() == t.dtype, ShapeError, op, ": ", what, " is ",
               to_string(value.dtype()), ", expected ", to_string(t.dtype));
    LOOM_CHECK(value.sample_shape() == t.sample_shape(), ShapeError, op, ": ", what,
               " has samples of shape ", value.sample_shape().to_string(), ", expected ",
               t.sample_shape().to_string());
    const size_t bytes = t.size() * size_of(t.dtype);
    const void* src = nullptr;  // value's samples in t's rows (a packed value's own rows)
    std::vector<char> packed;
    if (t.dynamic()) {
      const SequenceLayout& l = *t.layout;
      LOOM_CHECK(value.is_sequence() == as_sequence && value.num_sequences() == l.num_sequences(),
                 ShapeError, op, ": ", what, " holds ", value.num_sequences(),
                 as_sequence ? " sequences" : " samples", ", expected ", l.num_sequences());
      if (as_sequence)
        for (size_t b = 0; b < l.num_sequences(); ++b)
          LOOM_CHECK(value.sequence_length(b) == l.lengths[b], ShapeError, op, ": ", what,
                     "'s sequence ", b, " has ", value.sequence_length(b), " steps, expected ",
                     l.lengths[b]);
      if (!accumulate) {  // packed straight into t
        pack_dense(value, l, t.data);
        return;
      }
      if (value.is_packed()) {  // rows in l's order, the lengths being l's (checked above)
        src = value.packed_rows().raw_data();
      } else {
        packed.resize(bytes);
        pack_dense(value, l, packed.data());
        src = packed.data();
      }
    } else {
      LOOM_CHECK(value.num_sequences() == 1, ShapeError, op, ": ", what, " holds ",
                 value.num_sequences(), " samples, expected one (it has no batch axis)");
      src = value.data().raw_data();
    }
    if (!accumulate) {
      std::memcpy(t.data, src, bytes);
      return;
    }
    dispatch(t.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* a = static_cast<const T*>(src);
      T* d = t.ptr<T>();
      for (size_t i = 0, n = t.size(); i < n; ++i) d[i] += a[i];
    });
  }

  std::shared_ptr<UserFunction> user_;
  // What infer found for the inputs it was last given (re-inferred when placeholders are bound).
  mutable Rows rows_;
  size_t outputs_ = 0;  // 0 while the function is being made
};

struct Deserializers {
  std::mutex mutex;
  std::unordered_map<std::string, UserFunctionDeserializer> by_op_name;
  UserFunctionDeserializer fallback;
};

Deserializers& deserializers() {
  static Deserializers d;
  return d;
}

}  // namespace

Function user_function(std::shared_ptr<UserFunction> user, std::vector<Variable> inputs,
                       const std::string& name) {
  LOOM_CHECK(user != nullptr, ArgumentError, "user_function: no user function given");
  auto op = std::make_shared<UserOpDef>(std::move(user));
  Dictionary attributes;
  attributes["op_name"] = op->user()->op_name();
  Function f = make_primitive(*op, std::move(inputs), std::move(attributes), name);
  op->set_outputs(f.impl()->outputs.size());
  f.impl()->owned_op = std::move(op);
  return f;
}

std::shared_ptr<UserFunction> user_function_of(const FunctionImpl& f) {
  const auto* op = dynamic_cast<const UserOpDef*>(f.op);
  return op ? op->user() : nullptr;
}

std::string op_name_of(const FunctionImpl& f) {
  if (auto user = user_function_of(f)) return user->op_name();
  return f.op->name();
}

void register_user_function_deserializer(const std::string& op_name,
                                         UserFunctionDeserializer deserializer) {
  Deserializers& d = deserializers();
  std::lock_guard lock(d.mutex);
  LOOM_CHECK(d.by_op_name.emplace(op_name, std::move(deserializer)).second, ArgumentError,
             "a deserializer for user functions of op name '", op_name,
             "' has already been registered");
}

void set_fallback_user_function_deserializer(UserFunctionDeserializer deserializer) {
  Deserializers& d = deserializers();
  std::lock_guard lock(d.mutex);
  d.fallback = std::move(deserializer);
}

Dictionary user_function_attributes(const FunctionImpl& f) {
  const auto user = user_function_of(f);
  LOOM_CHECK(user != nullptr, StateError, function_label(f), " is not a user function");
  Dictionary d;
  d["op_name"] = user->op_name();
  d["state"] = user->serialize().map();
  if (f.attributes.contains(kNativeUserFunctionKey))
    d[kNativeUserFunctionKey] = f.attributes.at(kNativeUserFunctionKey);
  return d;
}

Function user_function_from_attributes(const std::vector<Variable>& inputs,
                                       const Dictionary& attributes, const std::string& name) {
  LOOM_CHECK(attributes.contains("op_name") && attributes.at("op_name").is<std::string>() &&
                 attributes.contains("state") && attributes.at("state").is<DictionaryMap>(),
             ArgumentError, "a user function's attributes hold its op_name and state");
  const std::string& op_name = attributes.get<std::string>("op_name");
  const Dictionary state(attributes.get<DictionaryMap>("state"));
  UserFunctionDeserializer make;
  {
    Deserializers& d = deserializers();
    std::lock_guard lock(d.mutex);
    auto it = d.by_op_name.find(op_name);
    if (it != d.by_op_name.end())
      make = it->second;
    else if (!attributes.contains(kNativeUserFunctionKey))
      make = d.fallback;
  }
  // A native user function is made again by its library's factory, unless a deserializer
  // registered for its op name takes its place (as CNTK's callbacks did).
  if (!make && attributes.contains(kNativeUserFunctionKey))
    return native_user_function_from_record(
        inputs, attributes.get_dictionary(kNativeUserFunctionKey), name);
  std::shared_ptr<UserFunction> user = make ? make(inputs, name, state) : nullptr;
  LOOM_CHECK(user != nullptr, ArgumentError, "no deserializer knows user functions of op name '",
             op_name,
             "': register one (register_user_function_deserializer; Python: "
             "Function.register_udf_deserialize_callback, or a static deserialize method on the "
             "class) before loading");
  return user_function(std::move(user), inputs, name);
}

}  // namespace loom
