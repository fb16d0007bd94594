// CTF reading speed: CTFDeserializer parsing (one thread, then more) and MinibatchSource packing
// one randomized sweep, on a dense file (Fashion-MNIST pixels / 255 as float32 text, 784 values
// a line, plus a one-hot label) and a sparse one (sequences of word indices, a label on each
// sequence's first row), both generated into a temporary folder. Beside them in the same run:
// plain read() of the same bytes (from the page cache: the physical limit here) and numpy's
// loadtxt on the dense file (ctf_reader_numpy.py, /usr/bin/python3), the peer a Python user
// would reach for. Figures are the best of --repeats runs.
//
//   bench_ctf_reader [--lines N (dense, 20000)] [--rows N (sparse, 4000000)]
//                    [--threads a,b,... (1 and the cores)] [--repeats R (3)] [--no-reference]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/fashion_mnist.h"
#include "loom/loom.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

double seconds_of(const std::function<void()>& f) {
  const auto t = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double best_of(size_t repeats, const std::function<void()>& f) {
  double best = 1e300;
  for (size_t r = 0; r < repeats; ++r) best = std::min(best, seconds_of(f));
  return best;
}

void append_number(std::string& out, float v) {
  char buf[32];
  auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

// Fashion-MNIST's training images, each line "|features <784 values> |labels <10 one-hot>".
size_t write_dense(const std::string& path, size_t lines) {
  auto images = examples::detail::read_idx(
      std::string(examples::kFashionMnistFolder) + "/train-images-idx3-ubyte.gz",
      std::string(examples::kFashionMnistFolder) + "/train-labels-idx1-ubyte.gz");
  const size_t n = images.labels.size();
  std::string text;
  for (size_t i = 0; i < lines; ++i) {
    text += "|features";
    for (size_t p = 0; p < 784; ++p) {
      text += ' ';
      append_number(text, images.pixels[(i % n) * 784 + p]);
    }
    text += " |labels";
    for (size_t c = 0; c < 10; ++c) text += c == images.labels[i % n] ? " 1" : " 0";
    text += '\n';
  }
  std::ofstream(path, std::ios::binary) << text;
  return text.size();
}

// Sequences of 5 to 30 rows "id |words index:1", vocabulary 30000, the first row also
// "|label class:1" of 10 classes.
size_t write_sparse(const std::string& path, size_t rows) {
  RandomGenerator rng(7);
  std::string text;
  for (size_t id = 0, row = 0; row < rows; ++id) {
    const size_t length = 5 + size_t(rng.uniform() * 26);
    for (size_t t = 0; t < length && row < rows; ++t, ++row) {
      text +=
          std::to_string(id) + " |words " + std::to_string(size_t(rng.uniform() * 30000)) + ":1";
      if (t == 0) text += " |label " + std::to_string(size_t(rng.uniform() * 10)) + ":1";
      text += '\n';
    }
  }
  std::ofstream(path, std::ios::binary) << text;
  return text.size();
}

void plain_read(const std::string& path, std::vector<char>& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw IOError("cannot open " + path);
  for (size_t off = 0;;) {
    const ssize_t n = ::read(fd, buffer.data() + off, buffer.size() - off);
    if (n <= 0) break;
    off += size_t(n);
  }
  ::close(fd);
}

// Samples (sequences for the sparse file) in one randomized sweep, and its packing time.
struct Sweep {
  size_t samples = 0;
  double seconds = 0;
};
Sweep pack_sweep(const std::shared_ptr<Deserializer>& d, size_t minibatch) {
  Sweep s;
  s.seconds = seconds_of([&] {
    MinibatchSource source(d, {.max_sweeps = 1});
    for (;;) {
      auto mb = source.next_minibatch(minibatch);
      if (mb.empty()) break;
      s.samples += mb.begin()->second.number_of_sequences;
    }
  });
  return s;
}

std::string numpy_script(const char* argv0) {
  const fs::path beside = fs::path(__FILE__).parent_path() / "ctf_reader_numpy.py";
  if (fs::exists(beside)) return beside.string();
  const fs::path from_binary =
      fs::absolute(argv0).parent_path() / ".." / ".." / "bench" / "ctf_reader_numpy.py";
  return fs::exists(from_binary) ? from_binary.string() : "";
}

// loadtxt's best seconds, or a negative number when it could not run.
double run_numpy(const std::string& script, const std::string& path, size_t repeats) {
  const std::string command =
      "/usr/bin/python3 " + script + " " + path + " " + std::to_string(repeats) + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  double seconds = -1;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::printf("    numpy: %s", line);
    std::sscanf(line, "seconds=%lf", &seconds);
  }
  pclose(p);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  size_t lines = 20000, rows = 4000000, repeats = 3;
  std::vector<size_t> threads{1, std::max<size_t>(1, std::thread::hardware_concurrency())};
  bool reference = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--lines") {
      lines = std::stoul(value());
    } else if (a == "--rows") {
      rows = std::stoul(value());
    } else if (a == "--repeats") {
      repeats = std::max<size_t>(1, std::stoul(value()));
    } else if (a == "--threads") {
      threads.clear();
      std::stringstream list(value());
      for (std::string t; std::getline(list, t, ',');) threads.push_back(std::stoul(t));
    } else if (a == "--no-reference") {
      reference = false;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--lines N] [--rows N] [--threads a,b,...] [--repeats R] "
                   "[--no-reference]\n",
                   argv[0]);
      return 2;
    }
  }
  threads.erase(std::unique(threads.begin(), threads.end()), threads.end());

  const fs::path dir = fs::temp_directory_path() / ("loom_bench_ctf_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string dense_path = (dir / "dense.ctf").string();
  const std::string sparse_path = (dir / "sparse.ctf").string();
  struct File {
    const char* name;
    std::string path;
    size_t bytes;
    StreamDefs streams;
    size_t minibatch;
  };
  std::vector<File> files{
      {"dense",
       dense_path,
       write_dense(dense_path, lines),
       {{"features", StreamDef{.shape = 784}}, {"labels", StreamDef{.shape = 10}}},
       256},
      {"sparse",
       sparse_path,
       write_sparse(sparse_path, rows),
       {{"words", StreamDef{.shape = 30000, .is_sparse = true}},
        {"label", StreamDef{.shape = 10, .is_sparse = true}}},
       2048},
  };

  std::printf("CTF reading, best of %zu (MB = 10^6 bytes; measured on %u hardware threads)\n\n",
              repeats, std::thread::hardware_concurrency());
  std::printf("%-7s %9s %-16s %10s %10s %14s\n", "file", "MB", "step", "seconds", "MB/s",
              "sequences/s");
  double numpy_seconds = -1;
  for (const File& f : files) {
    const double mb = double(f.bytes) / 1e6;
    std::vector<char> buffer(f.bytes);
    plain_read(f.path, buffer);  // into the page cache
    const double read_s = best_of(repeats, [&] { plain_read(f.path, buffer); });
    std::printf("%-7s %9.1f %-16s %10.3f %10.0f %14s\n", f.name, mb, "read()", read_s, mb / read_s,
                "-");
    std::shared_ptr<Deserializer> d;
    for (size_t t : threads) {
      const double parse_s = best_of(repeats, [&] {
        d = std::make_shared<CTFDeserializer>(f.path, f.streams, CTFOptions{.num_threads = t});
      });
      const double sequences = double(d->number_of_sequences());
      std::printf("%-7s %9.1f parse, %2zu thr    %10.3f %10.0f %14.0f\n", f.name, mb, t, parse_s,
                  mb / parse_s, sequences / parse_s);
    }
    Sweep best{0, 1e300};
    for (size_t r = 0; r < repeats; ++r) {
      Sweep s = pack_sweep(d, f.minibatch);
      if (s.seconds < best.seconds) best = s;
    }
    std::printf("%-7s %9.1f %-16s %10.3f %10.0f %14.0f\n", f.name, mb, "pack one sweep",
                best.seconds, mb / best.seconds, double(best.samples) / best.seconds);
    if (reference && f.path == dense_path) {
      const std::string script = numpy_script(argv[0]);
      if (script.empty()) {
        std::printf("    (ctf_reader_numpy.py not found: no numpy reference)\n");
      } else {
        numpy_seconds = run_numpy(script, f.path, repeats);
        if (numpy_seconds > 0)
          std::printf("%-7s %9.1f %-16s %10.3f %10.0f %14.0f\n", f.name, mb, "numpy loadtxt",
                      numpy_seconds, mb / numpy_seconds, double(lines) / numpy_seconds);
      }
    }
  }
  fs::remove_all(dir);
  return 0;
}
