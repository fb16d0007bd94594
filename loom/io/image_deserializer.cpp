#include "loom/io/image_deserializer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <type_traits>
#include <variant>

#include "loom/core/random.h"
#include "loom/core/trace.h"
#include "loom/io/image_header.h"
#include "loom/io/reader_threads.h"

namespace loom {

namespace {

int cv_interpolation(Interpolation i) {
  switch (i) {
    case Interpolation::nearest:
      return cv::INTER_NEAREST;
    case Interpolation::cubic:
      return cv::INTER_CUBIC;
    case Interpolation::lanczos:
      return cv::INTER_LANCZOS4;
    case Interpolation::linear:
      break;
  }
  return cv::INTER_LINEAR;
}

// A ratio of the range: its minimum without jitter, else drawn so that ratio^power is uniform
// between min^power and max^power (uniratio: power 1).
double jitter(const RatioRange& r, JitterType type, double power, RandomGenerator& rng) {
  if (type == JitterType::none || r.min == r.max) return r.min;
  const double lo = std::pow(r.min, power), hi = std::pow(r.max, power);
  return std::pow(lo + (hi - lo) * rng.uniform(), 1 / power);
}

// The power of a crop ratio that `type` draws uniformly. A side ratio is proportional to the
// crop's side length, an area ratio to its area: unilength draws the side length uniformly,
// uniarea the area; uniratio the ratio itself.
double jitter_power(JitterType type, bool area_ratio) {
  if (type == JitterType::unilength) return area_ratio ? 0.5 : 1.0;
  if (type == JitterType::uniarea) return area_ratio ? 1.0 : 2.0;
  return 1.0;
}

bool random_crop(CropType type) {
  return type == CropType::randomside || type == CropType::randomarea;
}

// Uniform in [-radius, radius].
double symmetric(double radius, RandomGenerator& rng) {
  return radius * (2 * rng.uniform() - 1);
}

// Uniform in {0, ..., n}.
int uniform_int(int n, RandomGenerator& rng) {
  return std::min(n, static_cast<int>(rng.uniform() * (n + 1)));
}

void check_ratio(const RatioRange& r, bool zero_allowed, const char* name) {
  const bool unset = zero_allowed && r.min == 0 && r.max == 0;
  LOOM_CHECK(unset || (r.min > 0 && r.min <= r.max && r.max <= 1), ArgumentError,
             "transforms::crop: ", name, " must lie in (0, 1] with min <= max, got [", r.min, ", ",
             r.max, "]");
}

// The crop's size in an image of rows x cols (CNTK's CropTransformer): crop_size, each side at
// most the image's; else up to ten draws of the ratios for a crop that fits, else the whole
// image.
cv::Size crop_size(const transforms::CropOptions& o, int rows, int cols, RandomGenerator& rng) {
  if (o.crop_size.width > 0)
    return {static_cast<int>(std::min(o.crop_size.width, size_t(cols))),
            static_cast<int>(std::min(o.crop_size.height, size_t(rows)))};
  for (int attempt = 0; attempt < 10; ++attempt) {
    int w = cols, h = rows;
    if (o.side_ratio.max > 0) {
      const double ratio =
          jitter(o.side_ratio, o.jitter_type, jitter_power(o.jitter_type, false), rng);
      w = h = static_cast<int>(std::lround(std::min(rows, cols) * ratio));
    } else if (o.area_ratio.max > 0) {
      const double ratio =
          jitter(o.area_ratio, o.jitter_type, jitter_power(o.jitter_type, true), rng);
      w = h = static_cast<int>(std::lround(std::sqrt(double(rows) * cols * ratio)));
    }
    const double aspect = jitter(o.aspect_ratio, o.jitter_type, 1.0, rng);
    if (aspect != 1.0) {
      const double area = double(w) * h;
      const int longer = static_cast<int>(std::sqrt(area / aspect));
      const int shorter = static_cast<int>(std::sqrt(area * aspect));
      const bool wide = rng.uniform() < 0.5;
      w = wide ? longer : shorter;
      h = wide ? shorter : longer;
    }
    w = std::max(w, 1);
    h = std::max(h, 1);
    if (w <= cols && h <= rows) return {w, h};
  }
  return {cols, rows};
}

// The crop rectangle: in the middle, anywhere for the random crops, or multiview10's view
// (0-4 and 5-9: the top-left, top-right, bottom-left and bottom-right corners, the middle).
cv::Rect crop_rect(const transforms::CropOptions& o, size_t view, int rows, int cols,
                   RandomGenerator& rng) {
  const cv::Size size = crop_size(o, rows, cols, rng);
  const int x_room = cols - size.width, y_room = rows - size.height;
  int x = x_room / 2, y = y_room / 2;
  if (random_crop(o.crop_type)) {
    x = uniform_int(x_room, rng);
    y = uniform_int(y_room, rng);
  } else if (o.crop_type == CropType::multiview10 && view % 5 < 4) {
    const size_t corner = view % 5;
    x = corner % 2 == 0 ? 0 : x_room;
    y = corner < 2 ? 0 : y_room;
  }
  return {x, y, size.width, size.height};
}

cv::Mat scaled(const cv::Mat& image, const transforms::Scale& s) {
  const int width = static_cast<int>(s.width), height = static_cast<int>(s.height);
  const int interpolation = cv_interpolation(s.options.interpolations);
  cv::Mat out;
  if (s.options.scale_mode == ScaleMode::fill) {
    cv::resize(image, out, {width, height}, 0, 0, interpolation);
    return out;
  }
  // crop: cover the target and cut its middle; pad: fit inside it and pad around.
  const double fx = double(width) / image.cols, fy = double(height) / image.rows;
  const double f = s.options.scale_mode == ScaleMode::crop ? std::max(fx, fy) : std::min(fx, fy);
  const int w = std::clamp(static_cast<int>(std::lround(image.cols * f)), 1, 1 << 30);
  const int h = std::clamp(static_cast<int>(std::lround(image.rows * f)), 1, 1 << 30);
  cv::resize(image, out, {w, h}, 0, 0, interpolation);
  if (s.options.scale_mode == ScaleMode::crop) {
    const int x = std::max(0, (w - width) / 2), y = std::max(0, (h - height) / 2);
    return out(cv::Rect(x, y, std::min(width, w), std::min(height, h))).clone();
  }
  const int top = std::max(0, (height - h) / 2), left = std::max(0, (width - w) / 2);
  cv::Mat padded;
  cv::copyMakeBorder(out, padded, top, std::max(0, height - h - top), left,
                     std::max(0, width - w - left),
                     s.options.pad_value < 0 ? cv::BORDER_REPLICATE : cv::BORDER_CONSTANT,
                     cv::Scalar::all(s.options.pad_value));
  return padded;
}

cv::Mat as_float(const cv::Mat& image) {
  if (image.depth() == CV_32F) return image;
  cv::Mat out;
  image.convertTo(out, CV_32F);
  return out;
}

// Pixel values kept in [0, 255].
void clamp_pixels(cv::Mat& image) {
  cv::min(image, 255.0, image);
  cv::max(image, 0.0, image);
}

// CNTK's ColorTransformer on a float image of values 0..255.
cv::Mat colored(const cv::Mat& input, const transforms::ColorOptions& o, RandomGenerator& rng) {
  cv::Mat image = as_float(input);
  if (o.brightness_radius > 0 || o.contrast_radius > 0) {
    double beta = 0, alpha = 1;
    if (o.brightness_radius > 0) {
      const cv::Scalar sums = cv::sum(image);
      const double mean =
          (sums[0] + sums[1] + sums[2] + sums[3]) / double(image.total()) / image.channels();
      beta = symmetric(o.brightness_radius, rng) * mean;
    }
    if (o.contrast_radius > 0) alpha = 1 + symmetric(o.contrast_radius, rng);
    cv::Mat out;
    image.convertTo(out, CV_32F, alpha, beta);
    clamp_pixels(out);
    image = out;
  }
  if (o.saturation_radius > 0 && image.channels() == 3) {
    const double ratio = 1 + symmetric(o.saturation_radius, rng);
    cv::Mat hsv;
    cv::cvtColor(image, hsv, cv::COLOR_BGR2HSV);  // float: S in [0, 1], V as given
    for (int r = 0; r < hsv.rows; ++r) {
      float* p = hsv.ptr<float>(r);
      for (int c = 0; c < hsv.cols; ++c)
        p[3 * c + 1] = std::min(static_cast<float>(p[3 * c + 1] * ratio), 1.0f);
    }
    cv::cvtColor(hsv, image, cv::COLOR_HSV2BGR);
  }
  return image;
}

// An intensity file: the eigenvalues and eigenvectors (columns) of the RGB pixel covariance.
struct Lighting {
  cv::Vec3d eigenvalues;
  cv::Matx33d eigenvectors;
};

// CNTK's IntensityTransformer (AlexNet's lighting noise) on an image of values 0..255.
cv::Mat lit(const cv::Mat& image, double stdev, const Lighting& l, RandomGenerator& rng) {
  if (stdev == 0) return image;
  cv::Vec3d alpha;
  for (int i = 0; i < 3; ++i) alpha[i] = rng.normal() * stdev * l.eigenvalues[i];
  const cv::Vec3d rgb = l.eigenvectors * alpha;
  cv::Mat out;
  cv::add(as_float(image),
          image.channels() == 3 ? cv::Scalar(rgb[2], rgb[1], rgb[0]) : cv::Scalar(rgb[0]), out);
  clamp_pixels(out);
  return out;
}

// Reads an OpenCV XML file of `transform` (a mean or intensity file): IOError when it cannot be
// opened, DataError when it is not OpenCV's.
template <typename Read>
void read_opencv_file(const char* transform, const std::string& file, Read&& read) {
  try {
    cv::FileStorage fs(file, cv::FileStorage::READ);
    LOOM_CHECK(fs.isOpened(), IOError, "transforms::", transform, ": cannot open the ", transform,
               " file (", file, ")");
    read(fs);
  } catch (const cv::Exception& e) {
    throw DataError(detail::concat("transforms::", transform, ": the ", transform, " file (", file,
                                   ") is not an OpenCV XML file: ", e.what()));
  }
}

// Writes an H x W x C image (8-bit or float) as C x H x W values.
template <typename T>
void write_chw(const cv::Mat& image, T* out) {
  const size_t plane = size_t(image.rows) * size_t(image.cols);
  auto copy = [&](auto zero, auto channels) {
    using S = decltype(zero);
    for (int r = 0; r < image.rows; ++r) {
      const S* p = image.ptr<S>(r);
      T* o = out + size_t(r) * size_t(image.cols);
      for (int c = 0; c < image.cols; ++c, p += channels)
        for (int k = 0; k < channels; ++k) o[size_t(k) * plane + size_t(c)] = static_cast<T>(p[k]);
    }
  };
  // The channel count as a constant lets the compiler unroll the channel loop.
  auto by_channels = [&](auto zero) {
    if (image.channels() == 3)
      copy(zero, std::integral_constant<int, 3>());
    else
      copy(zero, std::integral_constant<int, 1>());
  };
  if (image.depth() == CV_8U)
    by_channels(uint8_t{});
  else
    by_channels(float{});
}

// Why an image cannot be used (Pipeline::run); its callers report it with the image's file and
// map file line.
class ImageProblem : public Error {
 public:
  using Error::Error;
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  return in ? bytes : std::vector<uint8_t>();
}

// Base64's alphabet: the value of each character, -1 for the others.
constexpr std::array<int8_t, 256> base64_values() {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int8_t i = 0; i < 64; ++i) values[static_cast<uint8_t>(alphabet[i])] = i;
  return values;
}
constexpr std::array<int8_t, 256> kBase64 = base64_values();

// CNTK's trim of a base64 image's end: every character that is neither base64's nor '='.
std::string_view trim_base64(std::string_view text) {
  while (!text.empty() && text.back() != '=' && kBase64[static_cast<uint8_t>(text.back())] < 0)
    text.remove_suffix(1);
  return text;
}

// Why `text` is not standard base64 (empty when it is): a multiple of 4 characters of the
// alphabet, the last one or two of which may be '=' padding.
std::string base64_problem(std::string_view text) {
  if (text.empty()) return "the image is empty";
  if (text.size() % 4 != 0)
    return detail::concat("the base64 image has ", text.size(), " characters, not a multiple of 4");
  const size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
  for (size_t i = 0; i < text.size() - padding; ++i)
    if (kBase64[static_cast<uint8_t>(text[i])] < 0)
      return detail::concat("the base64 image has '", text[i], "' (character ", i + 1,
                            " of the image), which is not base64");
  return {};
}

// Decodes base64 that base64_problem accepts.
std::vector<uint8_t> decode_base64(std::string_view text) {
  const size_t padding = text.ends_with("==") ? 2 : text.ends_with('=') ? 1 : 0;
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int held = 0;
  for (size_t i = 0; i < text.size() - padding; ++i) {
    bits = (bits << 6) | uint32_t(kBase64[static_cast<uint8_t>(text[i])]);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out.push_back(static_cast<uint8_t>(bits >> held));
    }
  }
  return out;
}

}  // namespace

