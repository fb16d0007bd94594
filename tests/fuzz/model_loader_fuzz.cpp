// libFuzzer target for the model loader: any bytes must give a Function or a loom::Error,
// never a crash, a hang, a leak or a huge allocation. Each input is loaded twice: as it is
// (the container checks), and with its CRCs recomputed, so mutations reach the dictionary
// decoder and the graph reconstruction behind the checksums.
#include <cstdint>
#include <cstring>
#include <vector>

#include "loom/core/crc32c.h"
#include "loom/core/error.h"
#include "loom/serialize/container.h"
#include "loom/serialize/model_file.h"

namespace {

// Recomputes the header CRC and each section's CRCs where the lengths allow.
void repair_crcs(std::vector<uint8_t>& b) {
  using loom::kContainerHeaderSize, loom::kSectionHeaderSize;
  if (b.size() < kContainerHeaderSize) return;
  uint64_t size = b.size();
  std::memcpy(b.data() + 24, &size, 8);  // the declared file size
  uint32_t crc = loom::crc32c(b.data(), 36);
  std::memcpy(b.data() + 36, &crc, 4);
  uint32_t count;
  std::memcpy(&count, b.data() + 20, 4);
  size_t pos = kContainerHeaderSize;
  for (uint32_t i = 0; i < count && b.size() - pos >= kSectionHeaderSize; ++i) {
    uint8_t* s = b.data() + pos;
    uint64_t length;
    std::memcpy(&length, s + 8, 8);
    pos += kSectionHeaderSize;
    if (length > b.size() - pos) length = b.size() - pos;
    std::memcpy(s + 8, &length, 8);
    crc = loom::crc32c(b.data() + pos, length);
    std::memcpy(s + 16, &crc, 4);
    crc = loom::crc32c(s, 20);
    std::memcpy(s + 20, &crc, 4);
    pos += length;
  }
}

void load(const std::vector<uint8_t>& bytes) {
  try {
    loom::Function f = loom::load_model_from_bytes(bytes, "fuzz");
    (void)loom::save_model_to_bytes(f);  // a loaded graph can be saved again
  } catch (const loom::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  load(bytes);
  repair_crcs(bytes);
  load(bytes);
  return 0;
}
