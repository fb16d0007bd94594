// Checkpoint save and restore of a model with 100 million float32 parameters trained with
// Adam (two state tensors per parameter), timed next to plain sequential I/O of the same
// number of bytes in the same run (write + fsync, then read), with the peak memory each
// step adds above the trained model.
//
//   bench_checkpoint [--parameters N] [--folder PATH]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loom/loom.h"

using namespace loom;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Peak resident memory (VmHWM) in MiB, and its reset to the current resident size.
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}
double rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

void plain_write(const std::string& path, const std::vector<char>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw IOError("cannot create " + path);
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + off, std::min<size_t>(bytes.size() - off, 8 << 20));
    if (n <= 0) throw IOError("write to " + path + " failed");
    off += size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
}

void plain_read(const std::string& path, std::vector<char>& bytes) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw IOError("cannot open " + path);
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = ::read(fd, bytes.data() + off, std::min<size_t>(bytes.size() - off, 8 << 20));
    if (n <= 0) throw IOError("read of " + path + " failed");
    off += size_t(n);
  }
  ::close(fd);
}

void drop_page_cache_of(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 100'000'000;
  std::string folder = std::filesystem::temp_directory_path() / "loom_bench_checkpoint";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--parameters") n = std::stoul(argv[i + 1]);
    if (std::string(argv[i]) == "--folder") folder = argv[i + 1];
  }
  std::filesystem::create_directories(folder);
  const size_t rows = 10'000, cols = n / rows;

  Variable x = input_variable({rows});
  Parameter W = parameter(NDShape{rows, cols}, glorot_uniform(), DataType::Float32, "W");
  Variable z = times(x, W);
  Variable loss = reduce_sum(z, Axis::all_static_axes());
  auto learner =
      adam(std::vector<Parameter>{W}, learning_parameter_schedule(0.001), momentum_schedule(0.9));
  Trainer trainer(z, loss, {learner});
  std::vector<float> ones(rows, 1.0f);
  trainer.train_minibatch({{x, Value::create_batch({rows}, ones)}});
  const double model_mib = rss_mib();

  const std::string ckp = folder + "/bench.ckp", plain = folder + "/plain.bin";
  reset_peak_rss();
  auto t = std::chrono::steady_clock::now();
  trainer.save_checkpoint(ckp);
  const double save_s = seconds_since(t);
  const double save_extra_mib = peak_rss_mib() - model_mib;
  const size_t bytes = std::filesystem::file_size(ckp);

  drop_page_cache_of(ckp);
  reset_peak_rss();
  t = std::chrono::steady_clock::now();
  trainer.restore_from_checkpoint(ckp);
  const double restore_s = seconds_since(t);
  const double restore_extra_mib = peak_rss_mib() - model_mib;

  std::vector<char> buffer(bytes, 1);
  t = std::chrono::steady_clock::now();
  plain_write(plain, buffer);
  const double write_s = seconds_since(t);
  drop_page_cache_of(plain);
  t = std::chrono::steady_clock::now();
  plain_read(plain, buffer);
  const double read_s = seconds_since(t);

  const double param_mib = double(n) * 4 / (1 << 20);
  std::printf("checkpoint of %zu float32 parameters + Adam state: %.1f MiB file\n", n,
              double(bytes) / (1 << 20));
  std::printf("%-10s %10s %12s %8s %22s\n", "step", "Loom s", "plain I/O s", "ratio",
              "extra peak MiB (x params)");
  std::printf("%-10s %10.3f %12.3f %7.2fx %14.0f (%.2fx)\n", "save", save_s, write_s,
              save_s / write_s, save_extra_mib, save_extra_mib / param_mib);
  std::printf("%-10s %10.3f %12.3f %7.2fx %14.0f (%.2fx)\n", "restore", restore_s, read_s,
              restore_s / read_s, restore_extra_mib, restore_extra_mib / param_mib);
  std::filesystem::remove(ckp);
  std::filesystem::remove(plain);
  return 0;
}
