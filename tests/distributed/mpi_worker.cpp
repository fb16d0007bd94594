// One worker of the multi-process tests: run under mpirun by run_mpi.py, which checks what
// the workers print. `mpi_worker MODE`; each mode checks its results and prints "PASS MODE"
// on every worker (the lost_worker and hung_worker modes print the error the survivors got).
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <mpi.h>

#include "loom/loom.h"

using namespace loom;
using namespace loom::distributed;

namespace {

using Gradients = std::unordered_map<Variable, NDArrayView>;

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

// Every worker's copy of v, to compare them.
std::vector<std::vector<float>> gathered(Communicator& comm, const std::vector<float>& v) {
  const auto all = comm.all_gather_bytes(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()), v.size() * 4));
  std::vector<std::vector<float>> out;
  for (const auto& bytes : all) {
    out.emplace_back(bytes.size() / 4);
    std::memcpy(out.back().data(), bytes.data(), bytes.size());
  }
  return out;
}

void collectives(Communicator& comm) {
  const size_t n = comm.num_workers(), r = comm.rank();
  // Every worker, in rank order, each with its host's name (CNTK's WorkerDescriptor).
  const std::vector<WorkerDescriptor> workers = comm.workers();
  check(workers.size() == n, "one descriptor a worker");
  for (size_t k = 0; k < workers.size(); ++k)
    check(workers[k].global_rank == k && !workers[k].host_id.empty(), "worker descriptors");
  check(workers[r].host_id == comm.current_worker().host_id, "this worker's host");
  // Small tensors share a bucket; the large one (8 MiB) is reduced in place, in pieces.
  std::vector<NDArrayView> tensors{
      NDArrayView::from_vector<float>({3}, {float(r), 1.0f, 2.0f * float(r)}),
      NDArrayView::from_vector<double>({2}, {0.5, double(r * r)}),
      NDArrayView(DataType::Float32, {2u << 20})};
  tensors[2].fill(double(r + 1));
  comm.all_reduce_sum(tensors);
  const double ranks = double(n * (n - 1) / 2);
  double squares = 0;
  for (size_t k = 0; k < n; ++k) squares += double(k * k);
  check(
      tensors[0].to_vector<float>() == std::vector<float>{float(ranks), float(n), float(2 * ranks)},
      "float bucket sum");
  check(tensors[1].to_vector<double>() == std::vector<double>{0.5 * double(n), squares},
        "double bucket sum");
  for (float v : tensors[2].to_vector<float>()) check(v == float(n * (n + 1) / 2), "in-place sum");

  // An AllReduceSum given its tensors one by one, last first (a bucket waits for the ones
  // before it), round after round: two small floats share a bucket, a double starts another,
  // the 1.5 MiB one goes in place in two pieces.
  AllReduceSum overlapped(comm, {{DataType::Float32, 5},
                                 {DataType::Float32, 3},
                                 {DataType::Float64, 2},
                                 {DataType::Float32, 3u << 17}});
  for (size_t round = 1; round <= 3; ++round) {
    std::vector<NDArrayView> parts{
        NDArrayView(DataType::Float32, {5}), NDArrayView(DataType::Float32, {3}),
        NDArrayView(DataType::Float64, {2}), NDArrayView(DataType::Float32, {3u << 17})};
    for (size_t i = 0; i < parts.size(); ++i) parts[i].fill(double(round * (i + 1) * (r + 1)));
    for (size_t i = parts.size(); i-- > 0;) overlapped.ready(i, parts[i]);
    overlapped.finish();
    for (size_t i = 0; i < parts.size(); ++i) {
      const double want = double(round * (i + 1)) * double(n * (n + 1) / 2);
      const auto values = parts[i].dtype() == DataType::Float32
                              ? [&] {
                                  const auto f = parts[i].to_vector<float>();
                                  return std::vector<double>(f.begin(), f.end());
                                }()
                              : parts[i].to_vector<double>();
      for (double v : values) check(v == want, "overlapped sum");
    }
  }

  // Worker r sends worker j r + j + 1 bytes of value 10 r + j.
  std::vector<std::byte> out, in, expected;
  std::vector<size_t> out_bytes, in_bytes;
  for (size_t j = 0; j < n; ++j) {
    out.insert(out.end(), r + j + 1, std::byte(10 * r + j));
    expected.insert(expected.end(), r + j + 1, std::byte(10 * j + r));
    out_bytes.push_back(r + j + 1);
    in_bytes.push_back(r + j + 1);
  }
  in.resize(expected.size());
  comm.all_to_all(out, out_bytes, in, in_bytes);
  check(in == expected, "all_to_all blocks");

  std::vector<std::byte> mine(r + 1, std::byte(r));
  const auto all = comm.all_gather_bytes(mine);
  for (size_t j = 0; j < n; ++j)
    check(all[j] == std::vector<std::byte>(j + 1, std::byte(j)), "all_gather_bytes block");
  check(comm.bytes_sent() > 0, "bytes are counted");
  comm.barrier();
}

