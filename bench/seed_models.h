// The networks of seed 002 that several benchmarks time (bench/mnist.cpp, bench/c_api_eval.cpp):
// built as the seed builds them, on [28,28] images without a channel axis.
#pragma once

#include "loom/layers/convolution.h"
#include "loom/layers/default_options.h"
#include "loom/layers/dense.h"
#include "loom/layers/dropout.h"
#include "loom/layers/pooling.h"
#include "loom/layers/sequential.h"
#include "loom/ops/elementwise.h"

namespace bench {

// Seed 002's convnet (reduction_rank 0: no channel axis).
inline loom::Function seed002_convnet() {
  using namespace loom;
  auto scope = default_options({.activation = relu, .pad = false});
  return Sequential({Convolution2D({5, 5}, 32, {.pad = true, .reduction_rank = 0}),
                     MaxPooling({3, 3}, {.strides = {2, 2}}), Convolution2D({3, 3}, 48),
                     MaxPooling({3, 3}, {.strides = {2, 2}}), Convolution2D({3, 3}, 64), Dense(96),
                     Dropout(0.5), Dense(10, {.activation = None})});
}

}  // namespace bench
