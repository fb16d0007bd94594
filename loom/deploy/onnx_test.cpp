// ONNX export and import: models made of every op Loom exports survive export -> import with
// the same outputs (float32 and float64), and bad models and bad files give clear errors.
// tests/e2e/onnx_test.py checks the files with onnx.checker, OpenCV and onnxruntime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/core/random.h"
#include "loom/deploy/onnx.h"
#include "loom/deploy/onnx.pb.h"
#include "loom/layers/convolution.h"
#include "loom/layers/default_options.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/normalization.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
#include "loom/ops/gradient_check.h"
#include "loom/ops/ops.h"
#include "loom/serialize/model_file.h"
#include "tests/support/trained_statistics.h"

namespace loom {
namespace {

// A batch of n samples of the argument's shape with values in [-1, 1) (in (0.1, 2) when
// positive, for log and sqrt).
NDArrayView batch(const Variable& argument, size_t n, bool positive = false) {
  RandomGenerator random(42);
  const size_t size = n * argument.shape().total_size();
  const NDShape shape = argument.shape().prepend(n);
  std::vector<double> v(size);
  for (double& x : v) x = positive ? 0.1 + 1.9 * random.uniform() : 2 * random.uniform() - 1;
  if (argument.dtype() == DataType::Float64) return NDArrayView::from_vector(shape, v);
  return NDArrayView::from_vector(shape, std::vector<float>(v.begin(), v.end()));
}

std::vector<double> values(const Value& v) {
  if (v.dtype() == DataType::Float64) return v.data().to_vector<double>();
  const auto f = v.data().to_vector<float>();
  return {f.begin(), f.end()};
}

// Exports model, imports the file and compares the outputs on one batch; returns the import.
Function round_trip(const Function& model, bool positive = false, double tolerance = 1e-5) {
  const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(model), "model.onnx");
  EXPECT_EQ(loaded.arguments().size(), model.arguments().size());
  EXPECT_EQ(loaded.output().shape(), model.output().shape());
  EXPECT_EQ(loaded.output().dtype(), model.output().dtype());
  const NDArrayView x = batch(model.arguments()[0], 3, positive);
  const std::vector<double> expected = values(model.eval(x)), got = values(loaded.eval(x));
  EXPECT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size() && i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tolerance) << "element " << i;
  return loaded;
}

// Sets every batch normalization's statistics as if trained.

TEST(Onnx, MlpRoundTrip) {
  Variable x = input_variable(6, {.name = "features"});
  Function model = Sequential({Dense(8, {.activation = relu}), Dense(7, {.activation = sigmoid}),
                               Dropout(0.5), Dense(5, {.activation = tanh}), BatchNormalization(),
                               Dense(4, {.activation = None})})(x);
  loom::testing::set_trained_statistics(model);
  const Function loaded = round_trip(softmax(model));
  EXPECT_EQ(loaded.arguments()[0].name(), "features");
  // Parameters keep their paths as names.
  EXPECT_EQ(loaded.parameter("Dense1.W").shape(), (NDShape{6, 8}));
}

// Seed 002's convnet on 14 x 14 black-and-white images, with average pooling, spatial batch
// normalization and global pooling besides.
TEST(Onnx, ConvnetRoundTrip) {
  Variable x = input_variable({14, 14}, {.name = "image"});
  auto scope = default_options({.activation = relu, .pad = false});
  Function model = Sequential({
      Convolution2D({5, 5}, 8, {.pad = true, .reduction_rank = 0}),
      MaxPooling({3, 3}, {.strides = {2, 2}}),
      Convolution2D({3, 3}, 16, {.pad = true}),
      BatchNormalization({.map_rank = 1}),
      AveragePooling({2, 2}, {.strides = {2, 2}, .pad = true}),
      Convolution2D({2, 2}, 12),
      Dense(10),
      Dropout(0.5),
      Dense(3, {.activation = None}),
  })(x);
  loom::testing::set_trained_statistics(model);
  round_trip(model, false, 1e-4);
  Function global = Sequential({Convolution2D({3, 3}, 6, {.pad = true, .reduction_rank = 0}),
                                GlobalMaxPooling(), Dense(2)})(x);
  round_trip(global, false, 1e-4);
  Function per_element = Sequential({Convolution2D({3, 3}, 6, {.reduction_rank = 0}),
                                     BatchNormalization(), GlobalAveragePooling(), Dense(2)})(x);
  loom::testing::set_trained_statistics(
      per_element);  // statistics [6,12,12]: ONNX's per channel of the flattened
  round_trip(per_element, false, 1e-4);
}

// Reductions over the batch axis (with static axes, or all axes) export with ONNX's axis 0 and
// import back as Loom's batch reductions, the result without dynamic axes.
TEST(Onnx, ReductionsOverTheBatchAxisRoundTrip) {
  const Variable x = input_variable(NDShape{3, 4}, {.name = "x"});
  for (bool keep : {false, true}) {
    const Function sum = reduce_sum(x, {Axis::default_batch_axis(), Axis(1)}, keep);
    const Function loaded = round_trip(sum);
    EXPECT_TRUE(loaded.output().dynamic_axes().empty());
    round_trip(reduce_max(x, Axis::all_axes(), keep));
  }
}

// convolution_transpose as ConvTranspose: automatic padding at strides 1 and 2 (the output's
// last element in no window: output_padding), explicit pads, and an output_shape larger than
// the windows reach, in float32 and float64.
TEST(Onnx, ConvolutionTransposeRoundTrip) {
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    const Variable x = input_variable(NDShape{2, 4, 3}, {.dtype = dtype, .name = "x"});
    const NDArrayView w = random_array(NDShape{2, 3, 3, 2}, dtype, 7, -1, 1);
    for (const ConvolutionTransposeOptions& o :
         {ConvolutionTransposeOptions{.strides = {2}, .output_shape = NDShape{8, 6}},
          ConvolutionTransposeOptions{.strides = {1, 2}},
          ConvolutionTransposeOptions{
              .strides = {2}, .auto_padding = {false}, .lower_pad = {1}, .upper_pad = {0}},
          ConvolutionTransposeOptions{
              .strides = {3, 2}, .auto_padding = {false}, .output_shape = NDShape{13, 7}}}) {
      const Function y = convolution_transpose(parameter(w, "w"), x, o);
      const Function loaded = round_trip(y, false, dtype == DataType::Float32 ? 1e-5 : 1e-12);
      EXPECT_EQ(loaded.output().shape(), y.output().shape());
    }
  }
}

// The elementwise, shape, reduction and softmax ops.
TEST(Onnx, ElementwiseAndShapeOpsRoundTrip) {
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    Variable x = input_variable({2, 3, 4}, {.dtype = dtype, .name = "x"});
    Parameter p = parameter({3, 4}, glorot_uniform(), dtype, "p");
    Parameter row = parameter({4}, glorot_uniform(), dtype, "row");
    Function a = element_times(plus(x, p), row);
    Function b = element_divide(minus(a, exp(x)), plus(square(x), constant(1.0, dtype)));
    Function c = element_max(abs(b), negate(x));
    Function d = element_min(sqrt(c), log(plus(c, constant(2.0, dtype))));
    Function e = splice({slice(d, Axis(1), 0, 2), slice(d, Axis(1), -1, 0)}, Axis(1));
    Function f = reshape(transpose(slice(e, Axis(-1), -3, 0), {2, 0, 1}), {9, 2});
    Function g = splice({reduce_sum(f, Axis(0)), reduce_mean(f, Axis(0)), reduce_max(f, Axis(0))},
                        Axis(0));  // [3,2]
    Function h = plus(log_softmax(g, Axis(0)), softmax(g, Axis::all_static_axes()));
    Function k = sigmoid(times(tanh(reshape(h, {6})), parameter({6, 4}, glorot_uniform(), dtype)));
    round_trip(plus(k, reduce_sum(relu(x), std::vector<Axis>{Axis(0), Axis(1)}, false)), true);
  }
}

// A lower-rank sample broadcasts against a higher-rank one behind the batch axis.
TEST(Onnx, BroadcastsSamplesOfLowerRank) {
  Variable x = input_variable({3, 4}, {.name = "x"});
  Variable y = input_variable({4}, {.name = "y"});
  const Function model = plus(x, y);
  const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(model));
  const NDArrayView xs = batch(x, 2), ys = batch(y, 2);
  EXPECT_EQ(values(model.eval({{"x", xs}, {"y", ys}})),
            values(loaded.eval({{"x", xs}, {"y", ys}})));
}

TEST(Onnx, SavesAndLoadsFiles) {
  const std::string path = ::testing::TempDir() + "loom_onnx_test.onnx";
  Variable x = input_variable(3, {.name = "features"});
  Function model = Dense(2)(x);
  save_model(model, path, ModelFormat::ONNX);
  EXPECT_EQ(values(load_model(path, ModelFormat::ONNX).eval(batch(x, 2))),
            values(model.eval(batch(x, 2))));
  save_model(model, path, ModelFormat::Loom);
  EXPECT_EQ(load_model(path, ModelFormat::Loom).to_string(), load_model(path).to_string());
  std::filesystem::remove(path);
}

template <typename E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks " << p;
  }
}

TEST(Onnx, ExportNamesWhatItCannotExport) {
  Variable x = input_variable(3, {.name = "x"});
  Variable y = input_variable(3, {.name = "y"});
  expect_error<ArgumentError>([&] { save_onnx_to_bytes(cosine_distance(x, y)); },
                              {"CosDistance", "no ONNX mapping", "docs/onnx.md"});
  Variable image = input_variable({2, 3}, {.name = "image"});
  expect_error<ArgumentError>([&] { save_onnx_to_bytes(classification_error(image, image, 2)); },
                              {"ClassificationError", "a vector sample", "Tensor[2,3]"});
  Variable s = sequence::input_variable(3, {.name = "s"});
  expect_error<ArgumentError>(
      [&] { save_onnx_to_bytes(Recurrence(LSTM(2, {.cell_shape = 4}))(s)); },
      {"LSTM", "projection", "cannot express"});
  expect_error<ArgumentError>(
      [&] { save_onnx_to_bytes(Recurrence(GRU(2, {.enable_self_stabilization = true}))(s)); },
      {"GRU", "self-stabilization"});
  expect_error<ArgumentError>([&] { save_onnx_to_bytes(sequence::reduce_sum(s)); },
                              {"SequenceReduceSum", "no ONNX mapping"});
  Variable m = sequence::input_variable(3, Axis::new_unique_dynamic_axis("m"), {.name = "m"});
  expect_error<ArgumentError>(
      [&] {
        save_onnx_to_bytes(combine({sequence::last(s), sequence::last(m)}));
      },
      {"along axis 'm", "one sequence axis"});
  expect_error<ArgumentError>([&] { save_onnx_to_bytes(Dense(2)); }, {"placeholder"});
}

// custom_proxy_op: a node of the op type it stands for over its operands (CNTK's purpose for it:
// an op that only the ONNX consumer computes).
TEST(Onnx, CustomProxyOpExportsAsItsOpType) {
  Variable a = input_variable(3, {.name = "a"}), b = input_variable(3, {.name = "b"});
  const std::vector<uint8_t> bytes =
      save_onnx_to_bytes(custom_proxy_op({a, relu(b)}, "MyOnnxOp", NDShape{4}, DataType::Float32));
  onnx_proto::ModelProto model;
  ASSERT_TRUE(model.ParseFromArray(bytes.data(), int(bytes.size())));
  const onnx_proto::GraphProto& g = model.graph();
  ASSERT_EQ(g.node_size(), 2);
  EXPECT_EQ(g.node(1).op_type(), "MyOnnxOp");
  ASSERT_EQ(g.node(1).input_size(), 2);
  EXPECT_EQ(g.node(1).input(0), "a");
  EXPECT_EQ(g.node(1).input(1), g.node(0).output(0));
  EXPECT_EQ(g.output(0).type().tensor_type().shape().dim(1).dim_value(), 4);
}

// Sequences of lengths 5, 1 and 3 of the argument's sample shape, values in [-1, 1).
Value sequences(const Variable& argument) {
  RandomGenerator random(5);
  const size_t F = argument.shape().total_size();
  std::vector<std::vector<double>> data;
  for (size_t length : {5, 1, 3}) {
    std::vector<double> s(length * F);
    for (double& x : s) x = 2 * random.uniform() - 1;
    data.push_back(std::move(s));
  }
  if (argument.dtype() == DataType::Float64) return Value::create_sequences(argument.shape(), data);
  std::vector<std::vector<float>> floats;
  for (const auto& s : data) floats.emplace_back(s.begin(), s.end());
  return Value::create_sequences(argument.shape(), floats);
}

