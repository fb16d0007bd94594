// The size an image file declares in its header, read without decoding the image, so that the
// image readers refuse an image too large for memory before OpenCV allocates its pixels (a
// 1.4 KB JPEG may declare 30000 x 30000 pixels).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace loom {

// The most pixels (width x height) an image reader decodes: 2^27, a 134-megapixel image, 384 MB
// of 8-bit BGR pixels and 1.5 GB as the floats the transforms make (docs/decisions.md, "Sizes
// read from files").
inline constexpr uint64_t kMaxImagePixels = uint64_t(1) << 27;

struct ImageHeader {
  uint64_t width = 0, height = 0;
  uint32_t channels = 0;  // as the file stores them (a palette's index: 3), 0 where not declared

  uint64_t pixels() const { return width * height; }  // both below 2^32: no overflow
};

// The header of the image file in `bytes` when it is a PNG, JPEG, BMP, TIFF, WebP, JPEG 2000
// (codestream or JP2), PNM (PBM, PGM, PPM, PAM, PFM), Sun raster or Radiance HDR file with a
// complete header; nullopt for other formats (OpenEXR, DICOM: OpenCV's own limit, 2^30 pixels,
// bounds those) and damaged headers, which the decoder then refuses.
std::optional<ImageHeader> read_image_header(std::span<const uint8_t> bytes);

}  // namespace loom
