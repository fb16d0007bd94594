// The op table: one OpSchema per op says everything about the op that is not its kernels: its
// name, inputs and attributes with CNTK's Python parameter names and defaults (from which the
// Python binding is generated), its ONNX counterpart, and the inputs the conformance harness
// (conformance_test.cpp) checks it on. Each op family's file defines its OpDefs and their
// schemas side by side; op_table.cpp collects them. loom/ops/README.md says how to add an op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loom/core/axis.h"
#include "loom/core/dictionary.h"
#include "loom/graph/function.h"
#include "loom/graph/op.h"

namespace loom {

// How a builder's argument is given: tensors become the op's inputs (Python also takes numbers
// and arrays, made Constants of the other inputs' dtype), the rest its attributes.
enum class ParamType {
  Tensor,
  // A tensor input the caller may leave out (Python's None; CNTK's sequence_lengths=None): the
  // op's last inputs, counted in max_inputs and not in min_inputs.
  OptionalTensor,
  // Every input, any number of them (CNTK's varargs, Python's *inputs): the op's only tensor
  // parameter, its first; the attributes after it are keyword-only in Python.
  Tensors,
  Double,
  // A list of numbers, held as a DictionaryVector of double (image_scaler's biases); Python
  // takes a number or a list or tuple of numbers.
  Doubles,
  Int,
  Bool,
  // A list of bools, held as a DictionaryVector of bool (bool_list_attribute, attribute_bools);
  // Python takes a bool or a list or tuple of bools (convolution's per-axis auto_padding).
  Bools,
  // An Axis, held as axis_attribute() writes it; Python takes an int (a static axis in Python
  // order, negative from the end), an Axis, or None (all static axes), or a list of them, held
  // as a DictionaryVector (an op that takes one axis refuses a list).
  Axis,
  // A list of ints, held as a DictionaryVector of int64 (int_list_attribute, attribute_ints);
  // Python takes an int, or a list or tuple of ints or of pairs of ints, flattened in order:
  // pad's pattern [(1, 1), (2, 2)] is held as 1, 1, 2, 2.
  Ints,
  // A shape in Python's order, held as an NDShape; Python takes an int (a rank-1 shape) or a
  // tuple or list of ints, -1 for the one dimension to infer (NDShape::kInferred).
  Shape,
  // A data type, held as its name (dtype_attribute, attribute_dtype: "float32", "float64");
  // Python takes numpy's dtypes (np.float32, np.float64, np.dtype('float64'), 'float32').
  DataType,
  // A string (an axis name's prefix).
  String,
  // A random seed: an optional uint64 attribute, left out for CNTK's auto_select (the op's
  // generator then comes from the global sequence, loom/graph/op.h); never filled from the
  // default. Python takes an int in [0, 2**64), or None or kAutoSelectRandomSeed (the default
  // it shows, as CNTK's) for auto_select.
  Seed,
};
// CNTK's SentinelValueForAutoSelectRandomSeed (the largest unsigned long less 2, on Linux's 64
// bits): a seed argument that stands for auto_select.
inline constexpr uint64_t kAutoSelectRandomSeed = UINT64_MAX - 2;
// Whether a parameter is one of the op's inputs (not an attribute).
inline bool is_tensor(ParamType type) {
  return type == ParamType::Tensor || type == ParamType::OptionalTensor ||
         type == ParamType::Tensors;
}

// An Axis as an attribute: a static axis as its (int64) index, any other by its name.
DictionaryValue axis_attribute(const Axis& axis);
// The Axis an attribute holds; an ArgumentError for a value of another type.
Axis attribute_axis(const DictionaryValue& value);
// A list of ints as an attribute (ParamType::Ints), and the ints an attribute holds (an
// ArgumentError for a value that is not a list of ints).
DictionaryValue int_list_attribute(const std::vector<int64_t>& ints);
std::vector<int64_t> attribute_ints(const DictionaryValue& value);
// A list of bools as an attribute (ParamType::Bools), and the bools an attribute holds (an
// ArgumentError for a value that is not a list of bools).
DictionaryValue bool_list_attribute(const std::vector<bool>& bools);
std::vector<bool> attribute_bools(const DictionaryValue& value);
// A data type as an attribute (ParamType::DataType), and the data type an attribute holds (an
// ArgumentError for another value).
DictionaryValue dtype_attribute(DataType dtype);
DataType attribute_dtype(const DictionaryValue& value);

// One parameter of an op's builder, in CNTK's Python order.
struct OpParam {
  const char* name;
  ParamType type = ParamType::Tensor;
  // An attribute's default (CNTK's); none when the caller must give it. A Double's default may
  // be an int64, shown as an int as CNTK writes it (normalization_time_constant=5000) and
  // filled as a double.
  DictionaryValue default_value = {};
  // The attribute's key where it is not the parameter's name (model files keep the keys Loom
  // first stored: slice's "begin" for begin_index).
  const char* key = nullptr;
  // Python's default is None, which leaves the attribute out (gather's
  // new_sequence_axis_typeinfo: the builder then does without it).
  bool none_default = false;
  // Python shows the default of a list type (Ints, Bools, Doubles) as a list, CNTK's mutable
  // defaults (sharing=[True]), not as a tuple (strides=(1,)).
  bool list_default = false;
  // Python places the parameter after name='' (CNTK's batch_normalization added running_count
  // there).
  bool after_name = false;
  // Python warns with this message when the argument is None (CNTK's batch_normalization
  // without running_count).
  const char* none_warning = nullptr;

