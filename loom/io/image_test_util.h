// Images for the image reader's tests: Fashion-MNIST items (Debian's dataset-fashion-mnist)
// written as PNG or JPEG files with a CNTK map file beside them, and synthetic images whose
// pixels name their place, so crops can be checked exactly.
#pragma once

#include <gtest/gtest.h>

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

}  // namespace loom::testing_io
