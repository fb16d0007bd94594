// Image reading speed: ImageDeserializer + MinibatchSource decode, crop (randomside, 0.875 of
// the shorter side, random flips), scale to 224 x 224 x 3 and pack minibatches of 64 from JPEG
// files, one randomized sweep per repeat, as images/s. The files are 320 x 240 color JPEGs
// (Fashion-MNIST items enlarged, tinted per class, with noise; quality 90) generated into a
// temporary folder, listed both in a CNTK map file and as an ImageFolder tree. Beside it in the
// same run: torchvision's ImageFolder with the same transforms (RandomCrop of 210, Resize to
// 224 x 224, RandomHorizontalFlip, ToTensor) under a DataLoader of batch 64, at each worker count
// in --workers, the best kept (image_reader_torch.py, /usr/bin/python3).
//
//   bench_image_reader [--images N (2000)] [--threads N (the cores)] [--repeats R (3)]
//                      [--workers a,b,... (0,1,2,4)] [--no-reference]
//   bench_image_reader --train EPOCHS
//
// --train is the long training run from images: all of Fashion-MNIST (60,000 training and
// 10,000 test items) written as PNG files, seed 002's convnet and recipe trained for EPOCHS
// epochs from them through ImageDeserializer + MinibatchSource (randomized, prefetching), and
// the same from the IDX files with the same chunks and seed. PNG keeps the pixels, so both runs
// must end with the same test error; each prints it and its samples/s.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <thread>

#include "examples/fashion_mnist.h"
#include "loom/loom.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

// Writes n JPEGs under root/class_<label>/ and root/map.txt; returns the map file.
std::string write_jpegs(const fs::path& root, size_t n) {
  auto images = examples::detail::read_idx(
      std::string(examples::kFashionMnistFolder) + "/t10k-images-idx3-ubyte.gz",
      std::string(examples::kFashionMnistFolder) + "/t10k-labels-idx1-ubyte.gz");
  std::ofstream map(root / "map.txt");
  cv::RNG rng(1);
  for (size_t i = 0; i < n; ++i) {
    const size_t item = i % images.labels.size(), label = images.labels[item];
    cv::Mat gray(28, 28, CV_32F, images.pixels.data() + item * 784), big, color;
    cv::resize(gray * 255, big, {320, 240}, 0, 0, cv::INTER_CUBIC);
    const cv::Scalar tint(0.4 + 0.06 * double(label), 1.0 - 0.05 * double(label), 0.7);
    cv::Mat channels[] = {big * tint[0], big * tint[1], big * tint[2]};
    cv::merge(channels, 3, color);
    cv::Mat noise(240, 320, CV_32FC3);
    rng.fill(noise, cv::RNG::NORMAL, 0, 12);
    cv::Mat noisy;
    cv::Mat(color + noise).convertTo(noisy, CV_8UC3);  // saturated to 0..255
    const fs::path folder = root / ("class_" + std::to_string(label));
    fs::create_directories(folder);
    const std::string name = std::to_string(i) + ".jpg";
    cv::imwrite((folder / name).string(), noisy, {cv::IMWRITE_JPEG_QUALITY, 90});
    map << (folder / name).string() << "\t" << label << "\n";
  }
  return (root / "map.txt").string();
}

