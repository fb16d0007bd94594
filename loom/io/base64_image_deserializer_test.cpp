// Base64ImageDeserializer (image_deserializer.h): the images of a map file, base64-encoded,
// read as an ImageDeserializer reads the same image files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <string>
#include <vector>

#include "loom/core/error_test_util.h"
#include "loom/io/image_deserializer.h"
#include "loom/io/image_test_util.h"
#include "loom/io/minibatch_source.h"

namespace loom {
namespace {

using namespace testing_io;

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = 0;
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    for (size_t k = 0; k < 3; ++k) group = (group << 8) | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? alphabet[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The base64 map file of the images an ImageDeserializer map file lists ("path<TAB>label"),
// in its order, with a key column ("image<i>") or without; `tail` ends each line.
std::string base64_map(const std::string& map, const std::string& name, bool keys,
                       const std::string& tail = "\n") {
  std::ifstream in(map);
  const std::string folder = std::filesystem::path(map).parent_path().string();
  std::string out;
  std::string line;
  for (size_t i = 0; std::getline(in, line); ++i) {
    const size_t tab = line.find('\t');
    if (keys) out += "image" + std::to_string(i) + "\t";
    out +=
        line.substr(tab + 1) + "\t" + base64(file_bytes(folder + "/" + line.substr(0, tab))) + tail;
  }
  return write_temp(name, out);
}

StreamDefs streams(std::vector<ImageTransform> transforms, size_t classes = 10) {
  return {{"features", {.field = "image", .transforms = std::move(transforms)}},
          {"labels", {.field = "label", .shape = classes}}};
}

// Every chunk of both deserializers holds the same data in sweeps 0 and 1.
void expect_same_chunks(Deserializer& files, Deserializer& base64) {
  ASSERT_EQ(files.chunk_infos().size(), base64.chunk_infos().size());
  for (size_t sweep = 0; sweep < 2; ++sweep)
    for (size_t k = 0; k < files.chunk_infos().size(); ++k) {
      auto a = files.load_chunk_in_sweep(k, sweep, 9);
      auto b = base64.load_chunk_in_sweep(k, sweep, 9);
      ASSERT_EQ(a->sequences.size(), b->sequences.size());
      for (size_t i = 0; i < a->sequences.size(); ++i) {
        EXPECT_EQ(a->sequences[i].key, b->sequences[i].key);
        EXPECT_EQ(a->sequences[i].num_samples, b->sequences[i].num_samples);
      }
      for (size_t s = 0; s < 2; ++s) {
        EXPECT_EQ(a->streams[s].values_f32, b->streams[s].values_f32) << "chunk " << k;
        EXPECT_EQ(a->streams[s].indices, b->streams[s].indices) << "chunk " << k;
      }
    }
}

class Base64ImageDeserializerTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kFashionMnist + "t10k-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    data_ = read_fashion_mnist(40, true);
  }
  FashionMnist data_;
};

// Through sources, randomized, in two sweeps of random crops and colors, and restored from a
// checkpoint: the same minibatches as the image files, with and without the key column.
TEST_F(Base64ImageDeserializerTest, SameMinibatchesAsTheImageFiles) {
  const std::string map = write_images("b64_png", data_, ".png");
  const std::vector<ImageTransform> transforms = {
      transforms::crop({.crop_type = CropType::randomside,
                        .side_ratio = {0.6, 0.9},
                        .jitter_type = JitterType::uniratio}),
      transforms::scale(20, 20, 1),
      transforms::color({.brightness_radius = 0.2, .contrast_radius = 0.3})};
  const ImageOptions options{.chunking = {.sequences_per_chunk = 6}};
  for (bool keys : {false, true}) {
    SCOPED_TRACE(keys ? "with keys" : "without keys");
    const std::string b64 = base64_map(map, keys ? "keys.b64" : "plain.b64", keys);
    auto files = std::make_shared<ImageDeserializer>(map, streams(transforms), options);
    auto encoded = std::make_shared<Base64ImageDeserializer>(b64, streams(transforms), options);
    EXPECT_EQ(encoded->stream_infos(), files->stream_infos());
    EXPECT_FALSE(encoded->same_in_every_sweep());
    expect_same_chunks(*files, *encoded);

    const MinibatchSourceConfig config{.randomization_seed = 3,
                                       .randomization_window_in_chunks = 2};
    MinibatchSource a(files, config), b(encoded, config);
    Dictionary state;
    std::vector<std::vector<float>> after;      // the files' minibatches after the checkpoint
    for (size_t step = 0; step < 12; ++step) {  // 12 x 7 images: two sweeps and a bit
      if (step == 5) state = b.get_checkpoint_state();
      auto x = a.next_minibatch(7), y = b.next_minibatch(7);
      const std::vector<float> images = x.at(a["features"]).data.data().to_vector<float>();
      EXPECT_EQ(images, y.at(b["features"]).data.data().to_vector<float>()) << "step " << step;
      EXPECT_EQ(x.at(a["labels"]).data.data().to_dense().to_vector<float>(),
                y.at(b["labels"]).data.data().to_dense().to_vector<float>());
      EXPECT_EQ(x.at(a["features"]).sweep_end, y.at(b["features"]).sweep_end);
      EXPECT_EQ(images.size(), 7u * 400);
      if (step >= 5) after.push_back(images);
    }
    MinibatchSource restored(encoded, config);
    restored.restore_from_checkpoint(state);
    for (size_t step = 5; step < 12; ++step)
      EXPECT_EQ(restored.next_minibatch(7).at(restored["features"]).data.data().to_vector<float>(),
                after[step - 5])
          << "restored, step " << step;
  }
}

// JPEG color images, multiview10 crops and a mean file, a CRLF map file with spaces after the
// images: the same images as from the files.
TEST_F(Base64ImageDeserializerTest, ColorJpegMultiviewAndMeanAsTheImageFiles) {
  const std::string folder = test_dir() + "/b64_color";
  std::filesystem::create_directories(folder);
  std::ofstream map_out(folder + "/map.txt");
  for (int i = 0; i < 5; ++i) {
    cv::Mat image = position_image(30 + 4 * i, 26 + 2 * i);
    image += cv::Scalar(10 * i, 0, 0);
    ASSERT_TRUE(cv::imwrite(folder + "/" + std::to_string(i) + ".jpg", image));
    map_out << i << ".jpg\t" << i % 3 << "\n";
  }
  map_out.close();
  {
    cv::FileStorage fs(folder + "/mean.xml", cv::FileStorage::WRITE);
    fs << "Channel" << 3 << "Row" << 16 << "Col" << 16;
    fs << "MeanImg" << cv::Mat(1, 16 * 16 * 3, CV_32F, cv::Scalar(40));
  }
  const std::vector<ImageTransform> transforms = {
      transforms::crop({.crop_type = CropType::multiview10, .side_ratio = 0.8}),
      transforms::scale(16, 16, 3), transforms::mean(folder + "/mean.xml")};
  const std::string b64 = base64_map(folder + "/map.txt", "color.b64", true, " \t\r\n");
  ImageDeserializer files(folder + "/map.txt", streams(transforms, 3));
  Base64ImageDeserializer encoded(b64, streams(transforms, 3));
  EXPECT_EQ(encoded.number_of_sequences(), 50u);  // 10 views of each image
  expect_same_chunks(files, encoded);
  EXPECT_EQ(encoded.stream_infos()[0].sample_shape, (NDShape{3, 16, 16}));
}

TEST_F(Base64ImageDeserializerTest, BadLinesNameTheFileAndLine) {
  const std::string map = write_images("b64_bad", data_, ".png");
  const std::string folder = std::filesystem::path(map).parent_path().string();
  const std::string good = base64(file_bytes(folder + "/0.png"));
  const StreamDefs defs = streams({transforms::scale(28, 28, 1)});
  auto file = [&](const std::string& bad_line) {
    return write_temp("bad.b64", "0\t" + good + "\n1\t" + good + "\n" + bad_line + "\n3\t" + good);
  };
  auto error = [&](const std::string& bad_line) {
    const std::string path = file(bad_line);
    std::string message = message_of<DataError>([&] {
      Base64ImageDeserializer d(path, defs);
      for (size_t k = 0; k < d.chunk_infos().size(); ++k) d.load_chunk(k);
    });
    EXPECT_NE(message.find("in line 3 of the map file (" + path + ")"), std::string::npos)
        << message;
    return message;
  };
  EXPECT_NE(error("2\t" + good.substr(0, 8) + "*" + good.substr(9))
                .find("the base64 image has '*' (character 9 of the image), which is not base64"),
            std::string::npos);
  EXPECT_NE(error("2\t" + good.substr(1)).find("not a multiple of 4"), std::string::npos);
  EXPECT_NE(error("2\t" + good.substr(0, 8) + "=" + good.substr(9)).find("which is not base64"),
            std::string::npos);
  EXPECT_NE(error("2\t").find("the image is empty"), std::string::npos);
  EXPECT_NE(error("2 " + good).find("a line without a label and a tab"), std::string::npos);
  EXPECT_NE(error("two\t" + good).find("the label 'two' (not a class index)"), std::string::npos);
  EXPECT_NE(error("10\t" + good).find("the label 10 (outside [0, 10)"), std::string::npos);
  // Valid base64 of bytes that are no image: found when the chunk loads.
  EXPECT_NE(error("2\t" + base64("not an image at all")).find("cannot be read or decoded"),
            std::string::npos);

  // Under max_errors the bad line is skipped with a WARNING; so is an undecodable image (the
  // constructor decodes every image then).
  Base64ImageDeserializer skipping(file("2\t" + good.substr(1)), defs, {.max_errors = 1});
  EXPECT_EQ(skipping.number_of_skipped(), 1u);
  EXPECT_EQ(skipping.number_of_sequences(), 3u);
  std::vector<uint64_t> keys;
  for (const SequenceInfo& s : skipping.sequence_infos(0)) keys.push_back(s.key);
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, 1, 3}));  // keys are map file lines
  Base64ImageDeserializer undecodable(file("2\t" + base64("no image")), defs, {.max_errors = 1});
  EXPECT_EQ(undecodable.number_of_skipped(), 1u);
  EXPECT_EQ(undecodable.number_of_sequences(), 3u);

  // Keys: the first line has three fields, so every line needs its key.
  const std::string keyed = write_temp("keyed.b64", "a\t0\t" + good + "\n1\t" + good + "\n");
  const std::string message =
      message_of<DataError>([&] { Base64ImageDeserializer d(keyed, defs); });
  EXPECT_NE(message.find("in line 2 of the map file"), std::string::npos) << message;
  EXPECT_NE(message.find("Base64ImageDeserializer: "), std::string::npos) << message;
}

