// For tests that compare a model's outputs across exports and runtimes: gives every Constant
// of a model (batch normalization's running mean, variance and count) values as if trained,
// so that normalization does real work instead of dividing by a fresh variance of 1.
#pragma once

#include <vector>

#include "loom/core/random.h"
#include "loom/graph/function.h"

namespace loom::testing {

inline void set_trained_statistics(const Function& model) {
  RandomGenerator random(7);
  for (const Constant& c : model.constants()) {
    std::vector<float> v(c.shape().total_size());
    for (float& x : v)
      x = c.name() == "aggregate_count"      ? 100.0f
          : c.name() == "aggregate_variance" ? float(0.5 + random.uniform())
                                             : float(random.uniform() - 0.5);
    c.set_value(NDArrayView::from_vector(c.shape(), v));
  }
}

}  // namespace loom::testing
