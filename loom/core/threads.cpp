#include "loom/core/threads.h"

#include <omp.h>

#include <cstring>

#include "loom/core/error.h"

namespace loom {

void set_max_num_cpu_threads(int n) {
  LOOM_CHECK(n >= 1, ArgumentError, "set_max_num_cpu_threads: need at least 1 thread, got ", n);
  omp_set_num_threads(n);
}

int get_max_num_cpu_threads() {
  return omp_get_max_threads();
}

void for_each_piece(size_t n, size_t pieces,
                    const std::function<void(size_t, size_t, size_t)>& body) {
  if (pieces <= 1) {
    body(size_t{0}, size_t{0}, n);
    return;
  }
  const long long count = static_cast<long long>(pieces);
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(pieces))
  for (long long i = 0; i < count; ++i) {
    const size_t k = static_cast<size_t>(i);
    body(k, n * k / pieces, n * (k + 1) / pieces);
  }
}

void copy_bytes(void* to, const void* from, size_t n) {
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  for_each_piece(n, byte_pieces(n), [&](size_t, size_t begin, size_t end) {
    std::memcpy(dst + begin, src + begin, end - begin);
  });
}

bool in_parallel_region() {
  return omp_in_parallel() != 0;
}

}  // namespace loom
