// Recurrent training and inference speed, Loom beside PyTorch in one run. Each row runs in a child
// process of its own, for Loom (this program with --row NAME) and for PyTorch (lstm_torch.py
// --row NAME), so each side's peak RSS (wait4's ru_maxrss) is that row's alone.
//
//   rows: lstm_train      Embedding(1000->50), Recurrence(LSTM(128)), sequence::last, Dense(5);
//                         32 sequences per minibatch, lengths uniform in 5..50, sparse one-hot
//                         words; cross_entropy_with_softmax, sgd 0.1 per minibatch
//         gru_train       the same with GRU(128)
//         rows_train_256  Fashion-MNIST rows: 28 steps of 28 pixels, LSTM(128), last, Dense(10),
//                         minibatch 256 (random pixels: the speed does not depend on them)
//         lstm_infer      lstm_train's forward in inference mode
//
// Minibatches are built before the clock starts (64 of them, used in turn); the Loom rows run
// Trainer::train_minibatch, or an Executor's forward for inference.
//
//   bench_lstm [--rows a,b,...] [--seconds S] [--no-reference]
//   bench_lstm --row NAME [--seconds S] [--loop]   (one row, Loom only: the child; --loop: the
//                                                   generic step loop instead of the fused op)
//   bench_lstm --accuracy EPOCHS [--seeds K]  (the fashion_mnist_rows example and
//                                              lstm_torch.py --accuracy, seeds 1..K; prints both
//                                              test accuracies)
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/side_by_side.h"
#include "loom/graph/executor.h"
#include "loom/layers/recurrent.h"
#include "loom/loom.h"

using namespace loom;
using namespace bench;

namespace {

struct Row {
  const char* name;
  const char* cell;  // "LSTM" or "GRU"
  bool train;
  bool rows;  // the Fashion-MNIST rows model, else the word model
  // Multiply-accumulates of one step's forward pass (input and recurrent products; a training
  // step costs 3x, a FLOP is half a MAC).
  double macs_per_token;
};

constexpr double kLstmMacs = (50 + 128) * 4 * 128.0, kGruMacs = (50 + 128) * 3 * 128.0,
                 kRowsMacs = (28 + 128) * 4 * 128.0;

const Row kRows[] = {
    {"lstm_train", "LSTM", true, false, kLstmMacs},
    {"gru_train", "GRU", true, false, kGruMacs},
    {"rows_train_256", "LSTM", true, true, kRowsMacs},
    {"lstm_infer", "LSTM", false, false, kLstmMacs},
};

const Row* find_row(const std::string& name) {
  for (const Row& r : kRows)
    if (name == r.name) return &r;
  return nullptr;
}

struct Options : bench::RowOptions {
  bool loop = false;  // child: the generic step loop
};

Options parse(int argc, char** argv) {
  std::vector<std::string> names;
  for (const Row& r : kRows) names.push_back(r.name);
  const std::string p = argv[0];
  Options o = bench::parse_row_options<Options>(
      argc, argv, names,
      "usage: " + p + " [--rows a,b,...] [--seconds S] [--no-reference]\n       " + p +
          " --row NAME [--seconds S] [--loop]\n       " + p + " --accuracy EPOCHS [--seeds K]",
      [](Options& o, const std::string& flag, auto&) {
        if (flag != "--loop") return false;
        o.loop = true;
        return true;
      });
  if (o.rows.empty()) o.rows = names;
  return o;
}

// ---- the child: one Loom row --------------------------------------------------------------

// CPU time of the process (all its threads), which the machine's other load does not inflate.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int run_row(const Row& row, double seconds, bool loop) {
  set_fixed_random_seed(1);
  const size_t classes = row.rows ? 10 : 5, minibatch = row.rows ? 256 : 32;
  Variable x = row.rows ? sequence::input_variable({28}, {.name = "pixels"})
                        : sequence::input_variable({1000}, {.is_sparse = true, .name = "words"});
  Variable y = input_variable({classes}, {.is_sparse = true, .name = "label"});
  const RecurrenceOptions recurrence{.fused = !loop};
  const Function cell = std::string(row.cell) == "LSTM" ? LSTM(128) : GRU(128);
  std::vector<Function> layers;
  if (!row.rows) layers.push_back(Embedding(50));
  layers.push_back(Recurrence(cell, recurrence));
  layers.push_back(Function(sequence::last(placeholder("h"))));
  layers.push_back(Dense(classes));
  Function model = Sequential(layers);
  Variable z = model(x);
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  Trainer trainer(z, criterion, {sgd(model.parameters(), learning_parameter_schedule(0.1))});
  Executor inference({z});