TEST(Base64Decoding, DecodesEveryPaddingAndByte) {
  // A PNG with 0, 1 or 2 bytes after its end (which decoders ignore): encodings that end in
  // each of base64's paddings ("", "==", "="); decoded exactly, the pixels come back.
  cv::Mat image(3, 5, CV_8UC1);
  for (int i = 0; i < 15; ++i) image.data[i] = uint8_t(37 * i);
  std::vector<uint8_t> png;
  ASSERT_TRUE(cv::imencode(".png", image, png));
  std::set<size_t> paddings;
  for (size_t extra = 0; extra < 3; ++extra) {
    const std::string bytes = std::string(png.begin(), png.end()) + std::string(extra, '\xff');
    const std::string encoded = base64(bytes);
    paddings.insert(encoded.size() - encoded.find_last_not_of('=') - 1);
    const std::string path =
        write_temp("one" + std::to_string(extra) + ".b64", "0\t" + encoded + "\n");
    Base64ImageDeserializer d(path, streams({transforms::scale(5, 3, 1)}, 1));
    auto chunk = d.load_chunk(0);
    EXPECT_EQ(chunk->streams[0].values_f32, std::vector<float>(image.data, image.data + 15));
  }
  EXPECT_EQ(paddings, (std::set<size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace loom