// The image stream's transforms, checked, with their mean images and intensity files loaded.
struct ImageDeserializer::Pipeline {
  std::vector<ImageTransform> transforms;
  transforms::Scale scale;
  std::vector<cv::Mat> means;       // one per Mean transform, in order: float, H x W x C
  std::vector<Lighting> lightings;  // one per Intensity transform, in order
  size_t views = 1;                 // sequences per image: 10 with a multiview10 crop

  // Whether run() draws nothing from its generator that changes the image.
  bool deterministic() const {
    return std::none_of(transforms.begin(), transforms.end(), [](const ImageTransform& t) {
      if (const auto* crop = std::get_if<transforms::CropOptions>(&t))
        return random_crop(crop->crop_type);
      if (const auto* c = std::get_if<transforms::ColorOptions>(&t))
        return c->brightness_radius > 0 || c->contrast_radius > 0 || c->saturation_radius > 0;
      if (const auto* i = std::get_if<transforms::Intensity>(&t)) return i->intensity_stdev > 0;
      return false;
    });
  }

  // The image in `bytes` decoded and transformed as view `view`. ImageProblem, saying why, when
  // it cannot be: no bytes, a header declaring more than kMaxImagePixels pixels, bytes OpenCV
  // does not decode, or an OpenCV error (its own size limit included).
  cv::Mat run(const std::vector<uint8_t>& bytes, size_t view, RandomGenerator& rng) const {
    if (bytes.empty()) throw ImageProblem("cannot be read");
    if (const auto header = read_image_header(bytes); header && header->pixels() > kMaxImagePixels)
      throw ImageProblem(detail::concat("declares ", header->width, " x ", header->height,
                                        " pixels, more than the ", kMaxImagePixels,
                                        " pixels an image may have"));
    try {
      return transformed(
          cv::imdecode(bytes, scale.channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR), view,
          rng);
    } catch (const cv::Exception& error) {
      std::string what = error.what();
      while (!what.empty() && std::isspace(static_cast<unsigned char>(what.back())))
        what.pop_back();
      throw ImageProblem("failed in OpenCV: " + what);
    }
  }

