// The loom._loom extension module: Loom's C++ core for the pure-Python package python/loom.
// This file adds the error types and the core data types (devices, axes, tensors, values,
// dictionaries); the other files of python/src add the graph, ops, layers, learners, readers and
// training.
#include <cstring>

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

namespace {

// CNTK's read_only=True: Loom's tensors have no read-only flag yet.
void check_writable(bool read_only) {
  if (read_only)
    throw ArgumentError(
        "read_only=True: Loom's tensors cannot be marked read-only; leave read_only False");
}

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

}  // namespace

ComputePrecision precision_of(const std::string& name) {
  if (name == "float32") return ComputePrecision::Float32;
  if (name == "bf16") return ComputePrecision::BFloat16;
  throw ArgumentError("compute precision '" + name + "': use 'float32' or 'bf16'");
}

void add_core(py::module_& m) {
  add_errors(m);

  py::enum_<DeviceKind>(m, "DeviceKind")
      .value("CPU", DeviceKind::CPU)
      .value("GPU", DeviceKind::GPU);
  py::class_<DeviceDescriptor>(m, "DeviceDescriptor")
      .def_static("cpu_device", &DeviceDescriptor::cpu_device)
      .def_static("gpu_device", &DeviceDescriptor::gpu_device, py::arg("device_id"))
      .def_static("use_default_device", &DeviceDescriptor::use_default_device)
      .def_static("all_devices", &DeviceDescriptor::all_devices)
      .def_static("set_excluded_devices", &DeviceDescriptor::set_excluded_devices,
                  py::arg("excluded_devices"))
      .def("type", &DeviceDescriptor::kind)
      .def("id", &DeviceDescriptor::id)
      .def("is_locked", &DeviceDescriptor::is_locked)
      .def("__eq__", &DeviceDescriptor::operator==)
      .def("__repr__", &DeviceDescriptor::to_string);

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

  py::class_<NDArrayView>(m, "NDArrayView", py::buffer_protocol())
      // CNTK's NDArrayView(shape, data_type, device): zeros of a shape (an int or a tuple);
      // given data (an array, list or sparse matrix) in place of a shape, a copy of the data.
      .def(py::init([](py::handle shape, py::handle data_type_, py::handle device) {
             check_device(device);
             const std::optional<DataType> t =
                 data_type_.is_none() ? std::nullopt : std::optional(data_type(data_type_));
             if (py::isinstance<py::int_>(shape) || py::isinstance<py::tuple>(shape)) {
               NDArrayView v(t.value_or(DataType::Float32), shape_of(shape));
               v.fill(0.0);
               return v;
             }
             return tensor_of(shape, t).deep_clone();
           }),
           py::arg("shape"), py::arg("data_type") = py::none(), py::arg("device") = py::none())
      .def_static(
          "from_dense",
          [](py::handle np_array, py::handle device, bool read_only, bool borrow) {
            check_device(device);
            check_writable(read_only);
            NDArrayView v = dense_view(np_array);
            return borrow ? v : v.deep_clone();
          },
          py::arg("np_array"), py::arg("device") = py::none(), py::arg("read_only") = false,
          py::arg("borrow") = false)
      .def_static(
          "from_csr",
          [](py::handle csr_array, py::handle device, bool read_only, bool /*borrow*/,
             py::handle shape) {
            check_device(device);
            check_writable(read_only);
            if (!is_sparse_matrix(csr_array))
              throw py::type_error("from_csr: expected a scipy.sparse matrix, got " +
                                   py::str(py::type::of(csr_array)).cast<std::string>());
            NDArrayView v = sparse_view(csr_array);
            if (!shape.is_none() && shape_of(shape) != v.shape())
              throw ShapeError("from_csr: shape " + shape_of(shape).to_string() +
                               " is not the matrix's " + v.shape().to_string());
            return v;
          },
          py::arg("csr_array"), py::arg("device") = py::none(), py::arg("read_only") = false,
          py::arg("borrow") = false, py::arg("shape") = py::none())
      .def_static(
          "from_data",
          [](py::handle data, py::handle device, bool read_only, bool borrow) {
            check_device(device);
            check_writable(read_only);
            if (py::isinstance<NDArrayView>(data)) return data.cast<NDArrayView>();
            NDArrayView v = tensor_of(data);
            return borrow || v.is_sparse() ? v : v.deep_clone();
          },
          py::arg("data"), py::arg("device") = py::none(), py::arg("read_only") = false,
          py::arg("borrow") = false)
      .def_property_readonly("shape", [](const NDArrayView& v) { return shape_tuple(v.shape()); })
      .def_property_readonly("dtype", [](const NDArrayView& v) { return numpy_dtype(v.dtype()); })
      .def_property_readonly("is_sparse", &NDArrayView::is_sparse)
      .def_property_readonly("device", &NDArrayView::device)
      // Never: read_only=True is refused (check_writable).
      .def_property_readonly("is_read_only", [](const NDArrayView&) { return false; })
      .def("asarray", [](const NDArrayView& v) { return to_numpy(v, true); })
      .def(
          "__array__",
          [](const NDArrayView& v, py::handle dtype) {
            py::array a = to_numpy(v);
            return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none())
      // The elements at start + [0, extent) along each axis; fewer extent entries than axes
      // drop the leading ones (CNTK's slice_view([0, 0, 0], shape[1:]) takes sample 0).
      .def(
          "slice_view",
          [](const NDArrayView& v, std::vector<size_t> start, std::vector<size_t> extent,
             bool /*read_only: a slice is a copy*/) {
            py::array a = to_numpy(v);
            const size_t rank = v.shape().rank();
            if (start.size() != rank || extent.size() > rank)
              throw py::value_error("slice_view: start needs one entry per axis of " +
                                    v.shape().to_string());
            py::tuple index(rank);
            const size_t dropped = rank - extent.size();
            for (size_t i = 0; i < rank; ++i)
              index[i] =
                  i < dropped
                      ? py::object(py::int_(start[i]))
                      : py::object(py::slice(py::ssize_t(start[i]),
                                             py::ssize_t(start[i] + extent[i - dropped]), 1));
            return tensor_of(a[index]);
          },
          py::arg("start_offset"), py::arg("extent"), py::arg("read_only") = true)
      .def("__repr__", &NDArrayView::to_string)
      .def("__str__", &NDArrayView::to_string);

  py::class_<Value>(m, "Value")
      // A batch [N, sample...] from an array; a list of arrays or matrices is a batch of
      // sequences; seq_starts[i] False continues sequence i from the previous minibatch.
      .def(py::init([](py::handle batch, py::object seq_starts, py::handle device) {
             check_device(device);
             std::vector<bool> starts;
             if (!seq_starts.is_none()) starts = seq_starts.cast<std::vector<bool>>();
             if (py::isinstance<py::list>(batch)) {
               std::vector<NDArrayView> sequences;
               for (py::handle s : batch) sequences.push_back(tensor_of(s));
               return Value::create(sequences, starts);
             }
             return Value(tensor_of(batch), false);
           }),
           py::arg("batch"), py::arg("seq_starts") = py::none(), py::arg("device") = py::none())
      // CNTK's Value.create: the Value for var from its data (a batch of samples, or of
      // sequences, dense or CSR), as eval and train read it.
      .def_static(
          "create",
          [](const Variable& var, py::handle data, py::handle seq_starts, py::handle device,
             bool read_only) {
            check_device(device);
            check_writable(read_only);
            return value_for(
                var, data,
                seq_starts.is_none() ? std::vector<bool>{} : seq_starts.cast<std::vector<bool>>());
          },
          py::arg("var"), py::arg("data"), py::arg("seq_starts") = py::none(),
          py::arg("device") = py::none(), py::arg("read_only") = false)
      .def_static(
          "one_hot",
          [](py::list batch, size_t num_classes, py::handle dtype, py::handle device) {
            check_device(device);
            const DataType t = data_type(dtype);
            if (py::len(batch) > 0 && py::isinstance<py::sequence>(batch[0]))
              return Value::one_hot_sequences(num_classes,
                                              batch.cast<std::vector<std::vector<size_t>>>(), t);
            return Value::one_hot(num_classes, batch.cast<std::vector<size_t>>(), t);
          },
          py::arg("batch"), py::arg("num_classes"), py::arg("dtype") = py::none(),
          py::arg("device") = py::none())
      .def_readonly_static("ONE_HOT_SKIP", &Value::kOneHotSkip)
      .def_property_readonly("device", [](const Value& v) { return v.data().device(); })
      // Loom's Values are not invalidated by a later pass: eval and forward return copies.
      .def_property_readonly("is_valid", [](const Value&) { return true; })
      .def_property_readonly("is_read_only", [](const Value&) { return false; })
      .def("__len__", &Value::num_sequences)
      // [sequence, step]: 2 where a sequence begins, 1 valid, 0 padding (CNTK's MaskKind).
      .def_property_readonly("mask", &mask_of)
      // The sequences without their padding: a list of arrays (the samples of a batch).
      .def(
          "as_sequences",
          [](const Value& v, py::handle /*variable: Loom's Values know their sparsity*/) {
            return sequences_of(v, false);
          },
          py::arg("variable") = py::none())
      .def_property_readonly("data", &Value::data)
      .def_property_readonly("shape", [](const Value& v) { return shape_tuple(v.data().shape()); })
      .def_property_readonly("dtype", [](const Value& v) { return numpy_dtype(v.dtype()); })
      .def_property_readonly("is_sparse", &Value::is_sparse)
      .def_property_readonly("is_sequence", &Value::is_sequence)
      .def_property_readonly("num_sequences", &Value::num_sequences)
      .def_property_readonly("sequence_lengths", &Value::sequence_lengths)
      .def_property_readonly("number_of_samples", &Value::number_of_samples)
      .def("asarray", [](const Value& v) { return padded_numpy(v); })
      .def("argmax", &Value::argmax)
      .def("__repr__", &Value::to_string);

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

  m.def(
      "set_compute_precision",
      [](const std::string& precision) { set_compute_precision(precision_of(precision)); },
      py::arg("precision"));
  m.def("get_compute_precision", [] { return std::string(to_string(get_compute_precision())); });
  m.def("bf16_supported", &bf16_supported);
  m.def("set_fixed_random_seed", &set_fixed_random_seed, py::arg("value"));
  m.def("set_max_num_cpu_threads", &set_max_num_cpu_threads, py::arg("num_cpu_threads"));
  m.def("get_max_num_cpu_threads", &get_max_num_cpu_threads);
}

}  // namespace loom::python

PYBIND11_MODULE(_loom, m) {
  using namespace loom::python;
  m.doc() = "Loom's C++ core; use it through the loom package";
  add_core(m);
  add_graph(m);
  add_user_function(m);
  add_ops(m);
  add_initializer(m);
  add_layers(m);
  add_learners(m);
  add_io(m);
  add_train(m);
  add_distributed(m);
  add_debugging(m);
}
