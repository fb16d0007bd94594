// A program of someone else's that uses Loom (tests/consumer/CMakeLists.txt). It evaluates a
// Dense layer (oneDNN, OpenMP); with all layers linked it also reports a minibatch through the
// train layer, as a progress line and to a TensorBoard event file in consumer_logdir
// (protocol buffers).
#include <cstdio>
#include <iostream>

#include "loom/loom.h"

using namespace loom;

int main() {
  Variable x = input_variable({2});
  Function model =
      Dense(3, {.init = constant_initializer(0.5), .init_bias = constant_initializer(1)});
  Function z = model(x);
  Value y = z.eval_one({{x, Value::create_batch<float>({2}, {1, 2, 3, 4})}});
  std::printf("dense:");
  for (float v : y.data().to_vector<float>()) std::printf(" %g", v);
  std::printf("\n");
#ifdef LOOM_CONSUMER_ALL_LAYERS
  ProgressPrinter printer({.freq = 1, .out = &std::cout});
  TensorBoardProgressWriter tensorboard({.freq = 1, .log_dir = "consumer_logdir", .model = z});
  printer.update_training(2, 1.5, std::nullopt);
  tensorboard.update_training(2, 1.5, std::nullopt);
#endif
  return 0;
}
