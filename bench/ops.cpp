// Times every op of the op table (loom/ops/op_schema.h) that has conformance cases, forward and
// forward+backward, on inputs grown from the op's first case to about 1 MiB of float32 per input
// at minibatch 64 ("batch"; the ops whose shapes cannot grow so have a case of that size in
// own_bench_case; a case that still does not fit its op is reported as skipped), and, where the
// case runs over sequences, on 64 ragged sequences of lengths 1..64 with the same sample per step
// ("seq"), and on the extra cases over a batch that some ops have (extra_bench_cases). Then it runs
// ops_torch.py (PyTorch's equivalent of each op on the same shapes, with Loom's thread count) as a
// child and prints one table of both sides' microseconds per call and their ratio (torch / Loom:
// above 1, Loom is faster), and for the elementwise family the bandwidth Loom's kernels reach as a
// share of the machine's (a memcpy of 256 MiB on Loom's threads).
//
// Forward is Executor::forward in inference mode; forward+backward is a training-mode forward
// and Executor::backward from a fixed random gradient of the output, to the op's differentiable
// inputs (a shared input is a Parameter). Each executor plans once and is reused, as the Trainer
// reuses its own, so a call is the op, binding its inputs and the executor's bookkeeping;
// neither side copies the result out. Ragged sequences (inputs and output gradients) are packed
// Values (Value::create_sequences packs, as an evaluation's outputs are), which the executor
// reads in place, as PyTorch's side takes its packed rows.
//
//   bench_ops [--ops NAME,NAME,...] [--quick] [--threads N] [--no-reference] [--list]
//   --ops: these ops only (OpDef names, as --list prints them); --quick: runs of >= 5 ms, 3 of
//   them (else >= 20 ms, 5 of them); --threads: both sides' thread count (default: Loom's, all
//   cores); --no-reference: Loom only; --list: the ops and exit.
//
// On a machine that other processes load, a parallel region waits for a time slice of a busy
// core (~8 ms here) whatever the op: the program prints the load average before and after, and
// --threads 1 gives figures that such load slows only in proportion.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "bench/side_by_side.h"
#include "loom/graph/executor.h"
#include "loom/loom.h"
#include "loom/ops/op_schema.h"

using namespace loom;

namespace {

constexpr size_t kBatch = 64;
// Floats per sample: 64 samples of 4,096 floats are 1 MiB per input.
constexpr size_t kSampleFloats = (size_t{1} << 20) / (kBatch * sizeof(float));
constexpr size_t kSequences = 64;  // of lengths 1, 2, ..., 64
constexpr size_t kBandwidthBytes = size_t{256} << 20;

// Each figure is the median per-call time over `runs` runs of at least run_seconds each.
struct Protocol {
  double run_seconds;
  int runs;
};
constexpr Protocol kFull{0.02, 5}, kQuick{0.005, 3};

struct Options {
  std::set<std::string> ops;  // empty: all
  bool quick = false, reference = true, list = false;
  int threads = 0;  // 0: Loom's default
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(
      stderr,
      "%s\nusage: bench_ops [--ops NAME,NAME,...] [--quick] [--threads N] [--no-reference] "
      "[--list]\n",
      problem.c_str());
  std::exit(2);
}

// The ops the bench can time: those with conformance cases (a composite's ops are timed as
// themselves).
std::vector<const OpSchema*> timed_ops() {
  std::vector<const OpSchema*> ops;
  for (const OpSchema& s : op_table())
    if (s.op && !s.conformance.empty()) ops.push_back(&s);
  return ops;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ops") {
      if (i + 1 >= argc) usage("missing value after --ops");
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) {
        const OpSchema* s = find_schema(name);
        if (!s || !s->op || s->conformance.empty())
          usage("no op with conformance cases is named " + name);
        o.ops.insert(name);
      }
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      if (i + 1 >= argc || (o.threads = std::atoi(argv[++i])) < 1)
        usage("--threads needs a positive integer");
    } else if (a == "--no-reference") {
      o.reference = false;
    } else if (a == "--list") {
      o.list = true;
    } else {
      usage("unknown option " + a);
    }
  }
  return o;
}

