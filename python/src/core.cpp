// CNTK's cntk.core: tensors (NDArrayView) and minibatch values (Value).
#include "python/src/binding.h"

namespace loom::python {

namespace {

// CNTK's read_only=True: Loom's tensors have no read-only flag yet.
void check_writable(bool read_only) {
  if (read_only)
    throw ArgumentError(
        "read_only=True: Loom's tensors cannot be marked read-only; leave read_only False");
}

}  // namespace

void add_core(py::module_ m) {
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
      .def_property_readonly("device", &Value::device)
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
      // Padded [sequences, longest, sample...] for sequences, without padding a packed Value.
      .def_property_readonly("shape", [](const Value& v) { return shape_tuple(v.shape()); })
      .def_property_readonly("dtype", [](const Value& v) { return numpy_dtype(v.dtype()); })
      .def_property_readonly("is_sparse", &Value::is_sparse)
      .def_property_readonly("is_sequence", &Value::is_sequence)
      .def_property_readonly("num_sequences", &Value::num_sequences)
      .def_property_readonly("sequence_lengths", &Value::sequence_lengths)
      .def_property_readonly("number_of_samples", &Value::number_of_samples)
      .def("asarray", [](const Value& v) { return padded_numpy(v); })
      .def("argmax", &Value::argmax)
      .def("__repr__", &Value::to_string);
}

}  // namespace loom::python
