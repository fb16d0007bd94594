// Fashion-MNIST training and inference speed, Loom beside PyTorch in one run. Each row runs in
// a child process of its own, for Loom (this program with --row NAME) and for PyTorch
// (mnist_torch.py --row NAME), so each side's peak RSS (wait4's ru_maxrss) is that row's alone.
//
//   rows: conv_train_256, conv_train_64 (seed 002's convnet, training), conv_infer_256 (its
//         forward), mlp_train_64, mlp_train_256 (784-200-200-10 relu MLP, training)
//
// A training step reads a randomized minibatch of the training set from the IDX files through
// IDXDeserializer + MinibatchSource, and runs Trainer::train_minibatch with
// cross_entropy_with_softmax (summed over the minibatch), classification_error and CNTK's
// momentum_sgd at lr 0.001 and momentum 0.9990239141819757 per sample (seed 002's parameters;
// the PyTorch side implements the same update).
//
// The child prints step_rss_mb: its peak RSS less its RSS once the source, the model and the
// trainer are built and the minibatches of --reading none are read, i.e. what the steps add
// (activations, gradients, oneDNN workspaces and scratchpads, the learner's state); the
// whole-process peak also holds the training set (47 MB of bytes, and the decompressed file
// beside it) and the code.
//
// --reading sets how Loom's steps get their minibatch: prefetch (the default: read and packed
// on the source's background thread while the step computes), sync (read when asked for), none
// (64 minibatches read before the steps, taken in turn: no reading at all, the bound for the
// other two; as many as hold 50 MB for the convnet, so that the inputs come from memory, as
// read ones do, not from a cache that one minibatch used again would stay in);
// interleaved (with --row only) times the three in alternating rounds of one process and prints
// the median cost of reading.
//
//   bench_mnist [--rows a,b,...] [--seconds S] [--threads N] [--no-reference]
//               [--reading prefetch|sync|none]
//   bench_mnist --row NAME [--seconds S] [--threads N] [--reading MODE|interleaved]
//               [--no-share-buffers]
//               (one row, Loom only: the child; --no-share-buffers: the trainer's executor
//               gives every value a buffer of its own, ExecutorOptions::share_buffers)
//   bench_mnist --memory [--rows a,b,...] [--seconds S] [--threads N]   (issue 17: the
//               training rows, conv_train_256, conv_train_64 and mlp_train_256 unless given,
//               Loom only, reading none, with buffer sharing on and off: peak RSS of the whole
//               process, the step's own (step_rss_mb, below) and samples/s, and the reductions)
//   bench_mnist --accuracy EPOCHS [--seeds K]   (seed 002's recipe for EPOCHS epochs on both
//                                    sides, K runs each with seeds 1..K: the mnist_convnet
//                                    example and mnist_torch.py --accuracy;
//                                    prints both test accuracies)
//   --bf16: also Loom in bf16 mixed precision (set_compute_precision): each speed row once more
//           in bf16, with its speed-up over Loom's float32; in the accuracy comparison, Loom
//           in float32 and in bf16 for each seed, and the difference of their means
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench/seed_models.h"
#include "bench/side_by_side.h"
#include "loom/graph/executor.h"
#include "loom/io/idx_deserializer.h"
#include "loom/layers/convolution.h"
#include "loom/layers/default_options.h"
#include "loom/layers/dropout.h"
#include "loom/layers/pooling.h"
#include "loom/loom.h"

using namespace loom;
using namespace bench;

