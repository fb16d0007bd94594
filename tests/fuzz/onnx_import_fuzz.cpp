// libFuzzer target for the ONNX importer (loom/deploy/onnx_import.cpp): any bytes must give a
// Function or a loom::Error, never a crash, a hang, a leak or a huge allocation. Each input is
// imported with axis 0 of fixed size as the batch axis and as a static axis (OnnxImportOptions).
#include <cstdint>
#include <span>

#include "loom/core/error.h"
#include "loom/deploy/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (bool batch : {true, false}) {
    try {
      (void)loom::load_onnx_from_bytes(std::span<const uint8_t>(data, size), "fuzz",
                                       {.fixed_axis0_is_batch = batch});
    } catch (const loom::Error&) {
    }
  }
  return 0;
}