// ONNX's LSTM, GRU and RNN carry Loom's fused recurrences both ways: gate orders, one bias,
// peepholes, both directions, the activations, and each sequence's last (first) step as the
// op's final state.
TEST(Onnx, RecurrentModelsRoundTrip) {
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    SCOPED_TRACE(dtype == DataType::Float32 ? "float32" : "float64");
    const double tolerance = dtype == DataType::Float32 ? 1e-5 : 1e-12;
    Variable x = sequence::input_variable(4, {.dtype = dtype, .name = "x"});
    const RecurrentCellOptions cell{.init_bias = uniform(0.5), .dtype = dtype};
    // Self-stabilized LSTM and RNNStep: their factors fold into the exported weights.
    RecurrentCellOptions peepholes = cell;
    peepholes.use_peepholes = true;
    peepholes.enable_self_stabilization = true;
    RecurrentCellOptions relu_cell = cell;
    relu_cell.activation = relu;
    relu_cell.enable_self_stabilization = true;
    const Function lstm = Recurrence(LSTM(3, peepholes))(Dense(5, {.dtype = dtype})(x));
    const Function gru = Recurrence(GRU(3, cell), {.go_backwards = true})(x);
    const Function rnn = Recurrence(RNNStep(2, relu_cell))(gru);
    const Function model = combine({Dense(2, {.dtype = dtype})(sequence::last(lstm)),
                                    sequence::first(gru), sequence::last(rnn), rnn});
    // The stabilizers' scalars start where their factor is 1: each gets a factor of its own.
    double alpha = 0.1;
    size_t stabilizers = 0;
    for (const Parameter& p : model.parameters()) {
      if (p.shape().rank() != 0) continue;
      alpha += 0.2;
      ++stabilizers;
      p.set_value(dtype == DataType::Float32
                      ? NDArrayView::from_vector(NDShape{}, std::vector<float>{float(alpha)})
                      : NDArrayView::from_vector(NDShape{}, std::vector<double>{alpha}));
    }
    ASSERT_EQ(stabilizers, 4u);  // LSTM dh, dc, c and RNNStep dh
    const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(model), "rnn.onnx");
    ASSERT_EQ(loaded.arguments().size(), 1u);
    EXPECT_TRUE(loaded.arguments()[0].has_sequence_axis());
    ASSERT_EQ(loaded.outputs().size(), model.outputs().size());
    const Value data = sequences(x);
    const ValueMap want = model.eval({{x, data}}),
                   got = loaded.eval({{loaded.arguments()[0], data}});
    for (size_t k = 0; k < model.outputs().size(); ++k) {
      const std::vector<double> a = values(want.at(model.outputs()[k])),
                                b = values(got.at(loaded.outputs()[k]));
      ASSERT_EQ(a.size(), b.size()) << "output " << k;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], tolerance) << k << ": " << i;
    }
  }
}

// Convolution, pooling, batch and local response normalization over sequences: ONNX's ops
// take [N, ...], so the sequence and batch axes are merged around them and split after (Shape,
// Slice, Concat, Reshape), and the importer reads that back as the op over sequences.
TEST(Onnx, ConvolutionOverSequencesRoundTrip) {
  Variable x = sequence::input_variable({2, 6, 6}, {.name = "frames"});
  Function model = Sequential({Convolution2D({3, 3}, 4, {.activation = relu, .pad = true}),
                               BatchNormalization({.map_rank = 1}),
                               MaxPooling({2, 2}, {.strides = {2, 2}}), Dense(3)})(x);
  loom::testing::set_trained_statistics(model);
  const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(model), "frames.onnx");
  ASSERT_TRUE(loaded.arguments().at(0).has_sequence_axis());
  const Value data = sequences(x);
  const auto want = model.eval({{x, data}}).at(model.output()).as_sequences<float>();
  const auto got =
      loaded.eval({{loaded.arguments()[0], data}}).at(loaded.output()).as_sequences<float>();
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(want.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    for (size_t i = 0; i < want[s].size(); ++i) EXPECT_NEAR(got[s][i], want[s][i], 1e-4) << i;
  }
  EXPECT_EQ(got[1].size(), 3u);  // the sequence of one step
}

std::vector<uint8_t> replaced(std::vector<uint8_t> bytes, const std::string& from,
                              const std::string& to) {
  std::string s(bytes.begin(), bytes.end());
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos);
  s.replace(at, from.size(), to);
  return {s.begin(), s.end()};
}

TEST(Onnx, ImportRejectsBadFiles) {
  const std::string text = "this is not an ONNX model at all";
  expect_error<DataError>(
      [&] {
        load_onnx_from_bytes({(const uint8_t*)text.data(), text.size()}, "notes.txt");
      },
      {"notes.txt", "not an ONNX model"});
  Variable x = input_variable(3, {.name = "x"});
  const std::vector<uint8_t> good = save_onnx_to_bytes(relu(Dense(2)(x)));
  // An op Loom lacks (the same length as Relu, so the protocol buffer stays well formed).
  expect_error<DataError>([&] { load_onnx_from_bytes(replaced(good, "Relu", "Celu"), "m.onnx"); },
                          {"m.onnx", "node", "no import of the ONNX op Celu"});
  // Every truncation is a DataError, never a crash.
  for (size_t n = 0; n < good.size(); n += 7)
    EXPECT_THROW(load_onnx_from_bytes({good.data(), n}, "cut.onnx"), DataError) << n << " bytes";
  // Every single-byte change loads or is a DataError (never another exception or a crash).
  const std::vector<uint8_t> conv = save_onnx_to_bytes(
      Sequential({Convolution2D({3, 3}, 2, {.pad = true, .reduction_rank = 0}),
                  MaxPooling({2, 2}, {.strides = {2}}), Dense(2)})(input_variable({6, 6})));
  const std::vector<uint8_t> rnn = save_onnx_to_bytes(sequence::last(
      Recurrence(LSTM(2, {.use_peepholes = true}))(sequence::input_variable(3, {.name = "s"}))));
  for (const std::vector<uint8_t>& bytes : {conv, rnn}) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<uint8_t> damaged = bytes;
      damaged[i] ^= uint8_t(0x5A);
      try {
        load_onnx_from_bytes(damaged, "damaged.onnx");
      } catch (const DataError&) {
      }
    }
  }
  // A damaged tensor: its data shorter than its shape.
  Function small =
      plus(x, parameter(NDArrayView::from_vector(NDShape{3}, std::vector<float>{1, 2, 3}), "bias"));
  expect_error<DataError>(
      [&] {
        load_onnx_from_bytes(replaced(save_onnx_to_bytes(small), std::string("\x08\x03", 2),
                                      std::string("\x08\x04", 2)),
                             "t.onnx");
      },
      {"t.onnx", "bias", "bytes of data for 4 elements"});
  EXPECT_THROW(load_model("/nonexistent/model.onnx", ModelFormat::ONNX), IOError);
}

// ---- files written by other tools: graphs of ONNX nodes built here ----

namespace pb = onnx_proto;

// A model (opset 13 unless given) over float inputs of fixed shapes (ONNX's node tests' form),
// its nodes and initializers added by the test.
class OnnxGraph {
 public:
  OnnxGraph(const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs,
            const std::vector<std::string>& outputs, int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.add_opset_import()->set_version(opset);
    for (const auto& [name, dims] : inputs) {
      pb::ValueInfoProto* v = graph().add_input();
      v->set_name(name);
      pb::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
      t->set_elem_type(pb::TensorProto::FLOAT);
      for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    }
    for (const std::string& o : outputs) graph().add_output()->set_name(o);
  }
  pb::GraphProto& graph() { return *model_.mutable_graph(); }
  pb::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs) {
    pb::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    return *n;
  }
  void initializer(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<float>& values) {
    pb::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(pb::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
  }
  Function load(bool fixed_axis0_is_batch = false) const {
    const std::string bytes = model_.SerializeAsString();
    return load_onnx_from_bytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                                "g.onnx", {.fixed_axis0_is_batch = fixed_axis0_is_batch});
  }

 private:
  pb::ModelProto model_;
};

void set(pb::NodeProto& n, const std::string& name, int64_t i) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INT);
  a->set_i(i);
}
void set(pb::NodeProto& n, const std::string& name, float f) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::FLOAT);
  a->set_f(f);
}
void set(pb::NodeProto& n, const std::string& name, const std::vector<int64_t>& ints) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::INTS);
  for (int64_t i : ints) a->add_ints(i);
}
void set(pb::NodeProto& n, const std::string& name, const std::string& s) {
  pb::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(pb::AttributeProto::STRING);
  a->set_s(s);
}

// The single output of f on the named float tensors.
std::vector<float> evaluate(const Function& f,
                            const std::vector<std::pair<std::string, NDArrayView>>& data) {
  Function::NamedData named;
  for (const auto& [name, array] : data) named.emplace_back(name, array);
  return f.eval(named).data().to_vector<float>();
}
// The outputs of f on the named float tensors.
std::vector<std::vector<float>> evaluate_all(
    const Function& f, const std::vector<std::pair<std::string, NDArrayView>>& data) {
  ValueMap args;
  for (const auto& [name, array] : data) {
    const Variable a = f.argument(name);
    args.insert_or_assign(a, ArgumentData(array).to_value(a));
  }
  const ValueMap v = f.eval(args, f.outputs());
  std::vector<std::vector<float>> outputs;
  for (const Variable& o : f.outputs()) outputs.push_back(v.at(o).data().to_vector<float>());
  return outputs;
}

NDArrayView tensor(const NDShape& shape, const std::vector<float>& v) {
  return NDArrayView::from_vector(shape, v);
}

// With fixed_axis0_is_batch false, an input whose axis 0 has a fixed size is that tensor, so
// that ops along axis 0 import; by default axis 0 stays the batch axis.
TEST(OnnxImport, FixedAxis0IsStaticOnRequest) {
  OnnxGraph g({{"x", {2, 3}}, {"y", {3}}}, {"z"});
  g.node("Add", {"x", "y"}, {"s"});
  set(g.node("Softmax", {"s"}, {"z"}), "axis", int64_t{0});
  OnnxGraph batched({{"x", {2, 3}}}, {"z"});
  set(batched.node("Softmax", {"x"}, {"z"}), "axis", int64_t{0});
  expect_error<DataError>([&] { batched.load(true); },
                          {"g.onnx", "Softmax", "axis 0, a batch axis"});
  const Function f = g.load();
  EXPECT_FALSE(f.arguments()[0].has_batch_axis());
  EXPECT_EQ(f.output().shape(), (NDShape{2, 3}));
  // Columns (x + y) of [0, 1], [1, 1], [2, 1]: softmax along axis 0.
  const std::vector<float> z =
      evaluate(f, {{"x", tensor({2, 3}, {0, 1, 2, 1, 1, 1})}, {"y", tensor({3}, {5, 5, 5})}});
  const float a = 1 / (1 + std::exp(1.f)), b = 1 / (1 + std::exp(-1.f));
  const std::vector<float> want = {a, 0.5f, b, b, 0.5f, a};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(z[i], want[i], 1e-6) << i;
}

// Flatten's negative axis counts from the rank (ONNX's -1 of [2, 3, 4] is axis 2).
TEST(OnnxImport, FlattensAtANegativeAxis) {
  OnnxGraph g({{"x", {2, 3, 4}}}, {"y"});
  set(g.node("Flatten", {"x"}, {"y"}), "axis", int64_t{-1});
  EXPECT_EQ(g.load().output().shape(), (NDShape{6, 4}));
  OnnxGraph batched({{"x", {2, 3, 4}}}, {"y"});
  set(batched.node("Flatten", {"x"}, {"y"}), "axis", int64_t{-2});  // [N, 3 * 4]
  EXPECT_EQ(batched.load(true).output().shape(), (NDShape{12}));
}

// Gemm with alpha, beta and a transposed A; Max of three inputs.
TEST(OnnxImport, GemmAttributesAndMaxOfMany) {
  OnnxGraph g({{"a", {2, 2}}, {"c", {2}}}, {"y"});
  g.initializer("b", {2, 2}, {1, 2, 3, 4});
  pb::NodeProto& gemm = g.node("Gemm", {"a", "b", "c"}, {"y"});
  set(gemm, "alpha", 0.5f);
  set(gemm, "beta", 2.f);
  set(gemm, "transA", int64_t{1});
  // A = [[1, 0], [1, 1]] given transposed: A B = [[1, 2], [4, 6]].
  EXPECT_EQ(evaluate(g.load(), {{"a", tensor({2, 2}, {1, 1, 0, 1})}, {"c", tensor({2}, {1, -1})}}),
            (std::vector<float>{2.5f, -1, 4, 1}));
  OnnxGraph m({{"x", {3}}, {"y", {3}}, {"z", {3}}}, {"w"});
  m.node("Max", {"x", "y", "z"}, {"w"});
  EXPECT_EQ(evaluate(m.load(), {{"x", tensor({3}, {1, 0, 0})},
                                {"y", tensor({3}, {0, 2, 0})},
                                {"z", tensor({3}, {0, 0, 3})}}),
            (std::vector<float>{1, 2, 3}));
}