 private:
  cv::Mat transformed(cv::Mat image, size_t view, RandomGenerator& rng) const {
    if (image.empty()) throw ImageProblem("cannot be read or decoded");
    size_t mean = 0, lighting = 0;
    for (const ImageTransform& t : transforms) {
      if (const auto* crop = std::get_if<transforms::CropOptions>(&t)) {
        image = image(crop_rect(*crop, view, image.rows, image.cols, rng));
        const bool mirrored = crop->crop_type == CropType::multiview10 && view >= 5;
        if ((random_crop(crop->crop_type) && rng.uniform() < 0.5) || mirrored) {
          cv::Mat flipped;
          cv::flip(image, flipped, 1);
          image = flipped;
        }
      } else if (std::holds_alternative<transforms::Scale>(t)) {
        image = scaled(image, scale);
      } else if (std::holds_alternative<transforms::Mean>(t)) {
        image = as_float(image) - means[mean++];
      } else if (const auto* i = std::get_if<transforms::Intensity>(&t)) {
        image = lit(image, i->intensity_stdev, lightings[lighting++], rng);
      } else {
        image = colored(image, std::get<transforms::ColorOptions>(t), rng);
      }
    }
    return image;
  }
};

ImageDeserializer::~ImageDeserializer() = default;

ImageDeserializer::ImageDeserializer(const std::string& map_file, const StreamDefs& streams,
                                     ImageOptions options)
    : ImageDeserializer(map_file, streams, options, MapFormat::paths) {}

