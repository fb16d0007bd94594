#include "loom/train/tensorboard_progress_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "loom/core/crc32c.h"
#include "loom/core/error.h"
#include "loom/ops/ops.h"
#include "loom/train/tensorboard_event.pb.h"

#include <zlib.h>

namespace loom {
namespace {

namespace fs = std::filesystem;

class TensorBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("loom_tensorboard_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<fs::path> files() const {
    std::vector<fs::path> found;
    if (fs::exists(dir_))
      for (const auto& entry : fs::directory_iterator(dir_)) found.push_back(entry.path());
    return found;
  }

  fs::path dir_;
};

// The events of a TFRecord file, every length and CRC checked.
std::vector<tensorboard::Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  const auto u32 = [&](size_t offset) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + offset, 4);
    return v;
  };
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    uint64_t length;
    std::memcpy(&length, bytes.data() + at, 8);
    EXPECT_EQ(u32(at + 8), crc32c_mask(crc32c(bytes.data() + at, 8))) << "length CRC at " << at;
    EXPECT_LE(at + 12 + length + 4, bytes.size());
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(u32(at + 12 + length), crc32c_mask(crc32c(data.data(), data.size())))
        << "data CRC at " << at;
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(data));
    events.push_back(event);
    at += 12 + length + 4;
  }
  return events;
}

