// Reading a CTF corpus larger than the randomization window: generates a file of --gigabytes
// of text (a dense stream of 32 values and a sparse stream of 4 to 12 word indices a line,
// vocabulary 50000), then reads one randomized sweep through CTFDeserializer + MinibatchSource
// and prints the peak resident memory of indexing and of the sweep next to the window's size,
// with MB/s of text, and the resident memory the index and the source add per sequence. The
// sweep holds only the window's chunks (and the minibatch read ahead), so its peak does not
// grow with the file; the index (about 31 bytes a sequence) and the source (4) do.
// No peer: this measures memory, bench_ctf_reader compares parsing speed.
//
//   bench_large_corpus [--gigabytes G (0.25)] [--chunk-mb M (8)] [--window-chunks W (4)]
//                      [--minibatch N (256)] [--threads T (0: the cores)] [--no-prefetch]
//                      [--keep PATH (write there and keep the file; reused when it exists)]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/side_by_side.h"
#include "loom/core/random.h"
#include "loom/loom.h"

using namespace loom;
using bench::status_mib;
namespace fs = std::filesystem;

namespace {

// Peak resident memory (VmHWM) in MiB; resetting it makes the next peak a phase's own.
double peak_rss_mib() {
  return status_mib("VmHWM:");
}
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Lines "|dense v1 .. v32 |words i:1 ..." until the file holds `bytes`.
void write_corpus(const std::string& path, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  RandomGenerator rng(11);
  std::string line;
  for (size_t written = 0; written < bytes; written += line.size()) {
    line = "|dense";
    for (int i = 0; i < 32; ++i) line += " " + std::to_string(int(rng.uniform() * 2000) - 1000);
    line += " |words";
    const int words = 4 + int(rng.uniform() * 9);
    for (int i = 0; i < words; ++i)
      line += " " + std::to_string(size_t(rng.uniform() * 50000)) + ":1";
    line += '\n';
    out << line;
  }
}

}  // namespace

int main(int argc, char** argv) {
  double gigabytes = 0.25;
  size_t chunk_mb = 8, window = 4, minibatch = 256, threads = 0;
  bool prefetch = true;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--gigabytes") {
      gigabytes = std::stod(value());
    } else if (a == "--chunk-mb") {
      chunk_mb = std::stoul(value());
    } else if (a == "--window-chunks") {
      window = std::stoul(value());
    } else if (a == "--minibatch") {
      minibatch = std::stoul(value());
    } else if (a == "--threads") {
      threads = std::stoul(value());
    } else if (a == "--no-prefetch") {
      prefetch = false;
    } else if (a == "--keep") {
      keep = value();
    } else {
      std::fprintf(stderr,
                   "usage: %s [--gigabytes G] [--chunk-mb M] [--window-chunks W] [--minibatch N] "
                   "[--threads T] [--no-prefetch] [--keep PATH]\n",
                   argv[0]);
      return 2;
    }
  }
  const fs::path folder =
      fs::temp_directory_path() / ("loom_large_corpus_" + std::to_string(getpid()));
  const std::string path = keep.empty() ? (folder / "corpus.ctf").string() : keep;
  if (!fs::exists(path)) {
    fs::create_directories(fs::path(path).parent_path());
    const auto t = std::chrono::steady_clock::now();
    write_corpus(path, size_t(gigabytes * 1e9));
    std::printf("wrote %s (%.2f GB) in %.1f s\n", path.c_str(), double(fs::file_size(path)) / 1e9,
                seconds_since(t));
  }
  const double file_mb = double(fs::file_size(path)) / 1e6;

  reset_peak_rss();
  const double rss_before = status_mib("VmRSS:");
  auto t = std::chrono::steady_clock::now();
  auto data = std::make_shared<CTFDeserializer>(
      path,
      StreamDefs{{"dense", StreamDef{.shape = 32}},
                 {"words", StreamDef{.shape = 50000, .is_sparse = true}}},
      CTFOptions{.chunk_size_bytes = chunk_mb << 20, .num_threads = threads});
  const double index_seconds = seconds_since(t), index_peak = peak_rss_mib() - rss_before;
  const size_t chunks = data->chunk_infos().size(), sequences = data->number_of_sequences();
  const double rss_index = status_mib("VmRSS:");
  std::printf(
      "indexed and checked %.0f MB, %zu sequences in %zu chunks of %zu MB: %.1f s "
      "(%.0f MB/s), peak RSS +%.0f MiB\n",
      file_mb, sequences, chunks, chunk_mb, index_seconds, file_mb / index_seconds, index_peak);

  MinibatchSource source(data, {.max_sweeps = 1,
                                .randomization_window_in_chunks = window,
                                .prefetch = prefetch,
                                .num_reader_threads = threads});
  const double rss_sweep = status_mib("VmRSS:");
  auto per_sequence = [&](double mib) { return mib * 1048576.0 / double(sequences); };
  std::printf("memory per sequence: index %.1f bytes, source %.1f bytes (resident growth / %zu)\n",
              per_sequence(rss_index - rss_before), per_sequence(rss_sweep - rss_index), sequences);
  reset_peak_rss();
  t = std::chrono::steady_clock::now();
  size_t samples = 0;
  for (auto mb = source.next_minibatch(minibatch); !mb.empty();
       mb = source.next_minibatch(minibatch))
    samples += mb.at(source["dense"]).number_of_samples;
  const double sweep_seconds = seconds_since(t), sweep_peak = peak_rss_mib() - rss_sweep;
  const ChunkStats stats = source.chunk_stats();
  std::printf(
      "one randomized sweep, %zu samples in minibatches of %zu (prefetch %s): %.1f s "
      "(%.0f MB/s of text)\n",
      samples, minibatch, prefetch ? "on" : "off", sweep_seconds, file_mb / sweep_seconds);
  std::printf("%-28s %10s\n", "", "MiB");
  std::printf("%-28s %10.0f\n", "file", file_mb / 1.048576);
  std::printf("%-28s %10.0f   (%zu chunks of %zu MiB of text)\n", "randomization window",
              double(window * chunk_mb), window, chunk_mb);
  std::printf("%-28s %10.0f   (above the %.0f MiB before it: index, code)\n",
              "peak RSS during the sweep", sweep_peak, rss_sweep);
  std::printf("chunks: %zu loads, at most %zu held at once\n", stats.loads, stats.peak_resident);
  if (keep.empty()) fs::remove_all(folder);
  return 0;
}