// Convolution and pooling over one sample [1, C, H, W] without a batch axis, auto_pad
// SAME_UPPER, and ceil_mode where it places CNTK's windows or overhangs the end (ceil_out_dim);
// batch normalization of a tensor, at inference and in training mode.
TEST(OnnxImport, WindowOpsOverOneSampleWithoutBatchAxis) {
  const std::vector<float> image = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // [1, 1, 3, 3]
  OnnxGraph conv({{"x", {1, 1, 3, 3}}, {"w", {1, 1, 2, 2}}}, {"y"});
  set(conv.node("Conv", {"x", "w"}, {"y"}), "auto_pad", std::string("SAME_UPPER"));
  const Function c = conv.load();
  EXPECT_EQ(c.output().shape(), (NDShape{1, 1, 3, 3}));
  EXPECT_EQ(
      evaluate(c, {{"x", tensor({1, 1, 3, 3}, image)}, {"w", tensor({1, 1, 2, 2}, {1, 1, 1, 1})}}),
      (std::vector<float>{12, 16, 9, 24, 28, 15, 15, 17, 9}));
  OnnxGraph pool({{"x", {1, 1, 3, 3}}}, {"y"});
  pb::NodeProto& p = pool.node("MaxPool", {"x"}, {"y"});
  set(p, "kernel_shape", std::vector<int64_t>{2, 2});
  set(p, "strides", std::vector<int64_t>{2, 2});
  set(p, "ceil_mode", int64_t{1});  // 2 windows from 0 per axis, as CNTK's auto padding
  EXPECT_EQ(evaluate(pool.load(), {{"x", tensor({1, 1, 3, 3}, image)}}),
            (std::vector<float>{5, 6, 8, 9}));
  // Windows from 0 whose last overhangs the end (Loom's ceil_out_dim): with ceil_mode, or as
  // explicit pads (as Loom exports them); counting the padding only where it lies within the
  // pads (Loom counts the whole window).
  auto average = [](int64_t include_pad, int64_t ceil_mode, const std::vector<int64_t>& pads) {
    auto g = std::make_unique<OnnxGraph>(
        std::vector<std::pair<std::string, std::vector<int64_t>>>{{"x", {1, 1, 1, 4}}},
        std::vector<std::string>{"y"});
    pb::NodeProto& n = g->node("AveragePool", {"x"}, {"y"});
    set(n, "kernel_shape", std::vector<int64_t>{1, 3});
    set(n, "strides", std::vector<int64_t>{1, 2});
    set(n, "pads", pads);
    set(n, "ceil_mode", ceil_mode);
    set(n, "count_include_pad", include_pad);
    return g;
  };
  const NDArrayView row = tensor({1, 1, 1, 4}, {1, 2, 3, 4});
  EXPECT_EQ(evaluate(average(0, 1, {0, 0, 0, 0})->load(), {{"x", row}}),
            (std::vector<float>{2, 3.5f}));
  EXPECT_EQ(evaluate(average(1, 0, {0, 0, 0, 1})->load(), {{"x", row}}),
            (std::vector<float>{2, 7.f / 3}));
  expect_error<DataError>(
      [&] {
        average(1, 1, {0, 0, 0, 0})->load();
      },
      {"AveragePool", "with ceil_mode give 2 windows from 0 along spatial axis 1",
       "or 2 with the last one overhanging", "other pads only where each is less than the window"});
  // Other explicit pads: a Pad, then unpadded pooling (average without the padding rescaled).
  auto padded = [](const char* op, int64_t include_pad) {
    auto g = std::make_unique<OnnxGraph>(
        std::vector<std::pair<std::string, std::vector<int64_t>>>{{"x", {1, 1, 1, 4}}},
        std::vector<std::string>{"y"});
    pb::NodeProto& n = g->node(op, {"x"}, {"y"});
    set(n, "kernel_shape", std::vector<int64_t>{1, 2});
    set(n, "strides", std::vector<int64_t>{1, 2});
    set(n, "pads", std::vector<int64_t>{0, 1, 0, 1});
    if (include_pad) set(n, "count_include_pad", include_pad);
    return g;
  };
  EXPECT_EQ(evaluate(padded("MaxPool", 0)->load(), {{"x", row}}), (std::vector<float>{1, 3, 4}));
  EXPECT_EQ(evaluate(padded("AveragePool", 1)->load(), {{"x", row}}),
            (std::vector<float>{0.5f, 2.5f, 2}));
  EXPECT_EQ(evaluate(padded("AveragePool", 0)->load(), {{"x", row}}),
            (std::vector<float>{1, 2.5f, 4}));
  for (bool include_pad : {false, true}) {
    const Variable x = input_variable(NDShape{2, 5, 4}, {.name = "x"});
    round_trip(pooling(x, PoolingType::Average, NDShape{3, 3},
                       {.strides = {2}, .include_pad = include_pad, .ceil_out_dim = true}));
  }

  OnnxGraph bn({{"x", {2, 2, 1}}}, {"y"});
  bn.initializer("scale", {2}, {1, 2});
  bn.initializer("bias", {2}, {0, 1});
  bn.initializer("mean", {2}, {1, 0});
  bn.initializer("var", {2}, {4, 1});
  set(bn.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}), "epsilon", 0.f);
  EXPECT_EQ(evaluate(bn.load(), {{"x", tensor({2, 2, 1}, {3, 1, 5, -1})}}),
            (std::vector<float>{1, 3, 2, -1}));
  // Training mode: x's statistics per channel (channel 0 holds 1 and 5, channel 1 2 and 4), and
  // the running statistics mixed by the momentum.
  pb::NodeProto& train = *bn.graph().mutable_node(0);
  train.set_output(0, "y");
  train.add_output("running_mean");
  train.add_output("running_var");
  set(train, "training_mode", int64_t{1});
  set(train, "momentum", 0.5f);
  bn.graph().add_output()->set_name("running_mean");
  bn.graph().add_output()->set_name("running_var");
  const Function trained = bn.load();
  const Variable x = trained.arguments()[0];
  const ValueMap v = trained.eval({{x, ArgumentData(tensor({2, 2, 1}, {1, 2, 5, 4})).to_value(x)}},
                                  trained.outputs());
  auto output = [&](size_t i) { return v.at(trained.outputs()[i]).data().to_vector<float>(); };
  EXPECT_EQ(output(0), (std::vector<float>{-1, -1, 1, 3}));
  EXPECT_EQ(output(1), (std::vector<float>{2, 1.5f}));
  EXPECT_EQ(output(2), (std::vector<float>{4, 1}));
  expect_error<DataError>([&] { bn.load(true); },
                          {"BatchNormalization", "training mode", "without a batch axis"});
}