// Median seconds per call of fn over p.runs runs of at least p.run_seconds each, after one
// warm-up call (first touch of the buffers, oneDNN's kernel choice); the first run that lasts
// long enough also sets the calls per run.
double per_call(const std::function<void()>& fn, const Protocol& p) {
  using Clock = std::chrono::steady_clock;
  auto run = [&](size_t calls) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < calls; ++i) fn();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  fn();
  size_t calls = 1;
  double t = run(calls);
  while (t < p.run_seconds) {
    calls = std::max(2 * calls,
                     size_t(std::ceil(double(calls) * 1.2 * p.run_seconds / std::max(t, 1e-9))));
    t = run(calls);
  }
  std::vector<double> seconds{t / double(calls)};
  while (seconds.size() < size_t(p.runs)) seconds.push_back(run(calls) / double(calls));
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// Bytes read and written per second by a memcpy of 256 MiB split over Loom's threads, as its
// own loops split: the most that the elementwise kernels could move from and to memory.
double memory_bandwidth(const Protocol& p) {
  std::vector<char> from(kBandwidthBytes, 1), to(kBandwidthBytes, 0);
  const size_t threads = size_t(get_max_num_cpu_threads());
  const double seconds = per_call(
      [&] {
        for_each_piece(kBandwidthBytes, threads, [&](size_t, size_t begin, size_t end) {
          std::memcpy(to.data() + begin, from.data() + begin, end - begin);
        });
      },
      p);
  return 2.0 * double(kBandwidthBytes) / seconds;
}

// The ops whose shapes the widening below cannot grow (their axes are related by more than
// equality: a pooled map is half its input; a region's 4 coordinates are not an extent), with a
// case of the bench's size of their own instead: about kSampleFloats floats a per-sample input.
ConformanceCase own_bench_case(const std::string& op) {
  if (op == "Unpooling")  // 2x2 max pooling at stride 2 of [16, 32, 32], reversed
    return {{{NDShape{16, 16, 16}}, {NDShape{16, 32, 32}}},
            Dictionary({{"unpooling_type", int64_t(PoolingType::Max)},
                        {"window", NDShape{2, 2}},
                        {"strides", NDShape{2}},
                        {"auto_padding", NDShape{0}}})};
  if (op == "ROIPooling")  // 8 regions of a [16, 16, 16] map into 4x4 cells
    return {{{NDShape{16, 16, 16}}, {NDShape{8, 4}, true, 0, 15}},
            Dictionary({{"pooling_type", int64_t(PoolingType::Max)},
                        {"roi_output_shape", NDShape{4, 4}},
                        {"spatial_scale", 1.0}})};
  if (op == "NCE")  // a language model's output layer, not widened: 10,000 words, hidden
    // dimension 512, sparse one-hot labels, a noise distribution in [0.1, 1] and 50 noise
    // classes drawn for the minibatch (CNTK's default is 32)
    return {
        {{NDShape{10000, 512}, false},
         {NDShape{10000, 1}, false},
         {NDShape{512}},
         {.shape = NDShape{10000}, .sparse = true},
         {.shape = NDShape{10000}, .per_sample = false, .low = 0.1, .high = 1, .constant = true}},
        Dictionary({{"num_samples", int64_t{50}}})};
  if (op == "LambdaRank" || op == "NDCG")  // one number a sample, not widened: the minibatch's
    // samples one group to rank (the group ids, in [0.1, 0.9], all 0), gains from 0 to 4
    return {{{NDShape{1}, true, -3, 3}, {NDShape{1}, true, 0, 4}, {NDShape{1}, true, 0.1, 0.9}}};
  return {};
}

// How a case's shapes grow to the bench's size. Each per-sample input's last axis of extent > 1
// is widened by one factor k, chosen so that the first per-sample input holds about
// kSampleFloats floats a sample; every axis of every input, and of an NDShape attribute
// (reshape's target), whose extent is one of those axes' original extents is widened by k too.
// That keeps the case's relations: broadcasting ([3,4] against a shared [4]), products (x [3]
// times W [3,2]), reshapes ([3,4] to [4,3]), splices along the last axis ([3,4] and [3,2]).
// Axes of extent 1 never grow (squeeze's [3,1,4,1] became [3,341,4,341], 1.4M floats a sample,
// and the bench ran out of memory).
struct Widening {
  size_t k = 1;
  std::set<size_t> extents;

