// loom_c.h over Loom's C++ API: a model handle is a ModelRunner shared by reference counting,
// a value handle a loom::Value. Every entry point runs its body inside guard(), which turns
// each C++ exception into a status and this thread's message, so none crosses into C.
#include "loom_c.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/value.h"
#include "loom/deploy/model_runner.h"
#include "loom/deploy/onnx.h"
#include "loom/graph/function.h"
#include "loom/graph/graph_walk.h"
#include "loom/serialize/model_file.h"

namespace {

// A handle that is NULL, freed or of another type.
class InvalidHandle : public loom::Error {
 public:
  using loom::Error::Error;
};

}  // namespace

// What a model handle and its clones share: the runner (thread safe) and the outputs of the
// functions of its graph (LOOM_NODE).
struct Model {
  explicit Model(loom::Function function)
      : runner(std::move(function)), nodes(loom::node_outputs(runner.function())) {}
  const loom::ModelRunner runner;
  const std::vector<loom::Variable> nodes;
};

struct loom_model {
  std::shared_ptr<const Model> model;
};

struct loom_value {
  loom::Value value;
  // The data without padding (and densified), when they are not value's own storage.
  mutable std::once_flag packed_once;
  mutable std::optional<loom::NDArrayView> packed;
};

namespace {

thread_local std::string t_message;
thread_local loom_status t_status = LOOM_OK;

// Live handles and their types, so that a freed or foreign pointer is refused before it is
// dereferenced. A handle freed by one thread while another uses it is still the caller's error.
enum class HandleType { Model, Value };
struct Registry {
  std::mutex mutex;
  std::unordered_map<const void*, HandleType> live;
};
Registry& registry() {
  static Registry r;
  return r;
}

void add_handle(const void* h, HandleType type) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live.emplace(h, type);
}

const char* type_name(HandleType type) {
  return type == HandleType::Model ? "loom_model" : "loom_value";
}

// Checks that h is a live handle of that type; with remove, also takes it off the registry (for
// its free function), in one step so that two threads cannot both free it.
void check_handle(const void* h, HandleType type, const char* what, bool remove = false) {
  LOOM_CHECK(h, InvalidHandle, what, " is NULL");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(h);
  LOOM_CHECK(it != r.live.end(), InvalidHandle, what, " (", h, ") is not a live ", type_name(type),
             remove ? ": it was already freed, or never made by loom_c"
                    : ": it was freed, or never made by loom_c");
  LOOM_CHECK(it->second == type, InvalidHandle, what, " (", h, ") is a ", type_name(it->second),
             ", not a ", type_name(type));
  if (remove) r.live.erase(it);
}

const loom_model& model_of(const loom_model* m) {
  check_handle(m, HandleType::Model, "model");
  return *m;
}

const loom_value& value_of(const loom_value* v, const char* what = "value") {
  check_handle(v, HandleType::Value, what);
  return *v;
}

template <typename Handle>
void give(std::unique_ptr<Handle> handle, HandleType type, Handle** out) {
  add_handle(handle.get(), type);
  *out = handle.release();
}

void fail(loom_status status, const char* function, const char* message) {
  t_status = status;
  try {
    t_message = std::string(function) + ": " + message;
  } catch (...) {  // no memory for the message: the status alone says it
    t_message.clear();
  }
}