namespace {

const std::string kData = "/usr/share/datasets/fashion-mnist/";
constexpr double kLrPerSample = 0.001, kMomentumPerSample = 0.9990239141819757;

struct Row {
  const char* name;
  bool conv, train;
  size_t minibatch;
  // Multiply-accumulates of one sample's forward pass; a training step costs 3x (forward,
  // gradient of the inputs, gradient of the weights), a FLOP is half a MAC.
  double macs;
};

// Convnet: conv 5x5x1->32 at 28x28, conv 3x3x32->48 at 11x11, conv 3x3x48->64 at 3x3, dense
// 576->96 and 96->10 (pooling and activations are not counted).
constexpr double kConvMacs =
    28 * 28 * 32 * 25.0 + 11 * 11 * 48 * 9 * 32.0 + 3 * 3 * 64 * 9 * 48.0 + 576 * 96.0 + 96 * 10.0;
constexpr double kMlpMacs = 784 * 200.0 + 200 * 200.0 + 200 * 10.0;

const Row kRows[] = {
    {"conv_train_256", true, true, 256, kConvMacs},  {"conv_train_64", true, true, 64, kConvMacs},
    {"conv_infer_256", true, false, 256, kConvMacs}, {"mlp_train_64", false, true, 64, kMlpMacs},
    {"mlp_train_256", false, true, 256, kMlpMacs},
};

const Row* find_row(const std::string& name) {
  for (const Row& r : kRows)
    if (name == r.name) return &r;
  return nullptr;
}

struct Options : bench::RowOptions {
  int threads = 0;                   // 0: Loom's default
  bool bf16 = false;                 // also (the child: only) Loom in bf16 mixed precision
  std::string reading = "prefetch";  // prefetch, sync or none (see the top)
  bool share_buffers = true;         // the child's trainer: ExecutorOptions::share_buffers
  bool memory = false;               // the buffer-sharing comparison instead of the speed rows
};

Options parse(int argc, char** argv) {
  std::vector<std::string> names;
  for (const Row& r : kRows) names.push_back(r.name);
  const std::string p = argv[0];
  const std::string usage =
      "usage: " + p +
      " [--rows a,b,...] [--seconds S] [--threads N] [--no-reference] [--bf16]\n"
      "       [--reading prefetch|sync|none]\n       " +
      p +
      " --row NAME [--seconds S] [--threads N] [--bf16] [--reading MODE|interleaved]\n"
      "           [--no-share-buffers]\n       " +
      p + " --memory [--rows a,b,...] [--seconds S] [--threads N]\n       " + p +
      " --accuracy EPOCHS [--seeds K] [--bf16]";
  Options o = bench::parse_row_options<Options>(
      argc, argv, names, usage, [&](Options& o, const std::string& flag, auto& value) {
        if (flag == "--threads") {
          o.threads = std::atoi(value().c_str());
          if (o.threads < 1) bench::row_usage("--threads needs a positive integer", usage, names);
        } else if (flag == "--bf16") {
          o.bf16 = true;
        } else if (flag == "--reading") {
          o.reading = value();
          if (o.reading != "prefetch" && o.reading != "sync" && o.reading != "none" &&
              o.reading != "interleaved")
            bench::row_usage("--reading is prefetch, sync, none or interleaved", usage, names);
        } else if (flag == "--no-share-buffers") {
          o.share_buffers = false;
        } else if (flag == "--memory") {
          o.memory = true;
        } else {
          return false;
        }
        return true;
      });
  if (o.reading == "interleaved" && o.row.empty())
    bench::row_usage("--reading interleaved times one row: give --row NAME", usage, names);
  if (o.rows.empty())
    o.rows = o.memory ? std::vector<std::string>{"conv_train_256", "conv_train_64", "mlp_train_256"}
                      : names;
  return o;
}

// ---- the child: one Loom row --------------------------------------------------------------

Function mlp() {
  return Sequential(
      {Dense(200, {.activation = relu}), Dense(200, {.activation = relu}), Dense(10)});
}

// --reading interleaved: the three ways of getting minibatches in alternating rounds of one
// process (one trainer, warm caches), so that the machine's drift, which moves separate runs by
// 5 %, falls on all three alike. Prints samples/s per round and the median cost of sync and
// prefetch reading against none.
template <class Timed>
int compare_reading(Timed&& timed, double seconds) {
  constexpr int kRounds = 7;
  const std::vector<std::string> modes{"none", "sync", "prefetch"};
  std::vector<std::vector<double>> sps(modes.size());
  for (int round = 0; round < kRounds; ++round) {
    std::printf("round %d:", round + 1);
    for (size_t m = 0; m < modes.size(); ++m) {
      sps[m].push_back(timed(modes[m], seconds / (kRounds * modes.size())));
      std::printf(" %s %.0f", modes[m].c_str(), sps[m].back());
    }
    std::printf("\n");
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (size_t m = 1; m < modes.size(); ++m) {
    std::vector<double> cost;
    for (int r = 0; r < kRounds; ++r) cost.push_back(100 * (1 - sps[m][r] / sps[0][r]));
    std::printf("%s: median %.0f samples/s, median cost against none %.1f %%\n", modes[m].c_str(),
                median(sps[m]), median(cost));
  }
  std::printf("none: median %.0f samples/s\n", median(sps[0]));
  return 0;
}

int run_row(const Row& row, double seconds, const std::string& reading, bool share_buffers) {
  set_fixed_random_seed(1);
  const NDShape image = row.conv ? NDShape{28, 28} : NDShape{784};
  auto data = std::make_shared<IDXDeserializer>(IDXStreamDefs{
      {"features",
       {.path = kData + "train-images-idx3-ubyte.gz", .shape = image, .scale = 1.0 / 255}},
      {"labels",
       {.path = kData + "train-labels-idx1-ubyte.gz", .num_classes = 10, .is_sparse = true}}});
  MinibatchSource source(data, {.randomization_seed = 2, .prefetch = reading == "prefetch"});
  // interleaved: a second source that reads ahead, beside the first reading when asked.
  std::optional<MinibatchSource> ahead;
  if (reading == "interleaved") ahead.emplace(data, MinibatchSourceConfig{.randomization_seed = 2});

  Variable x = input_variable(image);
  Variable y = input_variable({10}, {.is_sparse = true});
  Function model = row.conv ? bench::seed002_convnet() : mlp();
  Variable z = model(x);
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  Trainer trainer(
      z, criterion,
      {momentum_sgd(model.parameters(), learning_parameter_schedule_per_sample(kLrPerSample),
                    momentum_schedule_per_sample(kMomentumPerSample))},
      {}, {.share_buffers = share_buffers});
  Executor inference({z});  // the forward alone, in inference mode (dropout off)
  const std::unordered_map<Variable, StreamInformation> input_map{{x, source["features"]},
                                                                  {y, source["labels"]}};
  std::unordered_map<Variable, StreamInformation> ahead_map;
  if (ahead) ahead_map = {{x, (*ahead)["features"]}, {y, (*ahead)["labels"]}};
  constexpr size_t kHeld = 64;
  std::vector<MinibatchMap> held;
  while (held.size() < (reading == "none" || reading == "interleaved" ? kHeld : 1))
    held.push_back(source.next_minibatch(row.minibatch, input_map));
  size_t next_held = 0;
  const double rss_before_steps = status_mib("VmRSS:");
  auto step = [&](const std::string& mode) {
    MinibatchMap mb = mode == "none" ? held[next_held++ % held.size()]
                      : mode == "prefetch" && ahead
                          ? ahead->next_minibatch(row.minibatch, ahead_map)
                          : source.next_minibatch(row.minibatch, input_map);
    if (row.train)
      trainer.train_minibatch(mb);
    else
      inference.forward(values_of(mb), false);
  };
  using Clock = std::chrono::steady_clock;
  struct Timing {
    size_t steps = 0;
    double seconds = 0;
  };
  // Steps of `mode` for at least `seconds`.
  auto run = [&](const std::string& mode, double seconds) {
    Timing t;
    const auto t0 = Clock::now();
    do {
      step(mode);
      ++t.steps;
      t.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (t.seconds < seconds);
    return t;
  };
  auto samples_per_second = [&](const Timing& t) {
    return double(t.steps * row.minibatch) / t.seconds;
  };

  // Warm-up: the first minibatches load (decode) the chunks, oneDNN picks its kernels.
  for (int i = 0; i < 10; ++i) step(reading == "interleaved" ? "sync" : reading);
  if (reading == "interleaved")
    return compare_reading([&](const std::string& mode,
                               double seconds) { return samples_per_second(run(mode, seconds)); },
                           seconds);
  const Timing timing = run(reading, seconds);
  if (row.train)
    std::printf("last minibatch: loss %.4f, metric %.4f\n",
                trainer.previous_minibatch_loss_average(),
                trainer.previous_minibatch_evaluation_average());
  std::printf("step_rss_mb=%.1f\nsamples_per_second=%.1f\nsteps=%zu\nthreads=%d\n",
              status_mib("VmHWM:") - rss_before_steps, samples_per_second(timing), timing.steps,
              get_max_num_cpu_threads());
  return 0;
}

}  // namespace

// Seed 002's recipe for the same number of epochs on both sides, once per seed 1..seeds (the
// initial weights and dropout masks; the data order is seed 002's fixed shuffle). Loom's side is
// the mnist_convnet example beside this program. Single runs scatter by about a point, so the
// means are compared.
int compare_accuracy(int epochs, int seeds, bool bf16, const std::string& script) {
  const auto folder = std::filesystem::canonical("/proc/self/exe").parent_path();
  const std::string n = std::to_string(epochs);
  std::vector<double> loom, loom_bf16, torch;
  auto loom_accuracy = [&](const std::string& seed, bool in_bf16) {
    std::vector<std::string> command{(folder / "mnist_convnet").string(), n, "--seed", seed};
    if (in_bf16) command.push_back("--bf16");
    std::printf("Loom (mnist_convnet %s --seed %s%s):\n", n.c_str(), seed.c_str(),
                in_bf16 ? " --bf16" : "");
    const double error = find_value(run_child(command).lines, "Test error: ");
    return error < 0 ? -1 : 100 - error;
  };
  for (int seed = 1; seed <= seeds; ++seed) {
    const std::string s = std::to_string(seed);
    loom.push_back(loom_accuracy(s, false));
    if (bf16) loom_bf16.push_back(loom_accuracy(s, true));
    std::printf("PyTorch (mnist_torch.py --accuracy --epochs %s --seed %s):\n", n.c_str(),
                s.c_str());
    torch.push_back(find_value(
        run_child({"/usr/bin/python3", script, "--accuracy", "--epochs", n, "--seed", s}).lines,
        "test_accuracy="));
    if (loom.back() < 0 || torch.back() < 0 || (bf16 && loom_bf16.back() < 0)) {
      std::printf("no test accuracy from %s\n", torch.back() < 0 ? "PyTorch" : "Loom");
      return 1;
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / double(v.size());
  };
  std::printf("\ntest accuracy after %d epochs, seed by seed (Loom, %sPyTorch):", epochs,
              bf16 ? "Loom bf16, " : "");
  for (size_t i = 0; i < loom.size(); ++i) {
    std::printf(" (%.2f%%, ", loom[i]);
    if (bf16) std::printf("%.2f%%, ", loom_bf16[i]);
    std::printf("%.2f%%)", torch[i]);
  }
  std::printf("\nmean of %d: Loom %.2f%%, PyTorch %.2f%%, difference %+.2f points\n", seeds,
              mean(loom), mean(torch), mean(loom) - mean(torch));
  if (bf16)
    std::printf("mean of %d: Loom bf16 %.2f%%, Loom float32 %.2f%%, difference %+.2f points\n",
                seeds, mean(loom_bf16), mean(loom), mean(loom_bf16) - mean(loom));
  return 0;
}

// Issue 17: each row with the trainer's buffer sharing on and off (reading none, so the steps
// alone allocate), the best of the settings for each; the memory figures do not depend on the
// machine's load, the speeds do.
int compare_memory(const std::vector<std::string>& rows, const std::string& self,
                   const std::string& seconds, int threads, const std::vector<Setting>& settings) {
  struct Result {
    std::string row;
    Best shared, own;
  };
  std::vector<Result> results;
  for (const std::string& name : rows) {
    const std::vector<std::string> args{
        self,        "--row", name, "--seconds", seconds, "--threads", std::to_string(threads),
        "--reading", "none"};
    std::vector<std::string> own_args = args;
    own_args.push_back("--no-share-buffers");
    results.push_back({name, run_best(name + ", shared buffers", settings, args),
                       run_best(name + ", own buffers", settings, own_args)});
  }
  auto reduction = [](double own, double shared) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f%%", 100 * (own - shared) / own);
    return std::string(buf);
  };
  std::printf(
      "\nLoom's training memory with buffer sharing (shared) and without (own), "
      "reading none, %d threads\n",
      threads);
  std::printf("%-15s %9s %9s %6s %10s %10s %6s %9s %9s %6s\n", "row", "RSS own", "shared", "less",
              "step own", "shared", "less", "smp/s own", "shared", "ratio");
  for (const Result& r : results) {
    const Measurement &own = r.own.m, &shared = r.shared.m;
    if (!own.ran || !shared.ran) {
      std::printf("%-15s failed: %s\n", r.row.c_str(), (own.ran ? shared : own).why.c_str());
      continue;
    }
    const double own_rss = double(own.peak_rss_kb) / 1024,
                 shared_rss = double(shared.peak_rss_kb) / 1024;
    const double own_step = find_value(own.lines, "step_rss_mb="),
                 shared_step = find_value(shared.lines, "step_rss_mb=");
    std::printf("%-15s %6.0f MB %6.0f MB %6s %7.0f MB %7.0f MB %6s %9.0f %9.0f %5.2fx\n",
                r.row.c_str(), own_rss, shared_rss, reduction(own_rss, shared_rss).c_str(),
                own_step, shared_step, reduction(own_step, shared_step).c_str(), own.sps,
                shared.sps, shared.sps / own.sps);
  }
  std::printf(
      "RSS: the whole process's peak (wait4); step: the peak less the RSS before the "
      "first training step (model, trainer, data and first minibatch built); ratio: "
      "shared smp/s over own\n");
  return 0;
}

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.threads) set_max_num_cpu_threads(o.threads);
  if (!o.row.empty()) {
    if (o.bf16) set_compute_precision(ComputePrecision::BFloat16);
    return run_row(*find_row(o.row), o.seconds, o.reading, o.share_buffers);
  }

