// CNTK's TraceLevel: how much Loom says on stderr besides its errors (cntk.logging's
// set_trace_level). Warnings print at Warning (the default) and Info; Info also makes each
// executor print its plan (set_trace_level in loom/graph/debugging.h sets both).
#pragma once

#include <string_view>

namespace loom {

enum class TraceLevel { Error = 0, Warning = 1, Info = 2 };

TraceLevel get_trace_level();
// Stores the level and returns the one before it. Call set_trace_level (loom/graph/debugging.h),
// which also sets the computation network's trace level as CNTK's does.
TraceLevel exchange_trace_level(TraceLevel level);

// "WARNING: <message>" as one line on stderr, written at once (the lines of several threads or
// workers do not interleave), unless the trace level is Error.
void warn(std::string_view message);

}  // namespace loom