  // own: the case is already of the bench's size (own_bench_case): k stays 1.
  Widening(const ConformanceCase& c, bool own) {
    for (const ConformanceInput& in : c.inputs) {
      if (own) break;
      if (!in.per_sample) continue;
      if (extents.empty())
        k = std::max<size_t>(1,
                             (kSampleFloats + in.shape.total_size() / 2) / in.shape.total_size());
      for (size_t i = in.shape.rank(); i-- > 0;) {
        if (in.shape[i] == 1) continue;
        extents.insert(in.shape[i]);
        break;
      }
    }
  }
  NDShape operator()(NDShape s) const {
    for (size_t i = 0; i < s.rank(); ++i)
      if (s[i] != 1 && extents.contains(s[i])) s[i] *= k;
    return s;
  }
  Dictionary operator()(const Dictionary& attributes) const {
    Dictionary a = attributes;
    for (const auto& [key, value] : attributes.map())
      if (value.is<NDShape>()) a[key] = (*this)(value.get<NDShape>());
    return a;
  }
};

enum class Mode { Batch, Sequences };
const char* mode_name(Mode m) {
  return m == Mode::Batch ? "batch" : "seq";
}

// A row's case: its name (the table's case column), its mode, its inputs and attributes, and
// whether they are of the bench's size already (not widened).
struct BenchCase {
  std::string name;
  Mode mode;
  ConformanceCase c;
  bool sized;
};

// Rows beyond an op's bench case, over a batch, of the bench's size: cross_entropy_with_softmax
// and classification_error along the first axis of a matrix sample (32 classes at each of 128
// positions, as a segmentation lays them out), soft targets in [0, 1] (every slice is then an
// error: the cost is that of one-hot targets).
std::vector<BenchCase> extra_bench_cases(const std::string& op) {
  if (op != "CrossEntropyWithSoftmax" && op != "ClassificationError") return {};
  return {
      {"axis0",
       Mode::Batch,
       {{{NDShape{32, 128}}, {NDShape{32, 128}, true, 0, 1}}, Dictionary({{"axis", int64_t{0}}})},
       true}};
}

// The rows of an op: its bench case (own_bench_case, else its first conformance case, widened)
// in each mode that its first case runs in, then its extra cases.
std::vector<BenchCase> bench_cases(const OpSchema& s) {
  const ConformanceCase own = own_bench_case(s.op->name());
  const ConformanceCase& first = s.conformance.front();
  std::vector<BenchCase> cases;
  for (Mode mode : {Mode::Batch, Mode::Sequences})
    if (mode == Mode::Batch ? first.batch : first.sequences)
      cases.push_back(
          {mode_name(mode), mode, own.inputs.empty() ? first : own, !own.inputs.empty()});
  for (BenchCase& c : extra_bench_cases(s.op->name())) cases.push_back(std::move(c));
  return cases;
}

std::vector<size_t> sequence_lengths() {
  std::vector<size_t> lengths(kSequences);
  for (size_t i = 0; i < kSequences; ++i) lengths[i] = i + 1;
  return lengths;
}

// n floats uniform in [in.low, in.high], drawn again within 0.05 of 0 where the range crosses
// it: the conformance cases' rule, which keeps divisors and the like away from 0.
std::vector<float> draw(size_t n, const ConformanceInput& in, std::mt19937& gen) {
  std::uniform_real_distribution<float> u(float(in.low), float(in.high));
  const bool avoid_zero = in.low < -0.05 && in.high > 0.05;
  std::vector<float> v(n);
  for (float& x : v) {
    do x = u(gen);
    while (avoid_zero && std::abs(x) < 0.05f);
  }
  return v;
}

