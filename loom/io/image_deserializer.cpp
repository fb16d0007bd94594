#include "loom/io/image_deserializer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <type_traits>
#include <variant>

#include "loom/core/random.h"
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

// A ratio of the range: its minimum, or uniform in it under uniratio jitter.
double jitter(const RatioRange& r, JitterType type, RandomGenerator& rng) {
  if (type == JitterType::none || r.min == r.max) return r.min;
  return r.min + (r.max - r.min) * rng.uniform();
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

// The crop rectangle of an image of rows x cols (CNTK's CropTransformer): up to ten tries for
// a crop that fits, else the whole image.
cv::Rect crop_rect(const transforms::CropOptions& o, int rows, int cols, RandomGenerator& rng) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    int w = cols, h = rows;
    if (o.side_ratio.max > 0) {
      w = h = static_cast<int>(
          std::lround(std::min(rows, cols) * jitter(o.side_ratio, o.jitter_type, rng)));
    } else if (o.area_ratio.max > 0) {
      w = h = static_cast<int>(
          std::lround(std::sqrt(double(rows) * cols * jitter(o.area_ratio, o.jitter_type, rng))));
    }
    const double aspect = jitter(o.aspect_ratio, o.jitter_type, rng);
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
    if (w > cols || h > rows) continue;
    if (o.crop_type == CropType::center) return {(cols - w) / 2, (rows - h) / 2, w, h};
    return {uniform_int(cols - w, rng), uniform_int(rows - h, rng), w, h};
  }
  return {0, 0, cols, rows};
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
    cv::min(out, 255.0, out);
    cv::max(out, 0.0, out);
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

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<uint8_t> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  return in ? bytes : std::vector<uint8_t>();
}

}  // namespace

// The image stream's transforms, checked, with their mean images loaded.
struct ImageDeserializer::Pipeline {
  std::vector<ImageTransform> transforms;
  transforms::Scale scale;
  std::vector<cv::Mat> means;  // one per Mean transform, in order: float, H x W x C

