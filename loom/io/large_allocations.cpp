#include "loom/io/large_allocations.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace loom {

void reuse_large_allocations() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if ((tunables != nullptr && std::strstr(tunables, "malloc") != nullptr) ||
        std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
        std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr)
      return;
    constexpr int kThreshold = 256 << 20;
    mallopt(M_MMAP_THRESHOLD, kThreshold);
    mallopt(M_TRIM_THRESHOLD, kThreshold);
  });
}

}  // namespace loom
