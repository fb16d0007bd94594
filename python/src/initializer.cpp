// cntk.initializer: parameter initializers (loom/graph/initializer.h).
#include "python/src/binding.h"

namespace loom::python {

void add_initializer(py::module_ m) {
  py::class_<Initializer>(m, "Initializer");
  m.def("zeros", &zeros);
  m.def("constant_initializer", &constant_initializer, py::arg("value"));
  m.def("uniform", &uniform, py::arg("scale"), py::arg("seed") = py::none());
  m.def("normal", &normal, py::arg("scale"), py::arg("seed") = py::none());
  m.def("truncated_normal", &truncated_normal, py::arg("stdev"), py::arg("seed") = py::none());
  using Scaled = Initializer (*)(double, int, int, std::optional<uint64_t>);
  for (auto [name, f] : {std::pair<const char*, Scaled>{"glorot_uniform", &glorot_uniform},
                         {"glorot_normal", &glorot_normal},
                         {"he_uniform", &he_uniform},
                         {"he_normal", &he_normal},
                         {"xavier", &xavier}})
    m.def(name, f, py::arg("scale") = kDefaultParamInitScale,
          py::arg("output_rank") = kDefaultParamInitOutputRank,
          py::arg("filter_rank") = kDefaultParamInitFilterRank, py::arg("seed") = py::none());
  m.def("bilinear", &bilinear, py::arg("kernel_width"), py::arg("kernel_height"));
  m.def("initializer_with_rank", &initializer_with_rank, py::arg("initializer"),
        py::arg("output_rank") = py::none(), py::arg("filter_rank") = py::none());
}

}  // namespace loom::python
