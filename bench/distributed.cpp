// Distributed training speed: per model (seed 002's MLP and convnet on Fashion-MNIST), per
// algorithm (float data-parallel, 1-bit SGD, block momentum) and per number of workers N: the
// samples per second over all workers, the bytes each worker sends per step, and the time each
// worker spends in communication per step; and PyTorch's DistributedDataParallel (gloo, float)
// beside float data-parallel, in the same run. docs/distributed.md builds its speed-up model
// for 64 machines on these figures.
//
//   bench_distributed [--models mlp,convnet] [--algorithms data_parallel,one_bit,block_momentum]
//                     [--workers 1,2,4] [--steps S] [--threads T] [--no-reference]
//   mpirun -np N bench_distributed --worker MODEL ALGORITHM --steps S   (one row: the child)
//
// The driver starts each row under `mpirun --oversubscribe -np N` (N = 1 without mpirun), each
// worker with T OpenMP threads (default 1: on a loaded machine a second thread that is not
// scheduled stalls every parallel region), and distributed_torch.py likewise. A step
// is one global minibatch of 256 samples (block momentum: 256 per worker, CNTK's minibatch
// scale), read partitioned from the IDX files, trained with seed 002's momentum_sgd; 3
// warm-up steps, then S timed ones.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/fashion_mnist.h"
#include "loom/loom.h"

using namespace loom;

namespace {

const std::string kData = "/usr/share/datasets/fashion-mnist/";
constexpr size_t kMinibatch = 256, kWarmUp = 3;

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// ---- a worker: one row ------------------------------------------------------------------------

int run_worker(const std::string& model_name, const std::string& algorithm, size_t steps) {
  auto communicator = distributed::mpi_communicator();
  const size_t n = communicator->num_workers(), rank = communicator->rank();
  set_fixed_random_seed(1);
  const bool conv = model_name == "convnet";
  const NDShape image = conv ? NDShape{28, 28} : NDShape{784};
  MinibatchSource source(
      std::make_shared<IDXDeserializer>(IDXStreamDefs{
          {"features",
           {.path = kData + "train-images-idx3-ubyte.gz", .shape = image, .scale = 1.0 / 255}},
          {"labels",
           {.path = kData + "train-labels-idx1-ubyte.gz", .num_classes = 10, .is_sparse = true}}}),
      {.randomization_seed = 2});
  Variable x = input_variable(image);
  Variable y = input_variable({10}, {.is_sparse = true});
  Function model = conv ? examples::create_model_mn()
                        : Sequential({Dense(200, {.activation = relu}),
                                      Dense(200, {.activation = relu}), Dense(10)});
  Variable z = model(x);
  Function criterion = combine({cross_entropy_with_softmax(z, y), classification_error(z, y)});
  auto local = momentum_sgd(model.parameters(), learning_parameter_schedule_per_sample(0.001),
                            momentum_schedule_per_sample(0.9990239141819757));
  std::shared_ptr<distributed::DistributedLearner> learner;
  if (algorithm == "data_parallel") {
    learner = distributed::data_parallel_distributed_learner(local);
  } else if (algorithm == "one_bit") {
    learner = distributed::data_parallel_distributed_learner(local, 0, 1);
  } else {
    // A block of 4 minibatches per worker.
    learner = distributed::block_momentum_distributed_learner(local, 4 * kMinibatch * n);
  }
  Trainer trainer(z, criterion, {learner});
  const std::unordered_map<Variable, StreamInformation> input_map{{x, source["features"]},
                                                                  {y, source["labels"]}};
  const size_t global = kMinibatch * learner->minibatch_size_scale_factor();
  auto step = [&] { trainer.train_minibatch(source.next_minibatch(global, input_map, n, rank)); };
  for (size_t i = 0; i < kWarmUp; ++i) step();
  communicator->barrier();
  const uint64_t bytes = communicator->bytes_sent();
  const auto comm = communicator->communication_time();
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < steps; ++i) step();
  communicator->barrier();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double comm_ms =
      std::chrono::duration<double, std::milli>(communicator->communication_time() - comm).count();
  // The slowest worker's view decides; every worker's communication time is averaged.
  double figures[2] = {comm_ms, double(communicator->bytes_sent() - bytes)};
  communicator->all_reduce_sum(figures);
  if (communicator->is_main())
    std::printf(
        "RESULT samples_per_second=%.1f bytes_per_step=%.0f comm_ms_per_step=%.3f "
        "ms_per_step=%.3f\n",
        double(steps * global) / seconds, figures[1] / double(n) / double(steps),
        figures[0] / double(n) / double(steps), 1000.0 * seconds / double(steps));
  communicator->finalize();
  return 0;
}

// ---- the driver -------------------------------------------------------------------------------

struct Figures {
  double samples_per_second = 0, bytes_per_step = 0, comm_ms_per_step = 0, ms_per_step = 0;
  bool ok = false;
};

