// Helpers shared by the learners' unit tests.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "loom/learners/learner.h"

namespace loom::testing {

using LearnerFactory = std::function<std::shared_ptr<Learner>(std::vector<Parameter>)>;

// Seed 003's inspect_update: a float32 parameter of shape (1,) set to 0 and a gradient of
// `gradient` (the seed's all-ones sum gradient by default), `count` updates of minibatch size
// mbsize; returns the parameter's value afterwards.
inline float inspect_update(const LearnerFactory& make, size_t mbsize, size_t count = 1,
                            float gradient = 1.0f) {
  Parameter p = parameter(NDArrayView::from_vector<float>({1}, {0.0f}));
  auto learner = make({p});
  std::unordered_map<Variable, NDArrayView> grads{
      {p, NDArrayView::from_vector<float>({1}, {gradient})}};
  for (size_t i = 0; i < count; ++i) learner->update(grads, mbsize);
  return p.value().to_vector<float>()[0];
}

// A parameter holding values (float32 unless T says otherwise).
template <typename T = float>
Parameter make_parameter(const std::vector<T>& values) {
  return parameter(NDArrayView::from_vector<T>({values.size()}, values));
}

template <typename T = float>
std::vector<T> values_of(const Parameter& p) {
  return p.value().to_vector<T>();
}

// v as numpy prints a float32 with precision 4 (seed 003's np.set_printoptions), zeros kept.
inline std::string printed(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", double(v));
  return text;
}

// Trains a learner made by `make` for 3 minibatches, checkpoints, trains 4 more; a second
// learner over fresh parameters holding the checkpointed values, restored, repeats the 4
// and must end bit-identical. The tensor is large enough for the threaded loops.
inline void expect_checkpoint_round_trip(const LearnerFactory& make) {
  constexpr size_t kSize = 70000;
  auto grads_at = [](const Parameter& p, int step) {
    std::vector<float> g(kSize);
    for (size_t i = 0; i < kSize; ++i) g[i] = std::sin(float(i) * 0.01f + float(step)) * 3.0f;
    return std::unordered_map<Variable, NDArrayView>{
        {p, NDArrayView::from_vector<float>({kSize}, g)}};
  };
  Parameter p = make_parameter(std::vector<float>(kSize, 0.25f));
  auto learner = make({p});
  for (int step = 0; step < 3; ++step) {
    auto g = grads_at(p, step);
    learner->update(g, 8 + step);
  }
  const Dictionary checkpoint = learner->create_checkpoint();
  const NDArrayView saved = p.value().deep_clone();
  for (int step = 3; step < 7; ++step) {
    auto g = grads_at(p, step);
    learner->update(g, 8 + step);
  }
  Parameter q = parameter(saved);
  auto fresh = make({q});
  fresh->restore_from_checkpoint(checkpoint);
  for (int step = 3; step < 7; ++step) {
    auto g = grads_at(q, step);
    fresh->update(g, 8 + step);
  }
  EXPECT_EQ(values_of(q), values_of(p));
  EXPECT_NE(values_of(q), std::vector<float>(kSize, 0.25f));
}

}  // namespace loom::testing