// What import reads beyond nodes' values: a Constant as a graph output, Dropout's mask; what it
// refuses rather than get wrong: a Dropout in training mode (with a ratio other than 0), a
// node's second output it does not compute (MaxPool's indices over a batch).
TEST(OnnxImport, ConstantsOutputsAndTrainingMode) {
  OnnxGraph k({}, {"c"});
  pb::NodeProto& constant_node = k.node("Constant", {}, {"c"});
  pb::AttributeProto* value = constant_node.add_attribute();
  value->set_name("value");
  value->set_type(pb::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(pb::TensorProto::FLOAT);
  value->mutable_t()->add_dims(2);
  value->mutable_t()->add_float_data(1.5f);
  value->mutable_t()->add_float_data(-2);
  EXPECT_EQ(k.load().eval_one({}).data().to_vector<float>(), (std::vector<float>{1.5f, -2}));
  OnnxGraph d({{"x", {2}}}, {"y"});
  pb::TensorProto* train = d.graph().add_initializer();
  train->set_name("train");
  train->set_data_type(pb::TensorProto::BOOL);
  train->add_int32_data(1);
  pb::NodeProto& training = d.node("Dropout", {"x", "", "train"}, {"y"});
  expect_error<DataError>([&] { d.load(); }, {"Dropout", "training_mode must be a constant false"});
  // Training mode with a ratio of 0 is the identity too.
  d.initializer("ratio", {}, {0});
  training.set_input(1, "ratio");
  EXPECT_EQ(evaluate(d.load(), {{"x", tensor({2}, {1, 2})}}), (std::vector<float>{1, 2}));
  // Dropout's mask (all true: ones), read by a node or as a graph output.
  OnnxGraph m({{"x", {2}}}, {"y", "mask"});
  m.node("Dropout", {"x"}, {"y", "mask"});
  const Function masked = m.load();
  const Variable x = masked.arguments()[0];
  const ValueMap mv =
      masked.eval({{x, ArgumentData(tensor({2}, {3, 4})).to_value(x)}}, masked.outputs());
  EXPECT_EQ(mv.at(masked.outputs()[0]).data().to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(mv.at(masked.outputs()[1]).data().to_vector<float>(), (std::vector<float>{1, 1}));
  OnnxGraph indices({{"x", {1, 1, 2, 2}}}, {"z"});
  pb::NodeProto& pool = indices.node("MaxPool", {"x"}, {"y", "i"});
  pool.set_name("p1");
  set(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  indices.node("Add", {"y", "i"}, {"z"});
  // Over a batch, ONNX numbers the elements of every sample: sample 1's follow sample 0's 4.
  EXPECT_EQ(evaluate(indices.load(true), {{"x", tensor({2, 1, 2, 2}, {1, 2, 3, 4, 4, 3, 2, 1})}}),
            (std::vector<float>{4 + 3, 4 + 4}));
}

// Models of opsets 7 to 12 read each op in its form there: attributes that later opsets made
// inputs (Clip's bounds, Pad's pads and value, Slice's starts, ends and axes, TopK's k, the axes
// of Squeeze, Unsqueeze and ReduceSum), Softmax, LogSoftmax and Hardmax over x flattened to 2-D
// at axis (default 1), batch normalization's training mode by its outputs, Dropout without a
// training mode; opsets below 7, an op defined after the model's opset and spatial 0 are refused.
TEST(OnnxImport, EarlierOpsetForms) {
  auto graph = [](int64_t opset, const std::vector<int64_t>& dims,
                  const std::vector<std::string>& outputs = {"y"}) {
    return std::make_unique<OnnxGraph>(
        std::vector<std::pair<std::string, std::vector<int64_t>>>{{"x", dims}}, outputs, opset);
  };
  const NDArrayView four = tensor({4}, {-2, -0.5f, 0.5f, 2});
  auto clip = graph(7, {4});
  pb::NodeProto& c = clip->node("Clip", {"x"}, {"y"});
  set(c, "min", -1.f);
  EXPECT_EQ(evaluate(clip->load(), {{"x", four}}), (std::vector<float>{-1, -0.5f, 0.5f, 2}));
  set(c, "max", 1.f);
  EXPECT_EQ(evaluate(clip->load(), {{"x", four}}), (std::vector<float>{-1, -0.5f, 0.5f, 1}));

  auto pad = graph(10, {2});
  pb::NodeProto& p = pad->node("Pad", {"x"}, {"y"});
  set(p, "pads", std::vector<int64_t>{1, 2});
  set(p, "value", 9.f);
  EXPECT_EQ(evaluate(pad->load(), {{"x", tensor({2}, {1, 2})}}),
            (std::vector<float>{9, 1, 2, 9, 9}));

  const NDArrayView square = tensor({2, 2}, {1, 2, 3, 4});
  auto slice = graph(9, {2, 2});
  pb::NodeProto& s = slice->node("Slice", {"x"}, {"y"});
  set(s, "starts", std::vector<int64_t>{1});
  set(s, "ends", std::vector<int64_t>{2});
  EXPECT_EQ(evaluate(slice->load(), {{"x", square}}), (std::vector<float>{3, 4}));
  set(s, "axes", std::vector<int64_t>{1});
  EXPECT_EQ(evaluate(slice->load(), {{"x", square}}), (std::vector<float>{2, 4}));

  auto top = graph(9, {4}, {"values", "indices"});
  set(top->node("TopK", {"x"}, {"values", "indices"}), "k", int64_t{2});
  const Function top_k = top->load();
  const Variable tx = top_k.arguments()[0];
  const ValueMap tv =
      top_k.eval({{tx, ArgumentData(tensor({4}, {1, 4, 2, 3})).to_value(tx)}}, top_k.outputs());
  EXPECT_EQ(tv.at(top_k.outputs()[0]).data().to_vector<float>(), (std::vector<float>{4, 3}));
  EXPECT_EQ(tv.at(top_k.outputs()[1]).data().to_vector<float>(), (std::vector<float>{1, 3}));

  auto axes = graph(12, {2, 2});
  set(axes->node("Unsqueeze", {"x"}, {"u"}), "axes", std::vector<int64_t>{0});
  pb::NodeProto& sum = axes->node("ReduceSum", {"u"}, {"r"});
  set(sum, "axes", std::vector<int64_t>{2});
  set(sum, "keepdims", int64_t{0});
  set(axes->node("Squeeze", {"r"}, {"y"}), "axes", std::vector<int64_t>{0});
  const Function squeezed = axes->load();
  EXPECT_EQ(squeezed.output().shape(), (NDShape{2}));
  EXPECT_EQ(evaluate(squeezed, {{"x", square}}), (std::vector<float>{3, 7}));

  // x [2, 2, 2], each row of 4 (axis 1 on) normalized as one.
  const float l5 = std::log(5.f);
  const NDArrayView cube = tensor({2, 2, 2}, {0, 0, 0, l5, 1, 1, 1, 1});
  auto softmax = graph(11, {2, 2, 2});
  softmax->node("Softmax", {"x"}, {"y"});
  const std::vector<float> got = evaluate(softmax->load(), {{"x", cube}});
  const std::vector<float> want{0.125f, 0.125f, 0.125f, 0.625f, 0.25f, 0.25f, 0.25f, 0.25f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  auto log_softmax = graph(12, {2, 2, 2});
  set(log_softmax->node("LogSoftmax", {"x"}, {"y"}), "axis", int64_t{-1});  // the last: one axis
  const std::vector<float> logs = evaluate(log_softmax->load(), {{"x", cube}});
  EXPECT_NEAR(logs[3], std::log(5.f / 6), 1e-6);
  EXPECT_NEAR(logs[4], std::log(0.5f), 1e-6);
  auto hardmax = graph(11, {2, 2, 2});
  hardmax->node("Hardmax", {"x"}, {"y"});
  EXPECT_EQ(evaluate(hardmax->load(), {{"x", tensor({2, 2, 2}, {1, 2, 4, 3, 5, 0, 0, 5})}}),
            (std::vector<float>{0, 0, 1, 0, 1, 0, 0, 0}));
  set(*softmax->graph().mutable_node(0), "axis", int64_t{0});
  expect_error<DataError>([&] { softmax->load(true); },
                          {"Softmax at opset 11", "merge the batch axis"});

  // Batch normalization before opset 14: training mode where the node has outputs beside Y.
  auto bn = graph(12, {2, 2, 1}, {"y", "running_mean"});
  bn->initializer("scale", {2}, {1, 2});
  bn->initializer("bias", {2}, {0, 1});
  bn->initializer("mean", {2}, {1, 0});
  bn->initializer("var", {2}, {4, 1});
  pb::NodeProto& norm =
      bn->node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean"});
  set(norm, "epsilon", 0.f);
  set(norm, "momentum", 0.5f);
  const Function trained = bn->load();
  const Variable bx = trained.arguments()[0];
  const ValueMap bv = trained.eval(
      {{bx, ArgumentData(tensor({2, 2, 1}, {1, 2, 5, 4})).to_value(bx)}}, trained.outputs());
  EXPECT_EQ(bv.at(trained.outputs()[0]).data().to_vector<float>(),
            (std::vector<float>{-1, -1, 1, 3}));
  EXPECT_EQ(bv.at(trained.outputs()[1]).data().to_vector<float>(), (std::vector<float>{2, 1.5f}));
  // Its saved statistics (outputs 3 and 4 before opset 14): the batch's mean and, as
  // onnxruntime gives it, 1 / sqrt(var + epsilon) of the batch's variance.
  for (const char* o : {"running_var", "saved_mean", "saved_var"}) {
    norm.add_output(o);
    bn->graph().add_output()->set_name(o);
  }
  const Function saved = bn->load();
  const Variable sx = saved.arguments()[0];
  const ValueMap sv = saved.eval({{sx, ArgumentData(tensor({2, 2, 1}, {1, 2, 5, 4})).to_value(sx)}},
                                 saved.outputs());
  ASSERT_EQ(saved.outputs().size(), 5u);
  const std::vector<std::vector<float>> statistics{{2, 1.5f}, {4, 1}, {3, 3}, {0.5f, 1}};
  for (size_t i = 1; i < 5; ++i)
    EXPECT_EQ(sv.at(saved.outputs()[i]).data().to_vector<float>(), statistics[i - 1]) << i;

  // spatial 0 (opsets 7 and 8): statistics per element of the sample [C, D] = [1, 2], at
  // inference over a tensor and over a batch, and in training mode.
  auto spatial = graph(8, {2, 1, 2});
  spatial->initializer("scale", {1, 2}, {1, 2});
  spatial->initializer("bias", {1, 2}, {0, 1});
  spatial->initializer("mean", {1, 2}, {1, 0});
  spatial->initializer("var", {1, 2}, {4, 1});
  pb::NodeProto& per_element =
      spatial->node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
  set(per_element, "spatial", int64_t{0});
  set(per_element, "epsilon", 0.f);
  const NDArrayView two = tensor({2, 1, 2}, {1, 2, 5, 4});
  EXPECT_EQ(evaluate(spatial->load(), {{"x", two}}), (std::vector<float>{0, 5, 2, 9}));
  EXPECT_EQ(evaluate(spatial->load(true), {{"x", two}}), (std::vector<float>{0, 5, 2, 9}));
  per_element.add_output("running_mean");
  spatial->graph().add_output()->set_name("running_mean");
  set(per_element, "momentum", 0.5f);
  EXPECT_EQ(evaluate_all(spatial->load(), {{"x", two}}),
            (std::vector<std::vector<float>>{{-1, -1, 1, 3}, {2, 1.5f}}));
  spatial->graph().mutable_initializer(0)->mutable_dims()->RemoveLast();
  spatial->graph().mutable_initializer(0)->mutable_float_data()->RemoveLast();
  expect_error<DataError>([&] { spatial->load(); },
                          {"(BatchNormalization, opset 8)", "spatial 0: the sample's shape"});

  auto dropout = graph(10, {2}, {"y", "mask"});
  set(dropout->node("Dropout", {"x"}, {"y", "mask"}), "ratio", 0.5f);
  const Function dropped = dropout->load();
  const Variable dx = dropped.arguments()[0];
  const ValueMap dv =
      dropped.eval({{dx, ArgumentData(tensor({2}, {3, 4})).to_value(dx)}}, dropped.outputs());
  EXPECT_EQ(dv.at(dropped.outputs()[0]).data().to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_EQ(dv.at(dropped.outputs()[1]).data().to_vector<float>(), (std::vector<float>{1, 1}));

  auto old = graph(6, {2});
  old->node("Relu", {"x"}, {"y"});
  expect_error<DataError>([&] { old->load(); }, {"opset 6 is not supported", "opsets 7 to 17"});
  auto early = graph(10, {2});
  early->node("Round", {"x"}, {"y"});
  expect_error<DataError>([&] { early->load(); },
                          {"Round is defined from opset 11", "the model imports opset 10"});
}

// MaxPool's indices (output 1): each window's first maximum (row-major) as ONNX numbers the
// elements of x [1, C, H, W], c H W + h W + w, or with storage_order 1 c H W + w H + h.
TEST(OnnxImport, MaxPoolIndices) {
  OnnxGraph g({{"x", {1, 2, 3, 3}}}, {"y", "i"});
  pb::NodeProto& pool = g.node("MaxPool", {"x"}, {"y", "i"});
  set(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  // Channel 0 has one maximum per window, channel 1 ties everywhere.
  const std::vector<float> xs{1, 5, 3, 4, 2, 6, 7, 8, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const NDArrayView x = tensor({1, 2, 3, 3}, xs);
  auto run = [&](const Function& f) {
    const Variable a = f.arguments()[0];
    const ValueMap v = f.eval({{a, ArgumentData(x).to_value(a)}}, f.outputs());
    return std::make_pair(v.at(f.outputs()[0]).data().to_vector<float>(),
                          v.at(f.outputs()[1]).data().to_vector<float>());
  };
  const auto [y, rows] = run(g.load());
  EXPECT_EQ(y, (std::vector<float>{5, 6, 8, 8, 1, 1, 1, 1}));
  EXPECT_EQ(rows, (std::vector<float>{1, 5, 7, 7, 9, 10, 12, 13}));
  set(pool, "storage_order", int64_t{1});
  EXPECT_EQ(run(g.load()).second, (std::vector<float>{3, 7, 5, 5, 9, 12, 10, 13}));
  // Over a batch: sample n's positions follow n C H W.
  pool.mutable_attribute(1)->set_i(0);  // storage_order
  const Function batched = g.load(true);
  const Variable b = batched.arguments()[0];
  std::vector<float> twice = xs;
  twice.insert(twice.end(), xs.begin(), xs.end());
  const NDArrayView two = tensor({2, 2, 3, 3}, twice);
  const ValueMap bv = batched.eval({{b, ArgumentData(two).to_value(b)}}, batched.outputs());
  EXPECT_EQ(bv.at(batched.outputs()[1]).data().to_vector<float>(),
            (std::vector<float>{1, 5, 7, 7, 9, 10, 12, 13, 19, 23, 25, 25, 27, 28, 30, 31}));
  // ceil_mode: the last window of each axis overhangs the input (strides 2).
  set(pool, "ceil_mode", int64_t{1});
  set(pool, "strides", std::vector<int64_t>{2, 2});
  const auto [ceil_y, ceil_i] = run(g.load());
  EXPECT_EQ(ceil_y, (std::vector<float>{5, 6, 8, 0, 1, 1, 1, 1}));
  EXPECT_EQ(ceil_i, (std::vector<float>{1, 5, 7, 8, 9, 11, 15, 17}));
  pool.mutable_attribute(1)->set_i(2);
  expect_error<DataError>([&] { g.load(); }, {"(MaxPool, opset 13)", "storage_order 2 must be 0"});
}

// MatMul of stacks of matrices (a stack of right operands broadcast against one matrix, too);
// max pooling with dilated windows and pads, and with ceil_mode.
TEST(OnnxImport, BatchedMatMulAndDilatedMaxPool) {
  OnnxGraph stacks({{"a", {2, 1, 2}}, {"b", {2, 2, 1}}}, {"c"});
  stacks.node("MatMul", {"a", "b"}, {"c"});
  const Function f = stacks.load();
  EXPECT_EQ(f.output().shape(), (NDShape{2, 1, 1}));
  const NDArrayView b = tensor({2, 2, 1}, {5, 6, 7, 8});
  EXPECT_EQ(evaluate(f, {{"a", tensor({2, 1, 2}, {1, 2, 3, 4})}, {"b", b}}),
            (std::vector<float>{17, 53}));
  OnnxGraph one({{"a", {1, 2}}, {"b", {2, 2, 1}}}, {"c"});
  one.node("MatMul", {"a", "b"}, {"c"});
  EXPECT_EQ(evaluate(one.load(), {{"a", tensor({1, 2}, {1, 2})}, {"b", b}}),
            (std::vector<float>{17, 23}));

  OnnxGraph pool({{"x", {1, 1, 5}}}, {"y"});
  pb::NodeProto& p = pool.node("MaxPool", {"x"}, {"y"});
  set(p, "kernel_shape", std::vector<int64_t>{2});
  set(p, "dilations", std::vector<int64_t>{2});
  set(p, "pads", std::vector<int64_t>{1, 1});
  const Function y = pool.load();
  EXPECT_EQ(y.output().shape(), (NDShape{1, 1, 5}));
  EXPECT_EQ(evaluate(y, {{"x", tensor({1, 1, 5}, {3, 1, 4, 1, 5})}}),
            (std::vector<float>{1, 4, 1, 5, 1}));
  // ceil_mode with strides 2 and pads [1, 0]: a third window overhangs the end.
  set(p, "strides", std::vector<int64_t>{2});
  p.mutable_attribute(2)->set_ints(1, 0);
  const NDArrayView five = tensor({1, 1, 5}, {3, 9, 4, 2, 5});
  EXPECT_EQ(evaluate(pool.load(), {{"x", five}}), (std::vector<float>{9, 9}));
  set(p, "ceil_mode", int64_t{1});
  const Function ceiled = pool.load();
  EXPECT_EQ(ceiled.output().shape(), (NDShape{1, 1, 3}));
  EXPECT_EQ(evaluate(ceiled, {{"x", five}}), (std::vector<float>{9, 9, 2}));
}

// A recurrent op over an X of fixed sizes (ONNX's node tests' form) reads its samples as
// sequences: Y and Y_h as tensors of ONNX's shapes, in layout 0 and 1, with sequence_lens (Y
// zero past a sequence's end) and an initial state the same for every sample (one that differs
// per sample is refused). An RNN of one unit with Relu: h = relu(x / 2 + h / 2).
TEST(OnnxImport, RecurrenceOverATensor) {
  auto rnn = [](const std::vector<int64_t>& x_dims, int64_t layout) {
    auto g = std::make_unique<OnnxGraph>(
        std::vector<std::pair<std::string, std::vector<int64_t>>>{{"x", x_dims}},
        std::vector<std::string>{"y", "y_h"});
    g->initializer("w", {1, 1, 1}, {0.5f});
    g->initializer("r", {1, 1, 1}, {0.5f});
    pb::NodeProto& n = g->node("RNN", {"x", "w", "r"}, {"y", "y_h"});
    set(n, "hidden_size", int64_t{1});
    set(n, "layout", layout);
    pb::AttributeProto* a = n.add_attribute();
    a->set_name("activations");
    a->set_type(pb::AttributeProto::STRINGS);
    a->add_strings("Relu");
    return g;
  };
  auto outputs = [](const OnnxGraph& g, const std::vector<size_t>& dims,
                    const std::vector<float>& x) {
    const Function f = g.load();
    const Variable a = f.arguments()[0];
    const ValueMap v =
        f.eval({{a, ArgumentData(tensor(NDShape(dims), x)).to_value(a)}}, f.outputs());
    return std::pair{v.at(f.outputs()[0]).data(), v.at(f.outputs()[1]).data()};
  };
  // Sample 0 is 1, 3; sample 1 is 2, 4.
  const auto [y, h] = outputs(*rnn({2, 2, 1}, 0), {2, 2, 1}, {1, 2, 3, 4});
  EXPECT_EQ(y.shape(), (NDShape{1, 2, 1, 2, 1}));  // one sample: [1, T, 1, N, c]
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.5f, 1, 1.75f, 2.5f}));
  EXPECT_EQ(h.shape(), (NDShape{1, 1, 2, 1}));
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1.75f, 2.5f}));
  const auto [y1, h1] = outputs(*rnn({2, 2, 1}, 1), {2, 2, 1}, {1, 3, 2, 4});
  EXPECT_EQ(y1.shape(), (NDShape{1, 2, 2, 1, 1}));
  EXPECT_EQ(y1.to_vector<float>(), (std::vector<float>{0.5f, 1.75f, 1, 2.5f}));
  EXPECT_EQ(h1.to_vector<float>(), (std::vector<float>{1.75f, 2.5f}));

  auto lengths_and_state = rnn({2, 2, 1}, 0);
  pb::TensorProto* lengths = lengths_and_state->graph().add_initializer();
  lengths->set_name("lengths");
  lengths->set_data_type(pb::TensorProto::INT32);
  lengths->add_dims(2);
  lengths->add_int32_data(2);
  lengths->add_int32_data(1);
  lengths_and_state->initializer("h0", {1, 2, 1}, {1, 1});
  pb::NodeProto& n = *lengths_and_state->graph().mutable_node(0);
  n.add_input("");
  n.add_input("lengths");
  n.add_input("h0");
  const auto [y2, h2] = outputs(*lengths_and_state, {2, 2, 1}, {1, 2, 3, 4});
  EXPECT_EQ(y2.to_vector<float>(), (std::vector<float>{1, 1.5f, 2, 0}));
  EXPECT_EQ(h2.to_vector<float>(), (std::vector<float>{2, 1.5f}));
  lengths_and_state->graph().mutable_initializer(3)->set_float_data(1, 2);
  expect_error<DataError>([&] { lengths_and_state->load(); },
                          {"RNN", "initial state", "the same state for every sample"});
}

// ONNX's comparisons and logic ops give booleans, which Loom holds as 0/1 values (a boolean
// graph input too); Where, Cast, PRelu (slope second), Clip with one bound, Round (halves to
// even), Softplus.
TEST(OnnxImport, BooleansComparisonsAndElementwiseOps) {
  OnnxGraph g({{"x", {6}}, {"y", {6}}}, {"where", "logic", "float"});
  g.graph().mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::BOOL);
  g.node("Greater", {"x", "zero"}, {"positive"});
  g.initializer("zero", {}, {0});
  g.node("Where", {"positive", "x", "zero"}, {"where"});
  g.node("Xor", {"positive", "y"}, {"exclusive"});
  g.node("Not", {"exclusive"}, {"logic"});
  g.node("LessOrEqual", {"x", "zero"}, {"non_positive"});
  set(g.node("Cast", {"non_positive"}, {"float"}), "to", int64_t{pb::TensorProto::FLOAT});
  const Function f = g.load();
  const NDArrayView x = tensor({6}, {-2, -1, 0, 1, 2, 3}), y = tensor({6}, {1, 0, 1, 0, 1, 0});
  ValueMap args;
  for (const Variable& a : f.arguments())
    args.insert_or_assign(a, ArgumentData(a.name() == "x" ? x : y).to_value(a));
  const ValueMap v = f.eval(args, f.outputs());
  auto output = [&](size_t k) { return v.at(f.outputs()[k]).data().to_vector<float>(); };
  EXPECT_EQ(output(0), (std::vector<float>{0, 0, 0, 1, 2, 3}));
  EXPECT_EQ(output(1), (std::vector<float>{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(output(2), (std::vector<float>{1, 1, 1, 0, 0, 0}));

  const std::vector<float> halves = {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.4f, -1.6f};
  OnnxGraph r({{"x", {8}}}, {"y"});
  r.node("Round", {"x"}, {"y"});
  EXPECT_EQ(evaluate(r.load(), {{"x", tensor({8}, halves)}}),
            (std::vector<float>{-2, -2, 0, 0, 2, 2, 0, -2}));
  OnnxGraph p({{"x", {4}}}, {"y"});
  p.initializer("slope", {1}, {0.5f});
  p.node("PRelu", {"x", "slope"}, {"y"});
  EXPECT_EQ(evaluate(p.load(), {{"x", tensor({4}, {-2, -1, 1, 2})}}),
            (std::vector<float>{-1, -0.5f, 1, 2}));
  OnnxGraph c({{"x", {4}}}, {"y"});
  c.initializer("high", {}, {1.5f});
  c.node("Clip", {"x", "", "high"}, {"y"});
  EXPECT_EQ(evaluate(c.load(), {{"x", tensor({4}, {-7, -1, 1, 2})}}),
            (std::vector<float>{-7, -1, 1, 1.5f}));
  OnnxGraph s({{"x", {2}}}, {"y"});
  s.node("Softplus", {"x"}, {"y"});
  const std::vector<float> softplus = evaluate(s.load(), {{"x", tensor({2}, {0, 1})}});
  EXPECT_NEAR(softplus[0], std::log(2.f), 1e-6);
  EXPECT_NEAR(softplus[1], std::log1p(std::exp(1.f)), 1e-6);
}

// TopK's two outputs: the values and their positions (ONNX's int64, Loom's values); K must be
// within the axis.
TEST(OnnxImport, TopKValuesAndPositions) {
  OnnxGraph g({{"x", {2, 3}}}, {"values", "positions"});
  pb::TensorProto* k = g.graph().add_initializer();
  k->set_name("k");
  k->set_data_type(pb::TensorProto::INT64);
  k->add_dims(1);
  k->add_int64_data(2);
  g.node("TopK", {"x", "k"}, {"values", "positions"});
  const Function f = g.load();
  const ValueMap v =
      f.eval({{f.arguments()[0],
               ArgumentData(tensor({2, 3}, {1, 5, 3, 9, 2, 4})).to_value(f.arguments()[0])}},
             f.outputs());
  EXPECT_EQ(v.at(f.outputs()[0]).data().to_vector<float>(), (std::vector<float>{5, 3, 9, 4}));
  EXPECT_EQ(v.at(f.outputs()[1]).data().to_vector<float>(), (std::vector<float>{1, 2, 0, 2}));
  k->set_int64_data(0, 4);
  expect_error<DataError>([&] { g.load(); }, {"TopK", "K [4] must be one number from 1"});
}

// An integer initializer holding the values given.
void int64_initializer(OnnxGraph& g, const std::string& name, const std::vector<int64_t>& dims,
                       const std::vector<int64_t>& values) {
  pb::TensorProto* t = g.graph().add_initializer();
  t->set_name(name);
  t->set_data_type(pb::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

// Integer tensors are float values of the graph's float type: an integer input takes floats,
// Div of integers (inputs, initializers, a Cast to an integer type, an op of integers) rounds
// toward zero, Cast to an integer type rounds toward zero, OneHot takes integer indices
// (negative ones from the end); an integer the float type cannot hold exactly is an error
// naming its tensor. float16 and bfloat16 are float32 values.
TEST(OnnxImport, IntegerTensorsAsFloatValues) {
  OnnxGraph g({{"a", {4}}, {"b", {4}}, {"x", {4}}}, {"quotient", "halves", "hot"});
  for (int i : {0, 1})
    g.graph().mutable_input(i)->mutable_type()->mutable_tensor_type()->set_elem_type(
        pb::TensorProto::INT64);
  g.node("Div", {"a", "b"}, {"quotient"});
  set(g.node("Cast", {"x"}, {"truncated"}), "to", int64_t{pb::TensorProto::INT32});
  int64_initializer(g, "two", {}, {2});
  g.node("Add", {"truncated", "truncated"}, {"doubled"});
  g.node("Div", {"doubled", "two"}, {"back"});
  g.node("Div", {"back", "two"}, {"halves"});
  int64_initializer(g, "indices", {2}, {-1, 1});
  int64_initializer(g, "depth", {}, {3});
  g.initializer("off_on", {2}, {0, 1});
  g.node("OneHot", {"indices", "depth", "off_on"}, {"hot"});
  // Integers stay integers through Concat, Transpose and the reductions (ReduceMean rounding
  // toward zero): Div of them rounds toward zero too.
  g.graph().add_output()->set_name("mean");
  g.graph().add_output()->set_name("sum_halved");
  set(g.node("Concat", {"a", "a"}, {"ab"}), "axis", int64_t{0});
  set(g.node("ReduceMean", {"ab"}, {"mean"}), "keepdims", int64_t{0});  // 10 / 8
  int64_initializer(g, "axes", {1}, {0});
  set(g.node("ReduceSum", {"a", "axes"}, {"sum"}), "keepdims", int64_t{0});  // 5
  g.node("Div", {"sum", "two"}, {"sum_halved"});
  const Function f = g.load();
  ValueMap args;
  const std::map<std::string, NDArrayView> data = {{"a", tensor({4}, {7, -7, 6, -1})},
                                                   {"b", tensor({4}, {2, 2, 4, 3})},
                                                   {"x", tensor({4}, {-1.5f, 2.7f, -0.2f, 3})}};
  for (const Variable& arg : f.arguments()) {
    EXPECT_EQ(arg.dtype(), DataType::Float32) << arg.name();
    args.insert_or_assign(arg, ArgumentData(data.at(arg.name())).to_value(arg));
  }
  const ValueMap v = f.eval(args, f.outputs());
  auto output = [&](size_t k) { return v.at(f.outputs()[k]).data().to_vector<float>(); };
  EXPECT_EQ(output(0), (std::vector<float>{3, -3, 1, 0}));
  EXPECT_EQ(output(1), (std::vector<float>{0, 1, 0, 1}));  // -1, 2, 0, 3 halved
  EXPECT_EQ(output(2), (std::vector<float>{0, 0, 1, 0, 1, 0}));
  EXPECT_EQ(output(3), std::vector<float>{1});  // 10 / 8
  EXPECT_EQ(output(4), std::vector<float>{2});  // 5 / 2

  // float32 holds integers up to 2^24 exactly, float64 (a graph with a double tensor) 2^53.
  OnnxGraph big({{"x", {1}}}, {"y"});
  int64_initializer(big, "offset", {1}, {(int64_t{1} << 24) + 1});
  big.node("Add", {"x", "offset"}, {"y"});
  expect_error<DataError>([&] { big.load(); },
                          {"tensor 'offset'", "16777217", "float32", "up to 2^24"});
  big.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::DOUBLE);
  const Function wide = big.load();
  EXPECT_EQ(wide.arguments()[0].dtype(), DataType::Float64);
  EXPECT_EQ(wide.eval({{"x", NDArrayView::from_vector(NDShape{1}, std::vector<double>{1})}})
                .data()
                .to_vector<double>(),
            std::vector<double>{16777218});
  big.graph().mutable_initializer(0)->set_int64_data(0, (int64_t{1} << 53) + 1);
  expect_error<DataError>([&] { big.load(); }, {"tensor 'offset'", "float64", "up to 2^53"});

  // float16 and bfloat16 are read as float32 (exactly); a Cast to float16 rounds to its values,
  // one to bfloat16 is refused; strings are not read: the message names the types that are.
  OnnxGraph half({{"x", {3}}}, {"y"});
  half.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::FLOAT16);
  pb::TensorProto* h = half.graph().add_initializer();
  h->set_name("h");
  h->set_data_type(pb::TensorProto::FLOAT16);
  h->add_dims(3);
  for (int bits : {0x3c00, 0xc500, 0x0001}) h->add_int32_data(bits);  // 1, -5, 2^-24
  pb::TensorProto* b = half.graph().add_initializer();
  b->set_name("b");
  b->set_data_type(pb::TensorProto::BFLOAT16);
  b->add_dims(3);
  for (int bits : {0x3fc0, 0, 0x4000}) b->add_int32_data(bits);  // 1.5, 0, 2
  half.node("Add", {"x", "h"}, {"xh"});
  half.node("Add", {"xh", "b"}, {"y"});
  EXPECT_EQ(evaluate(half.load(), {{"x", tensor({3}, {0, 0, 0})}}),
            (std::vector<float>{2.5f, -5, 2 + 0x1p-24f}));
  pb::NodeProto& to_half = half.node("Cast", {"y"}, {"z"});
  set(to_half, "to", int64_t{pb::TensorProto::FLOAT16});
  half.graph().mutable_output(0)->set_name("z");
  EXPECT_EQ(evaluate(half.load(), {{"x", tensor({3}, {0, 0, 0})}}),
            (std::vector<float>{2.5f, -5, 2}));
  to_half.mutable_attribute(0)->set_i(pb::TensorProto::BFLOAT16);
  expect_error<DataError>([&] { half.load(); }, {"Cast", "BFLOAT16 would round"});
  half.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::STRING);
  expect_error<DataError>([&] { half.load(); },
                          {"'x'", "STRING", "float16 and bfloat16", "bool", "int8 to int64"});
}

// Cast to float16 rounds float32 and float64 values to the nearest float16 (ties to even) and
// gives float32: normal values to 11 significant bits, subnormal ones to multiples of 2^-24,
// from 65520 on infinity (numpy's float16 conversion gives the same values).
TEST(OnnxImport, CastToFloat16Rounds) {
  const std::vector<double> x = {0.1,
                                 1 + 0x1p-11,
                                 1 + 3 * 0x1p-11,
                                 65519,
                                 65520,
                                 -1e6,
                                 3e-8,
                                 1e-8,
                                 -0x1p-14 + 0x1p-30,
                                 std::numeric_limits<double>::infinity()};
  const std::vector<float> want = {0.0999755859375f,
                                   1,
                                   1.001953125f,
                                   65504,
                                   std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity(),
                                   0x1p-24f,
                                   0,
                                   -0x1p-14f,
                                   std::numeric_limits<float>::infinity()};
  for (const auto type : {pb::TensorProto::FLOAT, pb::TensorProto::DOUBLE}) {
    OnnxGraph g({{"x", {10}}}, {"y"});
    g.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    set(g.node("Cast", {"x"}, {"y"}), "to", int64_t{pb::TensorProto::FLOAT16});
    const Function f = g.load();
    const Variable a = f.arguments()[0];
    const NDArrayView data = type == pb::TensorProto::FLOAT
                                 ? tensor({10}, std::vector<float>(x.begin(), x.end()))
                                 : NDArrayView::from_vector(NDShape{10}, x);
    const Value y = f.eval({{a, ArgumentData(data).to_value(a)}}, f.outputs()).at(f.output());
    EXPECT_EQ(y.data().dtype(), DataType::Float32);
    EXPECT_EQ(y.data().to_vector<float>(), want);
  }
}

// Pad's edge mode repeats each axis's first and last slices; ArgMax and ArgMin with
// select_last_index take the last extreme; TopK with largest 0 the smallest, increasing.
TEST(OnnxImport, EdgePadLastExtremesAndSmallest) {
  OnnxGraph g({{"x", {2, 3}}}, {"padded", "last_max", "last_min", "smallest", "where"});
  int64_initializer(g, "pads", {4}, {1, 0, 0, 2});
  set(g.node("Pad", {"x", "pads"}, {"padded"}), "mode", std::string("edge"));
  pb::NodeProto& last_max = g.node("ArgMax", {"x"}, {"last_max"});
  set(last_max, "axis", int64_t{1});
  set(last_max, "select_last_index", int64_t{1});
  pb::NodeProto& last_min = g.node("ArgMin", {"x"}, {"last_min"});
  set(last_min, "select_last_index", int64_t{1});
  set(last_min, "keepdims", int64_t{0});
  int64_initializer(g, "k", {1}, {2});
  set(g.node("TopK", {"x", "k"}, {"smallest", "where"}), "largest", int64_t{0});
  const Function f = g.load();
  const ValueMap v =
      f.eval({{f.arguments()[0],
               ArgumentData(tensor({2, 3}, {1, 5, 5, 2, 2, 1})).to_value(f.arguments()[0])}},
             f.outputs());
  auto output = [&](size_t k) { return v.at(f.outputs()[k]).data().to_vector<float>(); };
  EXPECT_EQ(output(0), (std::vector<float>{1, 5, 5, 5, 5, 1, 5, 5, 5, 5, 2, 2, 1, 1, 1}));
  EXPECT_EQ(output(1), (std::vector<float>{2, 1}));
  EXPECT_EQ(output(2), (std::vector<float>{0, 1, 1}));
  EXPECT_EQ(output(3), (std::vector<float>{1, 5, 1, 2}));
  EXPECT_EQ(output(4), (std::vector<float>{0, 1, 2, 0}));
}

// gather: a shared reference indexed by each sample's indices along a middle axis round trips
// (Gather along axis 0 between Transposes); each sample's own reference is refused (GatherND).
// Import reads a negative index from the end.
TEST(Onnx, GatherBothWays) {
  const Variable indices = input_variable(NDShape{2}, {.name = "i"});
  const Variable reference = parameter(random_array(NDShape{3, 4, 2}, DataType::Float32, 3), "r");
  const Function y = gather(reference, indices, Axis(1));
  const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(y));
  const NDArrayView i = tensor({2, 2}, {3, 0, 1.5f, 2});
  EXPECT_EQ(loaded.eval(i).data().to_vector<float>(), y.eval(i).data().to_vector<float>());
  EXPECT_EQ(loaded.output().shape(), (NDShape{3, 2, 2}));
  const Variable own = input_variable(NDShape{3, 4}, {.name = "own"});
  expect_error<ArgumentError>([&] { save_onnx_to_bytes(gather(own, indices)); },
                              {"Gather", "GatherND"});

  OnnxGraph g({{"data", {3, 2}}}, {"y"});
  int64_initializer(g, "at", {2}, {-1, 0});
  g.node("Gather", {"data", "at"}, {"y"});
  EXPECT_EQ(evaluate(g.load(), {{"data", tensor({3, 2}, {1, 2, 3, 4, 5, 6})}}),
            (std::vector<float>{5, 6, 1, 2}));
}

// Slice with steps: forward by 2 from the start, and backward by 2 from past the end (clamped to
// the last element) down to the first.
TEST(OnnxImport, SliceWithSteps) {
  OnnxGraph g({{"x", {2, 5}}}, {"y"});
  int64_initializer(g, "starts", {2}, {0, 100});
  int64_initializer(g, "ends", {2}, {2, -100});
  int64_initializer(g, "axes", {2}, {0, 1});
  int64_initializer(g, "steps", {2}, {1, -2});
  g.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  EXPECT_EQ(evaluate(g.load(), {{"x", tensor({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}}),
            (std::vector<float>{4, 2, 0, 9, 7, 5}));
  g.graph().mutable_initializer(3)->set_int64_data(1, 2);
  g.graph().mutable_initializer(0)->set_int64_data(1, 1);
  g.graph().mutable_initializer(1)->set_int64_data(1, 100);
  EXPECT_EQ(evaluate(g.load(), {{"x", tensor({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}}),
            (std::vector<float>{1, 3, 6, 8}));
}

// Upsample (opsets 7 to 9): nearest repeats each element floor(i / scale), linear interpolates
// at i / scale (the last element repeated past the end), with scales as the attribute (opsets 7
// and 8) or an input (9), along static axes and behind a batch axis; a scale along the batch
// axis, a mode ONNX lacks and Upsample at opset 10 are refused.
TEST(OnnxImport, Upsample) {
  const NDArrayView square = tensor({1, 1, 2, 2}, {1, 2, 3, 4});
  OnnxGraph nearest({{"x", {1, 1, 2, 2}}}, {"y"}, 9);
  nearest.initializer("scales", {4}, {1, 1, 2, 1.5f});
  nearest.node("Upsample", {"x", "scales"}, {"y"});
  const Function n = nearest.load();
  EXPECT_EQ(n.output().shape(), (NDShape{1, 1, 4, 3}));
  EXPECT_EQ(evaluate(n, {{"x", square}}), (std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4}));

  OnnxGraph linear({{"x", {1, 1, 2, 2}}}, {"y"}, 7);
  pb::NodeProto& up = linear.node("Upsample", {"x"}, {"y"});
  set(up, "mode", std::string("linear"));
  pb::AttributeProto* scales = up.add_attribute();
  scales->set_name("scales");
  scales->set_type(pb::AttributeProto::FLOATS);
  for (float v : {1.f, 1.f, 2.f, 2.f}) scales->add_floats(v);
  EXPECT_EQ(evaluate(linear.load(), {{"x", square}}),
            (std::vector<float>{1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4}));
  // Behind a batch axis: each sample upsampled.
  const Function batched = linear.load(true);
  EXPECT_EQ(evaluate(batched, {{"x", tensor({2, 1, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 4})}})[31], 4.f);
  EXPECT_EQ(evaluate(batched, {{"x", tensor({2, 1, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 4})}})[21], 1.f);
  scales->set_floats(0, 2);
  expect_error<DataError>([&] { linear.load(true); },
                          {"(Upsample, opset 7)", "along axis 0, a batch axis"});
  scales->set_floats(0, 1);
  set(up, "mode", std::string("cubic"));
  up.mutable_attribute(0)->set_s("cubic");
  expect_error<DataError>([&] { linear.load(); },
                          {"(Upsample, opset 7)", "mode cubic is not one of Upsample's"});
  OnnxGraph resized({{"x", {1, 1, 2, 2}}}, {"y"}, 10);
  resized.initializer("scales", {4}, {1, 1, 2, 2});
  resized.node("Upsample", {"x", "scales"}, {"y"});
  expect_error<DataError>([&] { resized.load(); },
                          {"(Upsample, opset 10)", "deprecated Upsample at opset 10"});
}

// Resize of x = (0, 10, 20, 40) at opset 13 (unless given), by scales (a float initializer) or
// to sizes (an int64 one), with the node's string attributes; the node, to add others.
struct ResizeGraph {
  OnnxGraph g;
  pb::NodeProto* node;
  ResizeGraph(const std::string& mode, const std::vector<float>& scales,
              const std::vector<int64_t>& sizes,
              const std::vector<std::pair<std::string, std::string>>& attributes = {},
              int64_t opset = 13)
      : g({{"x", {4}}}, {"y"}, opset) {
    std::vector<std::string> inputs{"x", "", ""};
    if (!scales.empty()) {
      g.initializer("scales", {int64_t(scales.size())}, scales);
      inputs[opset == 10 ? 1 : 2] = "scales";
    }
    if (!sizes.empty()) {
      int64_initializer(g, "sizes", {int64_t(sizes.size())}, sizes);
      inputs.push_back("sizes");
    }
    while (inputs.back().empty()) inputs.pop_back();
    node = &g.node("Resize", inputs, {"y"});
    set(*node, "mode", mode);
    for (const auto& [name, value] : attributes) set(*node, name, value);
  }
  std::vector<float> operator()() const {
    return evaluate(g.load(), {{"x", tensor({4}, {0, 10, 20, 40})}});
  }
};

void expect_near(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

// Resize's modes, as ONNX's reference computes them (the expected values are its
// interpolate_nd's): nearest with each nearest_mode at half_pixel positions, linear at each
// coordinate_transformation_mode (tf_crop_and_resize: roi and the extrapolation value outside
// it), cubic (cubic_coeff_a, exclude_outside); opset 10's form (X and scales: asymmetric, nearest
// ceil where the axis shrinks) and opset 11's (empty roi and scales beside sizes); a batch axis
// kept at scale 1.
TEST(OnnxImport, Resize) {
  const std::map<std::string, std::vector<double>> nearest = {
      {"round_prefer_floor", {0, 0, 10, 20, 20, 40}},
      {"round_prefer_ceil", {0, 10, 10, 20, 40, 40}},
      {"floor", {0, 0, 10, 10, 20, 40}},
      {"ceil", {0, 10, 20, 20, 40, 40}}};
  for (const auto& [rule, want] : nearest)
    expect_near(ResizeGraph("nearest", {1.5f}, {}, {{"nearest_mode", rule}})(), want);
  expect_near(ResizeGraph("nearest", {2}, {},
                          {{"coordinate_transformation_mode", "tf_half_pixel_for_nn"}})(),
              {0, 10, 10, 20, 20, 40, 40, 40});
  expect_near(ResizeGraph("linear", {}, {8})(), {0, 2.5, 7.5, 12.5, 17.5, 25, 35, 40});
  expect_near(
      ResizeGraph("linear", {}, {3}, {{"coordinate_transformation_mode", "align_corners"}})(),
      {0, 15, 40});
  expect_near(
      ResizeGraph("linear", {0.5f}, {}, {{"coordinate_transformation_mode", "asymmetric"}})(),
      {0, 20});
  expect_near(
      ResizeGraph("linear", {}, {1}, {{"coordinate_transformation_mode", "pytorch_half_pixel"}})(),
      {0});
  ResizeGraph crop("linear", {}, {3}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}});
  crop.g.initializer("roi", {2}, {0.25f, 1.25f});
  crop.node->set_input(1, "roi");
  set(*crop.node, "extrapolation_value", -1.f);
  expect_near(crop(), {7.5, 25, -1});

  expect_near(ResizeGraph("cubic", {2}, {})(), {-1.0546875, 1.9140625, 6.6796875, 12.6171875,
                                                15.9765625, 25.5859375, 35.8203125, 42.109375});
  expect_near(
      ResizeGraph("cubic", {}, {3}, {{"coordinate_transformation_mode", "align_corners"}})(),
      {0, 14.0625, 40});
  ResizeGraph tf("cubic", {2}, {});
  set(*tf.node, "cubic_coeff_a", -0.5f);
  set(*tf.node, "exclude_outside", int64_t{1});
  expect_near(tf(), {-0.88235294, 1.67883212, 7.09923664, 12.265625, 16.796875, 25.11450382,
                     36.42335766, 41.76470588});

  // Opset 10: asymmetric positions i / scale; nearest is their ceil where the axis shrinks
  // (1 / 0.6 picks element 2), their floor where it grows.
  expect_near(ResizeGraph("nearest", {0.6f}, {}, {}, 10)(), {0, 20});
  expect_near(ResizeGraph("nearest", {1.5f}, {}, {}, 10)(), {0, 0, 10, 20, 20, 40});
  expect_near(ResizeGraph("linear", {2}, {}, {}, 10)(), {0, 5, 10, 15, 20, 30, 40, 40});
  // Opset 11: roi and scales are required inputs, empty where sizes are given.
  ResizeGraph eleven("linear", {}, {8}, {}, 11);
  eleven.g.initializer("empty", {0}, {});
  eleven.node->set_input(1, "empty");
  eleven.node->set_input(2, "empty");
  expect_near(eleven(), {0, 2.5, 7.5, 12.5, 17.5, 25, 35, 40});

  // Behind a batch axis (scale 1 there): each sample resized.
  OnnxGraph batched({{"x", {1, 2}}}, {"y"});
  batched.initializer("scales", {2}, {1, 2});
  set(batched.node("Resize", {"x", "", "scales"}, {"y"}), "mode", std::string("linear"));
  const Function b = batched.load(true);
  EXPECT_EQ(b.output().shape(), (NDShape{4}));
  EXPECT_EQ(evaluate(b, {{"x", tensor({2, 2}, {0, 4, 8, 16})}}),
            (std::vector<float>{0, 1, 3, 4, 8, 10, 14, 16}));
  // Scale 1 everywhere leaves x as it is (the graph output its alias).
  EXPECT_EQ(ResizeGraph("cubic", {1}, {}).g.load().output().owner().op_name(), "Pass");
}

// Resize's refusals name the op and the opset: scales, sizes or roi computed when the model
// runs, both or neither of scales and sizes, tf_crop_and_resize without roi, modes ONNX lacks
// (cubic at opset 10), no elements, linear of integers, a batch axis resized, opset 9.
TEST(OnnxImport, ResizeRefusals) {
  OnnxGraph computed({{"x", {4}}, {"s", {1}}}, {"y"});
  computed.node("Resize", {"x", "", "s"}, {"y"});
  expect_error<DataError>([&] { computed.load(); },
                          {"(Resize, opset 13)",
                           "scales (input 2, 's') is computed when the "
                           "model runs; Loom imports Resize with constant "
                           "scales"});
  ResizeGraph both("nearest", {2}, {8});
  expect_error<DataError>([&] { both.g.load(); }, {"(Resize, opset 13)", "both are"});
  ResizeGraph neither("nearest", {}, {});
  expect_error<DataError>([&] { neither.g.load(); }, {"(Resize, opset 13)", "neither is"});
  ResizeGraph crop("linear", {}, {3}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}});
  expect_error<DataError>([&] { crop.g.load(); }, {"tf_crop_and_resize needs roi (input 1)"});
  expect_error<DataError>([&] { ResizeGraph("cubic", {2}, {}, {}, 10).g.load(); },
                          {"(Resize, opset 10)", "mode cubic is not one of Resize's at opset 10"});
  expect_error<DataError>([&] { ResizeGraph("area", {2}, {}).g.load(); },
                          {"mode area is not one of Resize's"});
  expect_error<DataError>(
      [&] {
        ResizeGraph("nearest", {2}, {}, {{"coordinate_transformation_mode", "half"}}).g.load();
      },
      {"coordinate_transformation_mode half is not one of ONNX's"});
  expect_error<DataError>(
      [&] {
        ResizeGraph("nearest", {2}, {}, {{"nearest_mode", "round"}}).g.load();
      },
      {"nearest_mode round is not one of ONNX's"});
  expect_error<DataError>([&] { ResizeGraph("nearest", {0.2f}, {}).g.load(); },
                          {"Resize would make 0 elements of axis 0", "no empty tensors"});
  ResizeGraph integers("linear", {2}, {});
  integers.g.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::INT64);
  expect_error<DataError>([&] { integers.g.load(); },
                          {"mode linear of an integer tensor is not imported"});
  ResizeGraph batch("nearest", {}, {4});
  expect_error<DataError>([&] { batch.g.load(true); }, {"(Resize, opset 13)", "a batch axis"});
  expect_error<DataError>([&] { ResizeGraph("nearest", {2}, {}, {}, 9).g.load(); },
                          {"(Resize, opset 9)", "defined from opset 10"});
}

