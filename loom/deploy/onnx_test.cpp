// ONNX export and import: models made of every op Loom exports survive export -> import with
// the same outputs (float32 and float64), and bad models and bad files give clear errors.
// tests/e2e/onnx_test.py checks the files with onnx.checker, OpenCV and onnxruntime.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/core/random.h"
#include "loom/deploy/onnx.h"
#include "loom/layers/convolution.h"
#include "loom/layers/default_options.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/normalization.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
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
  expect_error<ArgumentError>([&] { save_onnx_to_bytes(cross_entropy_with_softmax(x, y)); },
                              {"CrossEntropyWithSoftmax", "no ONNX mapping", "docs/onnx.md"});
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
    RecurrentCellOptions peepholes = cell;
    peepholes.use_peepholes = true;
    RecurrentCellOptions relu_cell = cell;
    relu_cell.activation = relu;
    const Function lstm = Recurrence(LSTM(3, peepholes))(Dense(5, {.dtype = dtype})(x));
    const Function gru = Recurrence(GRU(3, cell), {.go_backwards = true})(x);
    const Function rnn = Recurrence(RNNStep(2, relu_cell))(gru);
    const Function model = combine({Dense(2, {.dtype = dtype})(sequence::last(lstm)),
                                    sequence::first(gru), sequence::last(rnn), rnn});
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

}  // namespace
}  // namespace loom