// Worker 1 is lost in the middle of the run (lost_worker: it dies; hung_worker: it stops
// taking part); the others must get WorkerLostError naming it, then end the job.
void lose_worker_1(Communicator& comm, bool dies) {
  comm.set_timeout(std::chrono::seconds(2));  // run_mpi.py's TIME_LIMIT_S
  comm.barrier();
  if (comm.rank() == 1) {
    if (dies) std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(100));  // until the others abort the job
  }
  const auto start = std::chrono::steady_clock::now();
  double values[1] = {1.0};
  try {
    comm.all_reduce_sum(values);
  } catch (const WorkerLostError& e) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("LOST after %.3f s on worker %zu: %s\n", seconds, comm.rank(), e.what());
    std::fflush(stdout);
    // finalize aborts the job: first the others, which time out within milliseconds of this
    // worker, print their error too.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    comm.finalize();
  }
  throw std::runtime_error("all_reduce_sum returned although worker 1 is gone");
}

// A linear regression y = x . w + b on a fixed random data set; the gradient of the summed
// squared error over rows [begin, end) of minibatch `step`.
struct Regression {
  static constexpr size_t kInputs = 5, kMinibatch = 16;
  std::vector<float> x, y;

  explicit Regression(size_t steps) {
    RandomGenerator random(7);
    const float w[kInputs] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f};
    for (size_t i = 0; i < steps * kMinibatch; ++i) {
      float target = 0.3f;
      for (size_t k = 0; k < kInputs; ++k) {
        x.push_back(float(random.normal()));
        target += w[k] * x.back();
      }
      y.push_back(target + 0.01f * float(random.normal()));
    }
  }
  // Fills the gradients of (w, b) and returns the loss sum.
  double gradients(const Parameter& w, const Parameter& b, size_t step, size_t begin, size_t end,
                   Gradients& g) const {
    std::vector<float> gw(kInputs, 0.0f), gb(1, 0.0f);
    const auto wv = w.value().to_vector<float>();
    const float bv = b.value().to_vector<float>()[0];
    double loss = 0;
    for (size_t i = step * kMinibatch + begin; i < step * kMinibatch + end; ++i) {
      float prediction = bv;
      for (size_t k = 0; k < kInputs; ++k) prediction += wv[k] * x[i * kInputs + k];
      const float e = prediction - y[i];
      loss += 0.5 * double(e) * double(e);
      for (size_t k = 0; k < kInputs; ++k) gw[k] += e * x[i * kInputs + k];
      gb[0] += e;
    }
    g.insert_or_assign(w, NDArrayView::from_vector<float>({kInputs}, gw));
    g.insert_or_assign(b, NDArrayView::from_vector<float>({1}, gb));
    return loss;
  }
};

std::shared_ptr<Learner> local_learner(const Parameter& w, const Parameter& b) {
  return momentum_sgd({w, b}, learning_rate_schedule(0.05, UnitType::sample),
                      momentum_schedule(0.9));
}