// Split along an axis into the sizes `split` gives (an input from opset 13, an attribute
// before) or into equal parts; sizes that do not add up to the axis's extent are refused.
// Sum and Mean of any number of inputs, broadcast as ONNX broadcasts them.
TEST(OnnxImport, SplitSumAndMean) {
  const NDArrayView x = tensor({2, 3}, {0, 1, 2, 3, 4, 5});
  OnnxGraph sized({{"x", {2, 3}}}, {"a", "b"});
  int64_initializer(sized, "split", {2}, {1, 2});
  set(sized.node("Split", {"x", "split"}, {"a", "b"}), "axis", int64_t{-1});
  EXPECT_EQ(evaluate_all(sized.load(), {{"x", x}}),
            (std::vector<std::vector<float>>{{0, 3}, {1, 2, 4, 5}}));
  OnnxGraph equal({{"x", {2, 3}}}, {"a", "b", "c"}, 11);
  set(equal.node("Split", {"x"}, {"a", "b", "c"}), "axis", int64_t{1});
  EXPECT_EQ(evaluate_all(equal.load(), {{"x", x}}),
            (std::vector<std::vector<float>>{{0, 3}, {1, 4}, {2, 5}}));
  OnnxGraph attribute({{"x", {2, 3}}}, {"a", "b"}, 12);
  pb::NodeProto& split = attribute.node("Split", {"x"}, {"a", "b"});
  set(split, "split", std::vector<int64_t>{1, 1});
  EXPECT_EQ(evaluate_all(attribute.load(), {{"x", x}}),
            (std::vector<std::vector<float>>{{0, 1, 2}, {3, 4, 5}}));
  set(split, "axis", int64_t{1});
  expect_error<DataError>(
      [&] { attribute.load(); },
      {"(Split, opset 12)", "split [1,1] must be 2 positive sizes", "axis's extent 3"});
  split.mutable_attribute(0)->set_ints(0, 0);
  split.mutable_attribute(0)->set_ints(1, 3);
  expect_error<DataError>([&] { attribute.load(); }, {"(Split, opset 12)", "split [0,3]"});
  OnnxGraph uneven({{"x", {2, 3}}}, {"a", "b"});
  set(uneven.node("Split", {"x"}, {"a", "b"}), "axis", int64_t{1});
  expect_error<DataError>([&] { uneven.load(); },
                          {"(Split, opset 13)", "extent 3 does not split into 2 equal parts"});

  for (const char* op : {"Sum", "Mean"}) {
    OnnxGraph g({{"x", {2, 3}}, {"y", {3}}, {"z", {1}}}, {"s"}, 8);
    g.node(op, {"x", "y", "z"}, {"s"});
    const float n = std::string(op) == "Sum" ? 1 : 3;
    EXPECT_EQ(
        evaluate(g.load(), {{"x", x}, {"y", tensor({3}, {3, 6, 9})}, {"z", tensor({1}, {3})}}),
        (std::vector<float>{6 / n, 10 / n, 14 / n, 9 / n, 13 / n, 17 / n}))
        << op;
    OnnxGraph one({{"x", {2, 3}}}, {"s"});
    one.node(op, {"x"}, {"s"});
    EXPECT_EQ(evaluate(one.load(), {{"x", x}}), (std::vector<float>{0, 1, 2, 3, 4, 5})) << op;
  }
}