// One row of the table: an op on one case's inputs, grown, in one mode.
struct Bench {
  const OpSchema* schema;
  Mode mode;
  std::string name;  // the case's
  Function f = {};
  Variable out = {};
  ValueMap arguments = {};
  std::vector<Variable> wrt = {};             // the differentiable inputs
  std::vector<ConformanceInput> inputs = {};  // with the grown shapes
  size_t rows = 0;  // of each per-sample input: samples, or the sequences' steps
};

Bench build(const OpSchema& s, const BenchCase& bench_case) {
  const ConformanceCase& c = bench_case.c;
  const Mode mode = bench_case.mode;
  const Widening widen(c, bench_case.sized);
  const std::vector<size_t> lengths = sequence_lengths();
  Bench b{&s, mode, bench_case.name};
  b.rows = mode == Mode::Batch ? kBatch : kSequences * (kSequences + 1) / 2;
  std::mt19937 gen(1);
  std::vector<Variable> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    ConformanceInput in = c.inputs[i];
    in.shape = widen(in.shape);
    b.inputs.push_back(in);
    const std::string name = "x" + std::to_string(i);
    if (!in.per_sample) {
      inputs.push_back(parameter(
          NDArrayView::from_vector<float>(in.shape, draw(in.shape.total_size(), in, gen)), name));
      continue;
    }
    if (in.sparse) {  // one-hot samples of classes drawn uniformly (a loss's labels)
      std::uniform_int_distribution<size_t> label(0, in.shape[0] - 1);
      std::vector<std::vector<size_t>> sequences;
      for (size_t length : mode == Mode::Batch ? std::vector<size_t>{b.rows} : lengths) {
        sequences.emplace_back(length);
        for (size_t& c : sequences.back()) c = label(gen);
      }
      const InputOptions options{.is_sparse = true, .name = name};
      inputs.push_back(mode == Mode::Batch ? input_variable(in.shape, options)
                                           : sequence::input_variable(in.shape, options));
      b.arguments.emplace(inputs.back(), mode == Mode::Batch
                                             ? Value::one_hot(in.shape[0], sequences[0])
                                             : Value::one_hot_sequences(in.shape[0], sequences));
      continue;
    }
    const InputOptions options{.name = name, .needs_gradient = true};
    const std::vector<float> values = draw(b.rows * in.shape.total_size(), in, gen);
    if (mode == Mode::Batch) {
      inputs.push_back(input_variable(in.shape, options));
      b.arguments.emplace(inputs.back(), Value::create_batch<float>(in.shape, values));
    } else {
      inputs.push_back(sequence::input_variable(in.shape, options));
      b.arguments.emplace(inputs.back(), Value::create_sequences<float>(in.shape, values, lengths));
    }
  }
  b.f = s.apply(inputs, widen(c.attributes));
  b.out = b.f.output();
  const InputSet differentiable = s.op->traits(b.f.attributes()).differentiable;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (differentiable.contains(i)) b.wrt.push_back(inputs[i]);
  return b;
}

// The least bytes an elementwise op's kernels read and write: forward its inputs and output;
// backward the output's gradient, the inputs and output its gradient reads (OpTraits) and the
// differentiable inputs' gradients. A shared input counts once (its gradient is a sum over
// the rows), a per-sample one for every row.
struct Traffic {
  double forward = 0, forward_backward = 0;
};
Traffic traffic(const Bench& b) {
  const OpTraits t = b.schema->op->traits(b.f.attributes());
  Traffic bytes;
  const double out = double(b.out.shape().total_size() * b.rows * sizeof(float));
  bytes.forward = out;
  double backward = out + (t.backward_reads_output ? out : 0);
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    const ConformanceInput& in = b.inputs[i];
    const double n = double(in.shape.total_size() * (in.per_sample ? b.rows : 1) * sizeof(float));
    bytes.forward += n;
    if (t.backward_reads_inputs.contains(i)) backward += n;
    if (t.differentiable.contains(i)) backward += n;
  }
  bytes.forward_backward = bytes.forward + backward;
  return bytes;
}

struct Timing {
  double forward_us = NAN, forward_backward_us = NAN;  // NaN: not measured
};

