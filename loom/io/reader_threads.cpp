#include "loom/io/reader_threads.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "loom/core/threads.h"

namespace loom {

size_t reader_threads(size_t requested) {
  return requested > 0 ? requested : static_cast<size_t>(get_max_num_cpu_threads());
}

void for_each_item(size_t n, size_t threads, const std::function<void(size_t)>& body) {
  std::vector<std::exception_ptr> errors(n);
  const long long count = static_cast<long long>(n);
  const int team = static_cast<int>(std::max<size_t>(1, std::min(threads, n)));
#pragma omp parallel for schedule(dynamic, 1) num_threads(team) if (team > 1)
  for (long long i = 0; i < count; ++i) {
    try {
      body(static_cast<size_t>(i));
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace loom