// Unpooling exports as MaxUnpool at the indices of a MaxPool of the pooling input (and imports
// back as Loom's unpooling): windows of 2x2 at stride 2 (the last column in none), and
// overlapping 3x3 ones with automatic padding, in float32 and float64.
TEST(Onnx, UnpoolingRoundTrip) {
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    const Variable x = input_variable({2, 4, 5}, {.dtype = dtype});
    for (const auto& [window, pad] : {std::pair{NDShape{2, 2}, false}, {NDShape{3, 3}, true}}) {
      const PoolingOptions o{.strides = {2}, .auto_padding = {pad}};
      const Function model =
          unpooling(relu(pooling(x, PoolingType::Max, window, o)), x, PoolingType::Max, window, o);
      const std::vector<uint8_t> bytes = save_onnx_to_bytes(model);
      pb::ModelProto m;
      ASSERT_TRUE(m.ParseFromArray(bytes.data(), int(bytes.size())));
      std::vector<std::string> ops;
      for (const pb::NodeProto& n : m.graph().node()) ops.push_back(n.op_type());
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "MaxPool"), 2);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "MaxUnpool"), 1);
      round_trip(model);
    }
  }
}

// MaxUnpool at the indices of a MaxPool over one sample [1, C, H, W]: each window's maximum
// gets X's value, where two windows choose one position the later window's; indices given as
// data and windows other than the MaxPool's are refused.
TEST(OnnxImport, MaxUnpoolOfMaxPoolIndices) {
  OnnxGraph g({{"x", {1, 1, 3, 3}}}, {"z"});
  pb::NodeProto& pool = g.node("MaxPool", {"x"}, {"y", "i"});
  set(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  g.initializer("c", {1, 1, 2, 2}, {0, 10, 20, 30});
  g.node("Add", {"y", "c"}, {"v"});
  pb::NodeProto& unpool = g.node("MaxUnpool", {"v", "i"}, {"z"});
  set(unpool, "kernel_shape", std::vector<int64_t>{2, 2});
  EXPECT_EQ(evaluate(g.load(), {{"x", tensor({1, 1, 3, 3}, {1, 5, 3, 4, 2, 6, 7, 8, 0})}}),
            (std::vector<float>{0, 5, 0, 0, 0, 16, 0, 38, 0}));
  // output_shape: the MaxPool's input's (a constant may give any batch entry in a batch).
  int64_initializer(g, "shape", {4}, {1, 1, 3, 3});
  unpool.add_input("shape");
  EXPECT_EQ(evaluate(g.load(), {{"x", tensor({1, 1, 3, 3}, {1, 5, 3, 4, 2, 6, 7, 8, 0})}})[7], 38);
  g.graph().mutable_initializer(1)->set_int64_data(0, 7);
  EXPECT_EQ(g.load(true).output().shape(), (NDShape{1, 3, 3}));
  expect_error<DataError>([&] { g.load(); }, {"output_shape [7,1,3,3] must be the shape"});
  set(unpool, "strides", std::vector<int64_t>{2, 2});
  expect_error<DataError>([&] { g.load(); }, {"(MaxUnpool, opset 13)",
                                              "strides [2,2] differs from that of the "
                                              "MaxPool node"});
  OnnxGraph early({{"x", {1, 1, 2, 2}}}, {"z"}, 8);
  set(early.node("MaxPool", {"x"}, {"y", "i"}), "kernel_shape", std::vector<int64_t>{2, 2});
  set(early.node("MaxUnpool", {"y", "i"}, {"z"}), "kernel_shape", std::vector<int64_t>{2, 2});
  expect_error<DataError>([&] { early.load(); },
                          {"MaxUnpool is defined from opset 9", "the model imports opset 8"});
  // Indices given as data: X's values at them in the output of the windows' shape (4 x 4), the
  // later where two are one; over a batch they number the elements of every sample.
  OnnxGraph data({{"x", {1, 1, 2, 2}}, {"i", {1, 1, 2, 2}}}, {"y"}, 11);
  pb::NodeProto& scatter = data.node("MaxUnpool", {"x", "i"}, {"y"});
  set(scatter, "kernel_shape", std::vector<int64_t>{2, 2});
  set(scatter, "strides", std::vector<int64_t>{2, 2});
  const NDArrayView values = tensor({1, 1, 2, 2}, {5, 6, 7, 8});
  std::vector<float> want(16, 0);
  want[5] = 6, want[13] = 7, want[15] = 8;
  EXPECT_EQ(evaluate(data.load(), {{"x", values}, {"i", tensor({1, 1, 2, 2}, {5, 5, 13, 15})}}),
            want);
  want.resize(32, 0);
  for (size_t k = 0; k < 4; ++k) want[16 + k] = float(k + 1);
  EXPECT_EQ(
      evaluate(data.load(true), {{"x", tensor({2, 1, 2, 2}, {5, 6, 7, 8, 1, 2, 3, 4})},
                                 {"i", tensor({2, 1, 2, 2}, {5, 5, 13, 15, 16, 17, 18, 19})}}),
      want);
  // output_shape: indices into it directly, as onnxruntime reads them (ONNX's node test pads
  // the windows' shape instead: onnx/onnx#2398).
  int64_initializer(data, "shape", {4}, {1, 1, 5, 5});
  scatter.add_input("shape");
  std::vector<float> into(25, 0);
  into[5] = 5, into[7] = 6, into[13] = 7, into[15] = 8;
  EXPECT_EQ(evaluate(data.load(), {{"x", values}, {"i", tensor({1, 1, 2, 2}, {5, 7, 13, 15})}}),
            into);
  OnnxGraph large({{"x", {1, 1, 64, 64}}, {"i", {1, 1, 64, 64}}}, {"y"}, 11);
  set(large.node("MaxUnpool", {"x", "i"}, {"y"}), "kernel_shape", std::vector<int64_t>{2, 2});
  expect_error<DataError>([&] { large.load(); },
                          {"(MaxUnpool, opset 11)", "more than Loom makes (2^24)"});
}

// Export of the ops ONNX has no one node for (booleans cast back to 0/1, CNTK's round, clip
// with tensor bounds, log_add_exp, softplus with a steepness) round trips in float32 and
// float64.
TEST(Onnx, CompositeExportsRoundTrip) {
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    Variable x = input_variable(5, {.dtype = dtype, .name = "x"});
    const std::vector<double> lower = {-1, -0.5, 0, 0.2, 0.5};
    const Constant half = constant(0.5, dtype),
                   bounds = constant(
                       dtype == DataType::Float64
                           ? NDArrayView::from_vector(NDShape{5}, lower)
                           : NDArrayView::from_vector(
                                 NDShape{5}, std::vector<float>(lower.begin(), lower.end())));
    const Variable y =
        element_select(element_or(greater(x, half), not_equal(x, bounds)),
                       round(element_times(x, constant(3.0, dtype))),
                       plus(clip(x, bounds, half), log_add_exp(x, softplus(x, {.steepness = 2}))));
    round_trip(plus(element_not(y), y), false, dtype == DataType::Float64 ? 1e-12 : 1e-6);
  }
}

