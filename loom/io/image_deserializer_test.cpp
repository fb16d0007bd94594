#include "loom/io/image_deserializer.h"
#include "loom/core/error_test_util.h"
#include "loom/core/trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <string>
#include <vector>

#include "loom/io/ctf_deserializer.h"
#include "loom/io/image_test_util.h"
#include "loom/io/minibatch_source.h"
#include "loom/loom.h"

namespace loom {
namespace {

using namespace testing_io;

StreamDefs gray(std::vector<ImageTransform> before = {}, std::vector<ImageTransform> after = {},
                size_t size = 28) {
  before.push_back(transforms::scale(size, size, 1));
  before.insert(before.end(), after.begin(), after.end());
  return {{"features", {.field = "image", .transforms = before}},
          {"labels", {.field = "label", .shape = 10}}};
}

// Every image value of a deserializer, chunk after chunk.
std::vector<float> all_images(Deserializer& d, size_t sweep = 0, uint64_t seed = 5) {
  std::vector<float> out;
  for (size_t k = 0; k < d.chunk_infos().size(); ++k) {
    auto c = d.load_chunk_in_sweep(k, sweep, seed);
    out.insert(out.end(), c->streams[0].values_f32.begin(), c->streams[0].values_f32.end());
  }
  return out;
}

class ImageDeserializerTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kFashionMnist + "train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    data_ = read_fashion_mnist(40, true);  // the test set: a smaller file to read
  }
  FashionMnist data_;
};

TEST_F(ImageDeserializerTest, PngImagesAreTheirPixelsAndLabelsAreSparseOneHot) {
  ImageDeserializer d(write_images("png", data_, ".png"), gray(),
                      {.chunking = {.sequences_per_chunk = 16}});
  ASSERT_EQ(d.stream_infos().size(), 2u);
  EXPECT_EQ(d.stream_infos()[0].sample_shape, (NDShape{1, 28, 28}));
  EXPECT_FALSE(d.stream_infos()[0].is_sparse());
  EXPECT_TRUE(d.stream_infos()[1].is_sparse());
  EXPECT_EQ(d.stream_infos()[1].sample_shape, NDShape{10});
  EXPECT_EQ(d.chunk_infos().size(), 3u);
  EXPECT_EQ(d.number_of_sequences(), 40u);
  std::vector<float> want(data_.pixels.begin(), data_.pixels.end());
  EXPECT_EQ(all_images(d), want);
  auto c = d.load_chunk(1);
  const StreamChunkData& labels = c->streams[1];
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(c->sequences[i].key, 16 + i);  // the map file line
    EXPECT_EQ(labels.indices[labels.nnz_begin[i]], int32_t(data_.labels[16 + i]));
    EXPECT_EQ(labels.nnz_begin[i + 1] - labels.nnz_begin[i], 1u);
    EXPECT_EQ(labels.values_f32[i], 1.0f);
  }
}

TEST_F(ImageDeserializerTest, JpegImagesDecodeCloseToTheirPixels) {
  ImageDeserializer d(write_images("jpg", data_, ".jpg"), gray());
  std::vector<float> got = all_images(d);
  ASSERT_EQ(got.size(), data_.pixels.size());
  double error = 0;
  for (size_t i = 0; i < got.size(); ++i) error += std::abs(got[i] - float(data_.pixels[i]));
  EXPECT_LT(error / double(got.size()), 3.0);  // JPEG at quality 95
}

TEST_F(ImageDeserializerTest, ColorImagesAreChannelsFirstInBgrOrder) {
  const std::string dir = test_dir() + "/color";
  std::filesystem::create_directories(dir);
  cv::Mat image(4, 6, CV_8UC3, cv::Scalar(10, 20, 30));  // OpenCV's order: B, G, R
  image.at<cv::Vec3b>(1, 2) = {200, 100, 50};
  ASSERT_TRUE(cv::imwrite(dir + "/a.png", image));
  std::ofstream(dir + "/map.txt") << dir + "/a.png\t3\n";  // an absolute path
  ImageDeserializer d(dir + "/map.txt",
                      {{"labels", {.field = "label", .shape = 5, .dtype = DataType::Float64}},
                       {"features",
                        {.field = "image",
                         .transforms = {transforms::scale(6, 4, 3)},
                         .dtype = DataType::Float64}}});
  EXPECT_EQ(d.stream_infos()[1].sample_shape, (NDShape{3, 4, 6}));
  auto c = d.load_chunk(0);
  const std::vector<double>& v = c->streams[1].values_f64;
  ASSERT_EQ(v.size(), 72u);
  EXPECT_EQ(v[0], 10);            // B plane
  EXPECT_EQ(v[24], 20);           // G plane
  EXPECT_EQ(v[48], 30);           // R plane
  EXPECT_EQ(v[0 * 24 + 8], 200);  // pixel (1, 2)
  EXPECT_EQ(v[1 * 24 + 8], 100);
  EXPECT_EQ(v[2 * 24 + 8], 50);
  EXPECT_EQ(c->streams[0].indices, (std::vector<int32_t>{3}));
  EXPECT_EQ(c->streams[0].values_f64, (std::vector<double>{1}));
}