ImageDeserializer::ImageDeserializer(const std::string& map_file, const StreamDefs& streams,
                                     ImageOptions options, MapFormat format)
    : name_(format == MapFormat::base64 ? "Base64ImageDeserializer" : "ImageDeserializer"),
      format_(format),
      map_file_(map_file),
      pipeline_(std::make_unique<Pipeline>()),
      options_(options) {
  auto where = [&] { return name_ + "(" + map_file + "): "; };
  size_t image = SIZE_MAX, label = SIZE_MAX, num_labels = 0;
  for (const auto& [name, def] : streams) {
    const std::string& field = def.field.empty() ? name : def.field;
    LOOM_CHECK(field == "image" || field == "label", ArgumentError, where(), "stream '", name,
               "' reads field '", field, "'; an image map has the fields 'image' and 'label'");
    size_t& id = field == "image" ? image : label;
    LOOM_CHECK(id == SIZE_MAX, ArgumentError, where(), "two streams read the field '", field, "'");
    id = streams_.size();
    StreamInformation info{name, id, StorageFormat::Dense, def.dtype, {}, false};
    if (field == "label") {
      LOOM_CHECK(def.shape > 0 && def.shape <= size_t(INT32_MAX), ArgumentError, where(),
                 "the label stream '", name, "' needs its shape, the number of classes");
      LOOM_CHECK(def.transforms.empty(), ArgumentError, where(), "the label stream '", name,
                 "' takes no transforms");
      num_labels = def.shape;
      info.storage = StorageFormat::SparseCSR;
      info.sample_shape = NDShape{def.shape};
    } else {
      size_t scales = 0;
      bool crop_after_scale = false, mean_before_scale = false;
      for (const ImageTransform& t : def.transforms) {
        if (const auto* s = std::get_if<transforms::Scale>(&t)) {
          ++scales;
          pipeline_->scale = *s;
          LOOM_CHECK(s->width > 0 && s->height > 0 && (s->channels == 1 || s->channels == 3),
                     ArgumentError,
                     "transforms::scale: needs a positive width and height and 1 "
                     "or 3 channels, got ",
                     s->width, " x ", s->height, " x ", s->channels);
          LOOM_CHECK(s->options.pad_value >= -1, ArgumentError,
                     "transforms::scale: pad_value is -1 (repeat the border) or a pixel value, "
                     "got ",
                     s->options.pad_value);
        } else if (const auto* c = std::get_if<transforms::CropOptions>(&t)) {
          crop_after_scale = crop_after_scale || scales > 0;
          check_ratio(c->side_ratio, true, "side_ratio");
          check_ratio(c->area_ratio, true, "area_ratio");
          check_ratio(c->aspect_ratio, false, "aspect_ratio");
          LOOM_CHECK(c->side_ratio.max == 0 || c->area_ratio.max == 0, ArgumentError,
                     "transforms::crop: side_ratio and area_ratio cannot both be given");
          const CropSize& size = c->crop_size;
          const bool sized = size.width > 0 || size.height > 0;
          LOOM_CHECK(!sized || (size.width > 0 && size.height > 0), ArgumentError,
                     "transforms::crop: crop_size needs a positive width and height, got ",
                     size.width, " x ", size.height);
          LOOM_CHECK(!sized || (c->side_ratio.max == 0 && c->area_ratio.max == 0 &&
                                c->aspect_ratio.min == 1 && c->aspect_ratio.max == 1 &&
                                c->jitter_type == JitterType::none),
                     ArgumentError, "transforms::crop: crop_size (", size.width, " x ", size.height,
                     ") fixes the crop's size; give no side_ratio, area_ratio, aspect_ratio or "
                     "jitter_type with it");
          LOOM_CHECK(c->crop_type != CropType::randomside || c->side_ratio.max > 0 || sized,
                     ArgumentError,
                     "transforms::crop: crop_type randomside needs side_ratio or "
                     "crop_size");
          LOOM_CHECK(c->crop_type != CropType::randomarea || c->area_ratio.max > 0 || sized,
                     ArgumentError,
                     "transforms::crop: crop_type randomarea needs area_ratio or "
                     "crop_size");
          LOOM_CHECK(c->crop_type != CropType::multiview10 || c->jitter_type == JitterType::none,
                     ArgumentError,
                     "transforms::crop: crop_type multiview10 (the same 10 views "
                     "of every image, for evaluation) takes no jitter_type");
          if (c->crop_type == CropType::multiview10) pipeline_->views = 10;
        } else if (std::holds_alternative<transforms::Mean>(t)) {
          mean_before_scale = mean_before_scale || scales == 0;
        } else if (const auto* i = std::get_if<transforms::Intensity>(&t)) {
          LOOM_CHECK(i->intensity_stdev >= 0 && std::isfinite(i->intensity_stdev), ArgumentError,
                     "transforms::intensity: intensity_stdev must be a number >= 0, got ",
                     i->intensity_stdev);
        } else {
          const auto& c = std::get<transforms::ColorOptions>(t);
          for (double r : {c.brightness_radius, c.contrast_radius, c.saturation_radius})
            LOOM_CHECK(r >= 0 && r <= 1, ArgumentError,
                       "transforms::color: radii lie in [0, 1], got ", r);
        }
      }
      LOOM_CHECK(scales == 1 && !crop_after_scale && !mean_before_scale, ArgumentError, where(),
                 "the image stream '", name,
                 "' needs exactly one transforms::scale (it fixes the image size), after every "
                 "crop and before any mean");
      pipeline_->transforms = def.transforms;
      const transforms::Scale& s = pipeline_->scale;
      info.sample_shape = NDShape{s.channels, s.height, s.width};
    }
    streams_.push_back(std::move(info));
  }
  LOOM_CHECK(image != SIZE_MAX && label != SIZE_MAX, ArgumentError, where(),
             "needs a stream with field 'image' and one with field 'label'");
  image_stream_ = image;
  label_stream_ = label;

  // Mean images, of the scaled size, and intensity files.
  const transforms::Scale& s = pipeline_->scale;
  for (const ImageTransform& t : pipeline_->transforms) {
    if (const auto* m = std::get_if<transforms::Mean>(&t)) {
      cv::Mat mean;
      int channels = 0, rows = 0, cols = 0;
      read_opencv_file("mean", m->filename, [&](cv::FileStorage& fs) {
        fs["MeanImg"] >> mean;
        fs["Channel"] >> channels;
        fs["Row"] >> rows;
        fs["Col"] >> cols;
      });
      LOOM_CHECK(!mean.empty() && size_t(channels) == s.channels && size_t(rows) == s.height &&
                     size_t(cols) == s.width &&
                     mean.total() * size_t(mean.channels()) == s.channels * s.height * s.width,
                 DataError, "transforms::mean: the mean file (", m->filename, ") holds a ",
                 channels, " x ", rows, " x ", cols, " MeanImg of ",
                 mean.total() * size_t(mean.channels()), " values; the scaled images are ",
                 s.channels, " x ", s.height, " x ", s.width);
      cv::Mat shaped = mean.reshape(channels, rows);
      pipeline_->means.push_back(as_float(shaped).clone());
    } else if (const auto* i = std::get_if<transforms::Intensity>(&t)) {
      cv::Mat values, vectors;
      read_opencv_file("intensity", i->intensity_file, [&](cv::FileStorage& fs) {
        fs["EigVal"] >> values;
        fs["EigVec"] >> vectors;
      });
      LOOM_CHECK(values.total() == 3 && values.channels() == 1 && vectors.rows == 3 &&
                     vectors.cols == 3 && vectors.channels() == 1,
                 DataError, "transforms::intensity: the intensity file (", i->intensity_file,
                 ") holds an EigVal of ", values.rows, " x ", values.cols, " x ", values.channels(),
                 " and an EigVec of ", vectors.rows, " x ", vectors.cols, " x ", vectors.channels(),
                 " values; it needs EigVal 1 x 3 and EigVec 3 x 3 (eigenvectors as columns)");
      Lighting l;
      values.reshape(1, 3).convertTo(cv::Mat(3, 1, CV_64F, l.eigenvalues.val), CV_64F);
      vectors.convertTo(cv::Mat(3, 3, CV_64F, l.eigenvectors.val), CV_64F);
      pipeline_->lightings.push_back(l);
    }
  }

  // The map file: "path<TAB>label" lines, or "[key<TAB>]label<TAB>base64 image" lines.
  std::ifstream in(map_file, std::ios::binary);
  LOOM_CHECK(in, IOError, name_, ": cannot open the map file (", map_file, ")");
  const std::filesystem::path folder = std::filesystem::path(map_file).parent_path();
  auto bad = [&](size_t line, const std::string& what) {
    std::string message = detail::concat(name_, ": ", what, " in line ", line + 1,
                                         " of the map file (", map_file, ")");
    LOOM_CHECK(skipped_ < options.max_errors, DataError, message);
    warn(message + "; skipped");
    ++skipped_;
  };
  // The class index of a map line, or SIZE_MAX (reported) when it is not one of the label
  // stream's.
  auto label_of = [&](size_t line, std::string_view text) -> size_t {
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    size_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
      bad(line, "the label '" + std::string(text) + "' (not a class index)");
      return SIZE_MAX;
    }
    if (value >= num_labels) {
      bad(line, detail::concat("the label ", value, " (outside [0, ", num_labels,
                               "), the classes of stream '", streams_[label].name, "')"));
      return SIZE_MAX;
    }
    return value;
  };
  std::string text;
  bool keys = false;        // base64: whether the lines start with a sequence key
  uint64_t line_begin = 0;  // the line's first byte in the map file
  for (size_t line = 0; std::getline(in, text); ++line) {
    const uint64_t begin = line_begin;
    line_begin += text.size() + 1;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (format_ == MapFormat::base64) {
      if (line == 0) {  // CNTK: keys when the first line has three tab-separated fields
        const size_t first = text.find('\t');
        const size_t second = first == std::string::npos ? first : text.find('\t', first + 1);
        keys = second != std::string::npos && second + 1 < text.size();
      }
      std::string_view rest(text);
      if (keys) {
        const size_t tab = rest.find('\t');
        if (tab == std::string::npos) {
          bad(line, "a line without a sequence key and a tab (the first line has keys)");
          continue;
        }
        rest.remove_prefix(tab + 1);
      }
      const size_t tab = rest.find('\t');
      if (tab == std::string::npos) {
        bad(line, "a line without a label and a tab before the base64 image");
        continue;
      }
      const size_t value = label_of(line, rest.substr(0, tab));
      if (value == SIZE_MAX) continue;
      const std::string_view image = trim_base64(rest.substr(tab + 1));
      if (std::string problem = base64_problem(image); !problem.empty()) {
        bad(line, problem);
        continue;
      }
      entries_.push_back({.path = {},
                          .offset = begin + uint64_t(image.data() - text.data()),
                          .size = image.size(),
                          .label = value,
                          .line = line});
      continue;
    }
    const size_t tab = text.find('\t');
    if (tab == std::string::npos || tab == 0) {
      bad(line, "a line without an image path and a tab before the label");
      continue;
    }
    // A NUL would end the path where the operating system reads it: another file.
    if (const size_t nul = text.find('\0'); nul < tab) {
      bad(line, detail::concat("the image path has a NUL byte (character ", nul + 1, ")"));
      continue;
    }
    const size_t value = label_of(line, std::string_view(text).substr(tab + 1));
    if (value == SIZE_MAX) continue;
    std::filesystem::path path(text.substr(0, tab));
    if (path.is_relative()) path = folder / path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      bad(line, "the image '" + path.string() + "' (no such file)");
      continue;
    }
    entries_.push_back({.path = path.string(), .label = value, .line = line});
  }
  LOOM_CHECK(!in.bad(), IOError, name_, ": cannot read the map file (", map_file, ")");

  // Tolerating errors: images that do not decode are skipped now, before the data is cut into
  // chunks.
  if (options.max_errors > 0) {
    std::vector<std::string> problems(entries_.size());  // empty: the image decodes
    for_each_item(entries_.size(), reader_threads(options.num_threads), [&](size_t i) {
      RandomGenerator rng(0, entries_[i].line);
      try {
        pipeline_->run(read_image(entries_[i]), 0, rng);
      } catch (const ImageProblem& problem) {
        problems[i] = problem.what();
      }
    });
    std::vector<Entry> good;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (problems[i].empty())
        good.push_back(std::move(entries_[i]));
      else if (format_ == MapFormat::base64)
        bad(entries_[i].line, "the image (" + problems[i] + ")");
      else
        bad(entries_[i].line, "the image '" + entries_[i].path + "' (" + problems[i] + ")");
    }
    entries_ = std::move(good);
  }
  LOOM_CHECK(!entries_.empty(), DataError, name_, ": the map file (", map_file, ") lists no image");
  const size_t image_bytes = s.channels * s.height * s.width * size_of(streams_[image].dtype);
  const size_t sequences = entries_.size() * pipeline_->views;
  per_chunk_ = sequences_per_chunk(options.chunking, sequences, sequences * image_bytes);
  chunk_infos_ = make_chunks(sequences, per_chunk_);
}

