// CNTK's cntk.eval: the Evaluator.
#include "python/src/binding.h"

namespace loom::python {

void add_eval(py::module_ m) {
  py::class_<Evaluator, std::shared_ptr<Evaluator>>(m, "Evaluator")
      .def(py::init([](py::handle metric, ProgressWriters writers) {
             return std::make_shared<Evaluator>(as_variable(metric), writers);
           }),
           py::arg("eval_function"), py::arg("progress_writers") = ProgressWriters{},
           py::keep_alive<1, 3>())
      .def(
          "test_minibatch",
          [](Evaluator& e, py::dict arguments, py::handle device) {
            check_device(device);
            return with_minibatch(arguments,
                                  [&](const auto& data) { return e.test_minibatch(data); });
          },
          py::arg("arguments"), py::arg("device") = py::none())
      .def("summarize_test_progress", &Evaluator::summarize_test_progress)
      .def_property_readonly("evaluation_function", &Evaluator::evaluation_function);
}

}  // namespace loom::python
