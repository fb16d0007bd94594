// CNTK's cntk.ops.functions (loom._loom.ops.functions): Function, the graph as a Python object
// evaluated on numpy data, with CloneMethod, ModelFormat and BackPropState.
#include "loom/graph/graph_impl.h"
#include "python/src/binding.h"

namespace loom::python {

namespace {

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

// CNTK's update_signature: the placeholders among f's arguments (in signature order) become
// inputs of the given types (a shape, or a loom.layers.typing type), in place.
void update_signature(Function& f, const py::args& types, const py::kwargs& named_types) {
  const std::vector<Variable> args = f.arguments();
  if (types.size() > args.size())
    throw py::type_error("update_signature: " + std::to_string(types.size()) +
                         " types given for the " + std::to_string(args.size()) + " arguments of " +
                         f.to_string());
  const py::object input_for = py::module_::import("loom.variables").attr("_input_for");
  std::unordered_map<Variable, Variable> substitutions;
  auto bind = [&](const Variable& p, py::handle type) {
    if (!p.is_placeholder())
      throw py::type_error("update_signature: argument '" + p.name() +
                           "' already has a type: " + p.type_string());
    if (!substitutions.emplace(p, input_for(type, p.name()).cast<Variable>()).second)
      throw py::type_error("update_signature: argument '" + p.name() + "' is given twice");
  };
  for (size_t i = 0; i < types.size(); ++i) bind(args[i], types[i]);
  for (auto [name, type] : named_types) bind(f.argument(name.cast<std::string>()), type);
  f.replace_placeholders(substitutions);
}

// A Python function over Variables as a Function (CNTK's @Function): one placeholder per
// required parameter of the Python function, named after it and bound in that order by a later
// call; a tuple result gives a function of several outputs.
Function function_from_callable(const py::function& f, bool make_block, py::handle op_name,
                                const std::string& name) {
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
  // CNTK's @BlockFunction: the composite as a block of new placeholders, which a call binds.
  if (make_block) {
    if (op_name.is_none()) throw py::type_error("Function(make_block=True) needs an op_name");
    std::vector<std::pair<Variable, Variable>> arguments;
    for (const Variable& p : placeholders) arguments.emplace_back(p, placeholder(p.name()));
    composite = as_block(composite, arguments, op_name.cast<std::string>(), name);
    placeholders.clear();
    for (const auto& [inner, outer] : arguments) placeholders.push_back(outer);
  }
  // Annotated parameters (Python 3 annotations, or @Signature) give their arguments types.
  py::dict annotations = py::getattr(f, "__annotations__", py::dict());
  py::kwargs typed;
  for (const Variable& p : placeholders)
    if (annotations.contains(p.name())) typed[py::str(p.name())] = annotations[py::str(p.name())];
  if (!typed.empty()) update_signature(composite, py::args(), typed);
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

// {variable: value}: forward's and backward's values are copies of the executor's
// (Executor::output_value, gradient_value), which later passes leave alone; a packed one stays
// packed.
py::dict owned_results(const ValueMap& values, bool as_numpy) {
  py::dict d;
  for (const auto& [v, value] : values) d[py::cast(v)] = result(v, value, as_numpy);
  return d;
}

// The arguments' values from eval's data: a dict {Variable or name: data}, or data for the
// only argument.
ValueMap arguments_of(const Function& f, py::handle data) {
  if (py::isinstance<py::dict>(data)) {
    py::dict by_variable;
    for (auto [key, item] : data.cast<py::dict>())
      by_variable[py::isinstance<py::str>(key) ? py::cast(f.argument(key.cast<std::string>()))
                                               : py::reinterpret_borrow<py::object>(key)] = item;
    return value_map(by_variable);
  }
  std::vector<Variable> args = f.arguments();
  if (args.size() != 1)
    throw py::value_error(f.to_string() + " takes " + std::to_string(args.size()) +
                          " arguments: give their data as a dict {argument: data}");
  ValueMap values;
  values.emplace(args[0], value_for(args[0], data));
  return values;
}

py::object evaluate(const Function& f, py::handle data, py::handle outputs, py::handle device,
                    bool as_numpy) {
  check_device(device);
  ValueMap arguments = data.is_none() ? ValueMap{} : arguments_of(f, data);
  std::vector<Variable> wanted = outputs.is_none() ? f.outputs() : variables_of(outputs);
  ValueMap values;
  {
    py::gil_scoped_release nogil;
    values = f.eval(arguments, wanted);
  }
  return results(values, wanted, as_numpy);
}

// CNTK's root_function: a composite's single output's function (a primitive or a block), else
// the function itself.
Function root_function(const Function& f) {
  return f.is_composite() && f.outputs().size() == 1 && f.output().is_output() ? f.output().owner()
                                                                               : f;
}

// CNTK's Function.load: a model from a path, or from its bytes (bytes or bytearray).
Function load_function(py::handle model, py::handle device, ModelFormat format) {
  check_device(device);
  if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model)) {
    const std::string bytes =
        py::isinstance<py::bytes>(model)
            ? model.cast<std::string>()
            : py::bytes(py::reinterpret_borrow<py::object>(model)).cast<std::string>();
    const std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.data()),
                                        bytes.size());
    return format == ModelFormat::ONNX ? load_onnx_from_bytes(view) : load_model_from_bytes(view);
  }
  return load_model(model.cast<std::string>(), format);
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

