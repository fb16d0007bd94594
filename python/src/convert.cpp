// Conversions between Python data and Loom's tensors and values.
#include <algorithm>

#include "python/src/binding.h"

namespace loom::python {

std::shared_ptr<py::object> hold(py::object object) {
  return std::shared_ptr<py::object>(new py::object(std::move(object)), [](py::object* p) {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      delete p;
    } else {
      p->release();  // the interpreter is gone, and the object with it
      delete p;
    }
  });
}

DataType data_type(py::handle dtype) {
  if (dtype.is_none()) return DataType::Float32;
  py::dtype t = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype));
  if (t.equal(py::dtype::of<float>())) return DataType::Float32;
  if (t.equal(py::dtype::of<double>())) return DataType::Float64;
  throw py::type_error("Loom computes in float32 or float64, not " +
                       py::str(t).cast<std::string>());
}

py::dtype numpy_dtype(DataType t) {
  return t == DataType::Float32 ? py::dtype::of<float>() : py::dtype::of<double>();
}

namespace {

// A dimension as CNTK's Python writes it: a size, InferredDimension (-1) or FreeDimension (-3).
size_t dimension_of(py::handle d) {
  const int64_t n = d.cast<int64_t>();
  if (n == -1) return NDShape::kInferred;
  if (n == -3) return NDShape::kFree;
  if (n < 0)
    throw ArgumentError(
        "a shape's dimension must be a size, InferredDimension (-1) or "
        "FreeDimension (-3); got " +
        std::to_string(n));
  return static_cast<size_t>(n);
}

}  // namespace

NDShape shape_of(py::handle shape) {
  if (py::isinstance<py::int_>(shape)) return NDShape{dimension_of(shape)};
  std::vector<size_t> dims;
  for (py::handle d : shape) dims.push_back(dimension_of(d));
  return NDShape(std::move(dims));
}

py::tuple shape_tuple(const NDShape& shape) {
  py::tuple t(shape.rank());
  for (size_t i = 0; i < shape.rank(); ++i) {
    const size_t d = shape[i];
    t[i] = d == NDShape::kInferred ? py::int_(-1)
           : d == NDShape::kFree   ? py::int_(-3)
                                   : py::int_(d);
  }
  return t;
}

namespace {

py::module_& numpy() {
  static py::module_* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

// The dtype data convert to: want, else their own when float32/float64, else float32.
py::dtype target_dtype(const py::array& a, std::optional<DataType> want) {
  if (want) return numpy_dtype(*want);
  if (a.dtype().equal(py::dtype::of<double>())) return py::dtype::of<double>();
  return py::dtype::of<float>();
}

template <typename T>
std::vector<T> vector_of(py::handle array) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!a) throw py::error_already_set();
  return std::vector<T>(a.data(), a.data() + a.size());
}

// A Function from what a Python callable returned: a Function or a Variable.
Function function_of(py::handle result) {
  if (py::isinstance<Function>(result)) return result.cast<Function>();
  return Function(result.cast<Variable>());
}

}  // namespace

NDArrayView dense_view(py::handle data, std::optional<DataType> want) {
  py::array a = numpy().attr("asarray")(data);
  const char kind = a.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    throw py::type_error("expected numbers, got data of numpy dtype " +
                         py::str(a.dtype()).cast<std::string>());
  const py::dtype dtype = target_dtype(a, want);
  if (!a.dtype().equal(dtype) || !(a.flags() & py::array::c_style))
    a = numpy().attr("ascontiguousarray")(a, dtype);
  std::vector<size_t> dims(a.shape(), a.shape() + a.ndim());
  const DataType t = data_type(dtype);
  void* data_ptr = const_cast<void*>(a.data());
  const size_t bytes = size_t(a.nbytes());
  auto storage = std::make_shared<Buffer>(data_ptr, bytes, hold(std::move(a)));
  return NDArrayView::over(t, NDShape(std::move(dims)), std::move(storage));
}

bool is_sparse_matrix(py::handle data) {
  return py::hasattr(data, "tocsr") && py::hasattr(data, "nnz");
}