TEST_F(ImageDeserializerTest, CropScaleMeanAndColorTransforms) {
  const std::string map = write_images("transforms", data_, ".png");
  // A center crop of half the side: pixels 7..20 of each row and column.
  ImageDeserializer center(map, gray({transforms::crop({.side_ratio = 0.5})}, {}, 14));
  std::vector<float> got = all_images(center);
  for (size_t i = 0; i < 40; ++i)
    for (size_t r = 0; r < 14; ++r)
      for (size_t c = 0; c < 14; ++c)
        ASSERT_EQ(got[i * 196 + r * 14 + c], data_.pixels[i * 784 + (r + 7) * 28 + c + 7]);
  // Pad mode: a 28 x 28 image fit into 28 x 56 keeps its size, with 14 columns of padding each
  // side; crop mode cuts the middle of a 56 x 56 enlargement.
  StreamDefs pad{{"features",
                  {.field = "image",
                   .transforms = {transforms::scale(
                       56, 28, 1, {.scale_mode = ScaleMode::pad, .pad_value = 0})}}},
                 {"labels", {.field = "label", .shape = 10}}};
  auto padded = ImageDeserializer(map, pad).load_chunk(0);
  EXPECT_EQ(padded->streams[0].values_f32[5 * 56 + 3], 0.0f);
  EXPECT_EQ(padded->streams[0].values_f32[5 * 56 + 14 + 9], float(data_.pixels[5 * 28 + 9]));
  pad[0].second.transforms = {transforms::scale(56, 28, 1, {.scale_mode = ScaleMode::crop})};
  EXPECT_EQ(ImageDeserializer(map, pad).load_chunk(0)->streams[0].values_f32.size(), 40u * 56 * 28);
  // Mean: an OpenCV XML mean image of 1 x 28 x 28 values 100 is subtracted.
  const std::string mean_file = test_dir() + "/mean.xml";
  {
    cv::FileStorage fs(mean_file, cv::FileStorage::WRITE);
    fs << "Channel" << 1 << "Row" << 28 << "Col" << 28;
    fs << "MeanImg" << cv::Mat(1, 784, CV_32F, cv::Scalar(100));
  }
  ImageDeserializer mean(map, gray({}, {transforms::mean(mean_file)}));
  got = all_images(mean);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], float(data_.pixels[i]) - 100);
  // Color: values stay in [0, 255] and change.
  ImageDeserializer color(
      map, gray({}, {transforms::color({.brightness_radius = 0.5, .contrast_radius = 0.5})}));
  got = all_images(color);
  size_t changed = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_GE(got[i], 0.0f);
    ASSERT_LE(got[i], 255.0f);
    changed += got[i] != float(data_.pixels[i]);
  }
  EXPECT_GT(changed, got.size() / 2);
  // A mean file of another size is refused when the deserializer is made.
  std::string msg =
      message_of([&] { ImageDeserializer(map, gray({}, {transforms::mean(mean_file)}, 20)); });
  EXPECT_NE(msg.find("mean.xml"), std::string::npos) << msg;
}

// Random crops, flips and colors are a function of (seed, sweep, map line): the same at any
// thread count and chunking, different from sweep to sweep.
TEST_F(ImageDeserializerTest, RandomTransformsDependOnSeedSweepAndLineOnly) {
  const std::string map = write_images("random", data_, ".png");
  StreamDefs defs =
      gray({transforms::crop({.crop_type = CropType::randomside,
                              .side_ratio = {0.5, 0.9},
                              .aspect_ratio = {0.75, 1.0},
                              .jitter_type = JitterType::uniratio})},
           {transforms::color({.brightness_radius = 0.2, .contrast_radius = 0.2})}, 20);
  ImageDeserializer one(map, defs, {.num_threads = 1});
  ImageDeserializer many(map, defs, {.num_threads = 3, .chunking = {.sequences_per_chunk = 7}});
  EXPECT_EQ(all_images(one, 0), all_images(many, 0));
  EXPECT_EQ(all_images(one, 3), all_images(many, 3));
  EXPECT_EQ(all_images(one, 3), all_images(one, 3));
  EXPECT_NE(all_images(one, 0), all_images(one, 1));
  EXPECT_NE(all_images(one, 0, 5), all_images(one, 0, 6));
}

TEST_F(ImageDeserializerTest, BadMapLinesAndImagesNameTheFileAndLine) {
  const std::string map = write_images("bad", data_, ".png");
  const std::string dir = std::filesystem::path(map).parent_path().string();
  std::ofstream(dir + "/broken.png") << "not an image";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"0.png 3\n", "a line without an image path and a tab"},
      {"0.png\tthree\n", "the label 'three' (not a class index)"},
      {"0.png\t10\n", "the label 10 (outside [0, 10)"},
      {"missing.png\t1\n", "missing.png' (no such file)"},
  };
  for (const auto& [line, what] : cases) {
    std::ofstream(dir + "/one_bad.txt") << "1.png\t1\n2.png\t2\n" << line << "3.png\t3\n";
    std::string msg = message_of([&] { ImageDeserializer(dir + "/one_bad.txt", gray()); });
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_NE(msg.find("in line 3 of the map file (" + dir + "/one_bad.txt)"), std::string::npos)
        << msg;
  }
  // An image that does not decode fails when its chunk loads, naming it and its line.
  std::ofstream(dir + "/undecodable.txt") << "1.png\t1\nbroken.png\t2\n";
  ImageDeserializer undecodable(dir + "/undecodable.txt", gray());
  std::string msg = message_of([&] { undecodable.load_chunk(0); });
  EXPECT_NE(msg.find("broken.png' in line 2 of the map file"), std::string::npos) << msg;
  // Tolerated: each bad line or image skipped with a warning and counted.
  std::ofstream all(dir + "/all_bad.txt");
  all << "1.png\t1\n";
  for (const auto& c : cases) all << c.first;
  all << "broken.png\t2\n2.png\t2\n";
  all.close();
  testing::internal::CaptureStderr();
  ImageDeserializer tolerant(dir + "/all_bad.txt", gray(), {.max_errors = 5});
  std::string printed = testing::internal::GetCapturedStderr();
  EXPECT_EQ(tolerant.number_of_skipped(), 5u);
  EXPECT_EQ(tolerant.number_of_sequences(), 2u);
  EXPECT_NE(printed.find("WARNING: ImageDeserializer: the image '" + dir +
                         "/broken.png' (cannot be read or decoded) in line 6 of the map file"),
            std::string::npos)
      << printed;
  EXPECT_EQ(tolerant.sequence_infos(0)[1].key, 6u);
  // Quiet at trace level Error (CNTK's set_trace_level), skipping the same.
  const TraceLevel level = exchange_trace_level(TraceLevel::Error);
  testing::internal::CaptureStderr();
  ImageDeserializer quiet(dir + "/all_bad.txt", gray(), {.max_errors = 5});
  printed = testing::internal::GetCapturedStderr();
  exchange_trace_level(level);
  EXPECT_EQ(quiet.number_of_skipped(), 5u);
  EXPECT_EQ(printed, "");
  msg = message_of([&] { ImageDeserializer(dir + "/all_bad.txt", gray(), {.max_errors = 4}); });
  EXPECT_NE(msg.find("line 6"), std::string::npos) << msg;
  msg = message_of([&] { ImageDeserializer(dir + "/none.txt", gray()); });
  EXPECT_NE(msg.find("none.txt"), std::string::npos) << msg;
}