void declare_functions(py::module_ m) {
  py::class_<Function>(m, "Function");
}

void add_ops_functions(py::module_ m) {
  py::class_<BackPropState>(m, "BackPropState");

  py::enum_<ModelFormat>(m, "ModelFormat")
      .value("CNTKv2", ModelFormat::Loom)
      .value("ONNX", ModelFormat::ONNX);
  m.attr("kDefaultModelFormat") = kDefaultModelFormat;  // load_model's default

  py::enum_<ParameterCloneMethod>(m, "CloneMethod")
      .value("share", ParameterCloneMethod::Share)
      .value("clone", ParameterCloneMethod::Clone)
      .value("freeze", ParameterCloneMethod::Freeze);

  class_of<Function>()
      .def(py::init(&function_from_callable), py::arg("f"), py::arg("make_block") = false,
           py::arg("op_name") = py::none(), py::arg("name") = "")
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
      .def_property_readonly("is_block", &Function::is_block)
      .def_property_readonly("block_root", &Function::block_root)
      .def_property_readonly("block_arguments_mapping", &Function::block_arguments_mapping)
      .def(
          "find_all_with_name",
          [](const Function& f, const std::string& name, int depth) {
            return node_objects(find_all_with_name(f, name, depth));
          },
          py::arg("name"), py::arg("depth") = kBlocksAsNodes)
      .def(
          "find_by_name",
          [](const Function& f, const std::string& name, int depth) {
            return find_one_by_name(f, name, depth);
          },
          py::arg("name"), py::arg("depth") = kBlocksAsNodes)
      .def_property_readonly("root_function", &root_function)
      .def_property_readonly("is_primitive", [](const Function& f) { return !f.is_composite(); })
      .def(
          "set_attribute",
          [](const Function& f, const std::string& name, py::handle value) {
            f.set_attribute(name, from_python(value));
          },
          py::arg("name"), py::arg("value"))
      // CNTK's custom_attributes: a dict saved with the model (assigning replaces it).
      .def_property(
          "custom_attributes",
          [](const Function& f) { return to_python(f.custom_attributes().map()); },
          [](const Function& f, py::handle d) {
            if (!py::isinstance<py::dict>(d))
              throw py::type_error("custom_attributes takes a dict");
            f.custom_attributes() = Dictionary(from_python(d).get<DictionaryMap>());
          })
      .def("update_signature",
           [](Function& f, py::args types, py::kwargs named_types) {
             update_signature(f, types, named_types);
           })
      .def_property_readonly("signature", &Function::arguments)
      // CNTK's composition operators: f >> g is g(f), g << f is g(f).
      .def("__rshift__", [](py::object f, py::object g) { return g(f); })
      .def("__lshift__", [](py::object g, py::object f) { return g(f); })
      // {argument: value} of a call's values: positional in signature order, then by name.
      .def("argument_map",
           [](const Function& f, py::args args, py::kwargs kwargs) {
             const std::vector<Variable> params = f.arguments();
             if (args.size() > params.size())
               throw py::type_error(f.to_string() + " takes " + std::to_string(params.size()) +
                                    " arguments, given " + std::to_string(args.size()));
             py::dict map;
             for (size_t i = 0; i < args.size(); ++i) map[py::cast(params[i])] = args[i];
             for (auto [name, value] : kwargs) {
               py::object p = py::cast(f.argument(name.cast<std::string>()));
               if (map.contains(p))
                 throw py::type_error("argument_map: '" + name.cast<std::string>() +
                                      "' is given twice");
               map[p] = value;
             }
             return map;
           })
      // CNTK's Function.with_signature(types...): a decorator, @Function with @Signature.
      .def_static("with_signature",
                  [](py::args types, py::kwargs named_types) {
                    py::object signature =
                        py::module_::import("loom.layers.typing").attr("Signature");
                    py::object annotate = signature(*types, **named_types);
                    return py::cpp_function([annotate](const py::function& f) {
                      return function_from_callable(annotate(f).cast<py::function>(), false,
                                                    py::none(), "");
                    });
                  })
      .def_property_readonly("type", [](const Function& f) { return f.output(); })
      .def("parameter", &Function::parameter, py::arg("path"))
      .def("argument", &Function::argument, py::arg("name"))
      .def_property_readonly("parameter_paths", &Function::parameter_paths)
      .def("__str__", &Function::to_string)
      .def("__repr__", &Function::to_string)
      .def("__hash__", [](const Function& f) { return f.hash(); })
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
             if (args.size() == 1) return evaluate(f, args[0], py::none(), py::none(), true);
             std::vector<Variable> params = f.arguments();
             if (params.size() != args.size())
               throw py::value_error(f.to_string() + " takes " + std::to_string(params.size()) +
                                     " arguments, given " + std::to_string(args.size()));
             py::dict data;
             for (size_t i = 0; i < params.size(); ++i) data[py::cast(params[i])] = args[i];
             return evaluate(f, data, py::none(), py::none(), true);
           })
      .def("eval", &evaluate, py::arg("arguments") = py::none(), py::arg("outputs") = py::none(),
           py::arg("device") = py::none(), py::arg("as_numpy") = true)
      .def(
          "grad",
          // CNTK's: the gradient of the output (or of grad_root) summed over the batch, with
          // respect to wrt (default: the arguments that need gradients); given outputs, also
          // their values: (gradients, values).
          [](const Function& f, py::handle at, py::handle wrt, py::handle outputs,
             py::handle device, bool as_numpy, py::handle grad_root) -> py::object {
            check_device(device);
            ValueMap arguments = arguments_of(f, at);
            std::vector<Variable> targets;
            if (wrt.is_none()) {
              for (const Variable& a : f.arguments())
                if (a.needs_gradient()) targets.push_back(a);
              if (targets.empty())
                throw py::value_error("None of the Function '" + f.to_string() +
                                      "' arguments have 'needs_gradient == True'");
            } else {
              targets = variables_of(wrt);
            }
            const Function root = grad_root.is_none() ? f : combine({as_variable(grad_root)});
            const std::vector<Variable> wanted =
                outputs.is_none() ? std::vector<Variable>{} : variables_of(outputs);
            ValueMap gradients, values;
            {
              py::gil_scoped_release nogil;
              gradients = root.grad(arguments, targets);
              if (!wanted.empty()) values = f.eval(arguments, wanted);
            }
            py::object g = results(gradients, targets, as_numpy);
            if (wanted.empty()) return g;
            return py::make_tuple(g, results(values, wanted, as_numpy));
          },
          py::arg("at"), py::arg("wrt") = py::none(), py::arg("outputs") = py::none(),
          py::arg("device") = py::none(), py::arg("as_numpy") = true,
          py::arg("grad_root") = py::none())
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
      // ModelFormat.CNTKv2 is Loom's own format (docs/decisions.md: Loom writes no CNTK
      // protobuf).
      // The only placeholder bound to substitution, in place (CNTK's replace_placeholder).
      .def(
          "replace_placeholder",
          [](Function& f, py::handle substitution) {
            const std::vector<Variable> placeholders = f.placeholders();
            if (placeholders.size() != 1)
              throw ArgumentError("replace_placeholder: " + f.to_string() + " has " +
                                  std::to_string(placeholders.size()) +
                                  " placeholders, not one; use replace_placeholders");
            f.replace_placeholders({{placeholders[0], as_variable(substitution)}});
            return f;
          },
          py::arg("substitution"))
      // The op's attributes (of the root function for a composite), as Python values.
      .def_property_readonly(
          "attributes",
          [](const Function& f) {
            return to_python(DictionaryValue(root_function(f).attributes().map()));
          })
      .def(
          "save",
          [](const Function& f, const std::string& filename, ModelFormat format,
             bool use_external_files_to_store_parameters) {
            if (use_external_files_to_store_parameters)
              throw ArgumentError(
                  "save: use_external_files_to_store_parameters=True is not "
                  "supported: Loom writes the parameters into the model file");
            save_model(f, filename, format);
          },
          py::arg("filename"), py::arg("format") = kDefaultModelFormat,
          py::arg("use_external_files_to_store_parameters") = false)
      .def(
          "restore",
          [](const Function& f, const std::string& filename) { restore_model(f, filename); },
          py::arg("filename"))
      .def_static("load", &load_function, py::arg("model"), py::arg("device") = py::none(),
                  py::arg("format") = kDefaultModelFormat)
      // model.W: a parameter by name or path; otherwise the single output's attribute (z.shape).
      // ... or the one node of that name (a Label's: model.hidden), as CNTK's. A block (a
      // layer's call: model.classify) looks inside itself first, as CNTK's: model.classify.b.
      .def("__getattr__", [](const Function& f, const std::string& name) -> py::object {
        if (name.rfind("__", 0) != 0) {
          if (f.is_block()) {
            const std::vector<GraphNode> inside = find_all_with_name(f.block_root(), name, 1);
            if (inside.size() == 1) return node_object(inside[0]);
          }
          for (const std::string& path : f.parameter_paths())
            if (path == name || path.substr(path.rfind('.') + 1) == name)
              return py::cast(f.parameter(name));
          if (f.outputs().size() == 1) {
            py::object output = py::cast(f.output());
            if (py::hasattr(output, name.c_str())) return output.attr(name.c_str());
          }
          const std::vector<GraphNode> found = find_all_with_name(f, name);
          if (found.size() == 1) return node_object(found[0]);
        }
        throw py::attribute_error("'Function' object has no attribute '" + name + "'");
      });
}

}  // namespace loom::python
