// The loom._loom extension module: Loom's C++ core for the pure-Python package python/loom.
// Each file of python/src adds the names of one CNTK module to the submodule of that name
// (loom._loom.core for cntk.core, loom._loom.train.distributed for cntk.train.distributed, ...);
// this one adds Loom's error types and compute precision at the top and makes the submodules.
#include "python/src/binding.h"

namespace loom::python {

namespace {

// Loom's errors as Python exceptions that are also the matching built-in ones.
void add_errors(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  auto both = [&](const char* name, PyObject* builtin) {
    return py::exception<Error>(m, name, py::make_tuple(error, py::handle(builtin)));
  };
  static py::exception<Error> shape = both("ShapeError", PyExc_ValueError);
  static py::exception<Error> argument = both("ArgumentError", PyExc_ValueError);
  static py::exception<Error> data = both("DataError", PyExc_ValueError);
  static py::exception<Error> io = both("IOError", PyExc_OSError);
  static py::exception<Error> state = both("StateError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      shape(e.what());
    } catch (const ArgumentError& e) {
      argument(e.what());
    } catch (const DataError& e) {
      data(e.what());
    } catch (const IOError& e) {
      io(e.what());
    } catch (const StateError& e) {
      state(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });
}

// Loom's own names at the top: the errors and the compute precision.
void add_top(py::module_& m) {
  add_errors(m);
  m.def(
      "set_compute_precision",
      [](const std::string& precision) { set_compute_precision(precision_of(precision)); },
      py::arg("precision"));
  m.def("get_compute_precision", [] { return std::string(to_string(get_compute_precision())); });
  m.def("bf16_supported", &bf16_supported);
}

}  // namespace

ComputePrecision precision_of(const std::string& name) {
  if (name == "float32") return ComputePrecision::Float32;
  if (name == "bf16") return ComputePrecision::BFloat16;
  throw ArgumentError("compute precision '" + name + "': use 'float32' or 'bf16'");
}

py::module_ submodule(py::module_& parent, const char* name) {
  py::module_ m = parent.def_submodule(name);
  // Registered as a module, so that `from loom._loom.core import Value` imports it.
  py::module_::import("sys").attr("modules")[m.attr("__name__")] = m;
  return m;
}

}  // namespace loom::python

PYBIND11_MODULE(_loom, m) {
  using namespace loom::python;
  m.doc() = "Loom's C++ core; use it through the loom package";
  add_top(m);
  add_device(submodule(m, "device"));
  add_axis(submodule(m, "axis"));
  add_core(submodule(m, "core"));
  add_cntk_py(submodule(m, "cntk_py"));
  py::module_ variables = submodule(m, "variables");
  py::module_ ops = submodule(m, "ops");
  py::module_ functions = submodule(ops, "functions");
  declare_variables(variables);
  declare_functions(functions);
  add_variables(variables);
  add_ops_functions(functions);
  add_user_function(functions);
  add_ops(ops);
  add_ops_sequence(submodule(ops, "sequence"));
  add_initializer(submodule(m, "initializer"));
  add_layers(submodule(m, "layers"));
  add_learners(submodule(m, "learners"));
  add_io(submodule(m, "io"));
  py::module_ logging = submodule(m, "logging");
  add_logging(logging);
  add_logging_graph(submodule(logging, "graph"));
  add_eval(submodule(m, "eval"));
  py::module_ train = submodule(m, "train");
  add_train(train);
  add_distributed(submodule(train, "distributed"));
  add_debugging(submodule(m, "debugging"));
}
