// CNTK's Python user functions (cntk.ops.functions.UserFunction): a Python object with forward,
// backward and infer_outputs run as a Loom op (loom/graph/user_function.h). The Python class
// itself is in python/loom/ops/functions.py; this file is the C++ side that calls it.
#include "loom/graph/user_function.h"
#include "loom/graph/native_user_function.h"

#include "python/src/binding.h"

namespace loom::python {

namespace {

// The Python object a Python user function's state or gradient is, held across calls.
struct PythonState {
  std::shared_ptr<py::object> object;
};

// A Python UserFunction instance as a loom::UserFunction.
class PythonUserFunction final : public UserFunction {
 public:
  explicit PythonUserFunction(py::object udf)
      : udf_(hold(std::move(udf))), op_name_(udf_->attr("op_name").cast<std::string>()) {
    for (py::handle in : udf_->attr("inputs")) inputs_.push_back(in.cast<Variable>());
  }

  std::string op_name() const override { return op_name_; }

  OutputSpec infer_output(const std::vector<Variable>&) const override {
    py::gil_scoped_acquire gil;
    const py::object outputs = udf_->attr("infer_outputs")();
    const auto list = returned<std::vector<Variable>>(outputs, op_name_ + ".infer_outputs",
                                                      "a list of output_variable(...)");
    if (list.size() != 1)
      throw py::value_error(op_name_ + ".infer_outputs gave " + std::to_string(list.size()) +
                            " outputs: a Loom user function has one");
    const Variable& o = list[0];
    output_ = placeholder(o.shape(), o.dtype(), o.dynamic_axes());
    return {o.shape(), o.dtype(), o.dynamic_axes(), o.is_sparse()};
  }

  // CNTK's Python forward has no training flag (CNTK passes none either).
  Value forward(const std::vector<Value>& inputs, bool /*is_training*/,
                std::any& state) const override {
    py::gil_scoped_acquire gil;
    const bool as_numpy = udf_->attr("as_numpy").cast<bool>();
    py::list args;
    for (size_t i = 0; i < inputs.size(); ++i)
      args.append(argument(inputs[i], inputs_[i], as_numpy));
    py::object arguments = args.size() == 1 ? py::object(args[0]) : py::object(py::tuple(args));
    const py::object device = py::cast(DeviceDescriptor::cpu_device());
    const py::object result = udf_->attr("forward")(arguments, device, py::none());
    if (!py::isinstance<py::tuple>(result) || py::len(result) != 2)
      throw py::type_error(op_name_ + ".forward returned " + type_name(result) +
                           "; it must return (state, output)");
    const py::tuple pair = result.cast<py::tuple>();
    state = PythonState{hold(pair[0])};
    return value_of(output_, pair[1], op_name_ + ".forward's output");
  }

  std::vector<std::optional<Value>> backward(const std::any& state, const Value& root,
                                             const std::vector<bool>& wanted) const override {
    py::gil_scoped_acquire gil;
    const bool as_numpy = udf_->attr("as_numpy").cast<bool>();
    const py::object s = *std::any_cast<const PythonState&>(state).object;
    const py::object root_gradient = argument(root, output_, as_numpy);
    std::vector<std::optional<Value>> gradients(inputs_.size());
    if (inputs_.size() == 1) {
      const py::object g = udf_->attr("backward")(s, root_gradient);
      gradients[0] = value_of(inputs_[0], g, op_name_ + ".backward's gradient");
      return gradients;
    }
    // CNTK's form for several inputs: backward fills {input: gradient} for the inputs asked.
    py::dict variables;
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (wanted[i]) variables[py::cast(inputs_[i])] = py::none();
    udf_->attr("backward")(s, root_gradient, variables);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (!wanted[i]) continue;
      const py::object g = variables[py::cast(inputs_[i])];
      if (g.is_none())
        throw py::value_error(op_name_ + ".backward gave no gradient for input " +
                              std::to_string(i) + " (" + inputs_[i].describe() +
                              "): set variables[self.inputs[" + std::to_string(i) + "]]");
      gradients[i] = value_of(inputs_[i], g, op_name_ + ".backward's gradient");
    }
    return gradients;
  }

  Dictionary serialize() const override {
    py::gil_scoped_acquire gil;
    const py::object cls = udf_->attr("__class__");
    Dictionary d;
    d["op_name"] = op_name_;
    d["module"] = cls.attr("__module__").cast<std::string>();
    d["class"] = cls.attr("__qualname__").cast<std::string>();
    const py::object state = udf_->attr("serialize")();
    if (!py::isinstance<py::dict>(state))
      throw py::type_error(op_name_ + ".serialize returned " + type_name(state) +
                           "; it must return a dict");
    d["state"] = from_python(state);
    return d;
  }

