// The conformance harness: every op of the op table (op_schema.h), on every case its entry
// gives, in every mode: gradients against finite differences in float64, float32 against
// float64, ragged sequences (one of them empty) packed against one at a time, save and load, and
// the ONNX round trip where the table maps the op; sparse inputs against the same data dense;
// assign's write; and for random ops, with their draws held in the gradient check, the same
// draws from the same seed (in another function, after save and load) and the moments of large
// draws; an op without computation (custom_proxy_op) only with save and load and an ONNX round
// trip that computes the op it stands for. An op without cases fails unless it is listed below
// with why. Blocks (as_block) are not ops of the table: cases of a few representative ops are
// also wrapped in a block (the op over placeholders, as_block onto the case's inputs), which
// must give exactly the op's values and gradients and pass every check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "loom/deploy/onnx.h"
#include "loom/graph/function.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/op_schema.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// Ops no mode of the harness applies to, each with why and the tests that cover it.
const std::map<std::string, std::string> kCoveredElsewhere = {};

enum class Mode { Batch, Sequences };

// How a case is built: the op itself, or the op inside a block.
enum class Form { Op, Block };

// One case of one op built in one data type, with values for its per-sample inputs.
struct Built {
  Function f;
  ValueMap arguments;
  std::vector<Variable> wrt;  // the inputs and parameters the op differentiates
  std::vector<Variable> per_sample;
  Function op;  // the op on the same inputs (f itself, or what f's block wraps)
};

// The op applied to placeholders standing for the per-sample inputs (the shared ones, parameters,
// stay inside), made a block over the inputs. A placeholder has the type of its input, or none
// for a sparse one (a placeholder's type is dense), which the input gives it.
Function wrapped_in_a_block(const OpSchema& s, const std::vector<Variable>& inputs,
                            const Dictionary& attributes, size_t output) {
  std::vector<Variable> inner;
  std::vector<std::pair<Variable, Variable>> arguments;
  for (const Variable& v : inputs) {
    if (!v.is_input()) {
      inner.push_back(v);
      continue;
    }
    const std::string name = "p_" + v.name();
    inner.push_back(v.is_sparse() ? placeholder(name)
                                  : placeholder(v.shape(), v.dtype(), v.dynamic_axes(), name));
    arguments.emplace_back(inner.back(), v);
  }
  return as_block(combine({s.apply(inner, attributes).outputs().at(output)}), arguments,
                  "Wrapped" + s.name(), "block");
}

// The sequence lengths of the sequence mode: ragged, with an empty sequence (Loom has them,
// from where, gather and slice; CNTK has none: docs/decisions.md).
const std::vector<size_t> kLengths = {3, 0, 1, 2};

// The data of one input in one data type: uniform random numbers (or in.values cycled), rounded
// down for integers, one-hot rows of random classes for a sparse input; a batch of `samples`,
// or sequences of kLengths.
Value draw(const ConformanceInput& in, DataType dtype, uint64_t seed, bool sequences,
           size_t samples) {
  size_t count = samples;
  if (sequences) {
    count = 0;
    for (size_t len : kLengths) count += len;
  }
  const size_t n = in.shape.total_size();
  if (in.sparse) {
    LOOM_CHECK(in.shape.rank() == 1, StateError, "a sparse conformance input is a vector, not ",
               in.shape.to_string());
    std::vector<size_t> classes;
    for (double u : gradient_check_detail::random_numbers(count, seed, 0, 1))
      classes.push_back(std::min(size_t(u * double(n)), n - 1));
    if (!sequences) return Value::one_hot(n, classes, dtype);
    std::vector<std::vector<size_t>> steps;
    auto it = classes.begin();
    for (size_t len : kLengths) {
      steps.emplace_back(it, it + std::ptrdiff_t(len));
      it += std::ptrdiff_t(len);
    }
    return Value::one_hot_sequences(n, steps, dtype);
  }
  std::vector<double> x = gradient_check_detail::random_numbers(count * n, seed, in.low, in.high);
  for (size_t i = 0; i < x.size(); ++i) {
    if (!in.values.empty()) x[i] = in.values[i % in.values.size()];
    if (in.integers) x[i] = std::floor(x[i]);
  }
  return dispatch(dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> data = gradient_check_detail::cast<T>(x);
    return sequences ? Value::create_sequences<T>(in.shape, data, kLengths)
                     : Value::create_batch<T>(in.shape, data);
  });
}

