// CNTK's Python user functions (cntk.ops.functions.UserFunction): a Python object with forward,
// backward and infer_outputs run as a Loom op (loom/graph/user_function.h). The Python class
// itself is in python/loom/ops/functions.py; this file is the C++ side that calls it, adding its
// names to loom._loom.ops.functions.
#include "loom/graph/user_function.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/native_user_function.h"

#include "python/src/binding.h"

namespace loom::python {

namespace {

// What a Python user function's forward leaves for its backward: the user's state (held across
// calls) and the function's outputs (the keys of root_gradients).
struct PythonState {
  std::shared_ptr<py::object> object;
  std::vector<Variable> outputs;
};

// A Python UserFunction instance as a loom::UserFunction.
class PythonUserFunction final : public UserFunction {
 public:
  explicit PythonUserFunction(py::object udf)
      : udf_(hold(std::move(udf))), op_name_(udf_->attr("op_name").cast<std::string>()) {}

  std::string op_name() const override { return op_name_; }

  // CNTK's self.inputs are the function's inputs as they are now (placeholders until bound).
  std::vector<OutputSpec> infer_outputs(const std::vector<Variable>& inputs) const override {
    py::gil_scoped_acquire gil;
    udf_->attr("inputs") = inputs;
    const py::object outputs = udf_->attr("infer_outputs")();
    const auto list = returned<std::vector<Variable>>(outputs, op_name_ + ".infer_outputs",
                                                      "a list of output_variable(...)");
    if (list.empty())
      throw py::value_error(op_name_ +
                            ".infer_outputs returned no outputs; it must return a list of "
                            "output_variable(...), one per output");
    std::vector<OutputSpec> specs;
    for (const Variable& o : list)
      specs.push_back(
          {o.shape(), o.dtype(), o.dynamic_axes(), o.is_sparse(), o.needs_gradient(), o.name()});
    return specs;
  }

  // CNTK's call forms: forward(arguments, device, outputs_to_retain) returns (state, output) for
  // one output; forward(arguments, outputs, device, outputs_to_retain) fills the dict outputs
  // ({output: None} on the way in) and returns the state for several. outputs_to_retain lists
  // every output in training and none otherwise, as CNTK's did.
  std::vector<Value> forward(const std::vector<Value>& inputs, const std::vector<Variable>& outputs,
                             bool is_training, std::any& state) const override {
    py::gil_scoped_acquire gil;
    const bool as_numpy = udf_->attr("as_numpy").cast<bool>();
    const std::vector<Variable> variables = this->inputs();
    py::list args;
    for (size_t i = 0; i < inputs.size(); ++i)
      args.append(argument(inputs[i], variables[i], as_numpy));
    py::object arguments = args.size() == 1 ? py::object(args[0]) : py::object(py::tuple(args));
    const py::object device = py::cast(DeviceDescriptor::cpu_device());
    const py::list keys = py::cast(outputs);
    udf_->attr("outputs") = keys;  // CNTK's self.outputs, the keys of outputs and root_gradients
    const py::list retain = is_training ? py::list(keys) : py::list();
    std::vector<Value> values;
    py::object user_state;
    if (outputs.size() == 1) {
      const py::object result = udf_->attr("forward")(arguments, device, retain);
      if (!py::isinstance<py::tuple>(result) || py::len(result) != 2)
        throw py::type_error(op_name_ + ".forward returned " + type_name(result) +
                             "; it must return (state, output)");
      const py::tuple pair = result.cast<py::tuple>();
      user_state = pair[0];
      values.push_back(value_of(outputs[0], pair[1], op_name_ + ".forward's output"));
    } else {
      py::dict filled;
      for (py::handle key : keys) filled[key] = py::none();
      user_state = udf_->attr("forward")(arguments, filled, device, retain);
      for (size_t k = 0; k < outputs.size(); ++k) {
        const std::string what = op_name_ + ".forward's output " + std::to_string(k) + " (" +
                                 outputs[k].describe() + ")";
        const py::object value = filled.attr("get")(keys[k]);
        if (value.is_none())
          throw py::value_error(what + " was not set: set outputs[self.outputs[" +
                                std::to_string(k) + "]]");
        values.push_back(value_of(outputs[k], value, what));
      }
    }
    state = PythonState{hold(user_state), outputs};
    return values;
  }

  // CNTK's call forms: root_gradients is the gradient itself for one output, {output: gradient}
  // for several (None for an output that needs no gradient); backward(state, root_gradients)
  // returns the gradient of a single input, and backward(state, root_gradients, variables)
  // fills {input: gradient} for the inputs asked.
  std::vector<std::optional<Value>> backward(const std::any& state, const std::vector<Value>& roots,
                                             const std::vector<bool>& wanted) const override {
    py::gil_scoped_acquire gil;
    const bool as_numpy = udf_->attr("as_numpy").cast<bool>();
    const PythonState& s = std::any_cast<const PythonState&>(state);
    py::object root_gradients;
    if (roots.size() == 1) {
      root_gradients = argument(roots[0], s.outputs[0], as_numpy);
    } else {
      py::dict by_output;
      for (size_t k = 0; k < roots.size(); ++k)
        by_output[py::cast(s.outputs[k])] = s.outputs[k].impl()->stops_gradient
                                                ? py::none()
                                                : argument(roots[k], s.outputs[k], as_numpy);
      root_gradients = by_output;
    }
    const std::vector<Variable> inputs = this->inputs();
    std::vector<std::optional<Value>> gradients(inputs.size());
    // None (or an input left out of variables) is a gradient of zeros, as CNTK's.
    if (inputs.size() == 1) {
      const py::object g = udf_->attr("backward")(*s.object, root_gradients);
      if (!g.is_none()) gradients[0] = value_of(inputs[0], g, gradient_label(inputs, 0));
      return gradients;
    }
    py::dict variables;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (wanted[i]) variables[py::cast(inputs[i])] = py::none();
    udf_->attr("backward")(*s.object, root_gradients, variables);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!wanted[i]) continue;
      const py::object g = variables[py::cast(inputs[i])];
      if (!g.is_none()) gradients[i] = value_of(inputs[i], g, gradient_label(inputs, i));
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
  // The user's self.inputs (the GIL held).
  std::vector<Variable> inputs() const {
    return udf_->attr("inputs").cast<std::vector<Variable>>();
  }

  std::string gradient_label(const std::vector<Variable>& inputs, size_t i) const {
    return op_name_ + ".backward's gradient of input " + std::to_string(i) + " (" +
           inputs[i].describe() + ")";
  }

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
        for (py::handle in : udf.attr("inputs")) {
          check_not_user_function(in);
          inputs.push_back(in.cast<Variable>());
        }
        Function f = loom::user_function(std::move(user), std::move(inputs), name);
        // CNTK's self.outputs (the function's outputs, held without it: no cycle through udf).
        std::vector<Variable> outputs;
        for (const auto& o : f.impl()->outputs) outputs.emplace_back(o);
        udf.attr("outputs") = outputs;
        return f;
      },
      py::arg("user_func"));
  m.def("register_native_user_function", &register_native_user_function, py::arg("op_id"),
        py::arg("module_name"), py::arg("factory_method_name"),
        py::call_guard<py::gil_scoped_release>());
  m.def("add_native_user_function_search_path", &add_native_user_function_search_path,
        py::arg("folder"));
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
