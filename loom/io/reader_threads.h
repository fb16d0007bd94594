// The threads a reader parses and decodes on: CTF chunks and images are independent items,
// handled in parallel, with results and errors that do not depend on the thread count.
#pragma once

#include <cstddef>
#include <functional>

namespace loom {

// The threads a reader uses for `requested` (0: as many as compute uses,
// get_max_num_cpu_threads()).
size_t reader_threads(size_t requested);

// Calls body(i) for every i in [0, n), on up to `threads` threads (items handed out one at a
// time). Every item runs even when some throw; then the exception of the lowest failing item
// is rethrown, so the error a caller sees is the first in item order.
void for_each_item(size_t n, size_t threads, const std::function<void(size_t)>& body);

}  // namespace loom
