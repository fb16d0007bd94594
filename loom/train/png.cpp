#include "loom/train/png.h"

#include <zlib.h>

#include <vector>

#include "loom/core/error.h"

namespace loom {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += char((v >> shift) & 0xFF);
}

// length, type, data, CRC-32 of type and data
void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, uint32_t(data.size()));
  const std::string body = type + data;
  out += body;
  put_u32(out, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))));
}

}  // namespace

std::string encode_png(std::span<const uint8_t> pixels, size_t height, size_t width,
                       size_t channels) {
  LOOM_CHECK(channels == 1 || channels == 3 || channels == 4, ArgumentError,
             "encode_png: ", channels, " channels (1 grey, 3 RGB or 4 RGBA)");
  LOOM_CHECK(height > 0 && width > 0 && height < (1u << 31) && width < (1u << 31), ArgumentError,
             "encode_png: an image of ", height, " x ", width, " pixels");
  LOOM_CHECK(pixels.size() == height * width * channels, ArgumentError,
             "encode_png: ", pixels.size(), " values for ", height, " x ", width, " pixels of ",
             channels, " channels");
  // Each row starts with its filter type, 0 (none).
  const size_t row = width * channels;
  std::vector<uint8_t> raw;
  raw.reserve(height * (row + 1));
  for (size_t y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + long(y * row), pixels.begin() + long((y + 1) * row));
  }
  uLongf size = compressBound(uLong(raw.size()));
  std::string deflated(size, '\0');
  LOOM_CHECK(compress(reinterpret_cast<Bytef*>(deflated.data()), &size, raw.data(),
                      uLong(raw.size())) == Z_OK,
             StateError, "encode_png: zlib's compress failed");
  deflated.resize(size);

  std::string header;
  put_u32(header, uint32_t(width));
  put_u32(header, uint32_t(height));
  header += char(8);                                          // bits per value
  header += char(channels == 1 ? 0 : channels == 3 ? 2 : 6);  // colour type
  header += std::string(3, '\0');  // deflate, no filtering method beyond per-row, not interlaced
  std::string png = "\x89PNG\r\n\x1a\n";
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", deflated);
  put_chunk(png, "IEND", "");
  return png;
}

}  // namespace loom