// N workers, each with its share of every global minibatch, end with the parameters of one
// process that trains on the whole minibatch; the first 32 samples are a warm start on the
// full data, and one worker has an empty minibatch once.
void data_parallel(Communicator& comm) {
  constexpr size_t kSteps = 12, kWarmStart = 32;
  const size_t n = comm.num_workers(), r = comm.rank();
  const Regression data(kSteps);
  Parameter w = parameter(NDArrayView(DataType::Float32, {Regression::kInputs}));
  Parameter b = parameter(NDArrayView(DataType::Float32, {1}));
  Parameter w_ref = parameter(NDArrayView(DataType::Float32, {Regression::kInputs}));
  Parameter b_ref = parameter(NDArrayView(DataType::Float32, {1}));
  auto learner = data_parallel_distributed_learner(local_learner(w, b), kWarmStart);
  auto reference = local_learner(w_ref, b_ref);
  Gradients g, g_ref;
  for (size_t step = 0; step < kSteps; ++step) {
    const bool warm = learner->total_number_of_samples_seen() < kWarmStart;
    size_t begin = warm ? 0 : Regression::kMinibatch * r / n;
    const size_t end = warm ? Regression::kMinibatch : Regression::kMinibatch * (r + 1) / n;
    // In step 5 worker 0 has no data (worker 1 takes its share): it still takes the step.
    if (step == 5 && r <= 1) begin = r == 0 ? end : 0;
    MinibatchInfo info;
    info.number_of_samples = end - begin;
    if (begin < end) info.training_loss = data.gradients(w, b, step, begin, end, g);
    const double loss = data.gradients(w_ref, b_ref, step, 0, Regression::kMinibatch, g_ref);
    check(learner->update(g, info), "update returns true");
    reference->update(g_ref, Regression::kMinibatch);
    check(info.number_of_samples == Regression::kMinibatch, "global sample count");
    check(std::abs(info.training_loss - loss) <= 1e-4 * (1 + loss), "global loss sum");
  }
  const double dw = max_difference(w.value().to_vector<float>(), w_ref.value().to_vector<float>());
  const double db = max_difference(b.value().to_vector<float>(), b_ref.value().to_vector<float>());
  std::printf("worker %zu: max |w - reference| %.3g, |b - reference| %.3g\n", r, dw, db);
  check(dw < 1e-5 && db < 1e-5, "parameters equal the single-process reference");
  check(learner->total_number_of_samples_seen() == kSteps * Regression::kMinibatch,
        "the local learner counts global samples");
}

// 1-bit SGD on a regression with a [8 x 16] weight (one column of 128): converges, every worker
// holds the same model, a checkpoint (with the residuals) resumes exactly, and it sends at most
// 1/16 of the bytes of a float all-reduce for a large tensor. 3 bits converge as well.
void one_bit(Communicator& comm) {
  const size_t n = comm.num_workers(), r = comm.rank();
  constexpr size_t kIn = 8, kOut = 16, kSamples = 8;
  RandomGenerator random(11);
  std::vector<float> truth(kIn * kOut);
  for (auto& t : truth) t = float(random.normal());
  Parameter w = parameter(NDArrayView(DataType::Float32, {kIn, kOut}));
  std::shared_ptr<DistributedLearner> learner;
  RandomGenerator inputs(100 + r);  // each worker its own data
  // loss = 1/2 |x W - x T|^2 per sample: gradient x^T x (W - T).
  auto step = [&]() {
    const auto wv = w.value().to_vector<float>();
    std::vector<float> gw(kIn * kOut, 0.0f);
    double loss = 0;
    for (size_t s = 0; s < kSamples; ++s) {
      std::vector<float> x(kIn);
      for (auto& v : x) v = float(inputs.normal());
      for (size_t o = 0; o < kOut; ++o) {
        float e = 0;
        for (size_t i = 0; i < kIn; ++i) e += x[i] * (wv[i * kOut + o] - truth[i * kOut + o]);
        loss += 0.5 * double(e) * double(e);
        for (size_t i = 0; i < kIn; ++i) gw[i * kOut + o] += x[i] * e;
      }
    }
    Gradients g{{w, NDArrayView::from_vector<float>({kIn, kOut}, gw)}};
    MinibatchInfo info;
    info.number_of_samples = kSamples;
    info.training_loss = loss;
    learner->update(g, info);
    return info.training_loss / double(info.number_of_samples);
  };
  for (int bits : {3, 1}) {
    w.value().fill(0.0);
    learner = data_parallel_distributed_learner(
        sgd({w}, learning_rate_schedule(0.02, UnitType::sample)), 0, bits);
    const double first = step();
    double last = first;
    for (int i = 0; i < 150; ++i) last = step();
    std::printf("worker %zu: %d-bit loss per sample %.4g -> %.4g\n", r, bits, first, last);
    check(last < 0.01 * first, std::to_string(bits) + "-bit SGD converges");
  }
  const auto copies = gathered(comm, w.value().to_vector<float>());
  for (size_t j = 1; j < n; ++j) check(copies[j] == copies[0], "every worker holds the same model");

  // Checkpoint, 3 steps, restore (parameters and learner), the same 3 steps: bit-identical.
  const Dictionary saved = learner->create_checkpoint();
  const NDArrayView saved_w = w.value().deep_clone();
  RandomGenerator inputs_at_checkpoint = inputs;
  for (int i = 0; i < 3; ++i) step();
  const auto continued = w.value().to_vector<float>();
  w.value().copy_from(saved_w);
  learner->restore_from_checkpoint(saved);
  inputs = inputs_at_checkpoint;
  for (int i = 0; i < 3; ++i) step();
  check(w.value().to_vector<float>() == continued, "a restored 1-bit learner resumes exactly");

  // Bytes per step for a [64 x 1024] gradient: 1-bit against float.
  Parameter big = parameter(NDArrayView(DataType::Float32, {64, 1024}));
  auto bytes_of_step = [&](int bits) {
    auto l = data_parallel_distributed_learner(sgd({big}, 0.001), 0, bits);
    Gradients g{{big, NDArrayView(DataType::Float32, {64, 1024})}};
    g.at(big).fill(1.0);
    const uint64_t before = comm.bytes_sent();
    l->update(g, 1);
    return double(comm.bytes_sent() - before);
  };
  const double float_bytes = bytes_of_step(32), one_bit_bytes = bytes_of_step(1);
  std::printf("worker %zu: bytes per step: float %.0f, 1-bit %.0f (1/%.1f)\n", r, float_bytes,
              one_bit_bytes, float_bytes / one_bit_bytes);
  check(one_bit_bytes * 16 <= float_bytes, "1-bit sends at most 1/16 of float's bytes");
}