NDArrayView sparse_view(py::handle matrix, std::optional<DataType> want) {
  py::object csr = matrix.attr("tocsr")();
  py::tuple shape = csr.attr("shape");
  const NDShape s{shape[0].cast<size_t>(), shape[1].cast<size_t>()};
  py::array values = csr.attr("data");
  const DataType t = want                                            ? *want
                     : values.dtype().equal(py::dtype::of<double>()) ? DataType::Float64
                                                                     : DataType::Float32;
  auto offsets = vector_of<int32_t>(csr.attr("indptr"));
  auto columns = vector_of<int32_t>(csr.attr("indices"));
  return dispatch(t, [&](auto zero) {
    using T = decltype(zero);
    return NDArrayView::sparse_csr<T>(s, std::move(offsets), std::move(columns),
                                      vector_of<T>(values));
  });
}

NDArrayView tensor_of(py::handle data, std::optional<DataType> want) {
  if (py::isinstance<NDArrayView>(data)) return data.cast<NDArrayView>();
  return is_sparse_matrix(data) ? sparse_view(data, want) : dense_view(data, want);
}

py::array to_numpy(const NDArrayView& view, bool copy) {
  NDArrayView dense = view.is_sparse() ? view.to_dense() : view;
  if (copy && !view.is_sparse()) dense = dense.deep_clone();
  std::vector<py::ssize_t> shape(dense.shape().dims().begin(), dense.shape().dims().end());
  void* data = dense.raw_data();
  auto* keep = new NDArrayView(std::move(dense));
  py::capsule owner(keep, [](void* p) { delete static_cast<NDArrayView*>(p); });
  return py::array(numpy_dtype(keep->dtype()), shape, data, owner);
}

py::object value_to_numpy(const Value& value) {
  if (!value.is_sequence()) return to_numpy(value.data());
  py::list sequences;
  for (size_t i = 0; i < value.num_sequences(); ++i) sequences.append(to_numpy(value.sequence(i)));
  return sequences;
}

py::array padded_numpy(const Value& value) {
  const std::vector<size_t> lengths = value.sequence_lengths();
  if (value.is_sequence() &&
      std::ranges::any_of(lengths, [&](size_t n) { return n != value.max_sequence_length(); }))
    PyErr_WarnEx(PyExc_UserWarning,
                 "asarray() will ignore the mask information. Please use as_sequences() to do "
                 "the proper conversion.",
                 1);
  return to_numpy(value.data());
}

py::array_t<int8_t> mask_of(const Value& v) {
  const auto rows = static_cast<py::ssize_t>(v.num_sequences());
  const auto cols = static_cast<py::ssize_t>(rows > 0 ? v.max_sequence_length() : 0);
  py::array_t<int8_t> out({rows, cols});
  auto m = out.mutable_unchecked<2>();
  for (py::ssize_t r = 0; r < rows; ++r)
    for (py::ssize_t c = 0; c < cols; ++c)
      m(r, c) = int8_t(v.mask() ? v.mask()->at(size_t(r), size_t(c))
                       : c == 0 ? MaskKind::SequenceBegin
                                : MaskKind::Valid);
  return out;
}

py::list sequences_of(const Value& v, bool samples_as_sequences) {
  const py::object csr = v.is_sparse() ? py::module_::import("scipy.sparse").attr("csr_matrix")
                                       : py::object(py::none());
  const bool as_sequences = v.is_sequence() || samples_as_sequences;
  py::list out;
  for (size_t i = 0; i < v.num_sequences(); ++i) {
    const NDArrayView s = v.sequence(i);  // [length, sample...], a batch's sample [1, sample...]
    py::array a = to_numpy(as_sequences ? s : s.reshaped(v.sample_shape()));
    out.append(v.is_sparse() ? csr(a) : a);
  }
  return out;
}