// Pad in constant and reflect mode, swapaxes, squeeze and expand_dims round trip; symmetric
// padding, which ONNX lacks, is an error naming the op.
TEST(Onnx, ShapeOpsRoundTrip) {
  Variable x = input_variable({3, 4}, {.name = "x"});
  const Variable padded = pad(pad(x, {{1, 2}, {0, 3}}, {.constant_value = 0.5}), {{2, 1}, {1, 1}},
                              {.mode = kReflectPad});
  round_trip(expand_dims(squeeze(swapaxes(expand_dims(padded, 0), {.axis1 = 0, .axis2 = 2})), 1));
  expect_error<ArgumentError>(
      [&] {
        save_onnx_to_bytes(pad(x, {{1, 1}, {1, 1}}, {.mode = kSymmetricPad}));
      },
      {"Pad", "symmetrically"});
}

// The losses export as ONNX compositions, a number per sample, and import back: the same
// values (soft targets tell classification_error's two rules apart).
TEST(Onnx, LossesRoundTrip) {
  const Variable z = input_variable({4}, {.name = "z"}), t = input_variable({4}, {.name = "t"});
  const std::vector<Function> losses{squared_error(z, t),
                                     cross_entropy_with_softmax(z, t),
                                     binary_cross_entropy(sigmoid(z), t),
                                     classification_error(z, t),
                                     classification_error_node(z, t, 1),
                                     classification_error(z, t, 2)};
  const std::vector<std::pair<std::string, NDArrayView>> data{
      {"z", tensor({3, 4}, {0.5f, -1, 2, 0.25f, 3, 1, -2, 0, -0.5f, 0.75f, 0.5f, 1.5f})},
      {"t", tensor({3, 4}, {0.1f, 0.2f, 0.6f, 0.1f, 0.3f, 0.4f, 0.2f, 0.1f, 0, 0, 0, 1})}};
  for (const Function& loss : losses) {
    SCOPED_TRACE(loss.op_name());
    const Function loaded = load_onnx_from_bytes(save_onnx_to_bytes(loss));
    const std::vector<float> expected = evaluate(loss, data), got = evaluate(loaded, data);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;
  }
  // The error rules differ on the second sample: class 0 scores highest, the target's largest
  // entry is class 1 (0.4) and it gives class 0 0.3.
  const std::vector<float> dot_rule = evaluate(losses[3], data);
  ASSERT_EQ(dot_rule.size(), 3u);
  EXPECT_NEAR(dot_rule[0], 0.4, 1e-6);
  EXPECT_NEAR(dot_rule[1], 0.7, 1e-6);
  EXPECT_EQ(dot_rule[2], 0);
  EXPECT_EQ(evaluate(losses[4], data), (std::vector<float>{0, 1, 0}));
  // Top 2: the second sample's class 1 scores second (1 after 3).
  EXPECT_EQ(evaluate(losses[5], data), (std::vector<float>{0, 0, 0}));
}