// Block momentum with 2 workers against the rule computed here by hand: local SGD steps on
// p with gradient M (p - target_r), then every block d = sum_r (start - p_r),
// v = bm v + (1 - bm) d, p = start - v - bm v (Nesterov), with bm = 1 - 1/N.
void block_momentum(Communicator& comm) {
  const size_t n = comm.num_workers(), r = comm.rank();
  constexpr size_t kMinibatch = 2, kBlock = 8, kSteps = 8;  // 2 local steps per block
  constexpr float kLr = 0.1f;
  auto target = [](size_t worker, size_t k) { return float(worker + 1) * float(k + 1); };
  Parameter p = parameter(NDArrayView(DataType::Float32, {3}));
  auto learner = block_momentum_distributed_learner(
      sgd({p}, learning_rate_schedule(kLr, UnitType::sample)), kBlock);
  check(learner->minibatch_size_scale_factor() == n, "the session scales minibatches by N");
  auto gradient = [&](const std::vector<float>& v, size_t worker) {
    std::vector<float> g(3);
    for (size_t k = 0; k < 3; ++k) g[k] = float(kMinibatch) * (v[k] - target(worker, k));
    return g;
  };
  // The reference: every worker's local model, in float as the learners compute.
  std::vector<std::vector<float>> local(n, std::vector<float>(3, 0.0f));
  std::vector<float> start(3, 0.0f), v(3, 0.0f);
  const float bm = 1.0f - 1.0f / float(n);
  const size_t local_steps_per_block = kBlock / n / kMinibatch;
  for (size_t step = 0; step < kSteps; ++step) {
    const auto g = gradient(p.value().to_vector<float>(), r);
    Gradients grads{{p, NDArrayView::from_vector<float>({3}, g)}};
    check(learner->update(grads, kMinibatch), "update returns true");
    for (size_t w = 0; w < n; ++w) {
      const auto gw = gradient(local[w], w);
      for (size_t k = 0; k < 3; ++k) local[w][k] -= kLr * gw[k];
    }
    if ((step + 1) % local_steps_per_block == 0) {
      for (size_t k = 0; k < 3; ++k) {
        float d = 0;
        for (size_t w = 0; w < n; ++w) d += start[k] - local[w][k];
        v[k] = bm * v[k] + (1.0f - bm) * d;
        start[k] = start[k] - v[k] - bm * v[k];
        for (size_t w = 0; w < n; ++w) local[w][k] = start[k];
      }
    }
  }
  const double diff = max_difference(p.value().to_vector<float>(), local[r]);
  std::printf("worker %zu: block momentum p = %.5f %.5f %.5f, max |p - reference| %.3g\n", r,
              double(p.value().to_vector<float>()[0]), double(p.value().to_vector<float>()[1]),
              double(p.value().to_vector<float>()[2]), diff);
  check(diff < 1e-4, "block momentum matches the hand-computed rule");
  check(learner->total_number_of_samples_seen() == kSteps * kMinibatch,
        "the local learner counts local samples");

  // A checkpoint in the middle of a block ends the block: every worker then holds one model.
  Gradients grads{{p, NDArrayView::from_vector<float>({3}, gradient(local[r], r))}};
  learner->update(grads, kMinibatch);
  const Dictionary saved = learner->create_checkpoint();
  const auto copies = gathered(comm, p.value().to_vector<float>());
  for (size_t j = 1; j < n; ++j) check(copies[j] == copies[0], "one model after a checkpoint");
  check(saved.get<uint64_t>("localTotalNumSamplesSeen") == (kSteps + 1) * kMinibatch,
        "the checkpoint counts this worker's samples");
}