  std::mt19937 gen(2);
  std::vector<ValueMap> batches;
  std::vector<size_t> tokens;
  for (int b = 0; b < 64; ++b) {
    std::vector<size_t> labels(minibatch);
    for (size_t& l : labels) l = gen() % classes;
    size_t count = 0;
    auto data = [&] {
      if (row.rows) {
        std::uniform_real_distribution<float> pixel(0, 1);
        std::vector<float> pixels(minibatch * 28 * 28);
        for (float& p : pixels) p = pixel(gen);
        count = minibatch * 28;
        return Value(NDArrayView::from_vector(NDShape{minibatch, 28, 28}, pixels), true);
      }
      std::vector<std::vector<size_t>> words(minibatch);
      for (auto& w : words) {
        w.resize(5 + gen() % 46);
        for (size_t& t : w) t = gen() % 1000;
        count += w.size();
      }
      return Value::one_hot_sequences(1000, words);
    };
    batches.push_back({{x, data()}, {y, Value::one_hot(classes, labels)}});
    tokens.push_back(count);
  }
  size_t next = 0, done_tokens = 0;
  auto step = [&] {
    const ValueMap& mb = batches[next++ % batches.size()];
    done_tokens += tokens[(next - 1) % batches.size()];
    if (row.train) {
      trainer.train_minibatch(mb);
    } else {
      inference.forward(mb, false);
    }
  };
  for (int i = 0; i < 5; ++i) step();
  using Clock = std::chrono::steady_clock;
  size_t steps = 0;
  done_tokens = 0;
  double elapsed = 0;
  const auto t0 = Clock::now();
  const double cpu0 = cpu_seconds();
  do {
    step();
    ++steps;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < seconds);
  const double cpu = cpu_seconds() - cpu0;
  if (row.train)
    std::printf("last minibatch: loss %.4f\n", trainer.previous_minibatch_loss_average());
  std::printf(
      "samples_per_second=%.1f\ntokens_per_second=%.1f\nsamples_per_cpu_second=%.1f\n"
      "steps=%zu\nthreads=%d\n",
      double(steps * minibatch) / elapsed, double(done_tokens) / elapsed,
      double(steps * minibatch) / cpu, steps, get_max_num_cpu_threads());
  return 0;
}

// ---- the parent ----------------------------------------------------------------------------