  // The image in `bytes` decoded and transformed; empty when it cannot be decoded.
  cv::Mat run(const std::vector<uint8_t>& bytes, RandomGenerator& rng) const {
    if (bytes.empty()) return {};
    cv::Mat image =
        cv::imdecode(bytes, scale.channels == 1 ? cv::IMREAD_GRAYSCALE : cv::IMREAD_COLOR);
    if (image.empty()) return image;
    size_t mean = 0;
    for (const ImageTransform& t : transforms) {
      if (const auto* crop = std::get_if<transforms::CropOptions>(&t)) {
        image = image(crop_rect(*crop, image.rows, image.cols, rng));
        if (crop->crop_type != CropType::center && rng.uniform() < 0.5) {
          cv::Mat flipped;
          cv::flip(image, flipped, 1);
          image = flipped;
        }
      } else if (std::holds_alternative<transforms::Scale>(t)) {
        image = scaled(image, scale);
      } else if (std::holds_alternative<transforms::Mean>(t)) {
        image = as_float(image) - means[mean++];
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
    : map_file_(map_file), pipeline_(std::make_unique<Pipeline>()), options_(options) {
  auto where = [&] { return "ImageDeserializer(" + map_file + "): "; };
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
          LOOM_CHECK(c->crop_type != CropType::randomside || c->side_ratio.max > 0, ArgumentError,
                     "transforms::crop: crop_type randomside needs side_ratio");
          LOOM_CHECK(c->crop_type != CropType::randomarea || c->area_ratio.max > 0, ArgumentError,
                     "transforms::crop: crop_type randomarea needs area_ratio");
        } else if (std::holds_alternative<transforms::Mean>(t)) {
          mean_before_scale = mean_before_scale || scales == 0;
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

  // Mean images, of the scaled size.
  const transforms::Scale& s = pipeline_->scale;
  for (const ImageTransform& t : pipeline_->transforms) {
    const auto* m = std::get_if<transforms::Mean>(&t);
    if (m == nullptr) continue;
    cv::Mat mean;
    int channels = 0, rows = 0, cols = 0;
    try {
      cv::FileStorage fs(m->filename, cv::FileStorage::READ);
      LOOM_CHECK(fs.isOpened(), IOError, "transforms::mean: cannot open the mean file (",
                 m->filename, ")");
      fs["MeanImg"] >> mean;
      fs["Channel"] >> channels;
      fs["Row"] >> rows;
      fs["Col"] >> cols;
    } catch (const cv::Exception& e) {
      throw DataError(detail::concat("transforms::mean: the mean file (", m->filename,
                                     ") is not an OpenCV XML file: ", e.what()));
    }
    LOOM_CHECK(!mean.empty() && size_t(channels) == s.channels && size_t(rows) == s.height &&
                   size_t(cols) == s.width &&
                   mean.total() * size_t(mean.channels()) == s.channels * s.height * s.width,
               DataError, "transforms::mean: the mean file (", m->filename, ") holds a ", channels,
               " x ", rows, " x ", cols, " MeanImg of ", mean.total() * size_t(mean.channels()),
               " values; the scaled images are ", s.channels, " x ", s.height, " x ", s.width);
    cv::Mat shaped = mean.reshape(channels, rows);
    pipeline_->means.push_back(as_float(shaped).clone());
  }

  // The map file: "path<TAB>label" lines.
  std::ifstream in(map_file, std::ios::binary);
  LOOM_CHECK(in, IOError, "ImageDeserializer: cannot open the map file (", map_file, ")");
  const std::filesystem::path folder = std::filesystem::path(map_file).parent_path();
  auto bad = [&](size_t line, const std::string& what) {
    std::string message = detail::concat("ImageDeserializer: ", what, " in line ", line + 1,
                                         " of the map file (", map_file, ")");
    LOOM_CHECK(skipped_ < options.max_errors, DataError, message);
    std::cerr << "WARNING: " << message << "; skipped\n";
    ++skipped_;
  };
  std::string text;
  for (size_t line = 0; std::getline(in, text); ++line) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const size_t tab = text.find('\t');
    if (tab == std::string::npos || tab == 0) {
      bad(line, "a line without an image path and a tab before the label");
      continue;
    }
    std::string_view label_text = std::string_view(text).substr(tab + 1);
    while (!label_text.empty() && (label_text.back() == ' ' || label_text.back() == '\t'))
      label_text.remove_suffix(1);
    size_t value = 0;
    auto [end, error] =
        std::from_chars(label_text.data(), label_text.data() + label_text.size(), value);
    if (error != std::errc() || end != label_text.data() + label_text.size()) {
      bad(line, "the label '" + std::string(label_text) + "' (not a class index)");
      continue;
    }
    if (value >= num_labels) {
      bad(line, detail::concat("the label ", value, " (outside [0, ", num_labels,
                               "), the classes of stream '", streams_[label].name, "')"));
      continue;
    }
    std::filesystem::path path(text.substr(0, tab));
    if (path.is_relative()) path = folder / path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      bad(line, "the image '" + path.string() + "' (no such file)");
      continue;
    }
    entries_.push_back({path.string(), value, line});
  }
  LOOM_CHECK(!in.bad(), IOError, "ImageDeserializer: cannot read the map file (", map_file, ")");

  // Tolerating errors: images that do not decode are skipped now, before the data is cut into
  // chunks.
  if (options.max_errors > 0) {
    std::vector<char> decodes(entries_.size());
    for_each_item(entries_.size(), reader_threads(options.num_threads), [&](size_t i) {
      RandomGenerator rng(0, entries_[i].line);
      decodes[i] = !pipeline_->run(read_bytes(entries_[i].path), rng).empty();
    });
    std::vector<Entry> good;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (decodes[i])
        good.push_back(std::move(entries_[i]));
      else
        bad(entries_[i].line, "the image '" + entries_[i].path + "' (cannot be decoded)");
    }
    entries_ = std::move(good);
  }
  LOOM_CHECK(!entries_.empty(), DataError, "ImageDeserializer: the map file (", map_file,
             ") lists no image");
  const size_t image_bytes = s.channels * s.height * s.width * size_of(streams_[image].dtype);
  per_chunk_ =
      sequences_per_chunk(options.chunking, entries_.size(), entries_.size() * image_bytes);
  chunk_infos_ = make_chunks(entries_.size(), per_chunk_);
}

std::vector<SequenceInfo> ImageDeserializer::sequence_infos(size_t chunk) const {
  LOOM_CHECK(chunk < chunk_infos_.size(), ArgumentError, "ImageDeserializer: chunk ", chunk,
             " does not exist (", chunk_infos_.size(), " chunks)");
  std::vector<SequenceInfo> out;
  const size_t first = chunk * per_chunk_;
  for (size_t i = first; i < first + chunk_infos_[chunk].num_sequences; ++i)
    out.push_back({1, entries_[i].line});
  return out;
}

std::shared_ptr<const Chunk> ImageDeserializer::load_chunk(size_t chunk) {
  return load_chunk_in_sweep(chunk, 0, 0);
}

std::shared_ptr<const Chunk> ImageDeserializer::load_chunk_in_sweep(size_t chunk, size_t sweep,
                                                                    uint64_t seed) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  const size_t first = chunk * per_chunk_, n = out->sequences.size();
  out->streams.resize(streams_.size());

  StreamChunkData& labels = out->streams[label_stream_];
  for (size_t i = 0; i < n; ++i) {
    labels.sample_begin.push_back(i + 1);
    labels.nnz_begin.push_back(i + 1);
    labels.indices.push_back(static_cast<int32_t>(entries_[first + i].label));
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
      const Entry& e = entries_[first + i];
      // The stream: (sweep, line), so neither the thread nor the chunking changes the draws.
      RandomGenerator rng(seed, (uint64_t(sweep) << 40) ^ e.line);
      cv::Mat image;
      try {
        image = pipeline_->run(read_bytes(e.path), rng);
      } catch (const cv::Exception& error) {
        throw DataError(detail::concat("ImageDeserializer: the image '", e.path, "' in line ",
                                       e.line + 1, " of the map file (", map_file_,
                                       ") failed in OpenCV: ", error.what()));
      }
      LOOM_CHECK(!image.empty(), DataError, "ImageDeserializer: the image '", e.path, "' in line ",
                 e.line + 1, " of the map file (", map_file_, ") cannot be read or decoded");
      write_chw(image, values.data() + i * dim);
    });
  });
  return out;
}

}  // namespace loom