// A Value of v's form (a batch, or packed sequences of v's lengths, as an output gradient from
// a previous evaluation is) with values in [0.5, 1.5]: the output gradient.
Value random_like(const Value& v) {
  std::mt19937 gen(2);
  const NDShape sample = v.sample_shape();
  const std::vector<float> values =
      draw(v.number_of_samples() * sample.total_size(), {sample, true, 0.5, 1.5}, gen);
  return v.is_sequence() ? Value::create_sequences<float>(sample, values, v.sequence_lengths())
                         : Value::create_batch<float>(sample, values);
}

Timing time_loom(const Bench& b, const Protocol& p) {
  Timing t;
  Executor inference({b.out});
  t.forward_us = 1e6 * per_call([&] { inference.forward(b.arguments, false); }, p);
  if (b.wrt.empty()) return t;
  Executor training({b.out}, b.wrt);
  training.forward(b.arguments, true);
  const Value dy = random_like(training.output_value(b.out));
  t.forward_backward_us = 1e6 * per_call(
                                    [&] {
                                      training.forward(b.arguments, true);
                                      training.backward(b.out, &dy);
                                    },
                                    p);
  return t;
}

// ---- the PyTorch side ------------------------------------------------------------------------

void write_json(std::ostream& o, const DictionaryValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          o << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t> ||
                             std::is_same_v<T, double>) {
          o << x;
        } else if constexpr (std::is_same_v<T, std::string>) {
          o << '"' << x << '"';  // attribute strings are names: nothing to escape
        } else if constexpr (std::is_same_v<T, NDShape>) {
          o << '[';
          for (size_t i = 0; i < x.rank(); ++i) o << (i ? "," : "") << x[i];
          o << ']';
        } else if constexpr (std::is_same_v<T, DictionaryVector>) {
          o << '[';
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) o << ',';
            write_json(o, x[i]);
          }
          o << ']';
        } else if constexpr (std::is_same_v<T, DictionaryMap>) {
          o << '{';
          bool first = true;
          for (const auto& [key, value] : x) {
            o << (first ? "" : ",") << '"' << key << "\":";
            write_json(o, value);
            first = false;
          }
          o << '}';
        } else {
          o << "null";  // none, or a tensor: no op of the table takes one as an attribute
        }
      },
      v.storage());
}

// What ops_torch.py needs of a row, one JSON object a line: the op, the mode, the attributes
// (with the defaults apply filled in), each input's sample shape, whether it is per sample,
// whether it is sparse (one-hot samples), its value range and whether Loom differentiates it, and
// the rows or the sequence lengths.
std::string spec_line(const Bench& b) {
  std::ostringstream o;
  o.precision(17);
  o << "{\"op\":\"" << b.schema->op->name() << "\",\"case\":\"" << b.name << "\",\"attributes\":";
  write_json(o, DictionaryValue(b.f.attributes().map()));
  o << ",\"inputs\":[";
  const InputSet differentiable = b.schema->op->traits(b.f.attributes()).differentiable;
  for (size_t i = 0; i < b.inputs.size(); ++i) {
    const ConformanceInput& in = b.inputs[i];
    o << (i ? "," : "") << "{\"shape\":";
    write_json(o, DictionaryValue(in.shape));
    o << ",\"per_sample\":" << (in.per_sample ? "true" : "false")
      << ",\"sparse\":" << (in.sparse ? "true" : "false") << ",\"low\":" << in.low
      << ",\"high\":" << in.high
      << ",\"differentiable\":" << (differentiable.contains(i) ? "true" : "false") << '}';
  }
  o << "],";
  if (b.mode == Mode::Batch) {
    o << "\"batch\":" << kBatch;
  } else {
    o << "\"lengths\":";
    DictionaryVector lengths;
    for (size_t l : sequence_lengths()) lengths.push_back(uint64_t(l));
    write_json(o, DictionaryValue(lengths));
  }
  o << '}';
  return o.str();
}

struct Reference {
  bool ran = false;
  std::string why;
  std::map<std::string, Timing> timings;  // by "op/case"; absent: no reference
  std::set<std::string> failed;           // rows whose PyTorch entry raised (echoed above)
};