// The fashion_mnist_rows example and lstm_torch.py --accuracy for the same epochs, once per seed
// 1..seeds (the initial weights; the data order is fixed); the means are compared.
int compare_accuracy(int epochs, int seeds, const std::string& script) {
  const auto folder = std::filesystem::canonical("/proc/self/exe").parent_path();
  const std::string n = std::to_string(epochs);
  std::vector<double> loom, torch;
  for (int seed = 1; seed <= seeds; ++seed) {
    const std::string s = std::to_string(seed);
    std::printf("Loom (fashion_mnist_rows %s --seed %s):\n", n.c_str(), s.c_str());
    const double loom_error =
        find_value(run_child({(folder / "fashion_mnist_rows").string(), n, "--seed", s}).lines,
                   "Test error: ");
    std::printf("PyTorch (lstm_torch.py --accuracy --epochs %s --seed %s):\n", n.c_str(),
                s.c_str());
    const double torch_accuracy = find_value(
        run_child({"/usr/bin/python3", script, "--accuracy", "--epochs", n, "--seed", s}).lines,
        "test_accuracy=");
    if (loom_error < 0 || torch_accuracy < 0) {
      std::printf("no test accuracy from %s\n", loom_error < 0 ? "Loom" : "PyTorch");
      return 1;
    }
    loom.push_back(100 - loom_error);
    torch.push_back(torch_accuracy);
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
  };
  std::printf("\ntest accuracy after %d epochs, seed by seed (Loom, PyTorch):", epochs);
  for (size_t i = 0; i < loom.size(); ++i) std::printf(" (%.2f%%, %.2f%%)", loom[i], torch[i]);
  std::printf("\nmean of %d: Loom %.2f%%, PyTorch %.2f%%, difference %+.2f points\n", seeds,
              mean(loom), mean(torch), mean(loom) - mean(torch));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.row.empty()) return run_row(*find_row(o.row), o.seconds, o.loop);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const std::string script = reference_script(argv[0], "lstm_torch.py");
  if (o.accuracy_epochs > 0) return compare_accuracy(o.accuracy_epochs, o.seeds, script);
  const std::string seconds = std::to_string(o.seconds);
  // Each side under each setting, keeping its best: one thread (the per-step products are small)
  // or all of them; libgomp's idle threads sleep at once (passive) or spin a few microseconds.
  const std::string all = std::to_string(get_max_num_cpu_threads());
  const std::vector<Setting> settings{
      {"1 thread", {{"OMP_NUM_THREADS", "1"}, {"OMP_WAIT_POLICY", "PASSIVE"}}},
      {all + " threads, passive", {{"OMP_NUM_THREADS", all}, {"OMP_WAIT_POLICY", "PASSIVE"}}},
      {all + " threads, spin", {{"OMP_NUM_THREADS", all}, {"GOMP_SPINCOUNT", "10000"}}}};
  struct Result {
    const Row* row;
    Best loom, torch;
  };
  std::vector<Result> results;
  for (const std::string& name : o.rows) {
    Result r{find_row(name), {}, {}};
    r.loom = run_best(name + ", Loom", settings, {self, "--row", name, "--seconds", seconds});
    if (o.reference && !script.empty()) {
      r.torch = run_best(name + ", PyTorch", settings,
                         {"/usr/bin/python3", script, "--row", name, "--seconds", seconds});
    } else {
      r.torch.m.why = o.reference ? "lstm_torch.py not found" : "not run";
    }
    results.push_back(r);
  }

  std::printf("\n%-15s %10s %10s %7s %9s %11s %11s %9s %9s %9s %9s  %s\n", "row", "Loom seq/s",
              "torch seq/s", "ratio", "cpu ratio", "Loom tok/s", "torch tok/s", "Loom RSS",
              "torch RSS", "Loom GF/s", "torch GF/s", "best settings (Loom; PyTorch)");
  double worst = 0;
  for (const Result& best : results) {
    const Measurement &loom = best.loom.m, &torch = best.torch.m;
    const Row* row = best.row;
    const double loom_tokens = find_value(loom.lines, "tokens_per_second=");
    const double torch_tokens = find_value(torch.lines, "tokens_per_second=");
    const double flops = 2 * row->macs_per_token * (row->train ? 3 : 1);
    const bool both = loom.ran && torch.ran;
    if (both && (worst == 0 || loom.sps / torch.sps < worst)) worst = loom.sps / torch.sps;
    std::string torch_mode;  // which of PyTorch's two ways was faster
    for (const std::string& l : torch.lines)
      if (l.rfind("mode=", 0) == 0) torch_mode = ", " + l.substr(5);
    const double cpu_ratio = find_value(loom.lines, "samples_per_cpu_second=") /
                             find_value(torch.lines, "samples_per_cpu_second=");
    std::printf("%-15s %10s %10s %7s %9s %11s %11s %9s %9s %9s %9s  %s; %s%s\n", row->name,
                cell(loom, loom.sps, "%.0f").c_str(), cell(torch, torch.sps, "%.0f").c_str(),
                both ? cell(loom, loom.sps / torch.sps, "%.2fx").c_str() : "-",
                both ? cell(loom, cpu_ratio, "%.2fx").c_str() : "-",
                cell(loom, loom_tokens, "%.0f").c_str(), cell(torch, torch_tokens, "%.0f").c_str(),
                cell(loom, double(loom.peak_rss_kb) / 1024, "%.0f MB").c_str(),
                cell(torch, double(torch.peak_rss_kb) / 1024, "%.0f MB").c_str(),
                cell(loom, loom_tokens * flops * 1e-9, "%.1f").c_str(),
                cell(torch, torch_tokens * flops * 1e-9, "%.1f").c_str(), best.loom.setting.c_str(),
                best.torch.setting.c_str(), torch_mode.c_str());
    if (!loom.ran) std::printf("  Loom: %s\n", loom.why.c_str());
    if (!torch.ran) std::printf("  PyTorch: %s\n", torch.why.c_str());
  }
  if (worst > 0) std::printf("worst ratio: %.2fx (target 3x)\n", worst);
  std::printf(
      "GF/s: model FLOPs (2 per multiply-add of the input and recurrent products, x3 for a "
      "training step) per token per second; cpu ratio: sequences per second of CPU time (all "
      "threads), Loom over PyTorch, which a loaded machine distorts less; PyTorch keeps the "
      "faster of its packed and padded nn.LSTM/nn.GRU\n");
  return 0;
}