// Runs an entry point's body: LOOM_OK, or the status and message of what it threw.
template <typename Body>
loom_status guard(const char* function, Body&& body) noexcept {
  loom_status status = LOOM_STATUS_INTERNAL_ERROR;
  try {
    body();
    return LOOM_OK;
  } catch (const InvalidHandle& e) {
    fail(status = LOOM_STATUS_INVALID_HANDLE, function, e.what());
  } catch (const loom::ArgumentError& e) {
    fail(status = LOOM_STATUS_ARGUMENT_ERROR, function, e.what());
  } catch (const loom::ShapeError& e) {
    fail(status = LOOM_STATUS_SHAPE_ERROR, function, e.what());
  } catch (const loom::DataError& e) {
    fail(status = LOOM_STATUS_DATA_ERROR, function, e.what());
  } catch (const loom::IOError& e) {
    fail(status = LOOM_STATUS_IO_ERROR, function, e.what());
  } catch (const loom::StateError& e) {
    fail(status = LOOM_STATUS_STATE_ERROR, function, e.what());
  } catch (const std::bad_alloc&) {
    fail(status = LOOM_STATUS_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception& e) {
    fail(status, function, e.what());
  } catch (...) {
    fail(status, function, "an exception that is not a std::exception");
  }
  return status;
}

template <typename T>
void check_out(T* out, const char* name) {
  LOOM_CHECK(out, loom::ArgumentError, name, " (an out-parameter) is NULL");
}

size_t non_negative(int64_t n, const char* what) {
  LOOM_CHECK(n >= 0, loom::ArgumentError, what, " is ", n, ": it cannot be negative");
  return size_t(n);
}

size_t positive(int64_t n, const char* what) {
  LOOM_CHECK(n > 0, loom::ArgumentError, what, " is ", n, ": it must be at least 1");
  return size_t(n);
}

size_t product(size_t a, size_t b) {
  size_t p = 0;
  LOOM_CHECK(!__builtin_mul_overflow(a, b, &p), loom::ArgumentError, a, " x ", b,
             " elements overflow the address space");
  return p;
}

loom::DataType data_type(loom_dtype dtype) {
  LOOM_CHECK(dtype == LOOM_FLOAT32 || dtype == LOOM_FLOAT64, loom::ArgumentError, "data type ",
             dtype, " is neither LOOM_FLOAT32 (1) nor LOOM_FLOAT64 (2)");
  return dtype == LOOM_FLOAT32 ? loom::DataType::Float32 : loom::DataType::Float64;
}

loom::NDShape sample_shape(const int64_t* dims, int64_t rank) {
  non_negative(rank, "sample_rank");
  LOOM_CHECK(dims || rank == 0, loom::ArgumentError, "sample_shape is NULL for rank ", rank);
  std::vector<size_t> shape;
  size_t elements = 1;
  for (int64_t i = 0; i < rank; ++i) {
    shape.push_back(positive(dims[i], "a sample dimension"));
    elements = product(elements, shape.back());
  }
  return loom::NDShape(std::move(shape));
}

// The sequences' lengths, each at least 1; their sum through total.
std::vector<size_t> sequence_lengths(const int64_t* lengths, int64_t num_sequences, size_t& total) {
  positive(num_sequences, "num_sequences");
  LOOM_CHECK(lengths, loom::ArgumentError, "lengths is NULL");
  std::vector<size_t> out;
  total = 0;
  for (int64_t i = 0; i < num_sequences; ++i) {
    LOOM_CHECK(lengths[i] > 0, loom::ArgumentError, "sequence ", i, " has length ", lengths[i],
               ": a sequence needs at least one step");
    out.push_back(size_t(lengths[i]));
    total += out.back();
  }
  return out;
}

// Checks that the caller's data hold exactly the elements the shape and counts need.
template <typename T>
std::span<const T> caller_data(const void* data, int64_t data_count, size_t needed) {
  LOOM_CHECK(data || needed == 0, loom::ArgumentError, "data is NULL");
  LOOM_CHECK(data_count >= 0 && size_t(data_count) == needed, loom::ShapeError, "data_count is ",
             data_count, " but the shape and counts need ", needed, " elements");
  return {static_cast<const T*>(data), needed};
}

std::vector<size_t> one_hot_indices(const int64_t* indices, size_t count) {
  LOOM_CHECK(indices, loom::ArgumentError, "indices is NULL");
  std::vector<size_t> out;
  for (size_t i = 0; i < count; ++i) {
    LOOM_CHECK(indices[i] >= LOOM_ONE_HOT_SKIP, loom::ArgumentError, "indices[", i, "] is ",
               indices[i], ": one-hot indices are 0..dim-1, or LOOM_ONE_HOT_SKIP (-1)");
    // LOOM_ONE_HOT_SKIP converts to Value::kOneHotSkip, the largest size_t.
    out.push_back(size_t(indices[i]));
  }
  return out;
}

// The whole CSR matrix of steps samples (Loom validates offsets and indices).
template <typename T>
loom::NDArrayView csr_matrix(const loom::NDShape& sample, size_t steps, const int32_t* row_offsets,
                             int64_t num_offsets, const int32_t* col_indices, const void* values,
                             int64_t nnz) {
  LOOM_CHECK(sample.rank() >= 1, loom::ShapeError,
             "a CSR sample needs at least one axis (its last axis is the columns)");
  LOOM_CHECK(row_offsets, loom::ArgumentError, "row_offsets is NULL");
  const size_t n = non_negative(nnz, "nnz"), offsets = non_negative(num_offsets, "num_offsets");
  LOOM_CHECK((col_indices && values) || n == 0, loom::ArgumentError,
             "col_indices or values is NULL");
  std::vector<int32_t> cols, off(row_offsets, row_offsets + offsets);
  std::vector<T> vals;
  if (n) {
    cols.assign(col_indices, col_indices + n);
    vals.assign(static_cast<const T*>(values), static_cast<const T*>(values) + n);
  }
  return loom::NDArrayView::sparse_csr<T>(sample.prepend(steps), std::move(off), std::move(cols),
                                          vals);
}

// Sequences of a CSR matrix whose steps are packed one after another.
template <typename T>
loom::Value csr_sequences(const loom::NDArrayView& whole, const std::vector<size_t>& lengths) {
  const loom::NDShape sample = whole.shape().sub_shape(1);
  const size_t rows_per_step = whole.csr_rows() / whole.shape()[0];
  const auto& off = whole.csr_row_offsets();
  const auto& col = whole.csr_col_indices();
  const T* val = whole.csr_values<T>();
  std::vector<loom::NDArrayView> sequences;
  size_t row = 0;
  for (size_t len : lengths) {
    const size_t end = row + len * rows_per_step;
    const int32_t first = off[row], last = off[end];
    std::vector<int32_t> seq_off;
    for (size_t r = row; r <= end; ++r) seq_off.push_back(off[r] - first);
    sequences.push_back(loom::NDArrayView::sparse_csr<T>(
        sample.prepend(len), std::move(seq_off),
        std::vector<int32_t>(col.begin() + first, col.begin() + last),
        std::vector<T>(val + first, val + last)));
    row = end;
  }
  return loom::Value::create(sequences);
}

std::unique_ptr<loom_value> new_value(loom::Value value) {
  return std::unique_ptr<loom_value>(new loom_value{std::move(value), {}, {}});
}

const std::vector<loom::Variable>& variables(const loom_model& m, loom_variable_kind kind) {
  LOOM_CHECK(kind == LOOM_ARGUMENT || kind == LOOM_OUTPUT || kind == LOOM_NODE, loom::ArgumentError,
             "variable kind ", kind, " is not LOOM_ARGUMENT (0), LOOM_OUTPUT (1) or LOOM_NODE (2)");
  return kind == LOOM_ARGUMENT ? m.model->runner.arguments()
         : kind == LOOM_OUTPUT ? m.model->runner.outputs()
                               : m.model->nodes;
}

const char* kind_name(loom_variable_kind kind) {
  return kind == LOOM_ARGUMENT ? "argument" : kind == LOOM_OUTPUT ? "output" : "node output";
}

size_t checked_index(const loom_model& m, loom_variable_kind kind, int64_t index) {
  const size_t count = variables(m, kind).size();
  LOOM_CHECK(index >= 0 && size_t(index) < count, loom::ArgumentError, kind_name(kind), " index ",
             index, " is out of range: the model has ", count, " ", kind_name(kind),
             count == 1 ? "" : "s");
  return size_t(index);
}

const loom::Variable& variable(const loom_model* model, loom_variable_kind kind, int64_t index) {
  const loom_model& m = model_of(model);
  return variables(m, kind)[checked_index(m, kind, index)];
}

// The index of the variable with that name, else with that uid (outputs of CNTK's files often
// have no name); none when neither matches.
std::optional<size_t> match_variable(const loom_model& m, loom_variable_kind kind,
                                     const char* name) {
  LOOM_CHECK(name, loom::ArgumentError, kind_name(kind), " name is NULL");
  const std::vector<loom::Variable>& vars = variables(m, kind);
  for (auto field : {&loom::Variable::name, &loom::Variable::uid}) {
    std::vector<size_t> found;
    for (size_t i = 0; i < vars.size(); ++i)
      if ((vars[i].*field)() == name) found.push_back(i);
    if (found.size() == 1) return found[0];
    LOOM_CHECK(found.empty(), loom::ArgumentError, "the model has ", found.size(), " ",
               kind_name(kind), "s named '", name, "': choose one by uid or index");
  }
  return std::nullopt;
}

[[noreturn]] void no_variable_named(const loom_model& m, loom_variable_kind kind,
                                    const char* name) {
  std::string known;
  for (const loom::Variable& v : variables(m, kind))
    known += (known.empty() ? "" : ", ") + (v.name().empty() ? v.uid() : v.name());
  throw loom::ArgumentError(loom::detail::concat("the model has no ", kind_name(kind), " named '",
                                                 name, "'; its ", kind_name(kind),
                                                 "s are: ", known));
}

size_t find_variable(const loom_model& m, loom_variable_kind kind, const char* name) {
  if (std::optional<size_t> i = match_variable(m, kind, name)) return *i;
  no_variable_named(m, kind, name);
}

void copy_shape(const loom::NDShape& shape, int64_t* dims, int64_t capacity) {
  LOOM_CHECK(dims || shape.rank() == 0, loom::ArgumentError, "dims is NULL");
  LOOM_CHECK(capacity >= 0 && size_t(capacity) >= shape.rank(), loom::ArgumentError, "capacity ",
             capacity, " is less than the rank ", shape.rank());
  for (size_t i = 0; i < shape.rank(); ++i) dims[i] = int64_t(shape[i]);
}

// Evaluates with the arguments chosen by index and the outputs chosen (null: all of them).
void evaluate(const loom_model& m, const std::vector<size_t>& arguments, loom_value* const* inputs,
              int64_t num_outputs, const std::vector<loom::Variable>* chosen,
              loom_value** outputs) {
  const loom::ModelRunner& runner = m.model->runner;
  const std::vector<loom::Variable>& args = runner.arguments();
  LOOM_CHECK(inputs || arguments.empty(), loom::ArgumentError, "inputs is NULL");
  LOOM_CHECK(outputs, loom::ArgumentError, "outputs (the caller's array) is NULL");
  loom::ValueMap values;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const loom_value& v = value_of(inputs[i], "an input value");
    LOOM_CHECK(values.emplace(args[arguments[i]], v.value).second, loom::ArgumentError, "argument ",
               args[arguments[i]].describe(), " is given twice");
  }
  if (chosen) {
    LOOM_CHECK(!chosen->empty(), loom::ArgumentError,
               "num_outputs is 0: choose at least one output");
  } else {
    LOOM_CHECK(size_t(num_outputs) == runner.outputs().size(), loom::ArgumentError,
               "num_outputs is ", num_outputs, " but the model has ", runner.outputs().size(),
               " outputs (output names or indices NULL: all of them)");
  }
  const std::vector<loom::Variable>& wanted = chosen ? *chosen : runner.outputs();
  // Only what the chosen outputs need is computed (ModelRunner plans each set once).
  const loom::ValueMap result = runner.evaluate(values, wanted);
  std::vector<std::unique_ptr<loom_value>> made;
  for (const loom::Variable& o : wanted) made.push_back(new_value(result.at(o)));
  // All registered, or none (the caller gets no value when the call fails).
  size_t registered = 0;
  try {
    for (; registered < made.size(); ++registered)
      add_handle(made[registered].get(), HandleType::Value);
  } catch (...) {
    while (registered > 0)
      check_handle(made[--registered].get(), HandleType::Value, "output", /*remove=*/true);
    throw;
  }
  for (size_t i = 0; i < made.size(); ++i) outputs[i] = made[i].release();
}

