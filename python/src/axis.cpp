// CNTK's cntk.axis: static and dynamic axes.
#include "python/src/binding.h"

namespace loom::python {

void add_axis(py::module_ m) {
  py::class_<Axis>(m, "Axis")
      .def(py::init<int>())
      .def(py::init(&Axis::dynamic_axis_named))  // CNTK's Axis('question'): a named dynamic axis
      .def_static("default_batch_axis", &Axis::default_batch_axis)
      .def_static("default_dynamic_axis", &Axis::default_dynamic_axis)
      .def_static("new_unique_dynamic_axis", &Axis::new_unique_dynamic_axis, py::arg("name"))
      .def_static("new_leading_axis", &Axis::new_leading_axis)
      .def_static("all_static_axes", &Axis::all_static_axes)
      .def_static("all_axes", &Axis::all_axes)
      .def_static("default_input_variable_dynamic_axes", &default_sequence_axes)
      .def_static("unknown_dynamic_axes", &unknown_dynamic_axes)
      .def_property_readonly("is_static_axis", &Axis::is_static)
      .def_property_readonly("is_dynamic_axis", &Axis::is_dynamic)
      .def_property_readonly("is_batch_axis", &Axis::is_batch)
      .def_property_readonly("is_sequence_axis", &Axis::is_sequence)
      .def_property_readonly("is_ordered", &Axis::is_ordered)
      .def(
          "static_axis_index",
          [](const Axis& a, bool checked) {
            if (checked && !a.is_static())
              throw ArgumentError("Cannot query the static axis index for a non-static axis (" +
                                  a.to_string() + ")");
            return a.static_index();
          },
          py::arg("checked") = true)
      .def_property_readonly("name", &Axis::name)
      .def("__eq__", &Axis::operator==)
      .def("__hash__", [](const Axis& a) { return py::hash(py::str(a.to_string())); })
      .def("__repr__", &Axis::to_string);
}

}  // namespace loom::python