  if (!std::filesystem::exists(kData + "train-images-idx3-ubyte.gz")) {
    std::printf("Fashion-MNIST is not in %s (apt-get install dataset-fashion-mnist)\n",
                kData.c_str());
    return 1;
  }
  // The accuracy runs: OpenMP threads sleep when idle, harmless on a busy machine.
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  const std::string self = std::filesystem::canonical("/proc/self/exe").string();
  const std::string script = reference_script(argv[0], "mnist_torch.py");
  if (o.accuracy_epochs > 0) return compare_accuracy(o.accuracy_epochs, o.seeds, o.bf16, script);
  const int threads = o.threads ? o.threads : get_max_num_cpu_threads();
  const std::string seconds = std::to_string(o.seconds);
  // Each side runs a row under each of its settings and keeps its best, as the issue asks for
  // each toolkit's best thread settings. Both use libgomp: its idle threads either sleep at once
  // (OMP_WAIT_POLICY=PASSIVE; each parallel region then wakes them through the kernel) or spin
  // a bounded while first (GOMP_SPINCOUNT=10000, some microseconds; libgomp's default spins
  // 30 times longer, which made Loom 30x slower on a loaded machine). PyTorch's nn.Linear runs
  // on OpenBLAS, with one thread (best for small products) or with all of them.
  const std::vector<Setting> loom_settings{{"passive", {{"OMP_WAIT_POLICY", "PASSIVE"}}},
                                           {"spin", {{"GOMP_SPINCOUNT", "10000"}}}};
  std::vector<Setting> torch_settings;
  for (const Setting& wait : loom_settings)
    for (int blas : threads > 1 ? std::vector<int>{1, threads} : std::vector<int>{1}) {
      Setting s = wait;
      s.label += ",blas" + std::to_string(blas);
      s.env.emplace_back("OPENBLAS_NUM_THREADS", std::to_string(blas));
      torch_settings.push_back(s);
    }
  if (o.memory) return compare_memory(o.rows, self, seconds, threads, loom_settings);
  struct Result {
    const Row* row;
    Best loom, torch, loom_bf16;
  };
  std::vector<Result> results;
  for (const std::string& name : o.rows) {
    Result r{find_row(name), {}, {}, {}};
    const std::vector<std::string> loom_row{
        self,        "--row",  name, "--seconds", seconds, "--threads", std::to_string(threads),
        "--reading", o.reading};
    r.loom = run_best(name + ", Loom (" + std::to_string(threads) + " threads)", loom_settings,
                      loom_row);
    if (o.bf16) {
      std::vector<std::string> bf16_row = loom_row;
      bf16_row.push_back("--bf16");
      r.loom_bf16 = run_best(name + ", Loom bf16", loom_settings, bf16_row);
    }
    if (o.reference && !script.empty()) {
      r.torch = run_best(name + ", PyTorch", torch_settings,
                         {"/usr/bin/python3", script, "--row", name, "--seconds", seconds,
                          "--threads", std::to_string(threads)});
    } else {
      r.torch.m.why = o.reference ? "mnist_torch.py not found" : "not run";
    }
    results.push_back(r);
  }