// Worker 1 builds a model whose second parameter has another shape.
void model_mismatch(Communicator& comm) {
  Parameter a = parameter(NDArrayView(DataType::Float32, {4}));
  Parameter b = parameter(NDArrayView(DataType::Float32, {comm.rank() == 1 ? 3u : 2u, 5}));
  auto learner = data_parallel_distributed_learner(sgd({a, b}, 0.1));
  Gradients g{{a, NDArrayView(DataType::Float32, a.shape())},
              {b, NDArrayView(DataType::Float32, b.shape())}};
  for (int attempt = 0; attempt < 2; ++attempt) {  // a second update fails the same way
    try {
      learner->update(g, 1);
      throw std::runtime_error("workers with different models trained together");
    } catch (const ShapeError& e) {
      std::printf("worker %zu: %s\n", comm.rank(), e.what());
      check(std::strstr(e.what(), "models differ") && std::strstr(e.what(), "worker 1"),
            "the error names the differing worker");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Training sessions (the Trainer, training_session and Function::train/test under mpirun).

// A small regression y = tanh-net(x) on data that chunks of 24 sequences split unequally
// between the workers (7 chunks: 4 and 3 for 2 workers, 2, 2, 2 and 1 for 4).
struct SessionData {
  static constexpr size_t kInputs = 5, kTrain = 160, kCv = 48, kChunk = 24;
  NDArrayView x = make(kTrain, 3), y = targets(x), x_cv = make(kCv, 4), y_cv = targets(x_cv);

  static NDArrayView make(size_t n, uint64_t seed) {
    RandomGenerator random(seed);
    std::vector<float> v(n * kInputs);
    for (auto& e : v) e = float(random.normal());
    return NDArrayView::from_vector<float>({n, kInputs}, v);
  }
  static NDArrayView targets(const NDArrayView& xs) {
    const auto xv = xs.to_vector<float>();
    std::vector<float> y;
    for (size_t i = 0; i < xs.shape()[0]; ++i) {
      float target = 0.1f;
      for (size_t k = 0; k < kInputs; ++k) target += (k % 2 ? -0.5f : 0.75f) * xv[i * kInputs + k];
      y.push_back(std::tanh(target));
    }
    return NDArrayView::from_vector<float>({xs.shape()[0], 1}, y);
  }
  // Randomized, so that partitions go by chunk.
  MinibatchSource source(const NDArrayView& xs, const NDArrayView& ys, size_t sweeps) const {
    return MinibatchSourceFromData({{"x", xs}, {"y", ys}}, {.max_sweeps = sweeps},
                                   {.sequences_per_chunk = kChunk});
  }
};

struct Net {
  explicit Net(size_t inputs = SessionData::kInputs, size_t hidden = 8)
      : x(input_variable(inputs, {.name = "x"})),
        model(Sequential({Dense(hidden, {.activation = loom::tanh}), Dense(1)})) {}

  Variable x;
  Variable y = input_variable(1, {.name = "y"});
  Function model;
  Variable z = model(x);
  Function criterion = combine({squared_error(z, y), squared_error(z, y)});

  // Starts from the other net's parameters.
  void copy_parameters(const Net& other) {
    const auto mine = model.parameters(), theirs = other.model.parameters();
    for (size_t i = 0; i < mine.size(); ++i) mine[i].value().copy_from(theirs[i].value());
  }
  std::vector<float> parameters() const {
    std::vector<float> all;
    for (const Parameter& p : model.parameters())
      for (float v : p.value().to_vector<float>()) all.push_back(v);
    return all;
  }
};

void check_same_on_every_worker(Communicator& comm, const std::vector<float>& v,
                                const std::string& what) {
  const auto copies = gathered(comm, v);
  for (size_t j = 1; j < copies.size(); ++j) check(copies[j] == copies[0], what);
}

// Block momentum in a training session whose workers get unequal partitions: the blocks end at
// the same minibatch on every worker (the counts travel every minibatch), so the session ends;
// cross-validation and test are partitioned too and every worker reports the sums over all.
void session_block_momentum(Communicator& comm) {
  const size_t r = comm.rank();
  constexpr size_t kSweeps = 3, kBlock = 64;
  const SessionData data;
  set_fixed_random_seed(5);
  Net net;
  auto learner = block_momentum_distributed_learner(
      momentum_sgd(net.model.parameters(), learning_rate_schedule(0.02, UnitType::sample),
                   momentum_schedule(0.9)),
      kBlock);
  std::ostringstream printed;
  auto printer = std::make_shared<ProgressPrinter>(
      ProgressPrinterOptions{.rank = r, .distributed_freq = 1, .out = &printed});
  auto collector = std::make_shared<SummaryCollector>();
  Trainer trainer(net.z, net.criterion, {learner}, {printer, collector});

  MinibatchSource source = data.source(data.x, data.y, kSweeps);
  MinibatchSource cv_source = data.source(data.x_cv, data.y_cv, 1);
  MinibatchSource test_source = data.source(data.x_cv, data.y_cv, 1);
  std::vector<double> cv_errors;
  const std::string checkpoint = "session_block_momentum_" + std::to_string(comm.num_workers());
  training_session(
      {.trainer = trainer,
       .mb_source = source,
       .mb_size = 8,
       .model_inputs_to_streams = {{net.x, source["x"]}, {net.y, source["y"]}},
       .progress_frequency = SessionData::kTrain,
       // A checkpoint ends a block: every 4 blocks, so that the blocks stay 64 samples long.
       .checkpoint_config = {.filename = checkpoint, .frequency = 4 * kBlock, .restore = false},
       .cv_config = {.source = cv_source,
                     .frequency = 2 * kBlock,
                     .minibatch_size = 16,
                     .callback =
                         [&](size_t, double error, size_t samples, size_t) {
                           // Every 2 blocks: the workers hold one model, whose error over
                           // all of the CV data is what one process computes.
                           check_same_on_every_worker(comm, net.parameters(),
                                                      "one model at a block's end");
                           const double local = net.criterion.test({data.x_cv, data.y_cv}).metric;
                           check(samples == SessionData::kCv, "CV counts every worker's samples");
                           check(std::abs(error - local) <= 1e-5 * (1 + local),
                                 "CV error is the error over all of the data");
                           cv_errors.push_back(error);
                           return true;
                         },
                     .model_inputs_to_streams = {{net.x, cv_source["x"]}, {net.y, cv_source["y"]}}},
       .test_config = {.source = test_source,
                       .minibatch_size = 16,
                       .model_inputs_to_streams = {{net.x, test_source["x"]},
                                                   {net.y, test_source["y"]}}}})
      .train();
  if (comm.is_main()) std::filesystem::remove(checkpoint);

  check(trainer.total_number_of_samples_seen() == kSweeps * SessionData::kTrain,
        "the trainer counts the samples of all workers");
  check_same_on_every_worker(comm, net.parameters(), "one model on every worker at the end");
  // The partitions were unequal (else this test would not test them).
  const std::vector<float> local{float(learner->learner()->total_number_of_samples_seen())};
  const auto shares = gathered(comm, local);
  bool unequal = false;
  for (const auto& s : shares) unequal |= s != shares[0];
  check(unequal, "the workers' partitions differ");
  // Every worker saw the same CV and test numbers.
  std::vector<float> numbers(cv_errors.begin(), cv_errors.end());
  // The trainer's writers see every CV pass, then the test.
  const auto& tested = collector->test_summaries.back();
  check(collector->test_summaries.size() == cv_errors.size() + 1 &&
            tested.samples == SessionData::kCv,
        "the test counts every worker's samples");
  numbers.push_back(float(*tested.metric));
  for (const auto& e : collector->training_summaries) numbers.push_back(float(e.loss));
  check_same_on_every_worker(comm, numbers, "every worker reports the same CV, test and loss");
  const double local_test = net.criterion.test({data.x_cv, data.y_cv}).metric;
  check(std::abs(*tested.metric - local_test) <= 1e-5 * (1 + local_test),
        "the test error is the error over all of the data");
  // Function::test partitioned over the workers gives what one process computes.
  const TestSummary shared = net.criterion.test(
      {data.x_cv, data.y_cv}, TestOptions{.minibatch_size = 7, .distributed = true});
  check(shared.samples == SessionData::kCv && std::abs(shared.metric - local_test) <= 1e-5,
        "Function::test(distributed) equals one process's");
  // Progress: rank 0 prints CNTK's lines, including one per block; the others print nothing.
  const std::string text = printed.str();
  std::printf("worker %zu: %zu CV passes, test error %.5f, local samples %.0f\n", r,
              cv_errors.size(), *tested.metric, double(local[0]));
  if (r == 0) {
    std::printf("%s", text.c_str());
    check(text.find("Distributed training: #Syncs elapsed = 1, #Samples elapsed = ") !=
                  std::string::npos &&
              text.find("Finished Epoch[3]") != std::string::npos,
          "rank 0 prints the epochs and the synchronizations");
  } else {
    check(text.empty(), "only rank 0 prints");
  }
}

// Function::train with a data-parallel learner on N workers ends with the parameters (and
// reports the losses) of one process that trains on the same global minibatches in the same
// order, through the whole Trainer and training session.
void session_equivalence(Communicator& comm) {
  const SessionData data;
  set_fixed_random_seed(5);
  Net net, reference;
  reference.copy_parameters(net);
  auto local_learner = [](const Net& n) {
    return momentum_sgd(n.model.parameters(), learning_rate_schedule(0.02, UnitType::sample),
                        momentum_schedule(0.9));
  };
  auto train = [&](Net& n, std::shared_ptr<Learner> learner) {
    MinibatchSource source = data.source(data.x, data.y, 3);
    return n.criterion.train(source, {.minibatch_size = 16,
                                      .parameter_learners = {learner},
                                      .max_epochs = 3,
                                      .epoch_size = SessionData::kTrain});
  };
  const TrainSummary distributed =
      train(net, data_parallel_distributed_learner(local_learner(net)));
  const TrainSummary one = train(reference, local_learner(reference));
  const double d = max_difference(net.parameters(), reference.parameters());
  std::printf("worker %zu: max |parameters - one process's| %.3g\n", comm.rank(), d);
  check(d < 1e-5, "N workers end with one process's parameters");
  check(distributed.updates.size() == one.updates.size(), "as many minibatches");
  for (size_t i = 0; i < one.updates.size(); ++i)
    check(distributed.updates[i].samples == one.updates[i].samples &&
              std::abs(distributed.updates[i].loss - one.updates[i].loss) <= 1e-5,
          "every minibatch's global loss and sample count");
  check_same_on_every_worker(comm, net.parameters(), "one model on every worker");
}

// The Trainer's data-parallel step sums each gradient over the workers while backward goes on
// (started from the executor's gradient-ready calls): with a weight of 1.2 MB (reduced where it
// is, in pieces) and small ones (packed in a bucket), and a worker with an empty minibatch once
// (it has no backward and sums zeros in update), N workers end with one process's parameters.
void trainer_overlap(Communicator& comm) {
  constexpr size_t kInputs = 600, kHidden = 512, kSteps = 6, kMinibatch = 16;
  const size_t n = comm.num_workers(), r = comm.rank();
  set_fixed_random_seed(7);
  Net net(kInputs, kHidden), reference(kInputs, kHidden);
  reference.copy_parameters(net);
  RandomGenerator random(11);
  std::vector<float> xs(kSteps * kMinibatch * kInputs), ys;
  for (auto& e : xs) e = float(random.normal());
  for (size_t i = 0; i < kSteps * kMinibatch; ++i) ys.push_back(std::tanh(xs[i * kInputs]));
  auto learner_of = [](const Net& m) {
    return momentum_sgd(m.model.parameters(), learning_rate_schedule(0.01, UnitType::sample),
                        momentum_schedule(0.9));
  };
  Trainer trainer(net.z, net.criterion, {data_parallel_distributed_learner(learner_of(net))});
  Trainer one(reference.z, reference.criterion, {learner_of(reference)});
  auto rows = [&](const Net& m, size_t first, size_t end) {
    return ValueMap{
        {m.x, Value::create_batch<float>({kInputs}, {xs.begin() + long(first * kInputs),
                                                     xs.begin() + long(end * kInputs)})},
        {m.y, Value::create_batch<float>({1}, {ys.begin() + long(first), ys.begin() + long(end)})}};
  };
  for (size_t step = 0; step < kSteps; ++step) {
    const size_t base = step * kMinibatch;
    size_t first = base + kMinibatch * r / n, end = base + kMinibatch * (r + 1) / n;
    if (step == 2 && r == 0) end = base + kMinibatch * 2 / n;  // worker 0 takes worker 1's share
    if (step == 2 && r == 1) first = end;
    trainer.train_minibatch(rows(net, first, end));
    one.train_minibatch(rows(reference, base, base + kMinibatch));
    check(trainer.previous_minibatch_sample_count() == kMinibatch,
          "global sample count in step " + std::to_string(step) + ": " +
              std::to_string(trainer.previous_minibatch_sample_count()));
    check(std::abs(trainer.previous_minibatch_loss_average() -
                   one.previous_minibatch_loss_average()) <= 1e-5,
          "global loss");
  }
  const double d = max_difference(net.parameters(), reference.parameters());
  std::printf("worker %zu: max |parameters - one process's| %.3g\n", r, d);
  check(d < 1e-5, "N workers end with one process's parameters");
  check_same_on_every_worker(comm, net.parameters(), "one model on every worker");
}

}  // namespace

int main(int argc, char** argv) {
  const std::unordered_map<std::string, std::function<void(Communicator&)>> modes{
      {"collectives", collectives},
      {"lost_worker", [](Communicator& c) { lose_worker_1(c, true); }},
      {"hung_worker", [](Communicator& c) { lose_worker_1(c, false); }},
      {"data_parallel", data_parallel},
      {"one_bit", one_bit},
      {"block_momentum", block_momentum},
      {"model_mismatch", model_mismatch},
      {"session_block_momentum", session_block_momentum},
      {"session_equivalence", session_equivalence},
      {"trainer_overlap", trainer_overlap}};
  if (argc != 2 || !modes.count(argv[1])) {
    std::fprintf(stderr,
                 "usage: mpi_worker collectives|lost_worker|hung_worker|data_parallel|one_bit|"
                 "block_momentum|model_mismatch|session_block_momentum|session_equivalence|"
                 "trainer_overlap\n");
    return 2;
  }
  // collectives runs in a program that initializes MPI itself: Loom uses that MPI and leaves
  // ending it to the program.
  const bool own_mpi = std::string(argv[1]) == "collectives";
  if (own_mpi) MPI_Init(&argc, &argv);
  auto comm = mpi_communicator();
  try {
    modes.at(argv[1])(*comm);
    comm->finalize();
    int ended = 0;
    MPI_Finalized(&ended);
    check(bool(ended) != own_mpi, "finalize ends MPI when, and only when, Loom started it");
  } catch (const std::exception& e) {
    std::printf("FAIL %s on worker %zu: %s\n", argv[1], comm->rank(), e.what());
    std::fflush(stdout);
    std::_Exit(1);  // without MPI_Finalize, which would wait for the others: mpirun ends them
  }
  std::printf("PASS %s on worker %zu of %zu\n", argv[1], comm->rank(), comm->num_workers());
  if (own_mpi) MPI_Finalize();
  return 0;
}