Value value_for(const Variable& argument, py::handle data, const std::vector<bool>& seq_starts) {
  const bool sequences_given = py::isinstance<py::list>(data) && argument.has_sequence_axis();
  if (!seq_starts.empty() && !sequences_given)
    throw ArgumentError(
        "seq_starts needs a list of sequences for an input with a sequence "
        "axis; " +
        argument.describe() + " was given " + py::str(py::type::of(data)).cast<std::string>());
  if (py::isinstance<Value>(data)) return data.cast<Value>();
  if (py::isinstance<MinibatchData>(data)) return data.cast<MinibatchData>().data;
  const DataType t = argument.dtype();
  try {
    if (sequences_given) {
      // A dense element of the sample's rank is one step (CNTK's [x] for a one-step sequence).
      const size_t sample_rank = argument.shape().rank();
      std::vector<NDArrayView> sequences;
      for (py::handle s : data) {
        NDArrayView seq = tensor_of(s, t);
        if (!seq.is_sparse() && seq.shape().rank() == sample_rank)
          seq = seq.reshaped(seq.shape().prepend(1));
        sequences.push_back(std::move(seq));
      }
      return Value::create(sequences, seq_starts);
    }
    py::object batch = py::reinterpret_borrow<py::object>(data);
    if (py::isinstance<py::list>(data) && py::len(data) > 0 && is_sparse_matrix(data[py::int_(0)]))
      batch = py::module_::import("scipy.sparse").attr("vstack")(data, "csr");
    return ArgumentData(tensor_of(batch, t)).to_value(argument);
  } catch (const py::type_error& e) {
    throw py::type_error("data for argument " + argument.describe() + ": " + e.what());
  }
}

ValueMap value_map(const py::dict& data) {
  ValueMap values;
  for (auto [key, item] : data) {
    Variable v = key.cast<Variable>();
    values.insert_or_assign(v, value_for(v, item));
  }
  return values;
}

std::shared_ptr<MinibatchSourceInterface> minibatch_source(py::handle source) {
  auto cpp = source.cast<std::shared_ptr<MinibatchSourceInterface>>();
  // The pointer owns the Python object, which owns the C++ one.
  MinibatchSourceInterface* raw = cpp.get();
  return std::shared_ptr<MinibatchSourceInterface>(
      raw, [python = hold(py::reinterpret_borrow<py::object>(source))](auto*) {});
}

DataSource data_source(py::handle data, const std::vector<Variable>& arguments) {
  if (py::isinstance<MinibatchSourceInterface>(data)) return minibatch_source(data);
  if (!py::isinstance<py::tuple>(data) && !py::isinstance<py::list>(data))
    throw py::type_error(
        "expected a minibatch source or a tuple of arrays in the order of the arguments");
  std::vector<DataArray> arrays;
  size_t i = 0;
  for (py::handle item : data) {
    const Variable* arg = i < arguments.size() ? &arguments[i] : nullptr;
    ++i;
    const std::optional<DataType> t = arg ? std::optional(arg->dtype()) : std::nullopt;
    if (py::isinstance<py::list>(item) && (!arg || arg->has_sequence_axis())) {
      std::vector<NDArrayView> sequences;
      for (py::handle s : item) sequences.push_back(tensor_of(s, t));
      arrays.emplace_back(Value::create(sequences));
    } else if (py::isinstance<Value>(item)) {
      arrays.emplace_back(item.cast<Value>());
    } else {
      arrays.emplace_back(tensor_of(item, t));
    }
  }
  return DataSource(std::move(arrays));
}

Function function_or_none(py::handle f) {
  if (f.is_none()) return Function();
  if (py::isinstance<Function>(f)) return f.cast<Function>();
  return Function(as_variable(f));
}

void check_not_user_function(py::handle x) {
  if (!py::isinstance(x, py::module_::import("loom.ops.functions").attr("UserFunction"))) return;
  const std::string type = py::str(py::type::of(x).attr("__name__"));
  throw py::type_error("a " + type + " object (named '" +
                       py::str(x.attr("name")).cast<std::string>() +
                       "') is a UserFunction, not a Function: wrap it with user_function(" + type +
                       "(...)) to use it as an operand");
}

Variable as_variable(py::handle x, DataType like) {
  if (py::isinstance<Variable>(x)) return x.cast<Variable>();
  if (py::isinstance<Function>(x)) return Variable(x.cast<Function>());
  if (py::isinstance<py::float_>(x) || py::isinstance<py::int_>(x))
    return constant(x.cast<double>(), like);
  check_not_user_function(x);
  return constant(dense_view(x, like).deep_clone());
}

void check_device(py::handle device) {
  if (!device.is_none() && !py::isinstance<DeviceDescriptor>(device))
    throw py::type_error("device must be a DeviceDescriptor (cntk.device.cpu()) or None, not " +
                         py::str(py::type::of(device)).cast<std::string>());
}

Activation activation_of(py::handle callable) {
  if (callable.is_none()) return None;
  return Activation([f = hold(py::reinterpret_borrow<py::object>(callable))](const Variable& x) {
    py::gil_scoped_acquire gil;
    return function_of((*f)(x));
  });
}

}  // namespace loom::python
