// CNTK's cntk.random: tensors of random numbers, of a shape or like a variable's; python/loom/
// random.py gives them CNTK's signatures and checks the shapes and seeds (None: auto_select).
#include "python/src/binding.h"

namespace loom::python {

void add_random(py::module_ m) {
  using Seed = std::optional<uint64_t>;
  m.def("_uniform_random", [](py::handle shape, py::handle dtype, double low, double high,
                              Seed seed, const std::string& n) {
    return uniform_random(shape_of(shape), data_type(dtype), {low, high, seed}, n);
  });
  m.def("_normal_random", [](py::handle shape, py::handle dtype, double mean, double scale,
                             Seed seed, const std::string& n) {
    return normal_random(shape_of(shape), data_type(dtype), {mean, scale, seed}, n);
  });
  m.def("_gumbel_random", [](py::handle shape, py::handle dtype, double loc, double scale,
                             Seed seed, const std::string& n) {
    return gumbel_random(shape_of(shape), data_type(dtype), {loc, scale, seed}, n);
  });
  m.def("_bernoulli_random",
        [](py::handle shape, py::handle dtype, double mean, Seed seed, const std::string& n) {
          return bernoulli_random(shape_of(shape), data_type(dtype), {mean, seed}, n);
        });
  m.def("_uniform_random_like",
        [](py::handle x, double low, double high, Seed seed, const std::string& n) {
          return uniform_random_like(as_variable(x), {low, high, seed}, n);
        });
  m.def("_normal_random_like",
        [](py::handle x, double mean, double scale, Seed seed, const std::string& n) {
          return normal_random_like(as_variable(x), {mean, scale, seed}, n);
        });
  m.def("_gumbel_random_like",
        [](py::handle x, double loc, double scale, Seed seed, const std::string& n) {
          return gumbel_random_like(as_variable(x), {loc, scale, seed}, n);
        });
  m.def("_bernoulli_random_like", [](py::handle x, double mean, Seed seed, const std::string& n) {
    return bernoulli_random_like(as_variable(x), {mean, seed}, n);
  });
}

}  // namespace loom::python