// The case built in dtype; with `dense`, a sparse input is a dense one given the same data (the
// computation the sparse one must equal).
Built build(const OpSchema& s, const ConformanceCase& c, DataType dtype, Mode mode,
            Form form = Form::Op, bool dense = false) {
  Built b;
  std::vector<Variable> inputs, drawn;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const ConformanceInput& in = c.inputs[i];
    const uint64_t seed = 100 + i;
    if (in.per_sample) {
      const bool sparse = in.sparse && !dense;
      const InputOptions options{.dtype = dtype,
                                 .is_sparse = sparse,
                                 .name = "x" + std::to_string(i),
                                 .needs_gradient = !in.sparse};
      const bool sequences = mode == Mode::Sequences && in.over_sequences;
      const Variable x = sequences ? sequence::input_variable(in.shape, options)
                                   : input_variable(in.shape, options);
      const Value value =
          draw(in, dtype, seed, sequences, mode == Mode::Sequences ? kLengths.size() : size_t{3});
      b.arguments.emplace(x,
                          sparse || !value.is_sparse()
                              ? value
                              : Value(value.data().to_dense(), value.is_sequence(), value.mask()));
      b.per_sample.push_back(x);
      drawn.push_back(x);
    } else {
      const NDArrayView value = random_array(in.shape, dtype, seed, in.low, in.high);
      const std::string name = "p" + std::to_string(i);
      drawn.push_back(in.constant ? Variable(constant(value, name)) : parameter(value, name));
    }
  }
  inputs = drawn;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const ConformanceInput& in = c.inputs[i];
    if (!in.through) continue;
    const OpSchema* through = find_schema(in.through);
    if (!through) throw StateError(std::string(in.through) + " is not in the op table");
    std::vector<Variable> operands{drawn[i]};
    if (in.through_with >= 0) operands.push_back(drawn.at(size_t(in.through_with)));
    inputs[i] = through->apply(operands, {}).output();
  }
  b.op = s.apply(inputs, c.attributes);
  // An op of several outputs: the case's output alone.
  const Function op = b.op.outputs().size() > 1 ? combine({b.op.outputs().at(c.output)}) : b.op;
  b.f = form == Form::Op ? op : wrapped_in_a_block(s, inputs, c.attributes, c.output);
  // A composite (or a build that made other ops) is differentiated through the ops it is made
  // of: every input.
  const InputSet differentiable = s.op && b.op.op_name() == s.op->name()
                                      ? s.op->traits(b.op.attributes()).differentiable
                                      : InputSet::all();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (differentiable.contains(i) && !c.inputs[i].sparse && c.inputs[i].differentiated)
      b.wrt.push_back(drawn[i]);
  return b;
}

bool is_random(const OpSchema& s, const ConformanceCase& c) {
  return s.op && s.op->traits(c.attributes).is_random;
}

std::vector<Mode> modes(const ConformanceCase& c) {
  std::vector<Mode> m;
  if (c.batch) m.push_back(Mode::Batch);
  if (c.sequences) m.push_back(Mode::Sequences);
  return m;
}

std::string case_label(const OpSchema& s, size_t k, Mode mode) {
  return s.name() + " case " + std::to_string(k) +
         (mode == Mode::Sequences ? " over sequences" : " over a batch");
}

std::vector<double> output_of(const Built& b) {
  return b.f.eval_one(b.arguments).data().to_vector<double>();
}

// The loaded function's arguments, bound to b's values by name.
ValueMap rebind(const Function& loaded, const Built& b) {
  ValueMap args;
  for (const Variable& a : loaded.arguments())
    for (const auto& [v, value] : b.arguments)
      if (v.name() == a.name()) args.emplace(a, value);
  return args;
}

// The checks of one case in one mode (the packed-sequence check in the sequence mode only),
// each for the op itself or wrapped in a block.

void check_gradients(const OpSchema& s, const ConformanceCase& c, Mode mode, Form form) {
  if (!c.finite_differences || c.stands_for) return;
  const Built b = build(s, c, DataType::Float64, mode, form);
  if (!b.wrt.empty()) expect_gradients_match(b.f, b.arguments, b.wrt);
}

// The data type of the case's output built in dtype: an op with a "dtype" attribute (cast)
// gives that type.
DataType output_dtype(const ConformanceCase& c, DataType dtype) {
  return c.attributes.contains("dtype") ? attribute_dtype(c.attributes.at("dtype")) : dtype;
}

