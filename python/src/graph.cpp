// Variables and Functions: the graph as Python objects, evaluated on numpy data.
#include "loom/graph/graph_impl.h"
#include "python/src/binding.h"

namespace loom::python {

namespace {

std::vector<Variable> variables_of(py::handle items) {
  std::vector<Variable> out;
  for (py::handle x : items) out.push_back(as_variable(x));
  return out;
}

bool is_graph_object(py::handle x) {
  return py::isinstance<Variable>(x) || py::isinstance<Function>(x);
}

// The names of f's parameters that a call must give (positional, without a default value); a
// built-in without a signature to read (one of Loom's ops, e.g. sequence.last) takes one, x.
std::vector<std::string> required_parameters(const py::function& f) {
  py::module_ inspect = py::module_::import("inspect");
  py::object signature;
  try {
    signature = inspect.attr("signature")(f);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ValueError) && !e.matches(PyExc_TypeError)) throw;
    return {"x"};
  }
  py::object empty = inspect.attr("Parameter").attr("empty");
  py::object positional = inspect.attr("Parameter").attr("POSITIONAL_ONLY");
  py::object either = inspect.attr("Parameter").attr("POSITIONAL_OR_KEYWORD");
  std::vector<std::string> names;
  for (py::handle p : signature.attr("parameters").attr("values")()) {
    const py::object kind = p.attr("kind");
    const py::object default_value = p.attr("default");
    if (default_value.is(empty) && (kind.equal(positional) || kind.equal(either)))
      names.push_back(p.attr("name").cast<std::string>());
  }
  return names;
}

// A Python function over Variables as a Function (CNTK's @Function): one placeholder per
// required parameter of the Python function, named after it and bound in that order by a later
// call; a tuple result gives a function of several outputs.
Function function_from_callable(const py::function& f) {
  std::vector<Variable> placeholders;
  py::list args;
  for (const std::string& name : required_parameters(f)) {
    placeholders.push_back(placeholder(name));
    args.append(placeholders.back());
  }
  py::object result = f(*args);
  std::vector<Variable> outputs;
  if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result))
    outputs = variables_of(result);
  else
    outputs.push_back(as_variable(result));
  Function composite = combine(outputs);
  composite.impl()->signature = placeholders;
  return composite;
}

// A variable's value as numpy, or as the Value. A variable without batch axis (a parameter's or
// constant's gradient) is an array of its own shape, as in CNTK.
py::object result(const Variable& v, const Value& value, bool as_numpy) {
  if (!as_numpy) return py::cast(value);
  if (!v.has_batch_axis() && value.num_sequences() == 1) return to_numpy(value.data()[0]);
  return value_to_numpy(value);
}

// Output values as numpy (or as Values): the one output's, or {output: value} for several.
py::object results(const ValueMap& values, const std::vector<Variable>& outputs, bool as_numpy) {
  if (outputs.size() == 1) return result(outputs[0], values.at(outputs[0]), as_numpy);
  py::dict d;
  for (const Variable& o : outputs) d[py::cast(o)] = result(o, values.at(o), as_numpy);
  return d;
}

// {variable: value} of copies: forward's and backward's values live in an executor that the
// next pass overwrites.
py::dict owned_results(const ValueMap& values, bool as_numpy) {
  py::dict d;
  for (const auto& [v, value] : values) {
    const Value copy(value.data().deep_clone(), value.is_sequence(), value.mask());
    d[py::cast(v)] = result(v, copy, as_numpy);
  }
  return d;
}

// The arguments' values from eval's data: a dict {Variable: data}, or data for the only argument.
ValueMap arguments_of(const Function& f, py::handle data) {
  if (py::isinstance<py::dict>(data)) return value_map(data.cast<py::dict>());
  std::vector<Variable> args = f.arguments();
  if (args.size() != 1)
    throw py::value_error(f.to_string() + " takes " + std::to_string(args.size()) +
                          " arguments: give their data as a dict {argument: data}");
  ValueMap values;
  values.emplace(args[0], value_for(args[0], data));
  return values;
}

py::object evaluate(const Function& f, py::handle data, py::handle outputs, bool as_numpy) {
  ValueMap arguments = data.is_none() ? ValueMap{} : arguments_of(f, data);
  std::vector<Variable> wanted = outputs.is_none() ? f.outputs() : variables_of(outputs);
  ValueMap values;
  {
    py::gil_scoped_release nogil;
    values = f.eval(arguments, wanted);
  }
  return results(values, wanted, as_numpy);
}