  std::shared_ptr<UserFunction> clone(const std::vector<Variable>& inputs) const override {
    py::gil_scoped_acquire gil;
    const py::object copy = udf_->attr("clone")(inputs);
    return std::make_shared<PythonUserFunction>(copy);
  }

 private:
  static std::string type_name(py::handle o) {
    return py::str(py::type::of(o).attr("__name__")).cast<std::string>();
  }

  // A value as the user's code takes it: numpy (an array [batch, ...], a list of arrays for
  // sequences, the plain array for a value without dynamic axes), or a Value.
  static py::object argument(const Value& v, const Variable& like, bool as_numpy) {
    if (like.dynamic_axes().empty())
      return as_numpy ? py::object(to_numpy(v.data()[0])) : py::cast(v);
    return as_numpy ? value_to_numpy(v) : py::cast(v);
  }

  // The user's result for a variable of like's type as a Value (numpy data by CNTK's rules).
  static Value value_of(const Variable& like, py::handle data, const std::string& what) {
    if (data.is_none()) throw py::value_error(what + " is None");
    if (py::isinstance<Value>(data)) return data.cast<Value>();
    if (like.dynamic_axes().empty()) {
      const NDArrayView t = dense_view(data, like.dtype());
      if (t.shape() != like.shape())
        throw py::value_error(what + " has shape " + t.shape().to_string() + ", expected " +
                              like.shape().to_string());
      return Value(t.reshaped(like.shape().prepend(1)), false);
    }
    try {
      return value_for(like, data);
    } catch (const Error& e) {
      throw py::value_error(what + ": " + e.what());
    }
  }

  std::shared_ptr<py::object> udf_;
  std::string op_name_;
  std::vector<Variable> inputs_;
  mutable Variable output_;  // the output's type, from infer_output
};

// Loads a Python user function: Python's deserializer (the registered callback for its op
// name, or the class's static deserialize) from the state serialize() stored.
std::shared_ptr<UserFunction> deserialize(const std::vector<Variable>& inputs,
                                          const std::string& name, const Dictionary& saved) {
  if (!saved.contains("module") || !saved.contains("class")) return nullptr;  // not Python's
  py::gil_scoped_acquire gil;
  const py::object udf =
      py::module_::import("loom.ops.functions")
          .attr("_deserialize_user_function")(inputs, name, to_python(saved.map()));
  return std::make_shared<PythonUserFunction>(udf);
}

}  // namespace

void add_user_function(py::module_& m) {
  set_fallback_user_function_deserializer(deserialize);
  m.def(
      "user_function",
      [](py::object udf) {
        const std::string name = udf.attr("name").cast<std::string>();
        auto user = std::make_shared<PythonUserFunction>(udf);
        std::vector<Variable> inputs;
        for (py::handle in : udf.attr("inputs")) inputs.push_back(in.cast<Variable>());
        return loom::user_function(std::move(user), std::move(inputs), name);
      },
      py::arg("user_func"));
  m.def("register_native_user_function", &register_native_user_function, py::arg("op_id"),
        py::arg("module_name"), py::arg("factory_method_name"),
        py::call_guard<py::gil_scoped_release>());
  m.def(
      "native_user_function",
      [](const std::string& op_id, const std::vector<Variable>& operands, py::dict attributes,
         const std::string& name) {
        const DictionaryValue config = from_python(attributes);
        py::gil_scoped_release release;
        return loom::native_user_function(op_id, operands, Dictionary(config.get<DictionaryMap>()),
                                          name);
      },
      py::arg("op_id"), py::arg("operands"), py::arg("attributes"),
      py::arg("user_function_instance_name"));
  m.def(
      "output_variable",
      [](py::handle shape, py::handle dtype, const std::vector<Axis>& dynamic_axes,
         bool needs_gradient, const std::string& name) {
        for (const Axis& a : dynamic_axes)
          if (!a.is_dynamic())
            throw py::value_error("axis in dynamic_axes attribute is not dynamic");
        return output_variable(shape_of(shape), data_type(dtype), dynamic_axes, needs_gradient,
                               name);
      },
      py::arg("shape"), py::arg("dtype"), py::arg("dynamic_axes"), py::arg("needs_gradient") = true,
      py::arg("name") = "");
}

}  // namespace loom::python