// Float32 against float64, compared after conversion to double. A random op draws the same in
// either type from the same seed (in double, rounded to the type).
void check_float32(const OpSchema& s, const ConformanceCase& c, Mode mode, Form form) {
  if (c.stands_for) return;
  const Built b32 = build(s, c, DataType::Float32, mode, form);
  const Built b64 = build(s, c, DataType::Float64, mode, form);
  ASSERT_EQ(b32.f.output().dtype(), output_dtype(c, DataType::Float32));
  ASSERT_EQ(b64.f.output().dtype(), output_dtype(c, DataType::Float64));
  gradient_check_detail::expect_all_near(output_of(b32), output_of(b64), 1e-5, "float32 output");
  if (b32.wrt.empty()) return;
  const ValueMap g32 = weighted_output(b32.f).grad(b32.arguments, b32.wrt);
  const ValueMap g64 = weighted_output(b64.f).grad(b64.arguments, b64.wrt);
  for (size_t i = 0; i < b32.wrt.size(); ++i)
    gradient_check_detail::expect_all_near(g32.at(b32.wrt[i]).data().to_vector<double>(),
                                           g64.at(b64.wrt[i]).data().to_vector<double>(), 1e-5,
                                           "float32 gradient " + std::to_string(i));
}

// Packed sequences give what each sequence gives alone, and so do the gradients of the
// per-sample inputs the op differentiates (not of indices, e.g. gather's). Not for a random op,
// whose draws depend on where a step is in the minibatch, nor for an output without dynamic
// axes unless it is the sum over the sequences (sums_sequences). A sparse input's sequences
// alone are its CSR rows of each.
void check_packed_sequences(const OpSchema& s, const ConformanceCase& c, Form form) {
  if (!c.sequences || !c.per_sequence || is_random(s, c) || c.stands_for) return;
  const Built b = build(s, c, DataType::Float64, Mode::Sequences, form);
  if (b.per_sample.empty() || (b.f.output().dynamic_axes().empty() && !c.sums_sequences)) return;
  std::vector<Variable> wrt;
  for (const Variable& x : b.per_sample)
    if (std::find(b.wrt.begin(), b.wrt.end(), x) != b.wrt.end()) wrt.push_back(x);
  expect_sequences_match_individually(b.f, b.arguments, wrt, 1e-12, c.padding);
}

// An op without computation (stands_for) is saved again as it was.
void check_save_and_load(const OpSchema& s, const ConformanceCase& c, Mode mode, Form form) {
  const Built b = build(s, c, DataType::Float32, mode, form);
  const std::vector<uint8_t> bytes = save_model_to_bytes(b.f);
  const Function loaded = load_model_from_bytes(bytes);
  EXPECT_EQ(loaded.op_name(), b.f.op_name());
  EXPECT_EQ(loaded.is_block(), form == Form::Block);
  if (c.stands_for) {
    EXPECT_EQ(save_model_to_bytes(loaded), bytes);
    return;
  }
  EXPECT_EQ(loaded.eval_one(rebind(loaded, b)).data().to_vector<double>(), output_of(b));
}

// An op without computation (stands_for) comes back as the op it stands for; a composite as the
// ops it is made of.
void check_onnx_round_trip(const OpSchema& s, const ConformanceCase& c, Form form) {
  const bool exported = s.op ? s.onnx.op_type && !s.onnx.none_because : !s.onnx.none_because;
  if (!c.stands_for && !exported) return;
  if (!c.batch || !c.onnx) return;
  const Built b = build(s, c, DataType::Float32, Mode::Batch, form);
  const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(b.f));
  const Function expected =
      c.stands_for ? find_schema(c.stands_for)->apply(b.op.inputs(), {}) : b.f;
  gradient_check_detail::expect_all_near(
      loaded.eval_one(rebind(loaded, b)).data().to_vector<double>(),
      expected.eval_one(b.arguments).data().to_vector<double>(), 1e-6, "ONNX round trip");
}

// A case with sparse inputs gives the values, and the other inputs' gradients, that it gives
// for the same data dense.
void check_sparse_inputs(const OpSchema& s, const ConformanceCase& c, Mode mode) {
  if (std::none_of(c.inputs.begin(), c.inputs.end(),
                   [](const ConformanceInput& in) { return in.sparse; }))
    return;
  const Built sparse = build(s, c, DataType::Float64, mode);
  const Built dense = build(s, c, DataType::Float64, mode, Form::Op, true);
  gradient_check_detail::expect_all_near(output_of(sparse), output_of(dense), 1e-12,
                                         "output of sparse inputs");
  if (sparse.wrt.empty() || is_random(s, c)) return;
  const ValueMap gs = weighted_output(sparse.f).grad(sparse.arguments, sparse.wrt);
  const ValueMap gd = weighted_output(dense.f).grad(dense.arguments, dense.wrt);
  for (size_t i = 0; i < sparse.wrt.size(); ++i)
    gradient_check_detail::expect_all_near(gs.at(sparse.wrt[i]).data().to_vector<double>(),
                                           gd.at(dense.wrt[i]).data().to_vector<double>(), 1e-12,
                                           "gradient of sparse inputs' " + sparse.wrt[i].name());
}