std::vector<uint8_t> ImageDeserializer::read_image(const Entry& e) const {
  if (format_ == MapFormat::paths) return read_bytes(e.path);
  std::ifstream in(map_file_, std::ios::binary);
  std::string text(e.size, '\0');
  in.seekg(std::streamoff(e.offset));
  in.read(text.data(), std::streamsize(e.size));
  // A map file that changed since it was read: nothing to decode.
  if (!in || !base64_problem(text).empty()) return {};
  return decode_base64(text);
}

std::string ImageDeserializer::describe(const Entry& e) const {
  const std::string image =
      format_ == MapFormat::paths ? "the image '" + e.path + "'" : "the image";
  return detail::concat(name_, ": ", image, " in line ", e.line + 1, " of the map file (",
                        map_file_, ")");
}

std::vector<SequenceInfo> ImageDeserializer::sequence_infos(size_t chunk) const {
  LOOM_CHECK(chunk < chunk_infos_.size(), ArgumentError, name_, ": chunk ", chunk,
             " does not exist (", chunk_infos_.size(), " chunks)");
  std::vector<SequenceInfo> out;
  const size_t first = chunk * per_chunk_;
  for (size_t i = first; i < first + chunk_infos_[chunk].num_sequences; ++i)
    out.push_back({1, entries_[i / pipeline_->views].line});
  return out;
}