struct Scalar {
  std::string tag;
  int64_t step;
  float value;
  bool operator==(const Scalar&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  return os << s.tag << "@" << s.step << "=" << s.value;
}

std::vector<Scalar> scalars(const std::vector<tensorboard::Event>& events) {
  std::vector<Scalar> found;
  for (const auto& event : events)
    if (event.has_summary())
      for (const auto& v : event.summary().value())
        found.push_back({v.tag(), event.step(), v.simple_value()});
  return found;
}

TEST_F(TensorBoardTest, WritesCntkTagsAndSteps) {
  {
    TensorBoardProgressWriter writer({.freq = 2, .log_dir = dir_.string()});
    writer.update_training(4, 2.0, 1.0);  // minibatch 1
    writer.update_training(4, 6.0, 3.0);  // 2: window of 1-2, loss 8/8, metric 4/8
    writer.update_training(2, 1.0, 0.0);  // 3
    writer.write_training_summary();      // epoch 1: loss 9/10, metric 4/10
    writer.update_training(5, 1.0, 1.0);  // 1 of epoch 2, minibatch 4 in all
    writer.update_training(5, 2.0, 0.0);  // 2: window 1-2 of epoch 2, loss 3/10, metric 1/10
    writer.write_training_summary();      // epoch 2
    writer.update_test(8, 2.0);
    writer.update_test(2, 1.0);
    writer.write_test_summary();  // after 5 training minibatches: 3/10
    writer.write_value("learning_rate", 0.125, 42);
    writer.close();
    EXPECT_THROW(writer.write_value("x", 1, 1), StateError);
    EXPECT_THROW(writer.flush(), StateError);
    EXPECT_THROW(writer.close(), StateError);
  }
  const auto paths = files();
  ASSERT_EQ(paths.size(), 1u);
  const std::string name = paths[0].filename().string();
  EXPECT_TRUE(name.starts_with("events.out.tfevents.")) << name;
  EXPECT_EQ(name.find_first_not_of("0123456789", 20), 30u) << name;  // 10-digit time, then .host

  const auto events = read_events(paths[0].string());
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  const std::vector<Scalar> expected = {
      {"minibatch/avg_loss", 2, 1.0f},        {"minibatch/avg_metric", 2, 0.5f},
      {"summary/avg_loss", 1, 0.9f},          {"summary/avg_metric", 1, 0.4f},
      {"minibatch/avg_loss", 5, 0.3f},        {"minibatch/avg_metric", 5, 0.1f},
      {"summary/avg_loss", 2, 0.3f},          {"summary/avg_metric", 2, 0.1f},
      {"minibatch/test_avg_metric", 5, 0.3f}, {"learning_rate", 42, 0.125f}};
  EXPECT_EQ(scalars(events), expected);
}

TEST_F(TensorBoardTest, TestBeforeAnyTrainingIsPerSummary) {
  TensorBoardProgressWriter writer({.log_dir = dir_.string()});
  writer.update_test(4, 1.0);
  writer.write_test_summary();
  writer.update_training(4, 4.0, std::nullopt);  // freq none: no minibatch scalars
  writer.write_training_summary();               // no metric: no metric scalar
  writer.close();
  const std::vector<Scalar> expected = {{"summary/test_avg_metric", 1, 0.25f},
                                        {"summary/avg_loss", 1, 1.0f}};
  EXPECT_EQ(scalars(read_events(writer.file_name())), expected);
}

TEST_F(TensorBoardTest, WritesTheModelGraph) {
  Variable x = input_variable({2}, {.name = "features"});
  Variable y = input_variable({3}, {.name = "labels"});
  Parameter W = parameter({2, 3}, glorot_uniform(), DataType::Float32, "W");
  Parameter b = parameter({3}, zeros(), DataType::Float32, "b");
  Function z = plus(times(x, W), b, "z");
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  TensorBoardProgressWriter writer({.log_dir = dir_.string(), .model = criterion});
  writer.close();

  const auto events = read_events(writer.file_name());
  ASSERT_EQ(events.size(), 2u);
  tensorboard::GraphDef graph;
  ASSERT_TRUE(graph.ParseFromString(events[1].graph_def()));
  std::map<std::string, tensorboard::NodeDef> nodes;
  for (const auto& node : graph.node()) {
    EXPECT_TRUE(nodes.emplace(node.name(), node).second) << "two nodes named " << node.name();
    for (const auto& input : node.input()) {
      EXPECT_TRUE(nodes.contains(input)) << node.name() << " reads " << input << " before it";
    }
  }
  EXPECT_EQ(nodes.size(), 8u);  // 4 variables, times, plus, the loss and the metric
  ASSERT_TRUE(nodes.contains("z"));
  EXPECT_EQ(nodes["z"].op(), "Plus");
  ASSERT_EQ(nodes["z"].input_size(), 2);
  EXPECT_EQ(nodes[nodes["z"].input(0)].op(), "Times");
  EXPECT_EQ(nodes["z"].input(1), "b");
  EXPECT_EQ(nodes["W"].op(), "Parameter");
  EXPECT_EQ(nodes["features"].op(), "Input");
  EXPECT_EQ(nodes["W"].attr().at("dtype").type(), tensorboard::DT_FLOAT);
  const auto shape = [&](const std::string& node) {
    std::vector<int64_t> dims;
    for (const auto& d : nodes[node].attr().at("_output_shapes").list().shape(0).dim())
      dims.push_back(d.size());
    return dims;
  };
  EXPECT_EQ(shape("W"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(shape("features"), (std::vector<int64_t>{-1, 2}));  // the batch axis is -1
  EXPECT_EQ(shape("z"), (std::vector<int64_t>{-1, 3}));
}

// The pixels of a PNG file as encode_png writes it (8-bit, unfiltered rows), every chunk's
// CRC checked; the header's width, height and colour type are returned too.
std::vector<uint8_t> png_pixels(const std::string& png, uint32_t& width, uint32_t& height,
                                int& colour_type) {
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n"));
  const auto u32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v = (v << 8) | uint8_t(png[at + k]);
    return v;
  };
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t length = u32(at);
    const std::string type = png.substr(at + 4, 4), data = png.substr(at + 8, length);
    EXPECT_EQ(u32(at + 8 + length),
              crc32(0, reinterpret_cast<const Bytef*>(png.data() + at + 4), length + 4))
        << type;
    if (type == "IHDR") {
      width = u32(at + 8);
      height = u32(at + 12);
      colour_type = uint8_t(data[9]);
    }
    if (type == "IDAT") idat += data;
    at += 12 + length;
  }
  const size_t channels = colour_type == 0 ? 1 : colour_type == 2 ? 3 : 4;
  std::vector<uint8_t> raw(height * (1 + width * channels));
  uLongf size = raw.size();
  EXPECT_EQ(uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()),
            Z_OK);
  std::vector<uint8_t> pixels;
  for (size_t y = 0; y < height; ++y) {
    EXPECT_EQ(raw[y * (1 + width * channels)], 0) << "row filter";
    pixels.insert(pixels.end(), raw.begin() + long(y * (1 + width * channels) + 1),
                  raw.begin() + long((y + 1) * (1 + width * channels)));
  }
  return pixels;
}

