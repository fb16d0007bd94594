#include "loom/core/trace.h"

#include <atomic>
#include <iostream>
#include <string>

namespace loom {

namespace {
std::atomic<TraceLevel> g_trace_level{TraceLevel::Warning};
}  // namespace

TraceLevel get_trace_level() {
  return g_trace_level;
}

TraceLevel exchange_trace_level(TraceLevel level) {
  return g_trace_level.exchange(level);
}

void warn(std::string_view message) {
  if (g_trace_level == TraceLevel::Error) return;
  std::cerr << "WARNING: " + std::string(message) + "\n";
}

}  // namespace loom
