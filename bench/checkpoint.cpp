// Checkpoint save and restore of a model with 100 million float32 parameters trained with
// Adam (two state tensors per parameter), timed next to plain sequential I/O of the same
// number of bytes in the same run (write + fsync, then read), with the peak memory each
// step adds above the trained model. The four steps alternate for several repeats, and the
// best and median of each are compared: a virtual machine's disk and memory vary by 2x from
// one run to the next.
//
//   bench_checkpoint [--parameters N] [--folder PATH] [--repeats R (4)]
#include <fcntl.h>
#include <sys/resource.h>
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

// CPU seconds (user + system, all threads) this process has used: unlike wall time, it does
// not include waiting for the disk, so it shows what the code itself costs.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Wall and CPU seconds of f.
struct Timing {
  double wall, cpu;
};
template <class F>
Timing timed(F&& f) {
  const double cpu = cpu_seconds();
  const auto t = std::chrono::steady_clock::now();
  f();
  return {seconds_since(t), cpu_seconds() - cpu};
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
  std::vector<Timing> save_t, write_t, restore_t, read_t;
  double save_extra_mib = 0, restore_extra_mib = 0;
  size_t bytes = 0;
  std::vector<char> buffer;
  for (size_t r = 0; r < repeats; ++r) {
    // Whichever writes first in a repeat is slower here (by up to 3x), so the two take turns.
    auto save = [&] {
      const double base_mib = rss_mib();  // the model, and the plain I/O buffer
      reset_peak_rss();
      save_t.push_back(timed([&] { trainer.save_checkpoint(ckp); }));
      save_extra_mib = std::max(save_extra_mib, peak_rss_mib() - base_mib);
      bytes = std::filesystem::file_size(ckp);
    };
    auto write = [&] {
      buffer.resize(bytes, 1);
      write_t.push_back(timed([&] { plain_write(plain, buffer); }));
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
    restore_t.push_back(timed([&] { trainer.restore_from_checkpoint(ckp); }));
    restore_extra_mib = std::max(restore_extra_mib, peak_rss_mib() - base_mib);
    read_t.push_back(timed([&] { plain_read(plain, buffer); }));
    std::printf("repeat %zu: save %.3f s, write %.3f s, restore %.3f s, read %.3f s\n", r + 1,
                save_t.back().wall, write_t.back().wall, restore_t.back().wall, read_t.back().wall);
  }
  auto best = [](const std::vector<Timing>& v, double Timing::*field) {
    double b = v[0].*field;
    for (const Timing& t : v) b = std::min(b, t.*field);
    return b;
  };
  auto median = [](const std::vector<Timing>& v, double Timing::*field) {
    std::vector<double> x;
    for (const Timing& t : v) x.push_back(t.*field);
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };

  const double param_mib = double(n) * 4 / (1 << 20);
  std::printf("checkpoint of %zu float32 parameters + Adam state: %.1f MiB file, %zu repeats\n", n,
              double(bytes) / (1 << 20), repeats);
  std::printf("%-8s %9s %9s %12s %12s %8s %8s %9s %9s %22s\n", "step", "Loom best", "median",
              "plain best", "median", "best", "median", "Loom cpu", "plain cpu",
              "extra peak MiB (x params)");
  auto row = [&](const char* name, const std::vector<Timing>& loom,
                 const std::vector<Timing>& plain_io, double extra) {
    const double lb = best(loom, &Timing::wall), pb = best(plain_io, &Timing::wall),
                 lm = median(loom, &Timing::wall), pm = median(plain_io, &Timing::wall);
    std::printf("%-8s %9.3f %9.3f %12.3f %12.3f %7.2fx %7.2fx %9.3f %9.3f %14.0f (%.2fx)\n", name,
                lb, lm, pb, pm, lb / pb, lm / pm, median(loom, &Timing::cpu),
                median(plain_io, &Timing::cpu), extra, extra / param_mib);
  };
  row("save", save_t, write_t, save_extra_mib);
  row("restore", restore_t, read_t, restore_extra_mib);
  std::printf(
      "ratios: Loom's wall time over plain I/O's (best over best, median over median); cpu: "
      "median CPU seconds (user + system, all threads)\n");
  std::filesystem::remove(ckp);
  std::filesystem::remove(plain);
  return 0;
}