std::string key(const std::string& op, const std::string& mode) {
  return op + "/" + mode;
}

// What the table keeps of a row once its graph and data (up to ~70 MB an input) are gone.
struct Row {
  std::string op;
  std::string name;  // the case's
  std::string spec;  // spec_line
  Traffic bytes;     // elementwise ops; else NaN
  Timing loom;
};

Reference run_torch(const char* argv0, const std::vector<Row>& rows, const Protocol& p) {
  Reference ref;
  const std::string script = bench::reference_script(argv0, "ops_torch.py");
  if (script.empty()) {
    ref.why = "ops_torch.py not found beside the bench sources";
    return ref;
  }
  const std::filesystem::path spec =
      std::filesystem::temp_directory_path() / ("bench_ops_" + std::to_string(getpid()) + ".jsonl");
  {
    std::ofstream out(spec);
    for (const Row& r : rows) out << r.spec << '\n';
  }
  char run_seconds[32];
  std::snprintf(run_seconds, sizeof run_seconds, "%g", p.run_seconds);
  const bench::Measurement m =
      bench::run_child({"/usr/bin/python3", script, "--spec", spec.string(), "--threads",
                        std::to_string(get_max_num_cpu_threads()), "--run-seconds", run_seconds,
                        "--runs", std::to_string(p.runs)},
                       "rows_timed=");
  std::filesystem::remove(spec);
  ref.ran = m.ran;
  ref.why = m.why;
  for (const std::string& line : m.lines) {
    char op[64], mode[16];
    Timing t;
    int end = 0;
    if (std::sscanf(line.c_str(), "result op=%63s case=%15s forward_us=%lf forward_backward_us=%lf",
                    op, mode, &t.forward_us, &t.forward_backward_us) == 4)
      ref.timings[key(op, mode)] = t;
    else if (std::sscanf(line.c_str(), "result op=%63s case=%15s failed%n", op, mode, &end) == 2 &&
             end > 0)
      ref.failed.insert(key(op, mode));
  }
  return ref;
}

// ---- the table -------------------------------------------------------------------------------

std::string figure(double v, const char* format) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Three significant digits: the ratios run from about 0.001 to 100.
constexpr const char* kRatio = "%.3g";

// The ratios of one pass (forward, or forward+backward) over the rows: the worst, and those
// below 1.
struct Ratios {
  double worst = INFINITY;
  std::string worst_row;
  std::vector<std::string> below;

  void add(const std::string& row, double ratio) {
    if (std::isnan(ratio)) return;
    if (ratio < worst) worst = ratio, worst_row = row;
    if (ratio < 1) below.push_back(row + " " + figure(ratio, kRatio));
  }
  void print(const char* pass) const {
    std::printf("worst %s ratio: %s (%s)\nbelow 1.0, %s (%zu):", pass,
                figure(worst, kRatio).c_str(), worst_row.c_str(), pass, below.size());
    for (const std::string& s : below) std::printf(" %s;", s.c_str());
    std::printf("\n");
  }
};