// Images too large for memory are refused from their headers before OpenCV allocates their
// pixels, and OpenCV's own errors (its size limits) are DataErrors too, naming the image, the
// map file and the line; under max_errors both are skipped like undecodable images.
TEST(ImageDeserializerLimits, OversizedImagesAreDataErrorsNamingTheMapLine) {
  const std::string dir = test_dir() + "/oversized";
  std::filesystem::create_directories(dir);
  write_bytes(dir + "/small.png", encoded_image(".png"));
  // A small JPEG declaring 30000 x 30000 pixels (2.7 GB decoded), and a BMP 2^21 pixels wide:
  // under kMaxImagePixels but over OpenCV's widest image (2^20 pixels), which OpenCV raises.
  write_bytes(dir + "/huge.jpg", declaring_size(".jpg", 30000, 30000));
  write_bytes(dir + "/wide.bmp", declaring_size(".bmp", 1u << 21, 1));
  const StreamDefs defs{
      {"features", {.field = "image", .transforms = {transforms::scale(8, 8, 3)}}},
      {"labels", {.field = "label", .shape = 2}}};
  const std::string map = dir + "/map.txt";
  for (const auto& [image, what] : std::vector<std::pair<std::string, std::string>>{
           {"huge.jpg",
            "declares 30000 x 30000 pixels, more than the 134217728 pixels an image may have"},
           {"wide.bmp", "failed in OpenCV: "}}) {
    const std::string path = dir + "/" + image;
    std::ofstream(map) << "small.png\t0\n" << image << "\t1\n" << image << "\t1\n";
    // Read when its chunk loads.
    ImageDeserializer lazy(map, defs);
    std::string msg = message_of<DataError>([&] { lazy.load_chunk(0); });
    EXPECT_NE(msg.find("ImageDeserializer: the image '" + path + "' in line 2 of the map file (" +
                       map + ") " + what),
              std::string::npos)
        << msg;
    // Decoded by the constructor under max_errors: skipped, then a DataError past the limit.
    testing::internal::CaptureStderr();
    ImageDeserializer tolerant(map, defs, {.max_errors = 2});
    const std::string printed = testing::internal::GetCapturedStderr();
    EXPECT_EQ(tolerant.number_of_skipped(), 2u);
    EXPECT_EQ(tolerant.number_of_sequences(), 1u);
    EXPECT_NE(printed.find("WARNING: ImageDeserializer: the image '" + path + "' (" + what),
              std::string::npos)
        << printed;
    msg = message_of<DataError>([&] { ImageDeserializer(map, defs, {.max_errors = 1}); });
    EXPECT_NE(msg.find("ImageDeserializer: the image '" + path + "' (" + what), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("in line 3 of the map file (" + map + ")"), std::string::npos) << msg;
  }
}

// A NUL byte would cut the path short where the system reads it (another file): the line is a
// DataError naming the map file and line, or skipped under max_errors.
TEST(ImageDeserializerLimits, PathsWithNulBytesAreDataErrors) {
  const std::string dir = test_dir() + "/nul";
  std::filesystem::create_directories(dir);
  write_bytes(dir + "/small.png", encoded_image(".png"));
  const std::string map = dir + "/map.txt";
  std::ofstream(map) << "small.png\t0\n" << std::string("small.png\0.txt\t1\n", 17);
  const StreamDefs defs{
      {"features", {.field = "image", .transforms = {transforms::scale(8, 8, 3)}}},
      {"labels", {.field = "label", .shape = 2}}};
  const std::string msg = message_of<DataError>([&] { ImageDeserializer(map, defs); });
  EXPECT_NE(msg.find("the image path has a NUL byte (character 10) in line 2 of the map file (" +
                     map + ")"),
            std::string::npos)
      << msg;
  testing::internal::CaptureStderr();
  ImageDeserializer tolerant(map, defs, {.max_errors = 1});
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(tolerant.number_of_skipped(), 1u);
  EXPECT_EQ(tolerant.number_of_sequences(), 1u);
}

