// CNTK's cntk.ops.sequence (cntk.sequence): sequence inputs; the ops along the sequence axis come
// from the op table (python/loom/ops/_table.py).
#include "python/src/binding.h"

namespace loom::python {

void add_ops_sequence(py::module_ m) {
  const InputOptions input;  // the defaults
  m.def(
      "input_variable",
      [](py::handle shape, py::handle dtype, bool needs_gradient, bool is_sparse,
         py::handle sequence_axis, const std::string& name) {
        InputOptions o{.dtype = data_type(dtype),
                       .is_sparse = is_sparse,
                       .name = name,
                       .needs_gradient = needs_gradient};
        if (sequence_axis.is_none()) return sequence::input_variable(shape_of(shape), o);
        return sequence::input_variable(shape_of(shape), sequence_axis.cast<Axis>(), o);
      },
      py::arg("shape"), py::arg("dtype") = py::none(),
      py::arg("needs_gradient") = input.needs_gradient, py::arg("is_sparse") = input.is_sparse,
      py::arg("sequence_axis") = py::none(), py::arg("name") = "");
}

}  // namespace loom::python
