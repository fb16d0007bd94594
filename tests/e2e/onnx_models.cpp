// Writes the models tests/e2e/onnx_test.py checks with independent ONNX runtimes: for each,
// NAME.onnx (ONNX export), NAME.cmf (Loom's model file), NAME.in and NAME.out (a batch of
// inputs and Loom's outputs for them: raw float32), and a line of DIR/manifest.txt:
//   NAME input-shape output-shape     (shapes with the batch axis, as 4,28,28)
// A model over sequences gets its inputs as ONNX takes them, [T, N, sample...] padded with
// zeros, the lengths in NAME.lens (int32), and its manifest line ends in "sequences".
// The weights are random (set_fixed_random_seed), batch normalizations get statistics as if
// trained.
//
//   onnx_models DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "examples/fashion_mnist.h"
#include "loom/deploy/onnx.h"
#include "tests/support/trained_statistics.h"

using namespace loom;

namespace {

std::string dims(const NDShape& s) {
  std::string out;
  for (size_t d : s.dims()) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

void write_ints(const std::string& path, const std::vector<int32_t>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(int32_t)));
}

void write(const std::string& dir, const std::string& name, const Function& model,
           std::ofstream& manifest) {
  const Variable x = model.arguments()[0];
  const size_t n = 4;
  RandomGenerator random(11);
  std::vector<float> input(n * x.shape().total_size());
  for (float& v : input) v = float(random.uniform());
  const Value out = model.eval(NDArrayView::from_vector(x.shape().prepend(n), input));
  save_model(model, dir + "/" + name + ".onnx", ModelFormat::ONNX);
  save_model(model, dir + "/" + name + ".cmf");
  write_floats(dir + "/" + name + ".in", input);
  write_floats(dir + "/" + name + ".out", out.data().to_vector<float>());
  manifest << name << " " << dims(x.shape().prepend(n)) << " " << dims(out.data().shape()) << "\n";
}