// The data, sequence after sequence without padding: the value's own storage when it lies so
// (dense samples; dense sequences all of one length, padded; Loom's packed rows of one sequence,
// or of sequences of one step each), else a copy made once.
const void* packed_data(const loom_value& v) {
  const loom::Value& value = v.value;
  // Dense samples (no sequence axis, so no padding): no look at the lengths.
  if (!value.is_sequence() && !value.is_sparse()) return value.data().raw_data();
  if (value.is_packed() && (value.num_sequences() <= 1 || value.max_sequence_length() <= 1))
    return value.packed_rows().raw_data();
  const std::vector<size_t> lengths = value.sequence_lengths();
  const bool padded = std::any_of(lengths.begin(), lengths.end(),
                                  [&](size_t len) { return len != value.max_sequence_length(); });
  if (!padded && !value.is_sparse() && !value.is_packed()) return value.data().raw_data();
  std::call_once(v.packed_once, [&] {
    const loom::NDShape sample = value.sample_shape();
    loom::NDArrayView packed =
        loom::NDArrayView::uninitialized(value.dtype(), sample.prepend(value.number_of_samples()));
    const size_t step = sample.total_size() * loom::size_of(value.dtype());
    char* to = static_cast<char*>(packed.raw_data());
    if (value.is_packed()) {  // each sequence's steps gathered from the rows, never padded
      for (size_t b = 0; b < lengths.size(); to += lengths[b] * step, ++b)
        loom::copy_sequence(*value.packed_layout(), b, step, value.packed_rows().raw_data(), to,
                            false);
    } else {
      const loom::NDArrayView dense = value.data().to_dense();
      const char* from = static_cast<const char*>(dense.raw_data());
      for (size_t b = 0; b < lengths.size(); to += lengths[b] * step, ++b)
        std::copy_n(from + b * value.max_sequence_length() * step, lengths[b] * step, to);
    }
    v.packed = std::move(packed);
  });
  return v.packed->raw_data();
}