// Images/s of one randomized sweep through the source, in minibatches of 64.
double loom_sweep(const std::string& map, size_t threads) {
  auto d = std::make_shared<ImageDeserializer>(
      map,
      StreamDefs{{"features",
                  {.field = "image",
                   .transforms = {transforms::crop(
                                      {.crop_type = CropType::randomside, .side_ratio = 0.875}),
                                  transforms::scale(224, 224, 3)}}},
                 {"labels", {.field = "label", .shape = 10}}},
      ImageOptions{.num_threads = threads});
  const auto start = std::chrono::steady_clock::now();
  MinibatchSource source(d, {.max_sweeps = 1});
  size_t images = 0;
  for (auto mb = source.next_minibatch(64); !mb.empty(); mb = source.next_minibatch(64))
    images += mb.at(source["features"]).number_of_samples;
  return double(images) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Writes the items as PNG files under folder and folder/map.txt; returns the map file.
std::string write_pngs(const fs::path& folder, const examples::detail::Images& images) {
  fs::create_directories(folder);
  std::ofstream map(folder / "map.txt");
  for (size_t i = 0; i < images.labels.size(); ++i) {
    cv::Mat gray(28, 28, CV_32F, const_cast<float*>(images.pixels.data() + i * 784)), bytes;
    gray.convertTo(bytes, CV_8U, 255.0);  // the IDX file's bytes again
    const std::string name = (folder / (std::to_string(i) + ".png")).string();
    if (!cv::imwrite(name, bytes)) throw IOError("cannot write " + name);
    map << name << "\t" << images.labels[i] << "\n";
  }
  return (folder / "map.txt").string();
}

// Trains seed 002's convnet for `epochs` from the training source and returns its test error
// on the test source; prints the training samples/s.
double train_convnet(const char* name, MinibatchSource train, MinibatchSource test, size_t epochs) {
  set_fixed_random_seed(1);
  Function model = examples::create_model_mn();
  Variable x = input_variable({1, 28, 28}, {.name = "features"});
  Variable y = input_variable({10}, {.is_sparse = true, .name = "labels"});
  // The seed's model reads [28, 28] images in [0, 1]; the streams are [1, 28, 28] bytes.
  Function criterion =
      examples::criterion_mn(model, reshape(x, {28, 28}) * constant(1.0f / 255), y);
  const auto recipe = examples::mnist_recipe(60000);
  const auto start = std::chrono::steady_clock::now();
  criterion.train(
      train,
      {.minibatch_size = recipe.minibatch_sizes,
       .parameter_learners = {momentum_sgd(model.parameters(), recipe.lrs, recipe.momentums)},
       .max_epochs = epochs});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double error = criterion.test(test, {.minibatch_size = 1000}).metric;
  std::printf("%-4s %zu epochs: %.0f samples/s, test error %.2f %%\n", name, epochs,
              double(epochs * 60000) / seconds, 100 * error);
  return error;
}

int train_from_images(size_t epochs) {
  const std::string folder = examples::kFashionMnistFolder;
  const fs::path root =
      fs::temp_directory_path() / ("loom_bench_train_images_" + std::to_string(getpid()));
  const auto start = std::chrono::steady_clock::now();
  const std::string train_map = write_pngs(
      root / "train", examples::detail::read_idx(folder + "/train-images-idx3-ubyte.gz",
                                                 folder + "/train-labels-idx1-ubyte.gz"));
  const std::string test_map =
      write_pngs(root / "test", examples::detail::read_idx(folder + "/t10k-images-idx3-ubyte.gz",
                                                           folder + "/t10k-labels-idx1-ubyte.gz"));
  std::printf("70,000 PNG files written in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const ChunkingOptions chunks{.sequences_per_chunk = 5000};
  auto pngs = [&](const std::string& map, bool training) {
    return MinibatchSource(
        std::make_shared<ImageDeserializer>(
            map,
            StreamDefs{
                {"features", {.field = "image", .transforms = {transforms::scale(28, 28, 1)}}},
                {"labels", {.field = "label", .shape = 10}}},
            ImageOptions{.chunking = chunks}),
        {.randomize = training, .max_sweeps = training ? INFINITELY_REPEAT : 1});
  };
  auto idx = [&](const std::string& set, bool training) {
    return MinibatchSource(std::make_shared<IDXDeserializer>(
                               IDXStreamDefs{{"features",
                                              {.path = folder + "/" + set + "-images-idx3-ubyte.gz",
                                               .shape = {1, 28, 28}}},
                                             {"labels",
                                              {.path = folder + "/" + set + "-labels-idx1-ubyte.gz",
                                               .num_classes = 10,
                                               .is_sparse = true}}},
                               chunks),
                           {.randomize = training, .max_sweeps = training ? INFINITELY_REPEAT : 1});
  };
  const double from_idx = train_convnet("IDX", idx("train", true), idx("t10k", false), epochs);
  const double from_png =
      train_convnet("PNG", pngs(train_map, true), pngs(test_map, false), epochs);
  fs::remove_all(root);
  std::printf("the two runs %s\n", from_png == from_idx ? "end alike" : "DIFFER");
  return from_png == from_idx ? 0 : 1;
}

std::string torch_script(const char* argv0) {
  const fs::path beside = fs::path(__FILE__).parent_path() / "image_reader_torch.py";
  if (fs::exists(beside)) return beside.string();
  const fs::path from_binary =
      fs::absolute(argv0).parent_path() / ".." / ".." / "bench" / "image_reader_torch.py";
  return fs::exists(from_binary) ? from_binary.string() : "";
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 2000, repeats = 3;
  size_t threads = std::max<unsigned>(1, std::thread::hardware_concurrency());
  std::string workers = "0,1,2,4";
  bool reference = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--images" && has_value) {
      n = std::stoul(argv[++i]);
    } else if (a == "--threads" && has_value) {
      threads = std::stoul(argv[++i]);
    } else if (a == "--repeats" && has_value) {
      repeats = std::max<size_t>(1, std::stoul(argv[++i]));
    } else if (a == "--workers" && has_value) {
      workers = argv[++i];
    } else if (a == "--no-reference") {
      reference = false;
    } else if (a == "--train" && has_value) {
      return train_from_images(std::stoul(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--images N] [--threads N] [--repeats R] [--workers a,b,...] "
                   "[--no-reference]\n       %s --train EPOCHS\n",
                   argv[0], argv[0]);
      return 2;
    }
  }
  const fs::path root =
      fs::temp_directory_path() / ("loom_bench_images_" + std::to_string(getpid()));
  fs::create_directories(root);
  const std::string map = write_jpegs(root, n);
  std::printf(
      "%zu JPEGs of 320 x 240 -> randomside crop 0.875 + flip -> 224 x 224 x 3, "
      "minibatches of 64; %u hardware threads\n",
      n, std::thread::hardware_concurrency());
  double loom = 0;
  for (size_t r = 0; r < repeats; ++r) loom = std::max(loom, loom_sweep(map, threads));
  std::printf("Loom ImageDeserializer (%zu reader threads): %.0f images/s (best of %zu sweeps)\n",
              threads, loom, repeats);
  const std::string script = torch_script(argv[0]);
  if (!reference || script.empty()) {
    if (reference) std::printf("(image_reader_torch.py not found: no reference)\n");
    fs::remove_all(root);
    return 0;
  }
  const std::string command = "/usr/bin/python3 " + script + " " + root.string() + " " +
                              std::to_string(repeats) + " " + workers + " 2>&1";
  double torch = -1;
  FILE* p = popen(command.c_str(), "r");
  char line[4096];
  while (p != nullptr && std::fgets(line, sizeof line, p)) {
    std::printf("    torchvision: %s", line);
    std::sscanf(line, "images_per_second=%lf", &torch);
  }
  if (p != nullptr) pclose(p);
  if (torch > 0)
    std::printf("ratio Loom / torchvision: %.2fx (target 2x: %s)\n", loom / torch,
                loom >= 2 * torch ? "PASS" : "BELOW");
  fs::remove_all(root);
  return 0;
}