  std::printf("\nLoom's minibatches: reading %s\n", o.reading.c_str());
  std::printf("%-15s %12s %12s %7s %10s %10s %9s %9s  %s\n", "row", "Loom smp/s", "torch smp/s",
              "ratio", "Loom RSS", "torch RSS", "Loom GF/s", "torch GF/s",
              "best settings (Loom; PyTorch)");
  for (const Result& best : results) {
    const Measurement &loom = best.loom.m, &torch = best.torch.m;
    const Row* row = best.row;
    const double flops = 2 * row->macs * (row->train ? 3 : 1);
    const bool both = loom.ran && torch.ran;
    std::printf("%-15s %12s %12s %7s %10s %10s %9s %9s  %s; %s\n", row->name,
                cell(loom, loom.sps, "%.0f").c_str(), cell(torch, torch.sps, "%.0f").c_str(),
                both ? cell(loom, loom.sps / torch.sps, "%.2fx").c_str() : "-",
                cell(loom, double(loom.peak_rss_kb) / 1024, "%.0f MB").c_str(),
                cell(torch, double(torch.peak_rss_kb) / 1024, "%.0f MB").c_str(),
                cell(loom, loom.sps * flops * 1e-9, "%.1f").c_str(),
                cell(torch, torch.sps * flops * 1e-9, "%.1f").c_str(), best.loom.setting.c_str(),
                best.torch.setting.c_str());
    if (!loom.ran) std::printf("  Loom: %s\n", loom.why.c_str());
    if (!torch.ran) std::printf("  PyTorch: %s\n", torch.why.c_str());
  }
  std::printf(
      "GF/s: model FLOPs (2 per multiply-add of convolutions and dense layers, x3 for a "
      "training step) per second; settings: passive = OMP_WAIT_POLICY=PASSIVE, spin = "
      "GOMP_SPINCOUNT=10000, blasN = OPENBLAS_NUM_THREADS=N\n");
  if (!o.bf16) return 0;
  std::printf("\n%-15s %12s %12s %9s  %s\n", "row", "float32 smp/s", "bf16 smp/s", "speed-up",
              "(Loom in bf16 mixed precision against Loom in float32)");
  for (const Result& r : results) {
    const Measurement &f32 = r.loom.m, &b16 = r.loom_bf16.m;
    std::printf("%-15s %12s %12s %9s\n", r.row->name, cell(f32, f32.sps, "%.0f").c_str(),
                cell(b16, b16.sps, "%.0f").c_str(),
                f32.ran && b16.ran ? cell(b16, b16.sps / f32.sps, "%.2fx").c_str() : "-");
    if (!b16.ran) std::printf("  Loom bf16: %s\n", b16.why.c_str());
  }
  return 0;
}