// The machine's load average: other processes on the cores make every figure slower.
void print_load(const char* when) {
  double load[3] = {};
  if (getloadavg(load, 3) == 3)
    std::printf("load average %s: %.2f %.2f %.2f\n", when, load[0], load[1], load[2]);
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.list) {
    for (const OpSchema* s : timed_ops()) std::printf("%s\n", s->op->name());
    return 0;
  }
  const Protocol p = o.quick ? kQuick : kFull;
  if (o.threads) set_max_num_cpu_threads(o.threads);
  const int threads = get_max_num_cpu_threads();
  print_load("before");
  std::set<std::string> elementwise;
  for (const OpSchema& s : elementwise_schemas())
    if (s.op) elementwise.insert(s.op->name());

  const double bandwidth = memory_bandwidth(p);
  std::printf(
      "Loom ops, %d thread(s), minibatch %zu (about 1 MiB a per-sample input) and %zu "
      "ragged sequences; runs of >= %g ms, median of %d\n",
      threads, kBatch, kSequences, p.run_seconds * 1e3, p.runs);
  std::printf("memory bandwidth (memcpy of %zu MiB on %d thread(s), read + written): %.1f GB/s\n",
              kBandwidthBytes >> 20, threads, bandwidth / 1e9);

  std::vector<Row> rows;
  std::vector<std::string> skipped;
  for (const OpSchema* s : timed_ops()) {
    if (!o.ops.empty() && !o.ops.contains(s->op->name())) continue;
    for (const BenchCase& c : bench_cases(*s)) {
      try {
        const Bench b = build(*s, c);
        const Row& r = rows.emplace_back(Row{
            s->op->name(), c.name, spec_line(b),
            elementwise.contains(s->op->name()) ? traffic(b) : Traffic{NAN, NAN}, time_loom(b, p)});
        std::printf("  %-24s %-5s forward %10.1f us, forward+backward %10s us\n", r.op.c_str(),
                    c.name.c_str(), r.loom.forward_us,
                    figure(r.loom.forward_backward_us, "%.1f").c_str());
      } catch (const std::exception& e) {  // the grown case does not fit the op
        skipped.push_back(std::string(s->op->name()) + " " + c.name + ": " + e.what());
        std::printf("  %-24s %-5s skipped: %s\n", s->op->name(), c.name.c_str(), e.what());
      }
    }
  }

  Reference torch;
  if (o.reference) {
    std::printf("\nPyTorch reference:\n");
    torch = run_torch(argv[0], rows, p);
    if (!torch.ran) std::printf("reference skipped: %s\n", torch.why.c_str());
  }

  std::printf(
      "\nus per call; ratio = torch / Loom (> 1: Loom faster); bw: Loom's elementwise bytes "
      "(read + written,\nthe least its kernels move) per second as %% of the memcpy's %.1f GB/s "
      "(a batch's inputs fit in\nthe caches, so more than 100 %% is possible)\n\n",
      bandwidth / 1e9);
  const char* format = "%-24s %-5s | %9s %9s %6s %5s | %9s %9s %6s %5s\n";
  std::printf(format, "op", "case", "fwd Loom", "fwd torch", "ratio", "bw", "f+b Loom", "f+b torch",
              "ratio", "bw");
  Ratios forward, backward;
  for (const Row& r : rows) {
    const std::string row = r.op + " " + r.name;
    const auto found = torch.timings.find(key(r.op, r.name));
    const bool has_ref = found != torch.timings.end();
    const Timing t = has_ref ? found->second : Timing{};
    const Timing& l = r.loom;
    auto bw = [&](double moved, double us) {
      return figure(100 * moved / (us * 1e-6) / bandwidth, "%.0f%%");
    };
    const char* none = !torch.ran                                 ? "-"
                       : torch.failed.contains(key(r.op, r.name)) ? "failed"
                                                                  : "no ref";
    forward.add(row, t.forward_us / l.forward_us);
    backward.add(row, t.forward_backward_us / l.forward_backward_us);
    std::printf(format, r.op.c_str(), r.name.c_str(), figure(l.forward_us, "%.1f").c_str(),
                has_ref ? figure(t.forward_us, "%.1f").c_str() : none,
                figure(t.forward_us / l.forward_us, kRatio).c_str(),
                bw(r.bytes.forward, l.forward_us).c_str(),
                figure(l.forward_backward_us, "%.1f").c_str(),
                has_ref ? figure(t.forward_backward_us, "%.1f").c_str() : none,
                figure(t.forward_backward_us / l.forward_backward_us, kRatio).c_str(),
                bw(r.bytes.forward_backward, l.forward_backward_us).c_str());
  }
  print_load("after");
  std::printf("skipped (%zu):", skipped.size());
  for (const std::string& why : skipped) std::printf(" %s;", why.c_str());
  std::printf("\n");
  if (!torch.timings.empty()) {
    std::printf("\n");
    forward.print("forward");
    backward.print("forward+backward");
    std::printf("worst ratio overall: %s\n",
                figure(std::min(forward.worst, backward.worst), kRatio).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
