// Writes a few small valid model files into the folder given as argv[1]: the fuzzer's seeds.
#include <cstdio>
#include <string>

#include "loom/core/random.h"
#include "loom/ops/ops.h"
#include "loom/serialize/model_file.h"

using namespace loom;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  set_fixed_random_seed(1);
  // A dense layer with a loss and a metric.
  Variable x = input_variable({4}, {.name = "x"}), y = input_variable({3}, {.name = "y"});
  Parameter W = parameter(NDShape{4, 3}, glorot_uniform(), DataType::Float32, "W");
  Parameter b = parameter(NDShape{3}, zeros(), DataType::Float32, "b");
  Function z = plus(times(x, W), b, "z");
  save_model(combine({cross_entropy_with_softmax(z, y), classification_error(z, y)}),
             dir + "/dense.loom");
  // Sparse input, sequences, shape ops, reductions and float64.
  Variable s = input_variable({6}, {.is_sparse = true, .name = "s"});
  Variable q = sequence::input_variable({2}, {.name = "q"});
  Variable d = input_variable({2}, {.dtype = DataType::Float64, .name = "d"});
  Function e = tanh(times(s, parameter(NDShape{6, 4}, he_normal(), DataType::Float32, "E")));
  Function r = reduce_mean(transpose(reshape(e, {2, 2})), Axis(0));
  Function t = splice({slice(sequence::last(q), Axis(0), 0, 1), sequence::reduce_sum(q)});
  Function u =
      softmax(square(times(d, constant(NDArrayView::from_vector<double>({2, 2}, {1, 2, 3, 4})))));
  save_model(combine({r, t, u}, "mixed"), dir + "/mixed.loom");
  // An uncalled layer: placeholder, inferred parameter shape.
  Variable p = placeholder("x");
  save_model(relu(times(p, parameter(NDShape{NDShape::kInferred, 2}))), dir + "/deferred.loom");
  return 0;
}