// A chain of 300,000 Relus (7.6 MB) imports, evaluates, exports, imports again and is freed:
// freeing it recursed once per node and overflowed the stack before (issue 32).
TEST(OnnxImport, ImportsAChainOfAnyDepth) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr size_t kNodes = 50'000;
#else
  constexpr size_t kNodes = 300'000;
#endif
  OnnxGraph g({{"v0", {1, 4}}}, {"v" + std::to_string(kNodes)});
  for (size_t i = 0; i < kNodes; ++i)
    g.node("Relu", {"v" + std::to_string(i)}, {"v" + std::to_string(i + 1)});
  const Function loaded = g.load();
  const std::vector<float> expected{0, 2, 0, 4};
  EXPECT_EQ(evaluate(loaded, {{"v0", tensor({1, 4}, {-1, 2, -3, 4})}}), expected);
  const Function again = load_onnx_from_bytes(save_onnx_to_bytes(loaded));
  EXPECT_EQ(evaluate(again, {{"v0", tensor({1, 4}, {-1, 2, -3, 4})}}), expected);
}

// Sizes a file states are checked before anything is allocated from them.
TEST(OnnxImport, RefusesHostileSizes) {
  for (const int64_t size : {int64_t{-1}, int64_t{0}, int64_t{1} << 40}) {
    OnnxGraph g({{"x", {2, size}}}, {"y"});
    g.node("Relu", {"x"}, {"y"});
    expect_error<DataError>([&] { g.load(); },
                            {"g.onnx", "graph input 'x'", "axis 1 has size", "1 to 2^31"});
  }
  auto conv = [](const std::vector<int64_t>& pads, const std::vector<int64_t>& kernel_shape,
                 const std::vector<int64_t>& strides) {
    OnnxGraph g({{"x", {1, 1, 3, 3}}}, {"y"});
    g.initializer("w", {1, 1, 2, 2}, {1, 1, 1, 1});
    pb::NodeProto& n = g.node("Conv", {"x", "w"}, {"y"});
    n.set_name("c1");
    set(n, "pads", pads);
    set(n, "kernel_shape", kernel_shape);
    set(n, "strides", strides);
    return g;
  };
  // The constants of positions import composes (ArgMax's select_last_index, Slice's steps).
  OnnxGraph last({{"x", {int64_t{1} << 25}}}, {"y"});
  set(last.node("ArgMax", {"x"}, {"y"}), "select_last_index", int64_t{1});
  expect_error<DataError>([&] { last.load(); }, {"ArgMax", "33554432 positions", "at most 2^24"});
  const int64_t huge = int64_t(1) << 31;
  expect_error<DataError>(
      [&] {
        conv({huge, 0, huge, 0}, {2, 2}, {1, 1}).load();
      },
      {"node 0 'c1' (Conv, opset 13)", "exceed the input's extent 3"});
  expect_error<DataError>(
      [&] {
        conv({0, 0, 0, 0}, {3, 3}, {1, 1}).load();
      },
      {"'c1'", "kernel_shape [3,3] contradicts W's kernel [2,2]"});
  expect_error<DataError>(
      [&] {
        conv({0, 0, 0, 0}, {2, 2}, {0, 1}).load();
      },
      {"'c1'", "strides must be positive"});
  EXPECT_EQ(conv({0, 0, 0, 0}, {2, 2}, {1, 1}).load().output().shape(), (NDShape{1, 1, 2, 2}));
  OnnxGraph r({{"x", {2}}}, {"y"});
  pb::TensorProto* target = r.graph().add_initializer();
  target->set_name("shape");
  target->set_data_type(pb::TensorProto::INT64);
  target->add_dims(3);
  for (int k = 0; k < 3; ++k) target->add_int64_data(huge);
  r.node("Reshape", {"x", "shape"}, {"y"});
  expect_error<DataError>([&] { r.load(); }, {"Reshape", "too many elements"});
  OnnxGraph padded({{"x", {2}}}, {"y"});
  pb::TensorProto* pads = padded.graph().add_initializer();
  pads->set_name("pads");
  pads->set_data_type(pb::TensorProto::INT64);
  pads->add_dims(2);
  pads->add_int64_data(huge);
  pads->add_int64_data(0);
  padded.node("Pad", {"x", "pads"}, {"y"});
  expect_error<DataError>([&] { padded.load(); }, {"Pad", "exceed the extent 2"});
  // Two nodes that write one name.
  OnnxGraph d({{"x", {2}}}, {"y"});
  d.node("Relu", {"x"}, {"y"});
  d.node("Neg", {"x"}, {"y"}).set_name("second");
  expect_error<DataError>([&] { d.load(); }, {"node 1 'second'", "output 'y' is already"});
}

// g's first input as sequences [T, N, ...]: its axes 0 and 1 without a fixed size.
void sequence_axes(OnnxGraph& g) {
  for (int k = 0; k < 2; ++k)
    g.graph()
        .mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(k)
        ->set_dim_param(k ? "N" : "T");
}

// A recurrent op's Y_h is read through a Squeeze of its direction axis; as a graph output the
// error says so.
TEST(OnnxImport, RecurrentStateAsGraphOutputSaysWhy) {
  OnnxGraph g({{"x", {1, 1, 1}}}, {"y_h"});
  sequence_axes(g);
  g.initializer("W", {1, 4, 1}, {1, 1, 1, 1});
  g.initializer("R", {1, 4, 1}, {1, 1, 1, 1});
  set(g.node("LSTM", {"x", "W", "R"}, {"", "y_h"}), "hidden_size", int64_t{1});
  expect_error<DataError>([&] { g.load(); },
                          {"g.onnx", "graph output 'y_h'", "recurrent op's output", "Squeeze"});
}

// An initial state given as ONNX allows it: the same state for every sample, of shape
// [1, N, hidden] with N read from the sequences' shape (Shape, Gather of entry 1, as a scalar
// then unsqueezed or as a vector, Concat), made by ConstantOfShape or by the Expand of a
// constant. Other initial states, and such a state read by any other op, are refused.
TEST(OnnxImport, InitialStatesOfEverySample) {
  // An RNN of one unit (tanh(x + 0.5 h)) over X [T, N, 1], its initial state made by `state`.
  auto rnn = [](const std::function<void(OnnxGraph&)>& state) {
    OnnxGraph g({{"x", {1, 1, 1}}}, {"y"});
    sequence_axes(g);
    g.initializer("W", {1, 1, 1}, {1});
    g.initializer("R", {1, 1, 1}, {0.5f});
    pb::TensorProto* one = g.graph().add_initializer();
    one->set_name("one");
    one->set_data_type(pb::TensorProto::INT64);
    one->add_dims(1);
    one->add_int64_data(1);
    g.node("Shape", {"x"}, {"shape"});
    state(g);
    set(g.node("RNN", {"x", "W", "R", "", "", "h0"}, {"steps"}), "hidden_size", int64_t{1});
    g.node("Squeeze", {"steps", "one"}, {"y"});
    return g;
  };
  const float h1 = std::tanh(1 + 0.25f), h2 = std::tanh(2 + 0.5f * h1), h3 = std::tanh(3 + 0.25f);
  const Value data = Value::create_sequences<float>(NDShape{1}, {{1, 2}, {3}});
  auto expect_states = [&](const OnnxGraph& g) {
    const Function f = g.load();
    const auto y = f.eval({{f.arguments()[0], data}}).at(f.output()).as_sequences<float>();
    ASSERT_EQ(y.size(), 2u);
    ASSERT_EQ(y[0].size(), 2u);
    ASSERT_EQ(y[1].size(), 1u);
    EXPECT_NEAR(y[0][0], h1, 1e-6);
    EXPECT_NEAR(y[0][1], h2, 1e-6);
    EXPECT_NEAR(y[1][0], h3, 1e-6);
  };
  // ConstantOfShape(Concat(1, Unsqueeze(Gather(Shape(x), 1 as a scalar)), 1)), value 0.5.
  expect_states(rnn([](OnnxGraph& g) {
    pb::TensorProto* scalar = g.graph().add_initializer();
    scalar->set_name("index");
    scalar->set_data_type(pb::TensorProto::INT64);
    scalar->add_int64_data(1);
    g.node("Gather", {"shape", "index"}, {"n"});
    pb::TensorProto* zero = g.graph().add_initializer();
    zero->set_name("zero");
    zero->set_data_type(pb::TensorProto::INT64);
    zero->add_dims(1);
    zero->add_int64_data(0);
    g.node("Unsqueeze", {"n", "zero"}, {"n1"});
    set(g.node("Concat", {"one", "n1", "one"}, {"target"}), "axis", int64_t{0});
    pb::AttributeProto* value = g.node("ConstantOfShape", {"target"}, {"h0"}).add_attribute();
    value->set_name("value");
    value->set_type(pb::AttributeProto::TENSOR);
    value->mutable_t()->set_data_type(pb::TensorProto::FLOAT);
    value->mutable_t()->add_dims(1);
    value->mutable_t()->add_float_data(0.5f);
  }));
  // Expand(0.5 as [1, 1, 1], Concat(1, Gather(Shape(x), [1]), 1)): Loom's export.
  auto expanded = [](OnnxGraph& g) {
    g.node("Gather", {"shape", "one"}, {"n"});
    set(g.node("Concat", {"one", "n", "one"}, {"target"}), "axis", int64_t{0});
    g.initializer("s0", {1, 1, 1}, {0.5f});
    g.node("Expand", {"s0", "target"}, {"h0"});
  };
  expect_states(rnn(expanded));
  // Entry 3 of the shape [T, N, 1] does not exist.
  expect_error<DataError>(
      [&] {
        rnn([](OnnxGraph& g) {
          pb::TensorProto* three = g.graph().add_initializer();
          three->set_name("three");
          three->set_data_type(pb::TensorProto::INT64);
          three->add_dims(1);
          three->add_int64_data(3);
          g.node("Gather", {"shape", "three"}, {"h0"});
        }).load();
      },
      {"g.onnx", "Gather", "index 3 is out of range for a shape of 3 entries"});
  // An initializer of shape [1, 1, 1] holds the state of one sample only.
  expect_error<DataError>(
      [&] { rnn([](OnnxGraph& g) {
              g.initializer("h0", {1, 1, 1}, {0.5f});
            }).load(); },
      {"g.onnx", "RNN", "initial state", "Expand", "ConstantOfShape"});
  // Read by another op, the expanded state says what Loom reads it as.
  OnnxGraph other = rnn(expanded);
  other.graph().mutable_output(0)->set_name("sum");
  other.node("Add", {"h0", "h0"}, {"sum"});
  expect_error<DataError>([&] { other.load(); },
                          {"g.onnx", "Add", "only as a recurrent op's initial state"});
}

}  // namespace
}  // namespace loom