std::shared_ptr<const Chunk> ImageDeserializer::load_chunk(size_t chunk) {
  return load_chunk_in_sweep(chunk, 0, 0);
}

bool ImageDeserializer::same_in_every_sweep() const {
  return pipeline_->deterministic();
}

std::shared_ptr<const Chunk> ImageDeserializer::load_chunk_in_sweep(size_t chunk, size_t sweep,
                                                                    uint64_t seed) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  const size_t first = chunk * per_chunk_, n = out->sequences.size(), views = pipeline_->views;
  out->streams.resize(streams_.size());

  StreamChunkData& labels = out->streams[label_stream_];
  for (size_t i = 0; i < n; ++i) {
    labels.sample_begin.push_back(i + 1);
    labels.nnz_begin.push_back(i + 1);
    labels.indices.push_back(static_cast<int32_t>(entries_[(first + i) / views].label));
  }
  dispatch(streams_[label_stream_].dtype,
           [&](auto zero) { values_of<decltype(zero)>(labels).assign(n, decltype(zero){1}); });

  StreamChunkData& images = out->streams[image_stream_];
  for (size_t i = 0; i < n; ++i) images.sample_begin.push_back(i + 1);
  const size_t dim = streams_[image_stream_].sample_shape.total_size();
  dispatch(streams_[image_stream_].dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T>& values = values_of<T>(images);
    values.resize(n * dim);
    for_each_item(n, reader_threads(options_.num_threads), [&](size_t i) {
      const Entry& e = entries_[(first + i) / views];
      const size_t view = (first + i) % views;
      // The stream: (sweep, line, view), so neither the thread nor the chunking changes the
      // draws.
      RandomGenerator rng(seed, (uint64_t(sweep) << 40) ^ (e.line * views + view));
      cv::Mat image;
      try {
        image = pipeline_->run(read_image(e), view, rng);
      } catch (const ImageProblem& problem) {
        throw DataError(describe(e) + " " + problem.what());
      }
      write_chw(image, values.data() + i * dim);
    });
  });
  return out;
}

}  // namespace loom