// Assign writes input 1's value into input 0, a parameter, and outputs it.
void check_assigns(const OpSchema& s, const ConformanceCase& c, Mode mode) {
  if (!c.assigns) return;
  const Built b = build(s, c, DataType::Float64, mode);
  const Variable ref = b.op.inputs().at(0), input = b.op.inputs().at(1);
  ASSERT_TRUE(ref.is_parameter() && input.is_parameter()) << "a case of two parameters";
  const std::vector<double> before = ref.value().to_vector<double>(),
                            value = input.value().to_vector<double>();
  ASSERT_NE(before, value);
  EXPECT_EQ(output_of(b), value) << "the output";
  EXPECT_EQ(ref.value().to_vector<double>(), value) << "the value written";
}

// One training pass of b's function (random ops draw in training; dropout does only then).
std::vector<double> training_output(const Built& b) {
  return b.f.forward(b.arguments).second.at(b.f.output()).data().to_vector<double>();
}

// A random op draws the same from the same seed (in a second function, and in the function
// saved and loaded); dropout at rate 0 is the identity; the moments of a large draw are the
// distribution's, within six standard errors (their fourth moment taken as at most 9 σ⁴, as for
// every distribution drawn here).
void check_draws(const OpSchema& s, const ConformanceCase& c, Mode mode) {
  if (!is_random(s, c)) return;
  const Built b = build(s, c, DataType::Float64, mode);
  const std::vector<double> first = training_output(b);
  EXPECT_EQ(training_output(build(s, c, DataType::Float64, mode)), first)
      << "a second function of the same seed draws otherwise";
  const Function loaded = load_model_from_bytes(save_model_to_bytes(b.f));
  EXPECT_EQ(loaded.forward(rebind(loaded, b)).second.at(loaded.output()).data().to_vector<double>(),
            training_output(b))
      << "the function saved and loaded draws otherwise";
  if (c.identity) {
    EXPECT_EQ(first, b.arguments.at(b.per_sample.at(0)).data().to_vector<double>())
        << "not the identity";
  }
  if (!c.moments) return;
  const double n = double(first.size());
  double mean = 0, variance = 0;
  for (double x : first) mean += x / n;
  for (double x : first) variance += (x - mean) * (x - mean) / n;
  const DrawMoments& expected = *c.moments;
  EXPECT_NEAR(mean, expected.mean, 6 * std::sqrt(expected.variance / n)) << "mean of the draw";
  EXPECT_NEAR(variance, expected.variance, 6 * std::sqrt(8 / n) * expected.variance)
      << "variance of the draw";
}

class Conformance : public ::testing::TestWithParam<size_t> {
 protected:
  const OpSchema& schema() const { return op_table()[GetParam()]; }
  // check(schema, case, mode) for every case of the op in each of its modes.
  template <class Check>
  void in_every_mode(Check check) const {
    const OpSchema& s = schema();
    for (size_t k = 0; k < s.conformance.size(); ++k)
      for (Mode mode : modes(s.conformance[k])) {
        SCOPED_TRACE(case_label(s, k, mode));
        check(s, s.conformance[k], mode);
      }
  }
};

TEST_P(Conformance, GradientsMatchFiniteDifferences) {
  in_every_mode([](const OpSchema& s, const ConformanceCase& c, Mode mode) {
    check_gradients(s, c, mode, Form::Op);
  });
}

TEST_P(Conformance, Float32MatchesFloat64) {
  in_every_mode([](const OpSchema& s, const ConformanceCase& c, Mode mode) {
    check_float32(s, c, mode, Form::Op);
  });
}

TEST_P(Conformance, PackedSequencesMatchOneAtATime) {
  const OpSchema& s = schema();
  for (size_t k = 0; k < s.conformance.size(); ++k) {
    SCOPED_TRACE(case_label(s, k, Mode::Sequences));
    check_packed_sequences(s, s.conformance[k], Form::Op);
  }
}