// Parameters in CNTK's order: the layers from the last applied to the first (CNTK lists a
// block's own parameters before those of the blocks it calls), each layer's in its own order
// (W, b). Seed 003 prints parameter lists in this order.
std::vector<Parameter> cntk_order(const std::vector<Parameter>& parameters) {
  std::vector<std::vector<Parameter>> layers;
  for (const Parameter& p : parameters) {
    const auto& layer = p.impl()->layer;
    if (layers.empty() || !layer || layers.back().back().impl()->layer != layer)
      layers.emplace_back();
    layers.back().push_back(p);
  }
  std::vector<Parameter> ordered;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it)
    ordered.insert(ordered.end(), it->begin(), it->end());
  return ordered;
}

}  // namespace

void add_graph(py::module_& m) {
  py::enum_<VariableKind>(m, "VariableKind")
      .value("Input", VariableKind::Input)
      .value("Output", VariableKind::Output)
      .value("Parameter", VariableKind::Parameter)
      .value("Constant", VariableKind::Constant)
      .value("Placeholder", VariableKind::Placeholder);

  py::class_<Variable> variable(m, "Variable");
  py::class_<Function> function(m, "Function");

  variable.def(py::init<const Function&>())
      .def_property_readonly("shape", [](const Variable& v) { return shape_tuple(v.shape()); })
      .def_property_readonly("dtype", [](const Variable& v) { return numpy_dtype(v.dtype()); })
      .def_property_readonly("name", &Variable::name)
      .def_property_readonly("uid", &Variable::uid)
      .def_property_readonly("kind", &Variable::kind)
      .def_property_readonly("is_sparse", &Variable::is_sparse)
      .def_property_readonly("needs_gradient", &Variable::needs_gradient)
      .def_property_readonly("dynamic_axes", &Variable::dynamic_axes)
      .def_property_readonly("is_input", &Variable::is_input)
      .def_property_readonly("is_output", &Variable::is_output)
      .def_property_readonly("is_parameter", &Variable::is_parameter)
      .def_property_readonly("is_constant", &Variable::is_constant)
      .def_property_readonly("is_placeholder", &Variable::is_placeholder)
      .def_property_readonly("owner", &Variable::owner)
      .def_property_readonly("type_string", &Variable::type_string)
      // Parameters and constants: a copy of the values; assigning copies new values in.
      .def_property(
          "value", [](const Variable& v) { return to_numpy(v.value(), true); },
          [](const Variable& v, py::handle data) { v.set_value(tensor_of(data, v.dtype())); })
      .def("set_value",
           [](const Variable& v, py::handle data) { v.set_value(tensor_of(data, v.dtype())); })
      .def("asarray", [](const Variable& v) { return to_numpy(v.value(), true); })
      .def_static("as_parameter", [](const Variable& v) { return Parameter(v); })
      .def("__hash__", [](const Variable& v) { return std::hash<Variable>()(v); })
      .def("__eq__", [](const Variable& a,
                        py::handle b) { return is_graph_object(b) && a == b.cast<Variable>(); })
      .def("__ne__", [](const Variable& a,
                        py::handle b) { return !is_graph_object(b) || !(a == b.cast<Variable>()); })
      .def("__repr__", &Variable::describe);
  py::implicitly_convertible<Function, Variable>();

  py::class_<Parameter, Variable>(m, "Parameter");
  py::class_<BackPropState>(m, "BackPropState");
  py::class_<Constant, Variable>(m, "Constant");

  py::enum_<ParameterCloneMethod>(m, "CloneMethod")
      .value("share", ParameterCloneMethod::Share)
      .value("clone", ParameterCloneMethod::Clone)
      .value("freeze", ParameterCloneMethod::Freeze);

  function.def(py::init(&function_from_callable), py::arg("f"))
      .def_property_readonly("inputs", &Function::inputs)
      .def_property_readonly("outputs", &Function::outputs)
      .def_property_readonly("output", &Function::output)
      .def_property_readonly("arguments", &Function::arguments)
      .def_property_readonly("parameters",
                             [](const Function& f) { return cntk_order(f.parameters()); })
      .def_property_readonly("constants", &Function::constants)
      .def_property_readonly("placeholders", &Function::placeholders)
      .def_property_readonly("name", &Function::name)
      .def_property_readonly("uid", &Function::uid)
      .def_property_readonly("op_name", &Function::op_name)
      .def_property_readonly("is_composite", &Function::is_composite)
      .def("parameter", &Function::parameter, py::arg("path"))
      .def("argument", &Function::argument, py::arg("name"))
      .def_property_readonly("parameter_paths", &Function::parameter_paths)
      .def("__str__", &Function::to_string)
      .def("__repr__", &Function::to_string)
      .def("__hash__", [](const Function& f) { return std::hash<const void*>()(f.impl().get()); })
      .def("__eq__",
           [](const Function& a, py::handle b) {
             return py::isinstance<Function>(b) && a == b.cast<Function>();
           })
      // f(x, y) with Variables composes; f(data) with numpy data evaluates (the arguments in
      // order, or a dict {argument: data}).
      .def("__call__",
           [](const Function& f, py::args args) -> py::object {
             bool graph = args.size() > 0;
             for (py::handle a : args) graph = graph && is_graph_object(a);
             if (graph) return py::cast(f(variables_of(args)));
             if (args.size() == 1) return evaluate(f, args[0], py::none(), true);
             std::vector<Variable> params = f.arguments();
             if (params.size() != args.size())
               throw py::value_error(f.to_string() + " takes " + std::to_string(params.size()) +
                                     " arguments, given " + std::to_string(args.size()));
             py::dict data;
             for (size_t i = 0; i < params.size(); ++i) data[py::cast(params[i])] = args[i];
             return evaluate(f, data, py::none(), true);
           })
      .def("eval", &evaluate, py::arg("arguments") = py::none(), py::arg("outputs") = py::none(),
           py::arg("as_numpy") = true)
      .def(
          "grad",
          [](const Function& f, py::handle at, py::handle wrt, bool as_numpy) {
            ValueMap arguments = arguments_of(f, at);
            std::vector<Variable> targets;
            if (wrt.is_none())
              for (const Parameter& p : f.parameters()) targets.push_back(p);
            else
              targets = variables_of(wrt);
            ValueMap gradients;
            {
              py::gil_scoped_release nogil;
              gradients = f.grad(arguments, targets);
            }
            return results(gradients, targets, as_numpy);
          },
          py::arg("at"), py::arg("wrt") = py::none(), py::arg("as_numpy") = true)
      // A forward pass that keeps what backward needs: (state, {output: value}). Loom keeps
      // every value the pass computed: keep_for_backward is accepted for CNTK's scripts.
      .def(
          "forward",
          [](const Function& f, py::handle at, py::handle outputs, py::handle /*keep_for_backward*/,
             py::handle /*device*/, bool as_numpy) {
            ValueMap arguments = arguments_of(f, at);
            std::vector<Variable> wanted = outputs.is_none() ? f.outputs() : variables_of(outputs);
            std::pair<BackPropState, ValueMap> r;
            {
              py::gil_scoped_release nogil;
              r = f.forward(arguments, wanted);
            }
            return py::make_tuple(r.first, owned_results(r.second, as_numpy));
          },
          py::arg("arguments"), py::arg("outputs") = py::none(),
          py::arg("keep_for_backward") = py::none(), py::arg("device") = py::none(),
          py::arg("as_numpy") = true)
      // {variable: gradient} given one output's gradient {output: value}.
      .def(
          "backward",
          [](const Function& f, const BackPropState& state, py::dict root_gradients,
             py::handle variables, bool as_numpy) {
            ValueMap roots = value_map(root_gradients);
            std::vector<Variable> wanted = variables_of(variables);
            ValueMap gradients;
            {
              py::gil_scoped_release nogil;
              gradients = f.backward(state, roots, wanted);
            }
            return owned_results(gradients, as_numpy);
          },
          py::arg("state"), py::arg("root_gradients"), py::arg("variables"),
          py::arg("as_numpy") = true)
      .def(
          "clone",
          [](const Function& f, ParameterCloneMethod method, py::handle substitutions) {
            std::unordered_map<Variable, Variable> subs;
            if (!substitutions.is_none())
              for (auto [k, v] : substitutions.cast<py::dict>())
                subs.emplace(as_variable(k), as_variable(v));
            return f.clone(method, subs);
          },
          py::arg("method"), py::arg("substitutions") = py::none())
      .def(
          "replace_placeholders",
          [](Function& f, py::dict substitutions) {
            std::unordered_map<Variable, Variable> subs;
            for (auto [k, v] : substitutions) subs.emplace(as_variable(k), as_variable(v));
            f.replace_placeholders(subs);
            return f;
          },
          py::arg("substitutions"))
      .def(
          "save", [](const Function& f, const std::string& path) { save_model(f, path); },
          py::arg("filename"))
      .def_static(
          "load", [](const std::string& path) { return load_model(path); }, py::arg("model"))
      // model.W: a parameter by name or path; otherwise the single output's attribute (z.shape).
      .def("__getattr__", [](const Function& f, const std::string& name) -> py::object {
        if (name.rfind("__", 0) != 0) {
          for (const std::string& path : f.parameter_paths())
            if (path == name || path.substr(path.rfind('.') + 1) == name)
              return py::cast(f.parameter(name));
          if (f.outputs().size() == 1) return py::getattr(py::cast(f.output()), name.c_str());
        }
        throw py::attribute_error("'Function' object has no attribute '" + name + "'");
      });

  m.def(
      "input_variable",
      [](py::handle shape, py::handle dtype, bool needs_gradient, bool is_sparse,
         py::handle dynamic_axes, const std::string& name) {
        InputOptions o{.dtype = data_type(dtype),
                       .is_sparse = is_sparse,
                       .name = name,
                       .needs_gradient = needs_gradient};
        if (!dynamic_axes.is_none()) o.dynamic_axes = dynamic_axes.cast<std::vector<Axis>>();
        return input_variable(shape_of(shape), o);
      },
      py::arg("shape"), py::arg("dtype") = py::none(), py::arg("needs_gradient") = false,
      py::arg("is_sparse") = false, py::arg("dynamic_axes") = py::none(), py::arg("name") = "");
  m.def(
      "sequence_input_variable",
      [](py::handle shape, py::handle dtype, bool needs_gradient, bool is_sparse,
         py::handle sequence_axis, const std::string& name) {
        InputOptions o{.dtype = data_type(dtype),
                       .is_sparse = is_sparse,
                       .name = name,
                       .needs_gradient = needs_gradient};
        if (sequence_axis.is_none()) return sequence::input_variable(shape_of(shape), o);
        return sequence::input_variable(shape_of(shape), sequence_axis.cast<Axis>(), o);
      },
      py::arg("shape"), py::arg("dtype") = py::none(), py::arg("needs_gradient") = false,
      py::arg("is_sparse") = false, py::arg("sequence_axis") = py::none(), py::arg("name") = "");
  m.def(
      "constant",
      [](py::handle value, py::handle shape, py::handle dtype, const std::string& name) {
        const DataType t = data_type(dtype);
        if (shape.is_none())
          return constant(dense_view(value.is_none() ? py::float_(0.0) : value, t).deep_clone(),
                          name);
        NDArrayView v(t, shape_of(shape));
        v.fill(value.is_none() ? 0.0 : value.cast<double>());
        return constant(v, name);
      },
      py::arg("value") = py::none(), py::arg("shape") = py::none(), py::arg("dtype") = py::none(),
      py::arg("name") = "");
  m.def(
      "parameter",
      [](py::handle shape, py::handle init, py::handle dtype, const std::string& name) {
        const DataType t = data_type(dtype);
        if (py::isinstance<Initializer>(init))
          return parameter(shape_of(shape), init.cast<Initializer>(), t, name);
        if (init.is_none()) return parameter(shape_of(shape), glorot_uniform(), t, name);
        if (!shape.is_none() &&
            (py::isinstance<py::float_>(init) || py::isinstance<py::int_>(init)))
          return parameter(shape_of(shape), constant_initializer(init.cast<double>()), t, name);
        return parameter(dense_view(init, t).deep_clone(), name);
      },
      py::arg("shape") = py::none(), py::arg("init") = py::none(), py::arg("dtype") = py::none(),
      py::arg("name") = "");
  m.def(
      "placeholder",
      [](py::handle shape, py::handle dtype, py::handle dynamic_axes, const std::string& name) {
        if (shape.is_none()) return placeholder(name);
        std::vector<Axis> axes =
            dynamic_axes.is_none() ? default_batch_axes() : dynamic_axes.cast<std::vector<Axis>>();
        return placeholder(shape_of(shape), data_type(dtype), axes, name);
      },
      py::arg("shape") = py::none(), py::arg("dtype") = py::none(),
      py::arg("dynamic_axes") = py::none(), py::arg("name") = "");
  m.def(
      "combine",
      [](py::handle operands, const std::string& name) {
        return combine(variables_of(operands), name);
      },
      py::arg("operands"), py::arg("name") = "");
}

}  // namespace loom::python