  const char* attribute_key() const { return key ? key : name; }
};

// An op's ONNX counterpart. With `generic`, loom/deploy exports and imports the op from this
// entry alone: the same inputs in the same order, the attributes renamed; otherwise the
// exporter and importer have code of their own for it, or there is none and none_because says
// why.
struct OnnxAttribute {
  const char* key;      // Loom's attribute (a double)
  const char* onnx;     // ONNX's float attribute
  double onnx_default;  // ONNX's value when a node leaves it out
};
struct OnnxMapping {
  const char* op_type = nullptr;
  bool generic = false;
  std::vector<OnnxAttribute> attributes = {};
  const char* none_because = nullptr;

  // Out of line: inlined into the families' long initializer lists, g++ 12 reports false
  // use-after-free and maybe-uninitialized errors in it.
  ~OnnxMapping();
};

// One input of a conformance case.
struct ConformanceInput {
  NDShape shape;  // the sample shape
  // With the batch (or sequence) axes of the case; else a parameter that every sample shares.
  bool per_sample = true;
  double low = -1, high = 1;  // values drawn uniformly (never within 0.05 of 0 across 0)
  bool constant = false;      // a shared input that is a Constant, not a Parameter
  // In the sequence mode a per-sample input is a sequence; false: one sample for each sequence,
  // without a sequence axis (broadcast_as's operand).
  bool over_sequences = true;
  bool integers = false;  // the values rounded down to integers (where's 0/1 conditions)
  // One-hot samples of a vector shape (classes drawn uniformly), in sparse CSR form: also
  // checked against the same data dense, and left out of the gradients (times' embedding
  // lookup, a loss's labels).
  bool sparse = false;
  // Values cycled over the elements instead of random ones, where the op needs valid data
  // (forward_backward's frame-aligned labels).
  std::vector<double> values = {};
  // The op's input is not the drawn variable but the op of the table named `through` applied to
  // it, and to the case's input `through_with` where that is >= 0 (labels_to_graph(labels), a
  // sequence on where's new axis as sequence.gather(x, condition) gives it).
  const char* through = nullptr;
  int through_with = -1;
  // False for an input that a composite takes no gradient to (crop_automatic's referent, whose
  // shape alone it reads; sequence.unpack's mask): left out of the gradients.
  bool differentiated = true;
};

// The mean and variance of a random op's output elements (conformance_test.cpp checks a draw
// against them, within six standard errors of the draw's size).
struct DrawMoments {
  double mean, variance;
};

// Inputs the conformance harness evaluates an op on, in every mode it has: gradients against
// finite differences in float64, float32 against float64, ragged sequences packed against one
// at a time, save and load, and the ONNX round trip where the op is mapped.
struct ConformanceCase {
  std::vector<ConformanceInput> inputs;
  Dictionary attributes = {};  // beyond the defaults
  bool batch = true;           // run over a batch of samples
  bool sequences = true;       // run over ragged sequences
  // False where the gradient is by design not the forward's derivative (stop_gradient,
  // straight_through): the op's own tests check it instead.
  bool finite_differences = true;
  // False where the case is outside what the op's ONNX mapping writes (a gather from each
  // sample's own reference): the ONNX round trip skips it.
  bool onnx = true;
  // An output whose first axis is free (the minibatch's longest sequence: sequence.unpack): a
  // sequence evaluated alone gives its own length, the minibatch that padded with this value.
  double padding = 0;
  // Forward writes input 1's value into input 0, a parameter, and outputs it (assign): both
  // checked after an evaluation.
  bool assigns = false;
  // Random ops (OpTraits::is_random; the case gives the seed): the output is input 0 in training
  // passes too (dropout at rate 0), and the moments of the output's elements.
  bool identity = false;
  std::optional<DrawMoments> moments = {};
  // An op without computation that stands for the table's op of this name (custom_proxy_op):
  // the harness checks that save and load keep it and that its ONNX round trip computes what
  // that op computes.
  const char* stands_for = nullptr;
  // False where an output sample is computed from other samples of the minibatch by design
  // (cosine_distance_with_negative_samples' negatives): a sequence alone cannot give it.
  bool per_sequence = true;
  // The output the case checks, of an op of several (TopK: 0 the values, 1 the positions).
  size_t output = 0;
  // An output without dynamic axes that is the sum over the minibatch's sequences (CNTK's one
  // number: forward_backward's): packed, it is the sum of the sequences' values alone, and the
  // gradients are each sequence's own. Other outputs without dynamic axes skip that check.
  bool sums_sequences = false;
};

// A Python function of an op that has several (RandomDistribution: uniform, normal_like, ...):
// its name, module, parameters and doc as OpSchema's, and the attributes it sets itself.
struct PythonVariant {
  const char* python;
  const char* module = "ops";
  std::vector<OpParam> params = {};
  const char* doc = "";
  Dictionary fixed = {};  // the attributes the function sets (the distribution)
};

// An op's schema. A composite (CNTK's functions built from other ops: times_transpose,
// sequence.softmax, sum) has no OpDef of its own (op null): `build` makes its graph, which model
// files and ONNX hold as the primitives it is made of, so the registry's lookups by op name
// (find_op, model loading) and the generic ONNX conversion pass it by.
struct OpSchema {
  const OpDef* op;
  size_t min_inputs, max_inputs;  // max SIZE_MAX: any number
  // The Python function (at loom.<module>.<python>, and loom.<python> for module "ops"), made
  // from params; null for an op Python does not call by itself (the layers' LayerNormalization).
  const char* python = nullptr;
  const char* module = "ops";
  // Without name='', which every builder takes last (Python before any after_name parameter).
  // Inputs past the parameters' (max_inputs counts them) are the C++ builder's alone: the
  // Convolution layers' fused bias.
  std::vector<OpParam> params = {};
  // Python's binary ops that take 2 or more operands (CNTK's associative_multi_arg).
  bool associative = false;
  const char* doc = "";
  OnnxMapping onnx = {};
  std::vector<ConformanceCase> conformance = {};
  // The op's Python functions beyond `python` (or instead of it, with python null).
  std::vector<PythonVariant> variants = {};
  // The op's C++ builder, where that does more than make the primitive (splice along a new
  // leading axis stacks its inputs, past_value's initial_state left out is a zero constant) or
  // where the op is a composite; apply calls it with every attribute (by key).
  Function (*build)(std::vector<Variable> inputs, const Dictionary& attributes,
                    const std::string& name) = nullptr;