// Runs a command; its "key=value" figures from the last line starting with `tag`.
Figures run(const std::string& command, const std::string& tag) {
  Figures f;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return f;
  char line[4096];
  std::string output;
  while (std::fgets(line, sizeof line, pipe)) {
    output += line;
    if (std::string(line).rfind(tag, 0) != 0) continue;
    std::map<std::string, double> values;
    std::stringstream in(line + tag.size());
    for (std::string item; in >> item;) {
      const auto eq = item.find('=');
      if (eq != std::string::npos) values[item.substr(0, eq)] = std::atof(item.c_str() + eq + 1);
    }
    f = {values["samples_per_second"], values["bytes_per_step"], values["comm_ms_per_step"],
         values["ms_per_step"], true};
  }
  if (pclose(pipe) != 0 || !f.ok) {
    std::fprintf(stderr, "failed: %s\n%s", command.c_str(), output.c_str());
    f.ok = false;
  }
  return f;
}

std::string script_path() {
  for (const std::filesystem::path& p :
       {std::filesystem::path(__FILE__).parent_path() / "distributed_torch.py",
        std::filesystem::path("../../bench/distributed_torch.py")})
    if (std::filesystem::exists(p)) return p.string();
  return "";
}

int run_driver(const std::vector<std::string>& models, const std::vector<std::string>& algorithms,
               const std::vector<size_t>& workers, size_t steps, size_t threads, bool reference,
               const std::string& self) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string root =
      geteuid() == 0 ? "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " : "";
  const std::string script = reference ? script_path() : "";
  if (reference && script.empty()) std::printf("distributed_torch.py not found: Loom only\n");
  std::printf(
      "%zu cores, %zu threads per worker; a step is a global minibatch of %zu samples (block "
      "momentum: %zu per worker); %zu timed steps\n\n",
      cores, threads, kMinibatch, kMinibatch, steps);
  std::printf("%-8s %-15s %2s %12s %8s %14s %10s %10s %12s %7s\n", "model", "algorithm", "N",
              "samples/s", "speed-up", "bytes/step", "ms/step", "comm ms", "torch DDP/s", "ratio");
  for (const std::string& model : models) {
    for (const std::string& algorithm : algorithms) {
      double base = 0;
      for (size_t n : workers) {
        const std::string env = root + "OMP_NUM_THREADS=" + std::to_string(threads) + " ";
        const std::string launcher =
            n == 1 ? "" : "mpirun --oversubscribe -np " + std::to_string(n) + " ";
        const Figures f = run(env + launcher + self + " --worker " + model + " " + algorithm +
                                  " --steps " + std::to_string(steps),
                              "RESULT");
        if (!f.ok) continue;
        if (n == workers.front()) base = f.samples_per_second / double(n);
        Figures torch;
        if (!script.empty() && algorithm == "data_parallel")
          torch = run("/usr/bin/python3 " + script + " --model " + model + " --workers " +
                          std::to_string(n) + " --threads " + std::to_string(threads) +
                          " --steps " + std::to_string(steps),
                      "RESULT");
        std::printf("%-8s %-15s %2zu %12.1f %8.2f %14.0f %10.2f %10.2f", model.c_str(),
                    algorithm.c_str(), n, f.samples_per_second,
                    base > 0 ? f.samples_per_second / base : 0.0, f.bytes_per_step, f.ms_per_step,
                    f.comm_ms_per_step);
        if (torch.ok)
          std::printf(" %12.1f %7.2f", torch.samples_per_second,
                      f.samples_per_second / torch.samples_per_second);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  std::printf(
      "\nspeed-up: samples/s over N times the first row's per-worker samples/s; "
      "ratio: Loom / PyTorch DDP (gloo). Measured on a shared machine: oversubscribed "
      "rows (N > cores) show the bytes and the communication, not the speed-up.\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models{"mlp", "convnet"},
      algorithms{"data_parallel", "one_bit", "block_momentum"};
  std::vector<size_t> workers{1, 2, 4};
  size_t steps = 20, threads = 1;
  bool reference = true;
  std::string worker_model, worker_algorithm;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models") {
      models = split(value());
    } else if (a == "--algorithms") {
      algorithms = split(value());
    } else if (a == "--workers") {
      workers.clear();
      for (const auto& w : split(value())) workers.push_back(std::stoul(w));
    } else if (a == "--steps") {
      steps = std::stoul(value());
    } else if (a == "--threads") {
      threads = std::max<size_t>(1, std::stoul(value()));
    } else if (a == "--no-reference") {
      reference = false;
    } else if (a == "--worker" && i + 2 < argc) {
      worker_model = argv[++i];
      worker_algorithm = argv[++i];
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!worker_model.empty()) {
    models = {worker_model};
    algorithms = {worker_algorithm};
  }
  for (const auto& m : models)
    if (m != "mlp" && m != "convnet")
      return std::fprintf(stderr, "unknown model %s\n", m.c_str()), 2;
  for (const auto& a : algorithms)
    if (a != "data_parallel" && a != "one_bit" && a != "block_momentum")
      return std::fprintf(stderr, "unknown algorithm %s\n", a.c_str()), 2;
  if (!worker_model.empty()) return run_worker(worker_model, worker_algorithm, steps);
  return run_driver(models, algorithms, workers, steps, threads, reference,
                    std::filesystem::canonical("/proc/self/exe").string());
}