size_t element_count(const loom::Value& value) {
  return value.number_of_samples() * value.sample_shape().total_size();
}

// A model handle for what reader makes of the file at path: a Function, or the path itself
// (ModelRunner reads Loom's and CNTK's files).
template <typename Reader>
void load(const char* path, loom_model** model, Reader&& reader) {
  LOOM_CHECK(path, loom::ArgumentError, "path is NULL");
  check_out(model, "model");
  give(std::make_unique<loom_model>(loom_model{std::make_shared<const Model>(reader(path))}),
       HandleType::Model, model);
}

// The same for a file's bytes in memory.
template <typename Reader>
void load(const void* bytes, int64_t size, loom_model** model, Reader&& reader) {
  LOOM_CHECK(bytes || size == 0, loom::ArgumentError, "bytes is NULL");
  check_out(model, "model");
  const std::span<const uint8_t> file(static_cast<const uint8_t*>(bytes),
                                      non_negative(size, "size"));
  give(std::make_unique<loom_model>(
           loom_model{std::make_shared<const Model>(reader(file, "<memory>"))}),
       HandleType::Model, model);
}

// loom_model_evaluate and _by_index: the arguments and the chosen outputs (all when keys is
// NULL) by name or by index, looked up with find_argument(model, key) and
// find_output(model, key).
template <typename Key, typename FindArgument, typename FindOutput>
void evaluate_by(const loom_model* model, int64_t num_inputs, const Key* input_keys,
                 loom_value* const* inputs, int64_t num_outputs, const Key* output_keys,
                 loom_value** outputs, const char* keys_name, FindArgument find_argument,
                 FindOutput find_output) {
  const loom_model& m = model_of(model);
  const size_t n_in = non_negative(num_inputs, "num_inputs");
  const size_t n_out = non_negative(num_outputs, "num_outputs");
  LOOM_CHECK(input_keys || n_in == 0, loom::ArgumentError, keys_name, " is NULL");
  std::vector<size_t> arguments;
  std::vector<loom::Variable> chosen;
  for (size_t i = 0; i < n_in; ++i) arguments.push_back(find_argument(m, input_keys[i]));
  for (size_t i = 0; output_keys && i < n_out; ++i)
    chosen.push_back(find_output(m, output_keys[i]));
  evaluate(m, arguments, inputs, num_outputs, output_keys ? &chosen : nullptr, outputs);
}

