// CNTK's cntk.variables (loom._loom.variables): Variable, Parameter, Constant and VariableKind,
// and the Parameter and Constant constructors that cntk.ops' builders share.
#include "python/src/binding.h"

namespace loom::python {

std::vector<Variable> variables_of(py::handle items) {
  std::vector<Variable> out;
  for (py::handle x : items) out.push_back(as_variable(x));
  return out;
}

bool is_graph_object(py::handle x) {
  return py::isinstance<Variable>(x) || py::isinstance<Function>(x);
}

namespace {

// A number, as CNTK's np.isscalar takes it (Python or numpy).
bool is_number(py::handle x) {
  return py::isinstance<py::float_>(x) || py::isinstance<py::int_>(x) ||
         py::isinstance(x, py::module_::import("numpy").attr("generic"));
}

// The element type of a parameter or constant made from `value` (CNTK's rules): the dtype
// given; else a float64 array's (when array_dtype_wins: cntk.parameter and cntk.constant, not
// the classes, whose dtype defaults to float32); else float32 (integer arrays too).
DataType element_type(py::handle value, py::handle dtype, bool array_dtype_wins) {
  if (!dtype.is_none()) return data_type(dtype);
  if (array_dtype_wins && py::isinstance<py::array>(value) &&
      py::reinterpret_borrow<py::array>(value).dtype().equal(py::dtype::of<double>()))
    return DataType::Float64;
  return DataType::Float32;
}

}  // namespace

Parameter make_parameter(py::handle shape, py::handle init, py::handle dtype, py::handle device,
                         const std::string& name, bool array_dtype_wins) {
  check_device(device);
  const DataType t = element_type(init, dtype, array_dtype_wins);
  if (py::isinstance<Initializer>(init)) {
    if (shape.is_none())
      throw ArgumentError("parameter '" + name + "': an initializer needs a shape");
    return parameter(shape_of(shape), init.cast<Initializer>(), t, name);
  }
  if (init.is_none() || is_number(init)) {
    const double fill = init.is_none() ? 0.0 : init.cast<double>();
    return parameter(shape.is_none() ? NDShape{} : shape_of(shape), constant_initializer(fill), t,
                     name);
  }
  return parameter(dense_view(init, t).deep_clone(), name);
}

Constant make_constant(py::handle value, py::handle shape, py::handle dtype, py::handle device,
                       const std::string& name, bool array_dtype_wins) {
  check_device(device);
  const DataType t = element_type(value, dtype, array_dtype_wins);
  if (value.is_none() || is_number(value)) {
    NDArrayView v(t, shape.is_none() ? NDShape{} : shape_of(shape));
    v.fill(value.is_none() ? 0.0 : value.cast<double>());
    return constant(v, name);
  }
  return constant(dense_view(value, t).deep_clone(), name);
}

void declare_variables(py::module_ m) {
  py::class_<Variable>(m, "Variable");
}

void add_variables(py::module_ m) {
  py::enum_<VariableKind>(m, "VariableKind")
      .value("Input", VariableKind::Input)
      .value("Output", VariableKind::Output)
      .value("Parameter", VariableKind::Parameter)
      .value("Constant", VariableKind::Constant)
      .value("Placeholder", VariableKind::Placeholder);

  const InputOptions input;  // the defaults
  class_of<Variable>()
      .def(py::init<const Function&>())
      // CNTK's Variable(...): an input of this type (by default a sequence, as CNTK's).
      .def(py::init([](py::handle shape, py::handle dtype, bool needs_gradient, bool is_sparse,
                       std::vector<Axis> dynamic_axes, const std::string& name) {
             return input_variable(shape.is_none() ? NDShape{} : shape_of(shape),
                                   InputOptions{.dtype = data_type(dtype),
                                                .is_sparse = is_sparse,
                                                .name = name,
                                                .needs_gradient = needs_gradient,
                                                .dynamic_axes = std::move(dynamic_axes)});
           }),
           py::arg("shape") = py::none(), py::arg("dtype") = py::none(),
           py::arg("needs_gradient") = input.needs_gradient, py::arg("is_sparse") = input.is_sparse,
           py::arg("dynamic_axes") = default_sequence_axes(), py::arg("name") = "")
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
      .def("as_parameter",
           [](const Variable& v) {
             if (!v.is_parameter()) throw py::type_error("cannot be converted into a Parameter");
             return Parameter(v);
           })
      .def("as_constant",
           [](const Variable& v) {
             if (!v.is_constant()) throw py::type_error("cannot be converted into a Constant");
             return Constant(v);
           })
      .def("__hash__", [](const Variable& v) { return std::hash<Variable>()(v); })
      .def("__eq__", [](const Variable& a,
                        py::handle b) { return is_graph_object(b) && a == b.cast<Variable>(); })
      .def("__ne__", [](const Variable& a,
                        py::handle b) { return !is_graph_object(b) || !(a == b.cast<Variable>()); })
      .def("__repr__", &Variable::describe);
  py::implicitly_convertible<Function, Variable>();

  py::class_<Parameter, Variable>(m, "Parameter")
      .def(py::init([](py::handle shape, py::handle init, py::handle dtype, py::handle device,
                       const std::string& name) {
             return make_parameter(shape, init, dtype, device, name, false);
           }),
           py::arg("shape") = py::none(), py::arg("init") = py::none(),
           py::arg("dtype") = py::none(), py::arg("device") = py::none(), py::arg("name") = "");
  py::class_<Constant, Variable>(m, "Constant")
      .def(py::init([](py::handle value, py::handle shape, py::handle dtype, py::handle device,
                       const std::string& name) {
             return make_constant(value, shape, dtype, device, name, false);
           }),
           py::arg("value") = py::none(), py::arg("shape") = py::none(),
           py::arg("dtype") = py::none(), py::arg("device") = py::none(), py::arg("name") = "");
}

}  // namespace loom::python