TEST_F(ImageDeserializerTest, BadStreamsAndTransformsAreArgumentErrors) {
  const std::string map = write_images("args", data_, ".png");
  const StreamDef label{.field = "label", .shape = 10};
  auto image = [&](std::vector<ImageTransform> t) {
    return StreamDefs{{"features", {.field = "image", .transforms = std::move(t)}},
                      {"labels", label}};
  };
  const std::vector<StreamDefs> bad{
      image({}),
      image({transforms::scale(28, 28, 1), transforms::scale(28, 28, 1)}),
      image({transforms::scale(28, 28, 1), transforms::crop()}),
      image({transforms::mean("m.xml"), transforms::scale(28, 28, 1)}),
      image({transforms::scale(28, 28, 2)}),
      image({transforms::crop({.crop_type = CropType::randomside}), transforms::scale(9, 9, 1)}),
      image({transforms::crop({.side_ratio = 1.5}), transforms::scale(9, 9, 1)}),
      image({transforms::crop({.side_ratio = 0.5, .area_ratio = 0.5}), transforms::scale(9, 9, 1)}),
      image({transforms::scale(28, 28, 1), transforms::color({.contrast_radius = 2})}),
      StreamDefs{{"features", {.field = "pixels"}}, {"labels", label}},
      StreamDefs{{"labels", label}},
      StreamDefs{{"features", {.field = "image", .transforms = {transforms::scale(28, 28, 1)}}},
                 {"labels", {.field = "label"}}},
  };
  for (const StreamDefs& defs : bad) EXPECT_THROW(ImageDeserializer(map, defs), ArgumentError);
}

