// The image transforms of CNTK's ImageDeserializer (cntk.io.transforms), applied in the order
// given to each image as it is decoded:
//
//   StreamDef{.field = "image", .transforms = {transforms::crop({.crop_type = CropType::randomside,
//                                                                .side_ratio = 0.8}),
//                                              transforms::scale(32, 32, 3)}}
//
// Random choices (crop size and place, horizontal flip, color and intensity changes) come from a
// generator seeded by (the deserializer's seed, the sweep, the sequence), so they do not depend
// on the thread that decodes an image, and a restored checkpoint reproduces them.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <variant>

namespace loom {

enum class CropType { center, randomside, randomarea, multiview10 };
enum class JitterType { none, uniratio, unilength, uniarea };
enum class Interpolation { nearest, linear, cubic, lanczos };
enum class ScaleMode { fill, crop, pad };

// A ratio, or a range of ratios [min, max] for jitter: `0.8` or `{0.5, 0.75}` (CNTK's "0.5:0.75").
struct RatioRange {
  double min = 0, max = 0;
  RatioRange() = default;
  RatioRange(double ratio) : min(ratio), max(ratio) {}  // NOLINT: a plain number is a ratio
  RatioRange(double lo, double hi) : min(lo), max(hi) {}
};

// A crop of width x height pixels: `224` (square) or `{256, 224}` (CNTK's "256:224"); 0: none.
struct CropSize {
  size_t width = 0, height = 0;
  CropSize() = default;
  CropSize(size_t side) : width(side), height(side) {}  // NOLINT: a plain number is a square
  CropSize(size_t w, size_t h) : width(w), height(h) {}
};

namespace transforms {

// CNTK's crop(crop_type, crop_size, side_ratio, area_ratio, aspect_ratio, jitter_type). The crop
// is crop_size pixels (each side at most the image's; it takes no ratios and no jitter), or
// side_ratio of the shorter side, or covers area_ratio of the area (at most one of them;
// neither: the whole image), then reshaped to aspect_ratio (width/height or height/width, either
// with probability 1/2) keeping its area. center places it in the middle; randomside (needs
// side_ratio or crop_size) and randomarea (needs area_ratio or crop_size) anywhere, and flip the
// image horizontally with probability 1/2. multiview10 (evaluation; no jitter) makes each image
// 10 sequences in a row, its views: the crop at the top-left, top-right, bottom-left and
// bottom-right corners and in the middle, then the same five flipped horizontally. jitter_type
// draws each ratio of a range: none takes the minimum; uniratio draws the ratio uniformly;
// unilength draws the crop's side length uniformly, uniarea its area (aspect_ratio uniformly).
struct CropOptions {
  CropType crop_type = CropType::center;
  CropSize crop_size = {};
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

// CNTK's intensity transform (AlexNet's PCA lighting noise): the OpenCV XML file
// intensity_file holds EigVal (1 x 3) and EigVec (3 x 3, eigenvectors as columns) of the RGB
// pixel covariance; each image draws a_i ~ N(0, intensity_stdev) * EigVal_i and adds
// (EigVec * a)[c] to color c (R, G, B; a gray image: R's), kept in [0, 255].
struct Intensity {
  double intensity_stdev = 0;
  std::string intensity_file = {};
};

}  // namespace transforms

using ImageTransform = std::variant<transforms::CropOptions, transforms::Scale, transforms::Mean,
                                    transforms::ColorOptions, transforms::Intensity>;

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
inline ImageTransform intensity(double intensity_stdev, std::string intensity_file) {
  return Intensity{intensity_stdev, std::move(intensity_file)};
}
}  // namespace transforms

}  // namespace loom
