// Writes the fuzzers' seeds, a few small valid files: model files into <folder>/model_loader
// and ONNX files into <folder>/onnx_import.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "loom/core/random.h"
#include "loom/deploy/onnx.h"
#include "loom/layers/convolution.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/normalization.h"
#include "loom/layers/pooling.h"
#include "loom/layers/recurrent.h"
#include "loom/layers/sequential.h"
#include "loom/ops/ops.h"
#include "loom/serialize/model_file.h"

using namespace loom;

namespace {

void write_onnx(const Function& f, const std::string& path) {
  const std::vector<uint8_t> bytes = save_onnx_to_bytes(f);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
    return 2;
  }
  const std::string models = std::string(argv[1]) + "/model_loader";
  const std::string onnx = std::string(argv[1]) + "/onnx_import";
  std::filesystem::create_directories(models);
  std::filesystem::create_directories(onnx);
  set_fixed_random_seed(1);
  // A dense layer with a loss and a metric.
  Variable x = input_variable({4}, {.name = "x"}), y = input_variable({3}, {.name = "y"});
  Parameter W = parameter(NDShape{4, 3}, glorot_uniform(), DataType::Float32, "W");
  Parameter b = parameter(NDShape{3}, zeros(), DataType::Float32, "b");
  Function z = plus(times(x, W), b, "z");
  save_model(combine({cross_entropy_with_softmax(z, y), classification_error(z, y)}),
             models + "/dense.loom");
  // Sparse input, sequences, shape ops, reductions and float64.
  Variable s = input_variable({6}, {.is_sparse = true, .name = "s"});
  Variable q = sequence::input_variable({2}, {.name = "q"});
  Variable d = input_variable({2}, {.dtype = DataType::Float64, .name = "d"});
  Function e = tanh(times(s, parameter(NDShape{6, 4}, he_normal(), DataType::Float32, "E")));
  Function r = reduce_mean(transpose(reshape(e, {2, 2})), Axis(0));
  Function t = splice({slice(sequence::last(q), Axis(0), 0, 1), sequence::reduce_sum(q)});
  Function u =
      softmax(square(times(d, constant(NDArrayView::from_vector<double>({2, 2}, {1, 2, 3, 4})))));
  save_model(combine({r, t, u}, "mixed"), models + "/mixed.loom");
  // An uncalled layer: placeholder, inferred parameter shape.
  Variable p = placeholder("x");
  save_model(relu(times(p, parameter(NDShape{NDShape::kInferred, 2}))), models + "/deferred.loom");

  // ONNX (each well under the fuzzer's -max_len): a dense net with dropout and batch
  // normalization, a convnet with both poolings, recurrent nets (LSTM, GRU, RNN) and shape ops.
  Variable features = input_variable(4, {.name = "features"});
  write_onnx(softmax(Sequential({Dense(3, {.activation = relu}), Dropout(0.5), BatchNormalization(),
                                 Dense(2, {.activation = None})})(features)),
             onnx + "/dense.onnx");
  write_onnx(Sequential({Convolution2D({3, 3}, 2, {.activation = relu, .pad = true}),
                         MaxPooling({2, 2}, {.strides = {2}}), BatchNormalization({.map_rank = 1}),
                         AveragePooling({2, 2}, {.strides = {2}, .pad = true}),
                         Dense(2)})(input_variable({1, 6, 6}, {.name = "image"})),
             onnx + "/convnet.onnx");
  Variable steps = sequence::input_variable(3, {.name = "s"});
  write_onnx(sequence::last(Recurrence(LSTM(2, {.use_peepholes = true}))(steps)),
             onnx + "/lstm.onnx");
  const Function gru = Recurrence(GRU(2), {.go_backwards = true})(steps);
  write_onnx(combine({sequence::first(gru), sequence::last(Recurrence(RNNStep(2))(gru))}),
             onnx + "/gru_rnn.onnx");
  write_onnx(combine({reduce_mean(transpose(reshape(tanh(features), {2, 2})), Axis(0)),
                      splice({slice(features, Axis(0), 0, 1), sigmoid(features)})}),
             onnx + "/shapes.onnx");
  return 0;
}
