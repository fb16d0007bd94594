// A minimal PNG encoder (8-bit grey, RGB or RGBA, no filtering, zlib's deflate) for the
// images TensorBoard event files hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace loom {

// The PNG file of an image of height x width pixels with `channels` (1: grey, 3: RGB, 4: RGBA)
// interleaved 8-bit values per pixel, rows top to bottom. ArgumentError for other channel
// counts, an empty image or a pixel count that does not match.
std::string encode_png(std::span<const uint8_t> pixels, size_t height, size_t width,
                       size_t channels);

}  // namespace loom
