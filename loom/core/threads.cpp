#include "loom/core/threads.h"

#include <omp.h>

#include "loom/core/error.h"

namespace loom {

void set_max_num_cpu_threads(int n) {
  LOOM_CHECK(n >= 1, ArgumentError, "set_max_num_cpu_threads: need at least 1 thread, got ", n);
  omp_set_num_threads(n);
}

int get_max_num_cpu_threads() {
  return omp_get_max_threads();
}

}  // namespace loom
