// CNTK's cntk.ops.sequence (cntk.sequence): sequence inputs, the ops along the sequence axis and
// the recurrence (past_value, future_value, delay).
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
  m.def("softmax", &sequence::softmax, py::arg("seq"), py::arg("name") = "");
  m.def(
      "gather",
      [](const Variable& x, const Variable& cond, const std::string& n) {
        return sequence::gather(x, cond, n);
      },
      py::arg("seq"), py::arg("condition"), py::arg("name") = "");
  m.def("unpack", &sequence::unpack, py::arg("seq"), py::arg("padding_value"),
        py::arg("no_mask_output") = sequence::kUnpackNoMaskOutput, py::arg("name") = "");
  m.def("scatter", &sequence::scatter, py::arg("seq"), py::arg("condition"), py::arg("name") = "");
  auto delay = [&m](const char* name, auto with_state, auto without_state) {
    m.def(
        name,
        [with_state, without_state](const Variable& x, py::handle initial_state, size_t time_step,
                                    const std::string& n) {
          if (initial_state.is_none()) return without_state(x, time_step, n);
          return with_state(x, as_variable(initial_state, x.dtype()), time_step, n);
        },
        py::arg("x"), py::arg("initial_state") = py::none(),
        py::arg("time_step") = sequence::kDelayTimeStep, py::arg("name") = "");
  };
  m.def(
      "delay",
      [](const Variable& x, py::handle initial_state, int64_t time_step, const std::string& n) {
        if (initial_state.is_none()) return sequence::delay(x, time_step, n);
        return sequence::delay(x, as_variable(initial_state, x.dtype()), time_step, n);
      },
      py::arg("x"), py::arg("initial_state") = py::none(),
      py::arg("time_step") = sequence::kDelayTimeStep, py::arg("name") = "");
  delay(
      "past_value",
      [](const Variable& x, const Variable& s, size_t t, const std::string& n) {
        return sequence::past_value(x, s, t, n);
      },
      [](const Variable& x, size_t t, const std::string& n) {
        return sequence::past_value(x, t, n);
      });
  delay(
      "future_value",
      [](const Variable& x, const Variable& s, size_t t, const std::string& n) {
        return sequence::future_value(x, s, t, n);
      },
      [](const Variable& x, size_t t, const std::string& n) {
        return sequence::future_value(x, t, n);
      });
}

}  // namespace loom::python