// Arguments and outputs by index (loom_model_evaluate_by_index and _nodes).
size_t argument_at(const loom_model& m, int64_t index) {
  return checked_index(m, LOOM_ARGUMENT, index);
}
auto variable_at(loom_variable_kind kind) {
  return [kind](const loom_model& m, int64_t index) {
    return variables(m, kind)[checked_index(m, kind, index)];
  };
}

// An output by name or uid: the model's, else a node output (any function's of the graph).
loom::Variable output_named(const loom_model& m, const char* name) {
  if (std::optional<size_t> i = match_variable(m, LOOM_OUTPUT, name))
    return variables(m, LOOM_OUTPUT)[*i];
  if (std::optional<size_t> i = match_variable(m, LOOM_NODE, name))
    return variables(m, LOOM_NODE)[*i];
  no_variable_named(m, LOOM_OUTPUT, name);
}

}  // namespace

extern "C" {

const char* loom_last_error_message(void) {
  return t_message.c_str();
}

loom_status loom_last_error_status(void) {
  return t_status;
}

const char* loom_status_name(loom_status status) {
  switch (status) {
    case LOOM_OK:
      return "LOOM_OK";
    case LOOM_STATUS_ARGUMENT_ERROR:
      return "LOOM_STATUS_ARGUMENT_ERROR";
    case LOOM_STATUS_SHAPE_ERROR:
      return "LOOM_STATUS_SHAPE_ERROR";
    case LOOM_STATUS_DATA_ERROR:
      return "LOOM_STATUS_DATA_ERROR";
    case LOOM_STATUS_IO_ERROR:
      return "LOOM_STATUS_IO_ERROR";
    case LOOM_STATUS_INVALID_HANDLE:
      return "LOOM_STATUS_INVALID_HANDLE";
    case LOOM_STATUS_OUT_OF_MEMORY:
      return "LOOM_STATUS_OUT_OF_MEMORY";
    case LOOM_STATUS_INTERNAL_ERROR:
      return "LOOM_STATUS_INTERNAL_ERROR";
    case LOOM_STATUS_STATE_ERROR:
      return "LOOM_STATUS_STATE_ERROR";
    default:
      return "unknown";
  }
}

int32_t loom_c_api_version(void) {
  return LOOM_C_API_VERSION;
}

const char* loom_version(void) {
  return LOOM_VERSION_STRING;
}

loom_status loom_model_load(const char* path, loom_model** model) {
  return guard(__func__, [&] {
    load(path, model, [](const std::string& p) { return loom::load_model(p); });
  });
}

loom_status loom_model_load_from_bytes(const void* bytes, int64_t size, loom_model** model) {
  return guard(__func__, [&] { load(bytes, size, model, loom::load_model_from_bytes); });
}

loom_status loom_model_load_onnx(const char* path, loom_model** model) {
  return guard(__func__, [&] {
    load(path, model,
         [](const std::string& p) { return loom::load_model(p, loom::ModelFormat::ONNX); });
  });
}

loom_status loom_model_load_onnx_from_bytes(const void* bytes, int64_t size, loom_model** model) {
  return guard(__func__, [&] {
    load(bytes, size, model, [](std::span<const uint8_t> file, const std::string& name) {
      return loom::load_onnx_from_bytes(file, name);
    });
  });
}

loom_status loom_model_clone(const loom_model* model, loom_model** clone) {
  return guard(__func__, [&] {
    const loom_model& m = model_of(model);
    check_out(clone, "clone");
    give(std::make_unique<loom_model>(loom_model{m.model}), HandleType::Model, clone);
  });
}

loom_status loom_model_free(loom_model* model) {
  return guard(__func__, [&] {
    check_handle(model, HandleType::Model, "model", /*remove=*/true);
    delete model;
  });
}

loom_status loom_model_variable_count(const loom_model* model, loom_variable_kind kind,
                                      int64_t* count) {
  return guard(__func__, [&] {
    const loom_model& m = model_of(model);
    check_out(count, "count");
    *count = int64_t(variables(m, kind).size());
  });
}

loom_status loom_model_variable_index(const loom_model* model, loom_variable_kind kind,
                                      const char* name, int64_t* index) {
  return guard(__func__, [&] {
    const loom_model& m = model_of(model);
    check_out(index, "index");
    *index = int64_t(find_variable(m, kind, name));
  });
}

loom_status loom_model_variable_name(const loom_model* model, loom_variable_kind kind,
                                     int64_t index, const char** name) {
  return guard(__func__, [&] {
    const loom::Variable& v = variable(model, kind, index);
    check_out(name, "name");
    *name = v.name().c_str();
  });
}

loom_status loom_model_variable_uid(const loom_model* model, loom_variable_kind kind, int64_t index,
                                    const char** uid) {
  return guard(__func__, [&] {
    const loom::Variable& v = variable(model, kind, index);
    check_out(uid, "uid");
    *uid = v.uid().c_str();
  });
}

loom_status loom_model_variable_dtype(const loom_model* model, loom_variable_kind kind,
                                      int64_t index, loom_dtype* dtype) {
  return guard(__func__, [&] {
    const loom::Variable& v = variable(model, kind, index);
    check_out(dtype, "dtype");
    *dtype = v.dtype() == loom::DataType::Float32 ? LOOM_FLOAT32 : LOOM_FLOAT64;
  });
}

loom_status loom_model_variable_flags(const loom_model* model, loom_variable_kind kind,
                                      int64_t index, int32_t* flags) {
  return guard(__func__, [&] {
    const loom::Variable& v = variable(model, kind, index);
    check_out(flags, "flags");
    *flags = (v.is_sparse() ? LOOM_FLAG_SPARSE : 0) |
             (v.has_batch_axis() ? LOOM_FLAG_BATCH_AXIS : 0) |
             (v.has_sequence_axis() ? LOOM_FLAG_SEQUENCE_AXIS : 0);
  });
}

loom_status loom_model_variable_rank(const loom_model* model, loom_variable_kind kind,
                                     int64_t index, int64_t* rank) {
  return guard(__func__, [&] {
    const loom::Variable& v = variable(model, kind, index);
    check_out(rank, "rank");
    *rank = int64_t(v.shape().rank());
  });
}

loom_status loom_model_variable_shape(const loom_model* model, loom_variable_kind kind,
                                      int64_t index, int64_t* dims, int64_t capacity) {
  return guard(__func__, [&] { copy_shape(variable(model, kind, index).shape(), dims, capacity); });
}

loom_status loom_value_create_dense(loom_dtype dtype, const int64_t* sample_shape_dims,
                                    int64_t sample_rank, int64_t num_samples, const void* data,
                                    int64_t data_count, loom_value** value) {
  return guard(__func__, [&] {
    const loom::DataType type = data_type(dtype);
    const loom::NDShape sample = sample_shape(sample_shape_dims, sample_rank);
    const size_t n = positive(num_samples, "num_samples");
    check_out(value, "value");
    const loom::NDShape shape = sample.prepend(n);
    const size_t needed = product(n, sample.total_size());
    loom::NDArrayView array = loom::dispatch(type, [&](auto zero) {
      using T = decltype(zero);
      return loom::NDArrayView::from_vector<T>(shape, caller_data<T>(data, data_count, needed));
    });
    give(new_value(loom::Value(std::move(array), false)), HandleType::Value, value);
  });
}

loom_status loom_value_create_dense_sequences(loom_dtype dtype, const int64_t* sample_shape_dims,
                                              int64_t sample_rank, int64_t num_sequences,
                                              const int64_t* lengths, const void* data,
                                              int64_t data_count, loom_value** value) {
  return guard(__func__, [&] {
    const loom::DataType type = data_type(dtype);
    const loom::NDShape sample = sample_shape(sample_shape_dims, sample_rank);
    size_t steps = 0;
    const std::vector<size_t> lens = sequence_lengths(lengths, num_sequences, steps);
    check_out(value, "value");
    const size_t needed = product(steps, sample.total_size());
    loom::Value v = loom::dispatch(type, [&](auto zero) {
      using T = decltype(zero);
      const std::span<const T> d = caller_data<T>(data, data_count, needed);
      return loom::Value::create_sequences<T>(sample, std::vector<T>(d.begin(), d.end()), lens);
    });
    give(new_value(std::move(v)), HandleType::Value, value);
  });
}

loom_status loom_value_create_one_hot(loom_dtype dtype, int64_t dim, int64_t num_samples,
                                      const int64_t* indices, loom_value** value) {
  return guard(__func__, [&] {
    const loom::DataType type = data_type(dtype);
    const size_t d = positive(dim, "dim");
    const size_t n = positive(num_samples, "num_samples");
    check_out(value, "value");
    give(new_value(loom::Value::one_hot(d, one_hot_indices(indices, n), type)), HandleType::Value,
         value);
  });
}

loom_status loom_value_create_one_hot_sequences(loom_dtype dtype, int64_t dim,
                                                int64_t num_sequences, const int64_t* lengths,
                                                const int64_t* indices, loom_value** value) {
  return guard(__func__, [&] {
    const loom::DataType type = data_type(dtype);
    const size_t d = positive(dim, "dim");
    size_t steps = 0;
    const std::vector<size_t> lens = sequence_lengths(lengths, num_sequences, steps);
    check_out(value, "value");
    const std::vector<size_t> all = one_hot_indices(indices, steps);
    std::vector<std::vector<size_t>> sequences;
    auto next = all.begin();
    for (size_t len : lens) {
      sequences.emplace_back(next, next + ptrdiff_t(len));
      next += ptrdiff_t(len);
    }
    give(new_value(loom::Value::one_hot_sequences(d, sequences, type)), HandleType::Value, value);
  });
}

loom_status loom_value_create_csr(loom_dtype dtype, const int64_t* sample_shape_dims,
                                  int64_t sample_rank, int64_t num_samples,
                                  const int32_t* row_offsets, int64_t num_offsets,
                                  const int32_t* col_indices, const void* values, int64_t nnz,
                                  loom_value** value) {
  return guard(__func__, [&] {
    const loom::DataType type = data_type(dtype);
    const loom::NDShape sample = sample_shape(sample_shape_dims, sample_rank);
    const size_t n = positive(num_samples, "num_samples");
    check_out(value, "value");
    loom::NDArrayView matrix = loom::dispatch(type, [&](auto zero) {
      return csr_matrix<decltype(zero)>(sample, n, row_offsets, num_offsets, col_indices, values,
                                        nnz);
    });
    give(new_value(loom::Value(std::move(matrix), false)), HandleType::Value, value);
  });
}

loom_status loom_value_create_csr_sequences(loom_dtype dtype, const int64_t* sample_shape_dims,
                                            int64_t sample_rank, int64_t num_sequences,
                                            const int64_t* lengths, const int32_t* row_offsets,
                                            int64_t num_offsets, const int32_t* col_indices,
                                            const void* values, int64_t nnz, loom_value** value) {
  return guard(__func__, [&] {
    const loom::DataType type = data_type(dtype);
    const loom::NDShape sample = sample_shape(sample_shape_dims, sample_rank);
    size_t steps = 0;
    const std::vector<size_t> lens = sequence_lengths(lengths, num_sequences, steps);
    check_out(value, "value");
    loom::Value v = loom::dispatch(type, [&](auto zero) {
      using T = decltype(zero);
      return csr_sequences<T>(
          csr_matrix<T>(sample, steps, row_offsets, num_offsets, col_indices, values, nnz), lens);
    });
    give(new_value(std::move(v)), HandleType::Value, value);
  });
}

loom_status loom_model_evaluate(const loom_model* model, int64_t num_inputs,
                                const char* const* input_names, loom_value* const* inputs,
                                int64_t num_outputs, const char* const* output_names,
                                loom_value** outputs) {
  return guard(__func__, [&] {
    evaluate_by(
        model, num_inputs, input_names, inputs, num_outputs, output_names, outputs, "input_names",
        [](const loom_model& m, const char* name) { return find_variable(m, LOOM_ARGUMENT, name); },
        output_named);
  });
}

loom_status loom_model_evaluate_by_index(const loom_model* model, int64_t num_inputs,
                                         const int64_t* input_indices, loom_value* const* inputs,
                                         int64_t num_outputs, const int64_t* output_indices,
                                         loom_value** outputs) {
  return guard(__func__, [&] {
    evaluate_by(model, num_inputs, input_indices, inputs, num_outputs, output_indices, outputs,
                "input_indices", argument_at, variable_at(LOOM_OUTPUT));
  });
}

loom_status loom_model_evaluate_nodes(const loom_model* model, int64_t num_inputs,
                                      const int64_t* input_indices, loom_value* const* inputs,
                                      int64_t num_outputs, const int64_t* node_indices,
                                      loom_value** outputs) {
  return guard(__func__, [&] {
    LOOM_CHECK(node_indices, loom::ArgumentError, "node_indices is NULL");
    evaluate_by(model, num_inputs, input_indices, inputs, num_outputs, node_indices, outputs,
                "input_indices", argument_at, variable_at(LOOM_NODE));
  });
}

loom_status loom_value_dtype(const loom_value* value, loom_dtype* dtype) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(dtype, "dtype");
    *dtype = v.value.dtype() == loom::DataType::Float32 ? LOOM_FLOAT32 : LOOM_FLOAT64;
  });
}

