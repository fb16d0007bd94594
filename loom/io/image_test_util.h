// Images for the image reader's tests: Fashion-MNIST items (Debian's dataset-fashion-mnist)
// written as PNG or JPEG files with a CNTK map file beside them, and synthetic images whose
// pixels name their place, so crops can be checked exactly.
#pragma once

#include <gtest/gtest.h>

#include <zlib.h>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "loom/io/idx_deserializer.h"
#include "loom/io/io_test_util.h"

namespace loom::testing_io {

inline const std::string kFashionMnist = "/usr/share/datasets/fashion-mnist/";

struct FashionMnist {
  std::vector<uint8_t> pixels;  // 28 x 28 per item
  std::vector<size_t> labels;
};

// The first `count` items of the training (or test) set, in file order.
inline FashionMnist read_fashion_mnist(size_t count, bool test_set = false) {
  const std::string prefix = kFashionMnist + (test_set ? "t10k" : "train");
  IDXDeserializer d({{"x", {.path = prefix + "-images-idx3-ubyte.gz"}},
                     {"y", {.path = prefix + "-labels-idx1-ubyte.gz"}}});
  FashionMnist out;
  for (size_t k = 0; k < d.chunk_infos().size() && out.labels.size() < count; ++k) {
    auto chunk = d.load_chunk(k);
    for (size_t i = 0; i < chunk->sequences.size() && out.labels.size() < count; ++i) {
      const std::vector<uint8_t>& pixels = chunk->streams[0].values_u8;  // bytes, scale 1
      out.pixels.insert(out.pixels.end(), pixels.begin() + i * 784, pixels.begin() + (i + 1) * 784);
      out.labels.push_back(chunk->streams[1].values_u8[i]);
    }
  }
  return out;
}

// Writes the items as <folder>/<i><extension> (".png" or ".jpg") and <folder>/map.txt with
// relative paths; returns the map file's path.
inline std::string write_images(const std::string& folder_name, const FashionMnist& data,
                                const std::string& extension) {
  const std::string folder = test_dir() + "/" + folder_name;
  std::filesystem::create_directories(folder);
  std::ofstream map(folder + "/map.txt");
  for (size_t i = 0; i < data.labels.size(); ++i) {
    cv::Mat image(28, 28, CV_8UC1, const_cast<uint8_t*>(data.pixels.data() + i * 784));
    const std::string name = std::to_string(i) + extension;
    EXPECT_TRUE(cv::imwrite(folder + "/" + name, image, {cv::IMWRITE_JPEG_QUALITY, 95}));
    map << name << "\t" << data.labels[i] << "\n";
  }
  return folder + "/map.txt";
}

// A width x height color image whose pixels name their place: blue is the column, green the
// row (both below 256), red 128.
inline cv::Mat position_image(int width, int height) {
  cv::Mat image(height, width, CV_8UC3);
  for (int r = 0; r < height; ++r)
    for (int c = 0; c < width; ++c) image.at<cv::Vec3b>(r, c) = {uint8_t(c), uint8_t(r), 128};
  return image;
}

// Writes `image` as <folder>/image.png and <folder>/map.txt listing it `count` times (label 0),
// each line a sequence with random draws of its own; returns the map file's path.
inline std::string write_repeated_image(const std::string& folder_name, const cv::Mat& image,
                                        size_t count) {
  const std::string folder = test_dir() + "/" + folder_name;
  std::filesystem::create_directories(folder);
  EXPECT_TRUE(cv::imwrite(folder + "/image.png", image));
  std::ofstream map(folder + "/map.txt");
  for (size_t i = 0; i < count; ++i) map << "image.png\t0\n";
  return folder + "/map.txt";
}

// A small position_image encoded as `extension` (".png", ".jpg", ...) with OpenCV.
inline std::vector<uint8_t> encoded_image(const std::string& extension, int width = 8,
                                          int height = 8) {
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(cv::imencode(extension, position_image(width, height), bytes)) << extension;
  return bytes;
}

// An 8 x 8 image's file whose header declares width x height pixels instead: a PNG (its IHDR's
// CRC recomputed, so that decoders read on), a BMP or a JPEG (its baseline frame header).
inline std::vector<uint8_t> declaring_size(const std::string& extension, uint32_t width,
                                           uint32_t height) {
  std::vector<uint8_t> bytes = encoded_image(extension);
  auto put = [&](size_t at, uint32_t value, int n) {
    for (int i = 0; i < n; ++i) bytes[at + i] = uint8_t(value >> (8 * (n - 1 - i)));
  };
  if (extension == ".png") {  // IHDR: length, type, width, height, ..., CRC of type and data
    put(16, width, 4);
    put(20, height, 4);
    put(29, uint32_t(crc32(0, bytes.data() + 12, 17)), 4);
    return bytes;
  }
  if (extension == ".bmp") {  // little-endian width and height after the 14-byte file header
    for (int i = 0; i < 4; ++i) {
      bytes[18 + i] = uint8_t(width >> (8 * i));
      bytes[22 + i] = uint8_t(height >> (8 * i));
    }
    return bytes;
  }
  for (size_t i = 2; i + 9 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && bytes[i + 1] == 0xC0) {  // SOF0: length, precision, height, width
      put(i + 5, height, 2);
      put(i + 7, width, 2);
      return bytes;
    }
  }
  ADD_FAILURE() << "no baseline frame header in the JPEG";
  return bytes;
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace loom::testing_io