TEST_P(Conformance, SaveAndLoadGiveTheSameOutputs) {
  in_every_mode([](const OpSchema& s, const ConformanceCase& c, Mode mode) {
    check_save_and_load(s, c, mode, Form::Op);
  });
}

TEST_P(Conformance, OnnxRoundTripGivesTheSameOutputs) {
  const OpSchema& s = schema();
  for (size_t k = 0; k < s.conformance.size(); ++k) {
    SCOPED_TRACE(case_label(s, k, Mode::Batch));
    check_onnx_round_trip(s, s.conformance[k], Form::Op);
  }
}

TEST_P(Conformance, SparseInputsGiveTheDenseValues) {
  in_every_mode(check_sparse_inputs);
}

TEST_P(Conformance, AssignsWriteTheirInput) {
  in_every_mode(check_assigns);
}

TEST_P(Conformance, RandomOpsDrawTheSameFromTheSameSeed) {
  in_every_mode(check_draws);
}

// A composite's name without its dot (sequence_softmax).
std::string op_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = op_table()[info.param].name();
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, Conformance, ::testing::Range(size_t{0}, op_table().size()),
                         op_name);

// A table op's case wrapped in a block: an elementwise binary op broadcasting a parameter, a
// reduction along a static axis and over all axes, a sequence op, times with its weights and of
// sparse rows, sequence.gather of integer conditions, batch normalization of constant running
// statistics, broadcast_as of an input without the sequence axis, and cross_entropy_with_softmax
// along axis 0 of a matrix sample.
struct BlockCase {
  const char* op;
  size_t k;  // the op's conformance case
};
const BlockCase kBlockCases[] = {{"Plus", 1},
                                 {"ReduceSum", 1},
                                 {"ReduceSum", 5},
                                 {"SequenceReduceSum", 0},
                                 {"Times", 0},
                                 {"Times", 1},
                                 {"SequenceGather", 0},
                                 {"BatchNormalization", 0},
                                 {"SequenceBroadcastAs", 0},
                                 {"CrossEntropyWithSoftmax", 2}};

class BlockConformance : public ::testing::TestWithParam<BlockCase> {
 protected:
  const OpSchema& schema() const {
    const OpSchema* s = find_schema(GetParam().op);
    if (!s) throw StateError(std::string(GetParam().op) + " is not in the op table");
    return *s;
  }
  const ConformanceCase& conformance_case() const {
    const OpSchema& s = schema();
    if (GetParam().k >= s.conformance.size())
      throw StateError(std::string(GetParam().op) + " has no case " + std::to_string(GetParam().k));
    return s.conformance[GetParam().k];
  }
};

TEST_P(BlockConformance, GivesTheOpsValuesAndGradients) {
  const OpSchema& s = schema();
  const ConformanceCase& c = conformance_case();
  for (Mode mode : modes(c)) {
    SCOPED_TRACE(case_label(s, GetParam().k, mode));
    const Built b = build(s, c, DataType::Float64, mode, Form::Block);
    ASSERT_TRUE(b.f.is_block());
    EXPECT_EQ(b.f.op_name(), std::string("Wrapped") + s.op->name());
    EXPECT_EQ(b.f.output().producer().op_name(), s.op->name());
    EXPECT_EQ(output_of(b), b.op.eval_one(b.arguments).data().to_vector<double>());
    if (b.wrt.empty()) continue;
    const ValueMap block = weighted_output(b.f).grad(b.arguments, b.wrt);
    const ValueMap op = weighted_output(b.op).grad(b.arguments, b.wrt);
    for (const Variable& v : b.wrt)
      EXPECT_EQ(block.at(v).data().to_vector<double>(), op.at(v).data().to_vector<double>())
          << "gradient of " << v.name();
  }
}

TEST_P(BlockConformance, GradientsMatchFiniteDifferences) {
  for (Mode mode : modes(conformance_case())) {
    SCOPED_TRACE(case_label(schema(), GetParam().k, mode));
    check_gradients(schema(), conformance_case(), mode, Form::Block);
  }
}

TEST_P(BlockConformance, Float32MatchesFloat64) {
  for (Mode mode : modes(conformance_case())) {
    SCOPED_TRACE(case_label(schema(), GetParam().k, mode));
    check_float32(schema(), conformance_case(), mode, Form::Block);
  }
}

TEST_P(BlockConformance, PackedSequencesMatchOneAtATime) {
  check_packed_sequences(schema(), conformance_case(), Form::Block);
}