loom_status loom_value_flags(const loom_value* value, int32_t* flags) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(flags, "flags");
    *flags = LOOM_FLAG_BATCH_AXIS | (v.value.is_sparse() ? LOOM_FLAG_SPARSE : 0) |
             (v.value.is_sequence() ? LOOM_FLAG_SEQUENCE_AXIS : 0);
  });
}

loom_status loom_value_sample_rank(const loom_value* value, int64_t* rank) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(rank, "rank");
    *rank = int64_t(v.value.sample_shape().rank());
  });
}

loom_status loom_value_sample_shape(const loom_value* value, int64_t* dims, int64_t capacity) {
  return guard(__func__, [&] { copy_shape(value_of(value).value.sample_shape(), dims, capacity); });
}

loom_status loom_value_num_sequences(const loom_value* value, int64_t* num_sequences) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(num_sequences, "num_sequences");
    *num_sequences = int64_t(v.value.num_sequences());
  });
}

loom_status loom_value_sequence_lengths(const loom_value* value, int64_t* lengths,
                                        int64_t capacity) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(lengths, "lengths");
    const std::vector<size_t> lens = v.value.sequence_lengths();
    LOOM_CHECK(capacity >= 0 && size_t(capacity) >= lens.size(), loom::ArgumentError, "capacity ",
               capacity, " is less than the ", lens.size(), " sequences");
    std::copy(lens.begin(), lens.end(), lengths);
  });
}

