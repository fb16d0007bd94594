// Saves the small model the `loom` command's tests use: features: Tensor[3] -> Dense(4, relu)
// -> Dense(2), every parameter set by a formula the test repeats in Python:
// value k (row-major) of a parameter with n values is ((k * 7 + n) % 11 - 5) / 8.
// With --sequence the input is a sequence (Sequence[Tensor[3]]), the layers applied per step.
//
//   save_dense_model PATH [--sequence]
#include <cstdio>
#include <string>

#include "loom/loom.h"

int main(int argc, char** argv) {
  using namespace loom;
  const bool sequence = argc == 3 && std::string(argv[2]) == "--sequence";
  if (argc != 2 && !sequence) {
    std::fprintf(stderr, "usage: save_dense_model PATH [--sequence]\n");
    return 2;
  }
  Variable x = sequence ? sequence::input_variable(3, {.name = "features"})
                        : input_variable(3, {.name = "features"});
  Function z = Sequential({Dense(4, {.activation = relu}), Dense(2)})(x);
  for (const Parameter& p : z.parameters()) {
    const size_t n = p.shape().total_size();
    std::vector<float> values(n);
    for (size_t k = 0; k < n; ++k) values[k] = float(int((k * 7 + n) % 11) - 5) / 8.0f;
    p.set_value(NDArrayView::from_vector(p.shape(), values));
  }
  save_model(z, argv[1]);
  std::printf("%s\n", z.to_string().c_str());
  return 0;
}