TEST_P(BlockConformance, SaveAndLoadGiveTheSameOutputs) {
  for (Mode mode : modes(conformance_case())) {
    SCOPED_TRACE(case_label(schema(), GetParam().k, mode));
    check_save_and_load(schema(), conformance_case(), mode, Form::Block);
  }
}

TEST_P(BlockConformance, OnnxRoundTripGivesTheSameOutputs) {
  check_onnx_round_trip(schema(), conformance_case(), Form::Block);
}

INSTANTIATE_TEST_SUITE_P(TableOps, BlockConformance, ::testing::ValuesIn(kBlockCases),
                         [](const ::testing::TestParamInfo<BlockCase>& info) {
                           return std::string(info.param.op) + "Case" +
                                  std::to_string(info.param.k);
                         });

TEST(OpTable, EveryOpHasConformanceCasesOrNamesTheTestsThatCoverIt) {
  std::set<std::string> uncovered;
  for (const OpSchema& s : op_table()) {
    const std::string name = s.name();
    if (s.conformance.empty()) {
      uncovered.insert(name);
      EXPECT_TRUE(kCoveredElsewhere.count(name)) << name << " has no conformance cases";
    } else {
      EXPECT_FALSE(kCoveredElsewhere.count(name))
          << name << " has conformance cases: take it off kCoveredElsewhere";
    }
    for (const ConformanceCase& c : s.conformance) {
      EXPECT_TRUE(c.batch || c.sequences) << name << ": a case that runs in no mode";
      EXPECT_GE(c.inputs.size(), s.min_inputs) << name;
      EXPECT_LE(c.inputs.size(), s.max_inputs) << name;
    }
  }
  for (const auto& [name, test] : kCoveredElsewhere)
    EXPECT_TRUE(uncovered.count(name)) << name << " is not in the op table";
}

TEST(OpTable, EveryOpSaysWhatItIsInOnnx) {
  for (const OpSchema& s : op_table()) {
    if (!s.python) continue;  // internal ops' mappings, if any, are loom/deploy's own code
    if (!s.op) {
      EXPECT_FALSE(s.onnx.op_type) << s.name() << ": a composite exports as the ops it is made of";
      continue;
    }
    EXPECT_TRUE(s.onnx.op_type || s.onnx.none_because)
        << s.op->name() << ": give an ONNX op type or say why there is none";
    EXPECT_FALSE(s.onnx.generic && !s.onnx.op_type) << s.op->name();
  }
}

TEST(OpTable, PythonParametersAreWellFormed) {
  std::set<std::string> names;
  for (const OpSchema& s : op_table()) {
    if (!s.python) continue;
    EXPECT_TRUE(names.insert(std::string(s.module) + "." + s.python).second)
        << "two ops are " << s.module << "." << s.python;
    size_t required = 0, optional = 0;
    for (const OpParam& p : s.params) {
      if (p.type == ParamType::Tensors) {  // varargs: the only tensors, first
        EXPECT_EQ(&p, &s.params[0]) << s.python << ": varargs come first";
        EXPECT_EQ(s.max_inputs, SIZE_MAX) << s.python;
        required = s.min_inputs, optional = SIZE_MAX - required;
      } else if (p.type == ParamType::OptionalTensor) {
        ++optional;
      } else if (p.type == ParamType::Tensor) {
        EXPECT_EQ(optional, 0u) << s.python << ": optional inputs come last";
        ++required;
      }
    }
    EXPECT_EQ(required, s.min_inputs) << s.python;
    // Inputs past the parameters' are the C++ builder's alone (the Convolution layers' bias).
    EXPECT_LE(required + optional, s.max_inputs) << s.python;
  }
}

TEST(OpTable, ApplyFillsDefaultsAndNamesMissingAttributes) {
  const Variable x = input_variable({3});
  const Function elu = find_schema("ELU")->apply({x}, {});
  EXPECT_EQ(elu.attributes().get<double>("alpha"), 1.0);
  EXPECT_EQ(find_schema("ELU")
                ->apply({x}, Dictionary({{"alpha", 0.5}}))
                .attributes()
                .get<double>("alpha"),
            0.5);
  try {
    find_schema("HardSigmoid")->apply({x}, Dictionary({{"alpha", 0.2}}));
    FAIL();
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(), "hard_sigmoid: argument 'beta' is required");
  }
  EXPECT_THROW(find_schema("Plus")->apply({x}, {}), ArgumentError);
}

}  // namespace
}  // namespace loom
