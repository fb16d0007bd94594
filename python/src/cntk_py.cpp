// CNTK's cntk.cntk_py names outside the other modules: Dictionary (and the conversions of its
// values to and from Python's), the random seed and the CPU thread count.
#include "loom/graph/debugging.h"
#include "loom/graph/native_user_function.h"
#include "python/src/binding.h"

namespace loom::python {

py::object to_python(const DictionaryValue& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::monostate>) {
          return py::none();
        } else if constexpr (std::is_same_v<X, NDShape>) {
          return shape_tuple(x);
        } else if constexpr (std::is_same_v<X, DictionaryVector>) {
          py::list l;
          for (const auto& e : x) l.append(to_python(e));
          return l;
        } else if constexpr (std::is_same_v<X, DictionaryMap>) {
          py::dict d;
          for (const auto& [k, e] : x) d[py::str(k)] = to_python(e);
          return d;
        } else if constexpr (std::is_same_v<X, NDArrayView>) {
          return to_numpy(x, true);
        } else {
          return py::cast(x);
        }
      },
      v.storage());
}

DictionaryValue from_python(py::handle v) {
  if (v.is_none()) return {};
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) {
    if (v.cast<py::int_>() < py::int_(0)) return v.cast<int64_t>();
    return v.cast<uint64_t>();
  }
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::dict>(v)) {
    DictionaryMap m;
    for (auto [k, e] : v.cast<py::dict>()) m[k.cast<std::string>()] = from_python(e);
    return m;
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    DictionaryVector l;
    for (py::handle e : v) l.push_back(from_python(e));
    return l;
  }
  return dense_view(v).deep_clone();
}

void add_cntk_py(py::module_ m) {
  py::class_<Dictionary>(m, "Dictionary")
      .def(py::init([](py::dict d) { return Dictionary(from_python(d).get<DictionaryMap>()); }))
      .def("__getitem__",
           [](const Dictionary& d, const std::string& k) { return to_python(d.at(k)); })
      .def("__contains__", &Dictionary::contains)
      .def("__len__", &Dictionary::size)
      .def("keys",
           [](const Dictionary& d) {
             py::list keys;
             for (const auto& [k, v] : d.map()) keys.append(k);
             return keys;
           })
      .def("__repr__", [](const Dictionary& d) {
        return py::repr(to_python(DictionaryValue(d.map()))).cast<std::string>();
      });
  py::implicitly_convertible<py::dict, Dictionary>();

  m.def("force_deterministic_algorithms", &force_deterministic_algorithms);
  m.def("set_fixed_random_seed", &set_fixed_random_seed, py::arg("value"));
  m.def("set_max_num_cpu_threads", &set_max_num_cpu_threads, py::arg("num_cpu_threads"));
  m.def("get_max_num_cpu_threads", &get_max_num_cpu_threads);
  m.def("is_native_user_function_registered", &is_native_user_function_registered,
        py::arg("unique_op_name"));
}

}  // namespace loom::python
