// Shared pieces of the loom._loom extension: the conversions between Python data (numpy arrays,
// scipy.sparse matrices, lists of them) and Loom's tensors and values, Python objects held from
// C++, and the functions that add each part of the module.
#pragma once

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loom::python {

namespace py = pybind11;

// A Python object held by C++ code that may drop it on any thread: copies share one reference,
// and the last copy releases it with the GIL taken (or leaks it once the interpreter is gone).
// Code that calls it takes the GIL first (py::gil_scoped_acquire); what the call raises
// propagates as py::error_already_set, which pybind11 turns back into the original exception.
std::shared_ptr<py::object> hold(py::object object);

// numpy dtypes <-> DataType; float32 for None. TypeError for other dtypes.
DataType data_type(py::handle dtype);
py::dtype numpy_dtype(DataType t);
NDShape shape_of(py::handle shape);  // an int or a sequence of ints
py::tuple shape_tuple(const NDShape& shape);

// A dense tensor over a numpy array's memory when it is C-contiguous of the wanted dtype (no copy;
// the view keeps the array alive), else over a converted copy. `want` unset: float32/float64
// stay as they are, other numbers become float32. TypeError for data that are not numbers.
NDArrayView dense_view(py::handle data, std::optional<DataType> want = std::nullopt);
// Whether data is a scipy.sparse matrix, and a CSR tensor [rows, cols] copied from one.
bool is_sparse_matrix(py::handle data);
NDArrayView sparse_view(py::handle matrix, std::optional<DataType> want = std::nullopt);
// Either of the two, by the kind of data.
NDArrayView tensor_of(py::handle data, std::optional<DataType> want = std::nullopt);

// A numpy array over the tensor's memory (no copy; the array keeps the storage alive), or a copy.
// Sparse tensors are densified.
py::array to_numpy(const NDArrayView& view, bool copy = false);
// A Value as numpy: one array [N, sample...] for a batch, a list of arrays [T_i, sample...] for
// sequences.
py::object value_to_numpy(const Value& value);
// CNTK's Value.asarray and MinibatchData.asarray: the data as they are, [N, T, sample...] for
// sequences, padded where a sequence is shorter (with CNTK's warning that the mask is ignored:
// as_sequences() drops the padding).
py::array padded_numpy(const Value& value);

// CNTK's mask of a Value [sequence, step]: 2 where a sequence begins, 1 valid, 0 padding
// (int8, as CNTK's); a Value without a mask has full sequences that begin in it, a batch is
// one-sample sequences.
py::array_t<int8_t> mask_of(const Value& v);
// The sequences of a Value without padding: arrays [length, sample...] (CSR matrices for sparse
// data); a batch's samples as they are, or as one-sample sequences (MinibatchData's, as CNTK's
// reader gives them).
py::list sequences_of(const Value& v, bool samples_as_sequences);

// The Value for one argument from Python data (CNTK's sanitize rules): a Value, MinibatchData or
// NDArrayView; a numpy array or number (one sample of the argument's shape, or a batch [N, ...];
// a sequence argument: one sequence [T, ...] or [N, T, ...]); a scipy.sparse matrix (its rows are
// samples, or a sequence's steps); a list of arrays or matrices (a batch of samples, or of
// sequences of different lengths for a sequence argument). Numbers of another dtype are
// converted to the argument's. Errors name the argument and both shapes.
// seq_starts (for a list of sequences): False continues sequence i from the previous minibatch
// (CNTK's Value.create); empty: every sequence begins here.
Value value_for(const Variable& argument, py::handle data,
                const std::vector<bool>& seq_starts = {});
// {Variable: data} -> ValueMap.
ValueMap value_map(const py::dict& data);
// The C++ object of a minibatch source (Loom's reader or a UserMinibatchSource subclassed in
// Python); the pointer keeps the Python object, and with it the subclass's methods, alive.
std::shared_ptr<MinibatchSourceInterface> minibatch_source(py::handle source);
// Data for Function.train/test and the configs: a MinibatchSource, or a tuple of arrays in the
// order of `arguments` (their dtypes and sequence axes decide the conversion, when given).
DataSource data_source(py::handle data, const std::vector<Variable>& arguments = {});

// Checkpoint states: a Dictionary's entries as Python values (dicts, lists, numbers, strings,
// shapes as tuples, tensors as numpy arrays), and back (ints >= 0 become uint64, others int64).
py::object to_python(const DictionaryValue& value);
DictionaryValue from_python(py::handle value);

// A compute precision by name: "float32" or "bf16" (loom.set_compute_precision, Trainer's
// compute_precision).
ComputePrecision precision_of(const std::string& name);

// A Variable from a Variable, a single-output Function, or a number/array (a constant of
// like's dtype). A Python UserFunction instance is a TypeError (check_not_user_function).
Variable as_variable(py::handle x, DataType like = DataType::Float32);

// A TypeError naming x when it is a Python UserFunction instance, which is not a Function
// (docs/decisions.md): it says to wrap it with user_function(...).
void check_not_user_function(py::handle x);

// A Function from None (an invalid Function), a Function, or a Variable (its owner).
Function function_or_none(py::handle f);

// A minibatch from next_minibatch (every value a MinibatchData) passed to call as such, so that
// its sweep end reaches the learners; other data as values. Call runs without the GIL.
template <typename Call>
auto with_minibatch(const py::dict& arguments, Call call) {
  bool all_minibatch_data = py::len(arguments) > 0;
  for (auto [k, v] : arguments)
    all_minibatch_data = all_minibatch_data && py::isinstance<MinibatchData>(v);
  if (all_minibatch_data) {
    MinibatchMap mb;
    for (auto [k, v] : arguments) mb.emplace(py::cast<Variable>(k), py::cast<MinibatchData>(v));
    py::gil_scoped_release nogil;
    return call(mb);
  }
  ValueMap values = value_map(arguments);
  py::gil_scoped_release nogil;
  return call(values);
}

// A node of a graph walk as Python sees it: a Function, or a Variable as its kind's class; a
// list of them.
py::object node_object(const GraphNode& node);
py::list node_objects(const std::vector<GraphNode>& nodes);
// CNTK's find_by_name: the one node named name, None for none, ValueError for several.
py::object find_one_by_name(const Function& root, const std::string& name, int depth);

// Variables from a sequence of Variables, Functions and numbers (as_variable).
std::vector<Variable> variables_of(py::handle items);
// Whether x is a Variable or a Function.
bool is_graph_object(py::handle x);
// CNTK's parameter: init is an Initializer (shape needed), a number (filling shape, a scalar
// without one), an array or list (its own shape), or None: 0, as CNTK's parameters start.
// array_dtype_wins: an init array's dtype sets the parameter's when dtype is None (cntk.parameter;
// the class Parameter converts to float32).
Parameter make_parameter(py::handle shape, py::handle init, py::handle dtype, py::handle device,
                         const std::string& name, bool array_dtype_wins);
// CNTK's constant: a number filling shape (a scalar without one), an array or list (its own
// shape), or None: zeros of shape (0 without one); array_dtype_wins as make_parameter's.
Constant make_constant(py::handle value, py::handle shape, py::handle dtype, py::handle device,
                       const std::string& name, bool array_dtype_wins);

// CNTK's device= arguments: None or a DeviceDescriptor (the CPU: asking for a GPU already
// failed); TypeError for anything else.
void check_device(py::handle device);

// An Activation from None (none) or a callable on a Variable.
Activation activation_of(py::handle callable);

// The submodule `name` of parent (def_submodule), importable by its dotted name.
py::module_ submodule(py::module_& parent, const char* name);
// Each adds one CNTK module's names to m (the submodule of that name, or the top for what is
// still there).
void add_device(py::module_ m);
void add_axis(py::module_ m);
void add_core(py::module_ m);
void add_cntk_py(py::module_ m);
// Variable and Function are declared (their classes registered) before either adds the methods
// that take the other, so that each method's signature names the other's Python class.
void declare_variables(py::module_ m);
void declare_functions(py::module_ m);
void add_variables(py::module_ m);
void add_ops_functions(py::module_ m);
void add_user_function(py::module_& m);
void add_ops(py::module_ m);
void add_ops_sequence(py::module_ m);
void add_initializer(py::module_ m);
void add_layers(py::module_ m);
void add_learners(py::module_ m);
void add_io(py::module_ m);
void add_logging(py::module_ m);
void add_logging_graph(py::module_ m);
void add_eval(py::module_ m);
void add_train(py::module_ m);
void add_distributed(py::module_ m);
void add_debugging(py::module_ m);

// The Python class of T, which another file registered (pybind11's types are global), to add
// methods to it.
template <typename T, typename... Options>
py::class_<T, Options...> class_of() {
  return py::reinterpret_borrow<py::class_<T, Options...>>(py::type::of<T>());
}

// What a method of a user's Python object (a source, learner or callback) returned, as T; a
// TypeError naming the method, the value's type and what it must return otherwise (pybind11's
// own cast error names neither).
template <typename T>
T returned(py::handle value, const std::string& method, const char* expected) {
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(method + " returned " +
                         py::str(py::type::of(value).attr("__name__")).cast<std::string>() +
                         "; it must return " + expected);
  }
}

}  // namespace loom::python