// An image stream and a CTF stream of the same sequences in one source: randomized, split
// between two workers, and restored from a checkpoint, each image stays with its CTF line.
TEST_F(ImageDeserializerTest, ComposesWithCtfPartitionsAndCheckpoints) {
  const std::string map = write_images("compose", data_, ".png");
  std::string ctf;
  for (size_t i = 0; i < 40; ++i) ctf += "|index " + std::to_string(i) + "\n";
  auto make = [&] {
    return MinibatchSource(
        {std::make_shared<ImageDeserializer>(map, gray(),
                                             ImageOptions{.chunking = {.sequences_per_chunk = 6}}),
         std::make_shared<CTFDeserializer>(write_temp("index.ctf", ctf),
                                           StreamDefs{{"index", StreamDef{.shape = 1}}})},
        {.randomization_seed = 3, .randomization_window_in_chunks = 2});
  };
  auto check = [&](const Minibatch<StreamInformation>& mb, const MinibatchSource& s) {
    std::vector<float> x = mb.at(s["features"]).data.data().to_vector<float>();
    std::vector<float> index = mb.at(s["index"]).data.data().to_vector<float>();
    std::vector<float> y = mb.at(s["labels"]).data.data().to_vector<float>();
    for (size_t b = 0; b < index.size(); ++b) {
      const size_t item = size_t(index[b]);
      for (size_t p = 0; p < 784; ++p)
        EXPECT_EQ(x[b * 784 + p], float(data_.pixels[item * 784 + p]));
      EXPECT_EQ(y[b * 10 + data_.labels[item]], 1.0f);
    }
    return index;
  };
  std::multiset<float> seen;  // one sweep of 40 images in minibatches of 10, by two workers
  MinibatchSource w0 = make(), w1 = make();
  for (int step = 0; step < 4; ++step) {
    for (float i : check(w0.next_minibatch(10, 2, 0), w0)) seen.insert(i);
    for (float i : check(w1.next_minibatch(10, 2, 1), w1)) seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_EQ(std::set<float>(seen.begin(), seen.end()).size(), 40u);
  MinibatchSource a = make();
  // Checkpoint after three minibatches; a new source restored there continues identically.
  for (int step = 0; step < 3; ++step) check(a.next_minibatch(7), a);
  Dictionary state = a.get_checkpoint_state();
  std::vector<std::vector<float>> continued;
  for (int step = 0; step < 5; ++step) continued.push_back(check(a.next_minibatch(7), a));
  MinibatchSource b = make();
  b.restore_from_checkpoint(state);
  for (int step = 0; step < 5; ++step)
    EXPECT_EQ(check(b.next_minibatch(7), b), continued[size_t(step)]);
}

// Through a source, random transforms are drawn anew in every sweep from the source's
// randomization_seed, and a restored source draws them again alike.
TEST_F(ImageDeserializerTest, SourcesDrawTransformsPerSweepFromTheirSeed) {
  const std::string map = write_images("sweeps", data_, ".png");
  StreamDefs defs = gray({transforms::crop({.crop_type = CropType::randomside,
                                            .side_ratio = {0.5, 0.9},
                                            .jitter_type = JitterType::uniratio})},
                         {}, 20);
  auto make = [&](uint64_t seed) {
    return MinibatchSource(std::make_shared<ImageDeserializer>(
                               map, defs, ImageOptions{.chunking = {.sequences_per_chunk = 8}}),
                           {.randomize = false, .randomization_seed = seed});
  };
  auto sweep_of = [](MinibatchSource& s) {  // 40 images: one sweep
    return s.next_minibatch(40).at(s["features"]).data.data().to_vector<float>();
  };
  MinibatchSource a = make(3);
  const std::vector<float> first = sweep_of(a);
  const Dictionary state = a.get_checkpoint_state();
  const std::vector<float> second = sweep_of(a);
  ImageDeserializer direct(map, defs, {.chunking = {.sequences_per_chunk = 8}});
  EXPECT_EQ(first, all_images(direct, 0, 3));
  EXPECT_EQ(second, all_images(direct, 1, 3));
  EXPECT_NE(first, second);
  EXPECT_LE(a.chunk_stats().resident, 5u);  // not every sweep's chunks
  MinibatchSource other_seed = make(4);
  EXPECT_NE(sweep_of(other_seed), first);
  MinibatchSource restored = make(3);
  restored.restore_from_checkpoint(state);
  EXPECT_EQ(sweep_of(restored), second);
}

// Images whose transforms draw nothing at random are decoded once for all sweeps of a
// one-window source; with a random crop every sweep decodes them again.
TEST_F(ImageDeserializerTest, DeterministicImagesStayFromSweepToSweep) {
  const std::string map = write_images("kept", data_, ".png");
  for (bool random : {false, true}) {
    SCOPED_TRACE(random ? "random crop" : "center crop");
    const StreamDefs defs =
        gray({transforms::crop({.crop_type = random ? CropType::randomside : CropType::center,
                                .side_ratio = 0.75})},
             {}, 20);
    auto image = std::make_shared<ImageDeserializer>(
        map, defs, ImageOptions{.chunking = {.sequences_per_chunk = 8}});
    EXPECT_EQ(image->same_in_every_sweep(), !random);
    MinibatchSource source(image, {.max_sweeps = 3, .randomization_seed = 2});
    std::vector<float> seen;
    for (auto mb = source.next_minibatch(16); !mb.empty(); mb = source.next_minibatch(16))
      for (float v : mb.at(source["features"]).data.data().to_vector<float>()) seen.push_back(v);
    EXPECT_EQ(seen.size(), 3u * 40 * 20 * 20);
    EXPECT_EQ(source.chunk_stats().loads, random ? 15u : 5u);  // 5 chunks of 8
  }
  EXPECT_FALSE(ImageDeserializer(map, gray({}, {transforms::color({.contrast_radius = 0.2})}))
                   .same_in_every_sweep());
}

// Test error of a small CNN trained for one sweep over a training source and evaluated on a
// test source (each with "features" [1, 28, 28] of pixels 0..255 and "labels").
double trained_test_error(MinibatchSource train, MinibatchSource test) {
  set_fixed_random_seed(1);
  Variable x = input_variable({1, 28, 28}), y = input_variable(10, {.is_sparse = true});
  Function model =
      Sequential({Convolution2D({5, 5}, 8, {.activation = relu}),
                  MaxPooling({2, 2}, {.strides = {2, 2}}), Dense(10, {.activation = None})});
  Variable z = model(x * constant(1.0 / 255));
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  Trainer trainer(
      z, criterion,
      {momentum_sgd(model.parameters(), learning_parameter_schedule(0.1), momentum_schedule(0.9))});
  for (auto mb = train.next_minibatch(25, {{x, train["features"]}, {y, train["labels"]}});
       !mb.empty(); mb = train.next_minibatch(25, {{x, train["features"]}, {y, train["labels"]}}))
    trainer.train_minibatch(mb);
  double errors = 0, samples = 0;
  for (auto mb = test.next_minibatch(100, {{x, test["features"]}, {y, test["labels"]}});
       !mb.empty(); mb = test.next_minibatch(100, {{x, test["features"]}, {y, test["labels"]}})) {
    const double n = double(mb.at(y).number_of_samples);
    errors += trainer.test_minibatch(mb) * n;
    samples += n;
  }
  return errors / samples;
}

// A CNN trained from PNG files learns exactly what it learns from the IDX files (same pixels,
// same order); from JPEG files (lossy) it comes within two points.
TEST_F(ImageDeserializerTest, CnnTrainsFromImagesAsFromIdxFiles) {
  const size_t train_items = 1500, test_items = 300;
  FashionMnist train = read_fashion_mnist(train_items), test = read_fashion_mnist(test_items, true);
  auto images = [&](const std::string& map) {
    return MinibatchSource(std::make_shared<ImageDeserializer>(map, gray()),
                           {.randomize = false, .max_sweeps = 1});
  };
  // The first `items` of the file, in order.
  auto idx = [&](bool test_set, size_t items) {
    const std::string prefix = kFashionMnist + (test_set ? "t10k" : "train");
    return MinibatchSource(
        std::make_shared<IDXDeserializer>(IDXStreamDefs{
            {"features", {.path = prefix + "-images-idx3-ubyte.gz", .shape = {1, 28, 28}}},
            {"labels",
             {.path = prefix + "-labels-idx1-ubyte.gz", .num_classes = 10, .is_sparse = true}}}),
        {.randomize = false, .max_samples = items});
  };
  const double from_idx = trained_test_error(idx(false, train_items), idx(true, test_items));
  const double from_png = trained_test_error(images(write_images("train_png", train, ".png")),
                                             images(write_images("test_png", test, ".png")));
  const double from_jpeg = trained_test_error(images(write_images("train_jpg", train, ".jpg")),
                                              images(write_images("test_jpg", test, ".jpg")));
  EXPECT_LT(from_idx, 0.4);  // it learns (chance: 0.9)
  EXPECT_EQ(from_png, from_idx);
  EXPECT_NEAR(from_jpeg, from_idx, 0.02);
  std::printf("test error: IDX %.4f, PNG %.4f, JPEG %.4f\n", from_idx, from_png, from_jpeg);
}

// Seed 002's create_image_reader, in C++.
MinibatchSource create_image_reader(const std::string& map_file, bool is_training) {
  const size_t image_width = 32, image_height = 32, num_channels = 3, num_classes = 10;
  std::vector<ImageTransform> transforms;
  if (is_training)  // train uses data augmentation (translation only)
    transforms.push_back(transforms::crop({.crop_type = CropType::randomside, .side_ratio = 0.8}));
  transforms.push_back(transforms::scale(image_width, image_height, num_channels,
                                         {.interpolations = Interpolation::linear}));
  return MinibatchSource(
      std::make_shared<ImageDeserializer>(
          map_file, StreamDefs{{"features", {.field = "image", .transforms = transforms}},
                               {"labels", {.field = "label", .shape = num_classes}}}),
      {.randomize = is_training, .max_sweeps = is_training ? INFINITELY_REPEAT : 1});
}

TEST_F(ImageDeserializerTest, Seed002CreateImageReader) {
  const std::string map = write_images("seed002", data_, ".jpg");
  MinibatchSource train = create_image_reader(map, true);
  auto mb = train.next_minibatch(16);
  EXPECT_EQ(mb.at(train["features"]).data.data().shape(), (NDShape{16, 1, 3, 32, 32}));
  EXPECT_EQ(mb.at(train["labels"]).data.data().shape(), (NDShape{16, 1, 10}));
  EXPECT_TRUE(mb.at(train["labels"]).data.data().is_sparse());
  MinibatchSource test = create_image_reader(map, false);
  size_t samples = 0;
  for (auto m = test.next_minibatch(16); !m.empty(); m = test.next_minibatch(16))
    samples += m.at(test["labels"]).number_of_samples;
  EXPECT_EQ(samples, 40u);
}

// The transforms on synthetic images whose pixels name their place (image_test_util.h): blue is
// the column, green the row.

// A color stream through `crops`, scaled to width x height by nearest neighbours (a crop no
// larger than that keeps its first and last columns and rows in the corners), then `after`.
StreamDefs color_stream(std::vector<ImageTransform> crops, size_t width, size_t height,
                        std::vector<ImageTransform> after = {}) {
  crops.push_back(transforms::scale(width, height, 3, {.interpolations = Interpolation::nearest}));
  crops.insert(crops.end(), after.begin(), after.end());
  return {{"features", {.field = "image", .transforms = crops}},
          {"labels", {.field = "label", .shape = 2}}};
}

// The source columns and rows at the corners of sample i of [3, height, width] images: the
// crop's first and last column (reversed when flipped) and row.
struct Corners {
  float first_column, last_column, first_row, last_row;
  float width() const { return std::abs(last_column - first_column) + 1; }
  float height() const { return last_row - first_row + 1; }
  bool flipped() const { return last_column < first_column; }
};
Corners corners(const std::vector<float>& images, size_t i, size_t width, size_t height) {
  const float* p = images.data() + i * 3 * width * height;
  const float* green = p + width * height;
  return {p[0], p[width - 1], green[0], green[(height - 1) * width]};
}

// Sample i is the crop of a position image at (x, y), flipped or not, pixel by pixel.
void expect_crop(const std::vector<float>& images, size_t i, size_t width, size_t height, int x,
                 int y, bool flipped) {
  const float* p = images.data() + i * 3 * width * height;
  for (size_t r = 0; r < height; ++r)
    for (size_t c = 0; c < width; ++c) {
      const size_t column = flipped ? width - 1 - c : c;
      ASSERT_EQ(p[r * width + c], float(x + int(column)))
          << "sample " << i << " at " << r << ", " << c;
      ASSERT_EQ(p[width * height + r * width + c], float(y + int(r)))
          << "sample " << i << " at " << r << ", " << c;
    }
}

TEST(ImageTransformTest, CropSizeCenterCutsTheMiddlePixels) {
  const std::string map = write_repeated_image("crop_size", position_image(40, 30), 3);
  // 20 x 10 of 40 x 30: columns 10..29, rows 10..19, unflipped.
  std::vector<float> got = all_images(*std::make_shared<ImageDeserializer>(
      map, color_stream({transforms::crop({.crop_size = {20, 10}})}, 20, 10)));
  for (size_t i = 0; i < 3; ++i) expect_crop(got, i, 20, 10, 10, 10, false);
  // One number: a square, 16 x 16 at (12, 7).
  got = all_images(*std::make_shared<ImageDeserializer>(
      map, color_stream({transforms::crop({.crop_size = 16})}, 16, 16)));
  expect_crop(got, 0, 16, 16, 12, 7, false);
  // Larger than the image: each side at most the image's, as CNTK (50 x 20 -> 40 x 20).
  got = all_images(*std::make_shared<ImageDeserializer>(
      map, color_stream({transforms::crop({.crop_size = {50, 20}})}, 40, 20)));
  expect_crop(got, 0, 40, 20, 0, 5, false);
}

TEST(ImageTransformTest, RandomCropSizeStaysInsideAndReproducesAfterRestore) {
  const size_t n = 60;
  const std::string map = write_repeated_image("random_crop_size", position_image(40, 30), n);
  for (CropType type : {CropType::randomside, CropType::randomarea}) {
    const StreamDefs defs =
        color_stream({transforms::crop({.crop_type = type, .crop_size = {12, 8}})}, 12, 8);
    ImageDeserializer d(map, defs);
    const std::vector<float> got = all_images(d, 0, 7);
    std::set<std::pair<float, float>> places;
    size_t flipped = 0;
    for (size_t i = 0; i < n; ++i) {
      const Corners c = corners(got, i, 12, 8);
      const int x = int(std::min(c.first_column, c.last_column)), y = int(c.first_row);
      ASSERT_GE(x, 0);
      ASSERT_LE(x + 11, 39);
      ASSERT_GE(y, 0);
      ASSERT_LE(y + 7, 29);
      expect_crop(got, i, 12, 8, x, y, c.flipped());
      places.insert({float(x), float(y)});
      flipped += c.flipped();
    }
    EXPECT_GT(places.size(), n / 3);  // 29 x 23 places
    EXPECT_GT(flipped, n / 4);        // flipped with probability 1/2
    EXPECT_LT(flipped, 3 * n / 4);
    // The same seed and sweep: the same crops, also from a new deserializer and other chunks.
    EXPECT_EQ(all_images(d, 0, 7), got);
    ImageDeserializer chunked(map, defs,
                              {.num_threads = 2, .chunking = {.sequences_per_chunk = 7}});
    EXPECT_EQ(all_images(chunked, 0, 7), got);
    EXPECT_NE(all_images(d, 1, 7), got);
    // Through a source: a restored source draws the next sweep's crops again alike.
    auto make = [&] {
      return MinibatchSource(std::make_shared<ImageDeserializer>(map, defs),
                             {.randomize = false, .randomization_seed = 7});
    };
    auto sweep_of = [&](MinibatchSource& s) {
      return s.next_minibatch(n).at(s["features"]).data.data().to_vector<float>();
    };
    MinibatchSource a = make();
    EXPECT_EQ(sweep_of(a), got);
    const Dictionary state = a.get_checkpoint_state();
    const std::vector<float> second = sweep_of(a);
    MinibatchSource restored = make();
    restored.restore_from_checkpoint(state);
    EXPECT_EQ(sweep_of(restored), second);
  }
}

TEST(ImageTransformTest, Multiview10GivesTheTenViewsInCntkOrder) {
  const std::string map = write_repeated_image("multiview", position_image(40, 30), 2);
  const StreamDefs defs = color_stream(
      {transforms::crop({.crop_type = CropType::multiview10, .crop_size = {20, 10}})}, 20, 10);
  ImageDeserializer d(map, defs, {.chunking = {.sequences_per_chunk = 7}});
  // Each image is 10 sequences, all keyed by its map line: CNTK's copies 0-9.
  EXPECT_EQ(d.number_of_sequences(), 20u);
  std::vector<uint64_t> keys;
  for (size_t k = 0; k < d.chunk_infos().size(); ++k)
    for (const SequenceInfo& s : d.sequence_infos(k)) keys.push_back(s.key);
  EXPECT_EQ(keys,
            std::vector<uint64_t>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  // Top-left, top-right, bottom-left, bottom-right, centre; then the same flipped.
  const int x[] = {0, 20, 0, 20, 10}, y[] = {0, 0, 20, 20, 10};
  const std::vector<float> got = all_images(d, 3, 9);
  for (size_t i = 0; i < 20; ++i) expect_crop(got, i, 20, 10, x[i % 5], y[i % 5], i % 10 >= 5);
  EXPECT_EQ(all_images(d, 4, 1), got);  // no random draws
  // Without crop_size the views are the ratio's crop: 15 x 15 of 40 x 30.
  ImageDeserializer ratio(
      map, color_stream({transforms::crop({.crop_type = CropType::multiview10, .side_ratio = 0.5})},
                        15, 15));
  const std::vector<float> views = all_images(ratio);
  const int rx[] = {0, 25, 0, 25, 12}, ry[] = {0, 0, 15, 15, 7};
  for (size_t i = 0; i < 10; ++i) expect_crop(views, i, 15, 15, rx[i % 5], ry[i % 5], i >= 5);
}

// unilength draws the crop's side uniformly, uniarea its area, from either ratio: on a
// 250 x 250 image, side_ratio 0.2..1 and area_ratio 0.04..1 both give sides 50..250.
TEST(ImageTransformTest, UnilengthAndUniareaDrawSidesOrAreasUniformly) {
  const size_t n = 300;
  const std::string map = write_repeated_image("jitter", position_image(250, 250), n);
  struct Case {
    JitterType jitter;
    bool side;  // side_ratio, else area_ratio
  };
  for (const Case& k : {Case{JitterType::unilength, true}, Case{JitterType::unilength, false},
                        Case{JitterType::uniarea, true}, Case{JitterType::uniarea, false}}) {
    transforms::CropOptions crop{.jitter_type = k.jitter};
    (k.side ? crop.side_ratio : crop.area_ratio) =
        k.side ? RatioRange(0.2, 1.0) : RatioRange(0.04, 1.0);
    ImageDeserializer d(map, color_stream({transforms::crop(crop)}, 250, 250));
    const std::vector<float> got = all_images(d);
    // The uniform quantity: the side (50..250) or the area (2500..62500).
    const bool by_area = k.jitter == JitterType::uniarea;
    const double lo = by_area ? 2500 : 50, hi = by_area ? 62500 : 250;
    double sum = 0;
    size_t below_middle = 0;
    for (size_t i = 0; i < n; ++i) {
      const Corners c = corners(got, i, 250, 250);
      ASSERT_EQ(c.width(), c.height());
      ASSERT_GE(c.width(), 50);
      ASSERT_LE(c.width(), 250);
      const double q = by_area ? double(c.width()) * c.width() : c.width();
      sum += q;
      below_middle += q < (lo + hi) / 2;
    }
    SCOPED_TRACE(testing::Message() << "jitter " << int(k.jitter) << (k.side ? " side" : " area"));
    // Uniform: mean (lo + hi) / 2 within 4 standard errors (uniratio of the other kind is 7-11
    // away), half of the draws below it.
    const double standard_error = (hi - lo) / std::sqrt(12.0 * n);
    EXPECT_NEAR(sum / n, (lo + hi) / 2, 4 * standard_error);
    EXPECT_NEAR(double(below_middle) / n, 0.5, 0.1);
  }
}

// Intensity: with EigVal (1, 0, 0) and the first eigenvector (1, 2, 3), each image draws one
// a ~ N(0, stdev) and adds a to red, 2a to green and 3a to blue.
TEST(ImageTransformTest, IntensityAddsEigenvectorsTimesNormalDraws) {
  const size_t n = 200;
  const std::string map =
      write_repeated_image("intensity", cv::Mat(10, 20, CV_8UC3, cv::Scalar(100, 120, 140)), n);
  const std::string file = test_dir() + "/intensity/eigen.xml";
  {
    cv::FileStorage fs(file, cv::FileStorage::WRITE);
    fs << "EigVal" << cv::Mat(cv::Matx13f(1, 0, 0));
    fs << "EigVec" << cv::Mat(cv::Matx33f(1, 0, 0, 2, 0, 0, 3, 0, 0));
  }
  ImageDeserializer d(map, color_stream({}, 20, 10, {transforms::intensity(4, file)}));
  const std::vector<float> got = all_images(d);
  double sum = 0, squares = 0;
  for (size_t i = 0; i < n; ++i) {
    const float* p = got.data() + i * 600;
    const double a = p[400] - 140.0;  // red
    for (size_t k = 0; k < 200; ++k) {
      ASSERT_NEAR(p[k], 100 + 3 * a, 1e-3);
      ASSERT_NEAR(p[200 + k], 120 + 2 * a, 1e-3);
      ASSERT_NEAR(p[400 + k], 140 + a, 1e-3);
    }
    sum += a;
    squares += a * a;
  }
  EXPECT_NEAR(sum / n, 0, 4 * 4 / std::sqrt(double(n)));
  EXPECT_NEAR(std::sqrt(squares / n), 4, 0.8);
  // A gray image gets the red shift; stdev 0 changes nothing.
  StreamDefs gray_defs = color_stream({}, 20, 10, {transforms::intensity(4, file)});
  gray_defs[0].second.transforms[0] = transforms::scale(20, 10, 1);
  const std::vector<float> gray_got =
      all_images(*std::make_shared<ImageDeserializer>(map, gray_defs));
  gray_defs[0].second.transforms.pop_back();
  const std::vector<float> plain = all_images(*std::make_shared<ImageDeserializer>(map, gray_defs));
  for (size_t i = 0; i < n; ++i)
    ASSERT_NEAR(gray_got[i * 200 + 7] - plain[i * 200 + 7], got[i * 600 + 400] - 140.0f, 1e-3);
  EXPECT_EQ(all_images(*std::make_shared<ImageDeserializer>(
                map, color_stream({}, 20, 10, {transforms::intensity(0, file)}))),
            all_images(*std::make_shared<ImageDeserializer>(map, color_stream({}, 20, 10))));
}

TEST(ImageTransformTest, BadCropAndIntensityOptionsRaise) {
  const std::string map = write_repeated_image("bad_options", position_image(40, 30), 1);
  const std::string dir = test_dir() + "/bad_options";
  auto error = [&](std::vector<ImageTransform> crops, std::vector<ImageTransform> after = {}) {
    return message_of([&] { ImageDeserializer(map, color_stream(crops, 8, 8, after)); });
  };
  const std::vector<std::pair<std::vector<ImageTransform>, std::string>> crops{
      {{transforms::crop({.crop_size = {10, 0}})},
       "crop_size needs a positive width and height, got 10 x 0"},
      {{transforms::crop({.crop_size = 10, .side_ratio = 0.5})}, "crop_size (10 x 10) fixes"},
      {{transforms::crop({.crop_size = 10, .area_ratio = 0.5})}, "crop_size (10 x 10) fixes"},
      {{transforms::crop({.crop_size = 10, .aspect_ratio = 0.5})}, "crop_size (10 x 10) fixes"},
      {{transforms::crop({.crop_size = 10, .jitter_type = JitterType::uniratio})},
       "crop_size (10 x 10) fixes"},
      {{transforms::crop({.crop_type = CropType::multiview10,
                          .side_ratio = {0.5, 0.8},
                          .jitter_type = JitterType::unilength})},
       "multiview10 (the same 10 views of every image, for evaluation) takes no jitter_type"},
      {{transforms::crop({.crop_type = CropType::randomside, .area_ratio = 0.5})},
       "randomside needs side_ratio or crop_size"},
      {{transforms::crop({.crop_type = CropType::randomarea})},
       "randomarea needs area_ratio or crop_size"},
      {{transforms::crop({.side_ratio = {0.5, 1.2}, .jitter_type = JitterType::uniarea})},
       "side_ratio must lie in (0, 1]"},
      {{transforms::crop({.area_ratio = {0, 0.5}, .jitter_type = JitterType::unilength})},
       "area_ratio must lie in (0, 1]"},
  };
  for (const auto& [transforms, what] : crops) {
    const std::string msg = error(transforms);
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_THROW(ImageDeserializer(map, color_stream(transforms, 8, 8)), ArgumentError);
  }
  // Intensity: a negative stdev, a missing file, a file that is not OpenCV's, wrong sizes.
  std::string msg = error({}, {transforms::intensity(-1, dir + "/none.xml")});
  EXPECT_NE(msg.find("intensity_stdev must be a number >= 0, got -1"), std::string::npos) << msg;
  EXPECT_THROW(
      ImageDeserializer(map, color_stream({}, 8, 8, {transforms::intensity(1, dir + "/none.xml")})),
      IOError);
  msg = error({}, {transforms::intensity(1, dir + "/none.xml")});
  EXPECT_NE(msg.find("cannot open the intensity file (" + dir + "/none.xml)"), std::string::npos)
      << msg;
  std::ofstream(dir + "/text.xml") << "EigVal 1 2 3\n";
  msg = error({}, {transforms::intensity(1, dir + "/text.xml")});
  EXPECT_NE(msg.find("text.xml"), std::string::npos) << msg;
  {
    cv::FileStorage fs(dir + "/short.xml", cv::FileStorage::WRITE);
    fs << "EigVal" << cv::Mat(cv::Matx12f(1, 2));
    fs << "EigVec" << cv::Mat(cv::Matx33f::eye());
  }
  EXPECT_THROW(ImageDeserializer(
                   map, color_stream({}, 8, 8, {transforms::intensity(1, dir + "/short.xml")})),
               DataError);
  msg = error({}, {transforms::intensity(1, dir + "/short.xml")});
  EXPECT_NE(msg.find("short.xml) holds an EigVal of 1 x 2 x 1 and an EigVec of 3 x 3 x 1"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace loom
