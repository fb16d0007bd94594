// Checkpoint save and restore of a model with 100 million float32 parameters trained with
// Adam (two state tensors per parameter), timed next to plain sequential I/O of the same
// number of bytes in the same run (write + fsync, then read), with the peak memory each
// step adds above the trained model. The four steps alternate for several repeats, and the
// best and median of each are compared: a virtual machine's disk and memory vary by 2x from
// one run to the next.
//
//   bench_checkpoint [--parameters N] [--folder PATH] [--repeats R (4)]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
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

// Writes a new file beside path and renames it over path, as the checkpoint does: on this VM's
// thin virtual disk, rewriting blocks a file already had is 3x faster than writing fresh ones,
// which the checkpoint's new file always gets.
void plain_write(const std::string& path, const std::vector<char>& bytes) {
  const std::string fresh = path + ".new";
  int fd = ::open(fresh.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw IOError("cannot create " + fresh);
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + off, std::min<size_t>(bytes.size() - off, 8 << 20));
    if (n <= 0) throw IOError("write to " + path + " failed");
    off += size_t(n);
  }
  ::fsync(fd);
  ::close(fd);
  std::filesystem::rename(fresh, path);
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
  size_t n = 100'000'000, repeats = 4;
  std::string folder = std::filesystem::temp_directory_path() / "loom_bench_checkpoint";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--parameters") n = std::stoul(argv[i + 1]);
    if (std::string(argv[i]) == "--folder") folder = argv[i + 1];
    if (std::string(argv[i]) == "--repeats") repeats = std::max<size_t>(1, std::stoul(argv[i + 1]));
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

  const std::string ckp = folder + "/bench.ckp", plain = folder + "/plain.bin";
  std::vector<double> save_s, write_s, restore_s, read_s;
  double save_extra_mib = 0, restore_extra_mib = 0;
  size_t bytes = 0;
  std::vector<char> buffer;
  for (size_t r = 0; r < repeats; ++r) {
    // Whichever writes first in a repeat is slower here (by up to 3x), so the two take turns.
    auto save = [&] {
      const double base_mib = rss_mib();  // the model, and the plain I/O buffer
      reset_peak_rss();
      const auto t = std::chrono::steady_clock::now();
      trainer.save_checkpoint(ckp);
      save_s.push_back(seconds_since(t));
      save_extra_mib = std::max(save_extra_mib, peak_rss_mib() - base_mib);
      bytes = std::filesystem::file_size(ckp);
    };
    auto write = [&] {
      buffer.resize(bytes, 1);
      const auto t = std::chrono::steady_clock::now();
      plain_write(plain, buffer);
      write_s.push_back(seconds_since(t));
    };
    if (r == 0 || r % 2 == 1) {  // the first save gives the file's size
      save();
      write();
    } else {
      write();
      save();
    }

    drop_page_cache_of(ckp);
    drop_page_cache_of(plain);
    const double base_mib = rss_mib();
    reset_peak_rss();
    auto t = std::chrono::steady_clock::now();
    trainer.restore_from_checkpoint(ckp);
    restore_s.push_back(seconds_since(t));
    restore_extra_mib = std::max(restore_extra_mib, peak_rss_mib() - base_mib);
    t = std::chrono::steady_clock::now();
    plain_read(plain, buffer);
    read_s.push_back(seconds_since(t));
    std::printf("repeat %zu: save %.3f s, write %.3f s, restore %.3f s, read %.3f s\n", r + 1,
                save_s.back(), write_s.back(), restore_s.back(), read_s.back());
  }
  auto best = [](std::vector<double> v) { return *std::min_element(v.begin(), v.end()); };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };

  const double param_mib = double(n) * 4 / (1 << 20);
  std::printf("checkpoint of %zu float32 parameters + Adam state: %.1f MiB file, %zu repeats\n", n,
              double(bytes) / (1 << 20), repeats);
  std::printf("%-8s %9s %9s %12s %12s %8s %8s %22s\n", "step", "Loom best", "median", "plain best",
              "median", "best", "median", "extra peak MiB (x params)");
  auto row = [&](const char* name, const std::vector<double>& loom,
                 const std::vector<double>& plain_io, double extra) {
    std::printf("%-8s %9.3f %9.3f %12.3f %12.3f %7.2fx %7.2fx %14.0f (%.2fx)\n", name, best(loom),
                median(loom), best(plain_io), median(plain_io), best(loom) / best(plain_io),
                median(loom) / median(plain_io), extra, extra / param_mib);
  };
  row("save", save_s, write_s, save_extra_mib);
  row("restore", restore_s, read_s, restore_extra_mib);
  std::printf("ratios: Loom's time over plain I/O's (best over best, median over median)\n");
  std::filesystem::remove(ckp);
  std::filesystem::remove(plain);
  return 0;
}