  // The op's OpDef name, or a composite's Python path ("sequence.softmax"): what find_schema
  // takes and the conformance harness reports.
  std::string name() const;

  // The op applied to inputs with the attributes given (by key) and the defaults of the rest
  // (of variant's parameters, with its fixed attributes, where given); an ArgumentError names
  // the op and a missing attribute or a wrong input count.
  Function apply(std::vector<Variable> inputs, const Dictionary& attributes,
                 const std::string& name = "", const PythonVariant* variant = nullptr) const;
};

// The schema of an op that Python does not call by itself (the layers' LayerNormalization,
// debug_model's nodes), with its arity and conformance cases.
OpSchema internal_op(const OpDef& op, size_t min_inputs, size_t max_inputs,
                     std::vector<ConformanceCase> conformance);

// Every op, in the order of their families.
const std::vector<OpSchema>& op_table();
// The schema named `name` (OpSchema::name: an OpDef's name, or a composite's Python path), or
// null.
const OpSchema* find_schema(std::string_view name);
// The schema of op; an ArgumentError when op is in no schema.
const OpSchema& schema_of(const OpDef& op);
// An ArgumentError naming the op unless it takes count inputs (min_inputs to max_inputs).
void check_input_count(const OpSchema& s, size_t count);

// The schemas of each op family, defined beside its OpDefs.
std::vector<OpSchema> elementwise_schemas();
std::vector<OpSchema> linear_schemas();
std::vector<OpSchema> losses_schemas();
std::vector<OpSchema> reduction_schemas();
std::vector<OpSchema> shape_schemas();
std::vector<OpSchema> softmax_schemas();
std::vector<OpSchema> sequence_schemas();
std::vector<OpSchema> recurrence_schemas();
std::vector<OpSchema> assign_schemas();
std::vector<OpSchema> convolution_schemas();
std::vector<OpSchema> pooling_schemas();
std::vector<OpSchema> random_schemas();
std::vector<OpSchema> normalization_schemas();
std::vector<OpSchema> fused_rnn_schemas();
std::vector<OpSchema> dynamic_axes_schemas();
std::vector<OpSchema> custom_proxy_schemas();

}  // namespace loom
