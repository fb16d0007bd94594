// A user's program: check_headers.py builds it with -std=c++20 -Wall -Wextra -Wpedantic
// -Werror and no OpenMP flags, every public header included ahead of this file, links it
// against Loom's libraries and runs it.
#include <cstdio>
#include <vector>

#include "loom/loom.h"

int main() {
  using namespace loom;
  Variable x = input_variable({2});
  Function model = Dense(1);
  Function z = model(x);
  const std::vector<float> out =
      z.eval_one({{x, Value::create_batch<float>({2}, {1.0f, 2.0f})}}).data().to_vector<float>();
  std::printf("Dense(1) on one sample: %zu output\n", out.size());
  return out.size() == 1 ? 0 : 1;
}
