#include "c_api_reference.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace {

// The packed data of value (sequences' steps back to back) copied into out.
int64_t copy_packed(const loom::Value& value, float* out, int64_t capacity) {
  std::vector<float> packed;
  for (const auto& sequence : value.as_sequences<float>())
    packed.insert(packed.end(), sequence.begin(), sequence.end());
  if (int64_t(packed.size()) > capacity) throw loom::ArgumentError("reference: out is too small");
  std::copy(packed.begin(), packed.end(), out);
  return int64_t(packed.size());
}

// The output named (or with uid) output: the model's, evaluated by the runner, or else the
// output of the function of that name in its graph, evaluated by Function::eval.
int64_t copy_output(const loom::ModelRunner& runner, const loom::ValueMap& arguments,
                    const char* output, float* out, int64_t capacity) {
  for (const loom::Variable& o : runner.outputs())
    if (o.name() == output || o.uid() == output)
      return copy_packed(runner.evaluate(arguments).at(o), out, capacity);
  for (const loom::GraphNode& node : loom::find_all_with_name(runner.function(), output))
    if (const auto* f = std::get_if<loom::Function>(&node))
      return copy_packed(f->eval(arguments).at(f->output()), out, capacity);
  throw loom::ArgumentError(std::string("reference: no output named ") + output);
}

template <typename Body>
auto reporting(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference: %s\n", e.what());
    return -1;
  }
}

}  // namespace

extern "C" {

int reference_save_model(const char* path, const char* onnx_path) {
  return reporting([&] {
    using namespace loom;
    Variable x = input_variable(3, {.name = "features"});
    Variable hidden = alias(Dense(4, {.activation = relu})(x).output(), "hidden").output();
    Variable scores = alias(Dense(2)(hidden).output(), "scores").output();
    const Function model = combine({scores, hidden});
    save_model(model, path);
    save_model(model, onnx_path, ModelFormat::ONNX);
    return 0;
  });
}

int64_t reference_dense(const char* path, int64_t num_inputs, const char* const* names,
                        const float* const* data, int64_t num_sequences, const int64_t* lengths,
                        const char* output, float* out, int64_t capacity) {
  return reporting([&] {
    const loom::ModelRunner runner(path);
    loom::ValueMap arguments;
    for (int64_t i = 0; i < num_inputs; ++i) {
      const loom::Variable a = runner.argument(names[i]);
      const loom::NDShape& sample = a.shape();
      if (!lengths) {
        const size_t n = size_t(num_sequences) * sample.total_size();
        arguments.emplace(
            a, loom::Value::create_batch<float>(sample, std::vector<float>(data[i], data[i] + n)));
        continue;
      }
      std::vector<size_t> lens(lengths, lengths + num_sequences);
      size_t steps = 0;
      for (size_t len : lens) steps += len;
      const size_t n = steps * sample.total_size();
      arguments.emplace(a, loom::Value::create_sequences<float>(
                               sample, std::vector<float>(data[i], data[i] + n), lens));
    }
    return copy_output(runner, arguments, output, out, capacity);
  });
}

int64_t reference_one_hot(const char* path, const char* argument, int64_t dim,
                          int64_t num_sequences, const int64_t* lengths, const int64_t* indices,
                          const char* output, float* out, int64_t capacity) {
  return reporting([&] {
    const loom::ModelRunner runner(path);
    std::vector<std::vector<size_t>> sequences;
    for (int64_t b = 0; b < num_sequences; ++b) {
      sequences.emplace_back(indices, indices + lengths[b]);
      indices += lengths[b];
    }
    const loom::ValueMap arguments{
        {runner.argument(argument), loom::Value::one_hot_sequences(size_t(dim), sequences)}};
    return copy_output(runner, arguments, output, out, capacity);
  });
}

}  // extern "C"
