// The image transforms of CNTK's ImageDeserializer (cntk.io.transforms), applied in the order
// given to each image as it is decoded:
//
//   StreamDef{.field = "image", .transforms = {transforms::crop({.crop_type = CropType::randomside,
//                                                                .side_ratio = 0.8}),
//                                              transforms::scale(32, 32, 3)}}
//
// Random choices (crop size and place, horizontal flip, color changes) come from a generator
// seeded by (the deserializer's seed, the sweep, the sequence), so they do not depend on the
// thread that decodes an image, and a restored checkpoint reproduces them.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <variant>

namespace loom {

enum class CropType { center, randomside, randomarea };
enum class JitterType { none, uniratio };
enum class Interpolation { nearest, linear, cubic, lanczos };
enum class ScaleMode { fill, crop, pad };

// A ratio, or a range of ratios [min, max] for jitter: `0.8` or `{0.5, 0.75}` (CNTK's "0.5:0.75").
struct RatioRange {
  double min = 0, max = 0;
  RatioRange() = default;
  RatioRange(double ratio) : min(ratio), max(ratio) {}  // NOLINT: a plain number is a ratio
  RatioRange(double lo, double hi) : min(lo), max(hi) {}
};

namespace transforms {

// CNTK's crop(crop_type, side_ratio, area_ratio, aspect_ratio, jitter_type) without crop_size
// and multiview10. The crop is side_ratio of the shorter side, or covers area_ratio of the area
// (at most one of them; neither: the whole image), then reshaped to aspect_ratio (width/height
// or height/width, either with probability 1/2) keeping its area. center places it in the
// middle; randomside (needs side_ratio) and randomarea (needs area_ratio) anywhere, and flip the
// image horizontally with probability 1/2. jitter_type uniratio draws each ratio uniformly
// from its range; none takes the range's minimum.
struct CropOptions {
  CropType crop_type = CropType::center;
  RatioRange side_ratio = {};
  RatioRange area_ratio = {};
  RatioRange aspect_ratio = 1.0;
  JitterType jitter_type = JitterType::none;
};

// CNTK's scale(width, height, channels, interpolations, scale_mode, pad_value): the image's
// final size. fill stretches to width x height; crop scales to cover it and cuts the middle;
// pad scales to fit inside it and pads the rest (pad_value -1: the border pixels repeated).
// channels is 1 (images are read as grayscale) or 3 (as color, in OpenCV's BGR order).
struct ScaleOptions {
  Interpolation interpolations = Interpolation::linear;
  ScaleMode scale_mode = ScaleMode::fill;
  int pad_value = -1;
};
struct Scale {
  size_t width = 0, height = 0, channels = 0;
  ScaleOptions options = {};
};

// CNTK's mean(filename): subtracts the mean image of an OpenCV XML file (MeanImg, Channel, Row,
// Col), of the scaled size; after scale.
struct Mean {
  std::string filename = {};
};

// CNTK's color(brightness_radius, contrast_radius, saturation_radius), each in [0, 1]: pixels
// become p * (1 + c) + b * mean(image), c and b uniform in [-radius, radius], kept in [0, 255];
// the saturation of color images is scaled by 1 + s.
struct ColorOptions {
  double brightness_radius = 0;
  double contrast_radius = 0;
  double saturation_radius = 0;
};

}  // namespace transforms

using ImageTransform = std::variant<transforms::CropOptions, transforms::Scale, transforms::Mean,
                                    transforms::ColorOptions>;

namespace transforms {
inline ImageTransform crop(CropOptions options = {}) {
  return options;
}
inline ImageTransform scale(size_t width, size_t height, size_t channels,
                            ScaleOptions options = {}) {
  return Scale{width, height, channels, options};
}
inline ImageTransform mean(std::string filename) {
  return Mean{std::move(filename)};
}
inline ImageTransform color(ColorOptions options = {}) {
  return options;
}
}  // namespace transforms

}  // namespace loom