// A model over sequences of F numbers, on sequences of lengths 5, 1, 3 and 7.
void write_sequences(const std::string& dir, const std::string& name, const Function& model,
                     std::ofstream& manifest) {
  const std::vector<size_t> lengths{5, 1, 3, 7};
  const size_t F = model.arguments()[0].shape().total_size(), T = 7, N = lengths.size();
  RandomGenerator random(13);
  std::vector<std::vector<float>> sequences;
  std::vector<float> padded(T * N * F, 0.0f);  // [T, N, F]
  for (size_t i = 0; i < N; ++i) {
    std::vector<float> s(lengths[i] * F);
    for (float& v : s) v = float(random.uniform() * 2 - 1);
    for (size_t t = 0; t < lengths[i]; ++t)
      std::copy_n(s.begin() + long(t * F), F, padded.begin() + long((t * N + i) * F));
    sequences.push_back(std::move(s));
  }
  const Value out = model.eval(Value::create_sequences(NDShape{F}, sequences));
  save_model(model, dir + "/" + name + ".onnx", ModelFormat::ONNX);
  save_model(model, dir + "/" + name + ".cmf");
  write_floats(dir + "/" + name + ".in", padded);
  write_ints(dir + "/" + name + ".lens", {lengths.begin(), lengths.end()});
  write_floats(dir + "/" + name + ".out", out.data().to_vector<float>());
  manifest << name << " " << dims(NDShape{T, N, F}) << " " << dims(out.data().shape())
           << " sequences\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_models DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::ofstream manifest(dir + "/manifest.txt");
  set_fixed_random_seed(1);

  // An MLP on MNIST's flattened images with a softmax at the end.
  Variable pixels = input_variable(784, {.name = "features"});
  Function mlp =
      Sequential({Dense(64, {.activation = relu}), Dense(32, {.activation = sigmoid}), Dropout(0.5),
                  Dense(16, {.activation = loom::tanh}), Dense(10, {.activation = None})});
  write(dir, "mlp", softmax(mlp(pixels)), manifest);

  // Seed 002's convnet (examples/fashion_mnist.h) as mnist_convnet saves it.
  Variable image = input_variable({28, 28}, {.name = "features"});
  write(dir, "convnet", examples::create_model_mn()(image), manifest);

  // Colour images: spatial batch normalization, padded average pooling, global pooling.
  Variable rgb = input_variable({3, 16, 16}, {.name = "image"});
  Function bn_net = Sequential({
      Convolution2D({3, 3}, 8, {.activation = relu, .pad = true}),
      BatchNormalization({.map_rank = 1}),
      AveragePooling({3, 3}, {.strides = {2, 2}, .pad = true}),
      Convolution2D({3, 3}, 16, {.activation = relu, .pad = true}),
      MaxPooling({2, 2}, {.strides = {2, 2}}),
      GlobalAveragePooling(),
      Dense(5),
  })(rgb);
  loom::testing::set_trained_statistics(bn_net);
  write(dir, "bn_convnet", bn_net, manifest);

  // The elementwise, shape and reduction ops.
  Variable x = input_variable({2, 3, 4}, {.name = "x"});
  Function a = element_times(plus(x, parameter({3, 4})), parameter({4}));
  Function b = element_divide(minus(a, loom::exp(x)), plus(square(x), constant(1.0)));
  Function c = element_max(loom::abs(b), negate(x));
  Function d = element_min(loom::sqrt(c), loom::log(plus(c, constant(2.0))));
  Function e = splice({slice(d, Axis(1), 0, 2), slice(d, Axis(1), -1, 0)}, Axis(1));
  Function f = reshape(transpose(slice(e, Axis(-1), -3, 0), {2, 0, 1}), {9, 2});
  Function g =
      splice({reduce_sum(f, Axis(0)), reduce_mean(f, Axis(0)), reduce_max(f, Axis(0))}, Axis(0));
  Function h = plus(log_softmax(g, Axis(0)), softmax(g, Axis::all_static_axes()));
  Function k = sigmoid(times(loom::tanh(reshape(h, {6})), parameter({6, 4})));
  write(dir, "ops", plus(k, reduce_sum(relu(x), std::vector<Axis>{Axis(0), Axis(1)}, false)),
        manifest);

  // An LSTM with peepholes over a projection of the steps, its last state classified.
  Variable steps = sequence::input_variable(6, {.name = "steps"});
  Function states =
      Recurrence(LSTM(5, {.use_peepholes = true, .init_bias = uniform(0.5)}))(Dense(8)(steps));
  write_sequences(dir, "lstm", softmax(Dense(3, {.activation = None})(sequence::last(states))),
                  manifest);

  // A GRU backwards and an RNNStep (relu, initial state 0.5) over its outputs; the first and
  // last steps of both (ONNX's final states and gathered steps).
  Variable words = sequence::input_variable(4, {.name = "words"});
  Function gru = Recurrence(GRU(5, {.init_bias = uniform(0.5)}), {.go_backwards = true})(words);
  Function rnn = Recurrence(RNNStep(4, {.activation = relu, .init_bias = uniform(0.5)}),
                            {.initial_state = {constant(0.5)}})(gru);
  Function ends =
      splice({sequence::first(gru), sequence::last(rnn), sequence::last(gru), sequence::first(rnn)},
             Axis(0));
  write_sequences(dir, "gru_rnn", Dense(3, {.activation = sigmoid})(ends), manifest);

  // The exports composed of several nodes: a transposed convolution at stride 2 (its last
  // output along one axis in no window: output_padding), CNTK's layer normalization, max pooling
  // whose last window overhangs (ceil_out_dim), gather of a batched reference and of per-sample
  // indices (argmax) into a shared reference along its middle axis, max unpooling of overlapping
  // windows with automatic padding (MaxPool's indices, MaxUnpool).
  Variable planes = input_variable({2, 6, 5}, {.name = "planes"});
  const Function up = convolution_transpose(
      parameter({2, 3, 3, 3}, glorot_uniform()), planes,
      {.strides = {2}, .auto_padding = {false}, .output_shape = NDShape{13, 12}});
  const Function normalized = layer_normalization(up, parameter(NDShape{3, 13, 12}, uniform(1)),
                                                  parameter(NDShape{3, 13, 12}, uniform(1)));
  const Function pooled =
      pooling(normalized, PoolingType::Max, {3, 3}, {.strides = {2}, .ceil_out_dim = true});
  const Function rows = gather(
      pooled, constant(NDArrayView::from_vector(NDShape{2}, std::vector<float>{4, 1})), Axis(1));
  const Function picked =
      gather(parameter({4, 2, 3}, uniform(1)), argmax(planes, Axis(0)), Axis(1));
  const PoolingOptions overlapping{.strides = {2}, .auto_padding = {true}};
  const Function unpooled = unpooling(pooling(planes, PoolingType::Max, {3, 3}, overlapping),
                                      planes, PoolingType::Max, {3, 3}, overlapping);
  write(dir, "windows",
        splice({reshape(rows, {36}), reshape(picked, {360}), reshape(unpooled, {60})}, Axis(0)),
        manifest);
  std::printf("wrote %s/manifest.txt\n", dir.c_str());
  return 0;
}