TEST_F(TensorBoardTest, WritesImagesAsPng) {
  TensorBoardProgressWriter writer({.log_dir = dir_.string()});
  // Two RGB images of 2 x 3 pixels, [N, C, H, W]; values past 0..255 are clamped.
  std::vector<float> v(2 * 3 * 2 * 3);
  for (size_t k = 0; k < v.size(); ++k) v[k] = float(k * 9) - 20.4f;
  writer.write_image("samples", NDArrayView::from_vector(NDShape{2, 3, 2, 3}, v), 7);
  EXPECT_THROW(writer.write_image("bad", NDArrayView::from_vector(NDShape{2, 18}, v), 7),
               ArgumentError);
  writer.close();
  const auto events = read_events(files().at(0).string());
  size_t images = 0;
  for (const auto& event : events) {
    if (!event.has_summary()) continue;
    EXPECT_EQ(event.step(), 7);
    for (const auto& value : event.summary().value()) {
      ASSERT_TRUE(value.has_image());
      EXPECT_EQ(value.tag(), "samples/image/" + std::to_string(images));
      EXPECT_EQ(value.image().height(), 2);
      EXPECT_EQ(value.image().width(), 3);
      EXPECT_EQ(value.image().colorspace(), 3);
      uint32_t width = 0, height = 0;
      int colour_type = -1;
      const auto pixels =
          png_pixels(value.image().encoded_image_string(), width, height, colour_type);
      EXPECT_EQ(width, 3u);
      EXPECT_EQ(height, 2u);
      EXPECT_EQ(colour_type, 2);
      ASSERT_EQ(pixels.size(), 18u);
      for (size_t c = 0; c < 3; ++c)
        for (size_t p = 0; p < 6; ++p) {
          const float x = v[images * 18 + c * 6 + p];
          EXPECT_EQ(pixels[p * 3 + c], uint8_t(std::clamp(std::round(x), 0.0f, 255.0f)));
        }
      ++images;
    }
  }
  EXPECT_EQ(images, 2u);
}

TEST_F(TensorBoardTest, OnlyRankZeroWrites) {
  TensorBoardProgressWriter writer({.log_dir = dir_.string(), .rank = 1});
  writer.update_training(4, 1.0, 1.0);
  writer.write_training_summary();
  writer.write_value("x", 1.0, 1);
  writer.close();
  EXPECT_EQ(writer.file_name(), "");
  EXPECT_FALSE(fs::exists(dir_));
  EXPECT_THROW(writer.write_value("x", 1.0, 2), StateError);
}

TEST_F(TensorBoardTest, TwoWritersInOneFolderKeepTheirFiles) {
  TensorBoardProgressWriter first({.log_dir = dir_.string()});
  TensorBoardProgressWriter second({.log_dir = dir_.string()});
  first.write_value("a", 1.0, 1);
  second.write_value("b", 2.0, 1);
  first.close();
  second.close();
  EXPECT_NE(first.file_name(), second.file_name());
  EXPECT_EQ(scalars(read_events(first.file_name())), (std::vector<Scalar>{{"a", 1, 1.0f}}));
  EXPECT_EQ(scalars(read_events(second.file_name())), (std::vector<Scalar>{{"b", 1, 2.0f}}));
}

TEST_F(TensorBoardTest, UncreatableLogFolderIsAnIOErrorNamingIt) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "not a folder";
  const std::string log_dir = (dir_ / "file" / "logs").string();
  try {
    TensorBoardProgressWriter writer({.log_dir = log_dir});
    FAIL() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + log_dir + "'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