loom_status loom_value_element_count(const loom_value* value, int64_t* count) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(count, "count");
    *count = int64_t(element_count(v.value));
  });
}

loom_status loom_value_data(const loom_value* value, const void** data) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    check_out(data, "data");
    *data = packed_data(v);
  });
}

loom_status loom_value_copy_data(const loom_value* value, loom_dtype dtype, void* buffer,
                                 int64_t capacity) {
  return guard(__func__, [&] {
    const loom_value& v = value_of(value);
    const loom::DataType to = data_type(dtype);
    const size_t n = element_count(v.value);
    LOOM_CHECK(buffer || n == 0, loom::ArgumentError, "buffer is NULL");
    LOOM_CHECK(capacity >= 0 && size_t(capacity) >= n, loom::ArgumentError, "capacity ", capacity,
               " is less than the value's ", n, " elements");
    const void* from = packed_data(v);
    loom::dispatch(v.value.dtype(), [&](auto source) {
      loom::dispatch(to, [&](auto target) {
        using S = decltype(source);
        using D = decltype(target);
        std::copy_n(static_cast<const S*>(from), n, static_cast<D*>(buffer));
      });
    });
  });
}

loom_status loom_value_free(loom_value* value) {
  return guard(__func__, [&] {
    check_handle(value, HandleType::Value, "value", /*remove=*/true);
    delete value;
  });
}

}  // extern "C"
