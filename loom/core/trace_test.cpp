#include "loom/core/trace.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

std::string warned_at(TraceLevel level) {
  const TraceLevel before = exchange_trace_level(level);
  testing::internal::CaptureStderr();
  warn("the image 'a.png' cannot be read; skipped");
  const std::string out = testing::internal::GetCapturedStderr();
  exchange_trace_level(before);
  return out;
}

TEST(Trace, WarningsPrintUnlessTheLevelIsError) {
  EXPECT_EQ(get_trace_level(), TraceLevel::Warning);  // CNTK's default
  const std::string line = "WARNING: the image 'a.png' cannot be read; skipped\n";
  EXPECT_EQ(warned_at(TraceLevel::Warning), line);
  EXPECT_EQ(warned_at(TraceLevel::Info), line);
  EXPECT_EQ(warned_at(TraceLevel::Error), "");
}

}  // namespace
}  // namespace loom
