#include "loom/graph/debugging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "loom/core/error.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/op.h"
#include "loom/graph/user_function.h"

namespace loom {

namespace detail {
std::atomic<bool> g_observe_nodes{false};
}

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_timing{false}, g_checked{false}, g_deterministic{false};
std::atomic<int> g_network_trace{0};
std::atomic<bool> g_profiling{false};  // a profiler is started and enabled

// One profiled event kind (a fixed event, or a node's forward or backward): CNTK's
// FixedEventRecord.
struct ProfileRecord {
  size_t count = 0;
  double sum = 0, sumsq = 0, min = 0, max = 0;  // seconds
};
struct ProfileEvent {
  std::string name;
  Clock::time_point begin, end;
  unsigned thread;
};
// CNTK's fixed events and the separators of its summary (c_fixedEvtDesc), in its order; event
// is the ProfilerEvent a row records, none for a separator line.
struct FixedRow {
  const char* text;
  std::optional<ProfilerEvent> event;
};
constexpr size_t kFixedEvents = 7;
const FixedRow kFixedRows[] = {{"Main Thread", {}},
                               {"", {}},
                               {"_Minibatch Iteration", ProfilerEvent::Minibatch},
                               {"__Get Minibatch", ProfilerEvent::GetMinibatch},
                               {"__Forward + Backward", ProfilerEvent::ForwardBackward},
                               {"__Gradient Aggregation", ProfilerEvent::GradientAggregation},
                               {"__Weight Update", ProfilerEvent::WeightUpdate},
                               {"__Post Processing", ProfilerEvent::PostProcessing},
                               {"", {}},
                               {"Data Reader", {}},
                               {"", {}},
                               {"Prefetch Minibatch", ProfilerEvent::PrefetchMinibatch}};

static_assert(size_t(ProfilerEvent::PrefetchMinibatch) + 1 == kFixedEvents);

const char* fixed_event_name(ProfilerEvent event) {
  for (const FixedRow& row : kFixedRows)
    if (row.event == event) return row.text;
  return "";
}

struct Profiler {
  std::string dir;
  ProfilerOptions options;
  bool enabled = false;
  Clock::time_point start;
  std::array<ProfileRecord, kFixedEvents> fixed;               // by ProfilerEvent
  std::vector<std::pair<std::string, ProfileRecord>> records;  // in order of first event
  std::unordered_map<std::string, size_t> record_index;
  std::vector<ProfileEvent> events;
  size_t event_bytes = 0;
  bool buffer_full = false;
};
std::mutex g_profiler_mutex;
std::unique_ptr<Profiler> g_profiler;  // null: not started

// What node timing recorded per node uid.
std::mutex g_timing_mutex;
std::unordered_map<std::string, NodeTiming> g_timings;

void update_observation() {
  bool profiling;
  {
    std::lock_guard lock(g_profiler_mutex);
    profiling = g_profiler && g_profiler->enabled;
  }
  g_profiling = profiling;
  detail::g_observe_nodes.store(g_timing || g_checked || g_network_trace >= 1000 || profiling);
}

const char* pass_name(NodePass pass) {
  return pass == NodePass::Forward ? "Forward" : "Backward";
}

void record_timing(const FunctionImpl& f, NodePass pass, double seconds) {
  std::lock_guard lock(g_timing_mutex);
  NodeTiming& t = g_timings[f.uid];
  if (t.uid.empty()) t = {.uid = f.uid, .name = f.name, .op = op_name_of(f)};
  if (pass == NodePass::Forward) {
    ++t.forward_calls;
    t.forward_seconds += seconds;
  } else {
    ++t.backward_calls;
    t.backward_seconds += seconds;
  }
}

// Adds one event to its record and, while the buffer has room, to the detail file's events.
// Called under g_profiler_mutex.
void add_event(Profiler& p, ProfileRecord& r, std::string detail_name, Clock::time_point begin,
               Clock::time_point end) {
  const double s = std::chrono::duration<double>(end - begin).count();
  r.min = r.count ? std::min(r.min, s) : s;
  r.max = r.count ? std::max(r.max, s) : s;
  r.sum += s;
  r.sumsq += s * s;
  ++r.count;
  // The detail buffer holds what CNTK's did per event: the name and a begin/end/thread record.
  const size_t bytes = detail_name.size() + 1 + 2 * sizeof(int64_t) + sizeof(unsigned);
  if (p.event_bytes + bytes > p.options.reserve_mem) {
    if (!p.buffer_full)
      std::fprintf(stderr,
                   "Warning: Performance Profiler: Buffer is full, no more events will be "
                   "recorded.\n");
    p.buffer_full = true;
    return;
  }
  p.event_bytes += bytes;
  p.events.push_back({std::move(detail_name), begin, end, unsigned(::syscall(SYS_gettid))});
}

void record_profile(const FunctionImpl& f, NodePass pass, Clock::time_point begin,
                    Clock::time_point end) {
  std::lock_guard lock(g_profiler_mutex);
  if (!g_profiler || !g_profiler->enabled) return;
  Profiler& p = *g_profiler;
  const std::string name = f.uid + " " + pass_name(pass);
  auto [it, added] = p.record_index.emplace(name, p.records.size());
  if (added) p.records.emplace_back(name, ProfileRecord{});
  add_event(p, p.records[it->second].second, f.uid + pass_name(pass), begin, end);
}

// The sum of |x| over a dense tensor's elements, and whether any is NaN / infinite.
struct Scan {
  double abs_sum = 0;
  bool nan = false, inf = false;
};
Scan scan(const Tensor& t) {
  return dispatch(t.dtype, [&](auto zero) {
    using T = decltype(zero);
    Scan s;
    const T* d = t.ptr<T>();
    for (size_t i = 0, n = t.size(); i < n; ++i) {
      s.nan = s.nan || std::isnan(d[i]);
      s.inf = s.inf || std::isinf(d[i]);
      s.abs_sum += std::abs(double(d[i]));
    }
    return s;
  });
}

std::string node_text(const FunctionImpl& f) {
  return function_label(f) + " " + op_name_of(f);
}

void check_values(const FunctionImpl& f, NodePass pass, const Scan& s, size_t input) {
  if (!s.nan && !s.inf) return;
  const char* what = s.nan ? "NaN" : "infinite";
  if (pass == NodePass::Forward)
    throw DataError(detail::concat("checked mode: ", node_text(f),
                                   " operation unexpectedly produced ", what, " values"));
  throw DataError(detail::concat("checked mode: ", node_text(f),
                                 " operation unexpectedly produced ", what,
                                 " gradients on its input ", f.inputs[input].describe()));
}

void trace_values(const FunctionImpl& f, NodePass pass, const Tensor& t, const Scan& s,
                  size_t input) {
  std::string line = "Dump --> " + node_text(f);
  if (pass == NodePass::Backward) line += " Grad (input " + f.inputs[input].describe() + ")";
  line += detail::concat(": ", t.sample_shape().to_string(), " x ", t.rows(),
                         " abs sum = ", s.abs_sum, "\n");
  if (g_network_trace >= 1000000 && !t.blocked) {
    NDArrayView copy(t.dtype, t.shape);
    std::memcpy(copy.raw_data(), t.data, t.size() * size_of(t.dtype));
    line += copy.to_string() + "\n";
  }
  std::cerr << line;
}

// A tensor's value (or gradient) as a Value: one sample, a batch [N, sample...], or packed
// sequences when some sequence is longer than one step.
Value value_of(const Tensor& t) {
  return to_value(t, t.dynamic() && t.layout->max_length() > 1);
}

}  // namespace

void set_trace_level(TraceLevel level) {
  const TraceLevel previous = exchange_trace_level(level);
  if (previous == level) return;
  if (level == TraceLevel::Info) {
    set_computation_network_trace_level(int(level));
  } else if (previous == TraceLevel::Info) {
    set_computation_network_trace_level(0);
  }
}

void set_computation_network_trace_level(int level) {
  g_network_trace = level;
  update_observation();
}

int computation_network_trace_level() {
  return g_network_trace;
}

void set_node_timing(bool enable) {
  g_timing = enable;
  update_observation();
}

bool node_timing_enabled() {
  return g_timing;
}

std::vector<NodeTiming> node_timings(const std::vector<Variable>& roots) {
  std::map<std::string, NodeTiming> by_uid;
  std::lock_guard lock(g_timing_mutex);
  if (roots.empty())
    for (const auto& [uid, t] : g_timings) by_uid.emplace(uid, t);
  for (const auto& f : topological_order(roots)) {
    NodeTiming t;
    if (auto it = g_timings.find(f->uid); it != g_timings.end()) t = it->second;
    t.uid = f->uid;
    t.name = f->name;
    t.op = op_name_of(*f);
    by_uid.emplace(f->uid, std::move(t));
  }
  std::vector<NodeTiming> result;
  for (auto& [uid, t] : by_uid) result.push_back(std::move(t));
  return result;
}

std::string node_timing_report(const std::vector<Variable>& roots) {
  std::string report;
  const std::vector<NodeTiming> timings = node_timings(roots);
  for (const NodeTiming& t : timings) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "%-30s forward avg %07fs, backward avg %07fs (fwd# %d|bwd# %d)\n", t.uid.c_str(),
                  t.forward_calls ? t.forward_seconds / double(t.forward_calls) : 0.0,
                  t.backward_calls ? t.backward_seconds / double(t.backward_calls) : 0.0,
                  int(t.forward_calls), int(t.backward_calls));
    report += line;
  }
  std::lock_guard lock(g_timing_mutex);
  for (const NodeTiming& t : timings) g_timings.erase(t.uid);
  return report;
}

void reset_node_timing() {
  std::lock_guard lock(g_timing_mutex);
  g_timings.clear();
}

void set_checked_mode(bool enable) {
  g_checked = enable;
  update_observation();
}

bool checked_mode() {
  return g_checked;
}

void force_deterministic_algorithms() {
  g_deterministic = true;
}

bool deterministic_algorithms_forced() {
  return g_deterministic;
}

void start_profiler(const std::string& dir, const ProfilerOptions& options) {
  {
    std::lock_guard lock(g_profiler_mutex);
    LOOM_CHECK(!g_profiler, StateError,
               "start_profiler: the profiler is already started (writing to ", g_profiler->dir,
               "); stop_profiler() first");
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    LOOM_CHECK(!error && std::filesystem::is_directory(dir), IOError,
               "start_profiler: cannot create the directory ", dir,
               error ? " (" + error.message() + ")" : std::string());
    g_profiler = std::make_unique<Profiler>();
    g_profiler->dir = dir;
    g_profiler->options = options;
    g_profiler->start = Clock::now();
  }
  update_observation();
}

namespace {
// CNTK's FormatTimeStr: milliseconds under a minute, else hh:mm:ss.sss.
std::string time_text(double seconds) {
  char s[48];
  if (seconds < 60.0) {
    std::snprintf(s, sizeof s, "%13.3f ms", seconds * 1000.0);
  } else {
    std::snprintf(s, sizeof s, "    %02d:%02d:%06.3f", int(seconds) / 3600,
                  (int(seconds) / 60) % 60, std::fmod(seconds, 60.0));
  }
  return s;
}

// A summary row: the record's mean, standard deviation, min, max, count and total.
std::string summary_row(const std::string& name, const ProfileRecord& r) {
  const double n = double(r.count);
  const double variance = std::max(0.0, r.sumsq - r.sum * r.sum / n) / n;
  char line[512];
  std::snprintf(line, sizeof line, "%-26s: %s %s %s %s %16d %s\n", name.c_str(),
                time_text(r.sum / n).c_str(), time_text(std::sqrt(variance)).c_str(),
                time_text(r.min).c_str(), time_text(r.max).c_str(), int(r.count),
                time_text(r.sum).c_str());
  return line;
}

// CNTK's report (its fixed events; a row only where events were recorded, as CNTK's), then
// Loom's rows of the nodes.
void write_summary(const Profiler& p, const std::string& path, const std::tm& now) {
  std::ofstream out(path);
  LOOM_CHECK(out, IOError, "stop_profiler: cannot create ", path);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y/%m/%d %H:%M:%S", &now);
  out << "CNTK Performance Profiler Summary Report\n\nTime Stamp: " << stamp << "\n\n"
      << "Description................ ............Mean ..........StdDev .............Min "
         ".............Max ...........Count ...........Total\n\n";
  for (const FixedRow& row : kFixedRows) {
    if (!row.event) {
      out << row.text << "\n";
    } else if (const ProfileRecord& r = p.fixed[size_t(*row.event)]; r.count > 0) {
      out << summary_row(row.text, r);
    }
  }
  out << "\nNodes\n\n";
  for (const auto& [name, r] : p.records) out << summary_row(name, r);
  LOOM_CHECK(out.flush(), IOError, "stop_profiler: cannot write ", path);
}

void write_detail(const Profiler& p, const std::string& path) {
  std::ofstream out(path);
  LOOM_CHECK(out, IOError, "stop_profiler: cannot create ", path);
  const unsigned pid = unsigned(::getpid());
  auto micros = [&](Clock::time_point t) {
    return (unsigned long long)std::chrono::duration_cast<std::chrono::microseconds>(t - p.start)
        .count();
  };
  out << "[\n";
  for (size_t i = 0; i < p.events.size(); ++i) {
    const ProfileEvent& e = p.events[i];
    for (const auto& [phase, t] : {std::pair{"B", e.begin}, std::pair{"E", e.end}})
      out << (i == 0 && *phase == 'B' ? "" : ",\n") << "  {\"pid\":" << pid
          << ", \"tid\":" << e.thread << ", \"name\":\"" << e.name
          << "\", \"cat\":\"PERF\", \"ph\":\"" << phase << "\", \"ts\":" << micros(t) << "}";
  }
  out << "\n]\n";
  LOOM_CHECK(out.flush(), IOError, "stop_profiler: cannot write ", path);
}
}  // namespace

std::string stop_profiler() {
  std::unique_ptr<Profiler> p;
  {
    std::lock_guard lock(g_profiler_mutex);
    LOOM_CHECK(g_profiler, StateError, "stop_profiler: the profiler is not started; call ",
               "start_profiler(dir) first");
    p = std::move(g_profiler);
  }
  update_observation();
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d_%H-%M-%S", &local);
  const std::string base = p->dir + "/" + stamp;
  const std::string summary = base + "_summary_.txt";
  write_summary(*p, summary, local);
  write_detail(*p, base + "_detail_.json");
  return summary;
}

namespace {
void set_profiler_enabled(bool enable) {
  {
    std::lock_guard lock(g_profiler_mutex);
    if (!g_profiler) return;  // as CNTK's: nothing to enable before start_profiler
    g_profiler->enabled = enable;
  }
  update_observation();
}
}  // namespace

void enable_profiler() {
  set_profiler_enabled(true);
}

ProfileScope::ProfileScope(ProfilerEvent event)
    : event_(event), active_(g_profiling.load(std::memory_order_relaxed)) {
  if (active_) begin_ = Clock::now();
}

ProfileScope::~ProfileScope() {
  if (!active_) return;
  const Clock::time_point end = Clock::now();
  std::lock_guard lock(g_profiler_mutex);
  if (!g_profiler || !g_profiler->enabled) return;
  add_event(*g_profiler, g_profiler->fixed[size_t(event_)], fixed_event_name(event_), begin_, end);
}

void disable_profiler() {
  set_profiler_enabled(false);
}

void observe_node(const FunctionImpl& f, NodePass pass, const std::function<void()>& run,
                  std::span<const Tensor* const> results, std::span<const size_t> gradient_inputs) {
  const Clock::time_point begin = Clock::now();
  run();
  const Clock::time_point end = Clock::now();
  if (g_timing) record_timing(f, pass, std::chrono::duration<double>(end - begin).count());
  record_profile(f, pass, begin, end);
  inspect_results(f, pass, results, gradient_inputs);
}

void inspect_results(const FunctionImpl& f, NodePass pass, std::span<const Tensor* const> results,
                     std::span<const size_t> gradient_inputs) {
  const bool checked = g_checked, traced = g_network_trace >= 1000;
  if (!checked && !traced) return;
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor& t = *results[i];
    if (t.is_sparse() || !t.data) continue;
    const Scan s = scan(t);
    const size_t input = pass == NodePass::Backward ? gradient_inputs[i] : 0;
    if (traced) trace_values(f, pass, t, s, input);
    if (checked) check_values(f, pass, s, input);
  }
}

void trace_plan(const std::vector<std::shared_ptr<FunctionImpl>>& order) {
  std::string text = detail::concat("Executor: ", order.size(), " nodes\n");
  for (const auto& f : order) {
    text += "  " + node_text(*f) + "(";
    for (size_t i = 0; i < f->inputs.size(); ++i) text += (i ? ", " : "") + f->inputs[i].describe();
    text += ") -> " + Variable(f->outputs[0]).type_string() + "\n";
  }
  std::cerr << text;
}

// ---- Debug nodes -------------------------------------------------------------------------

namespace {

// Identity; the nodes of a debug_graph report what passes through to its callback, a loaded one
// (the registered op, without a callback) to no one.
class DebugOp final : public OpDef {
 public:
  explicit DebugOp(std::shared_ptr<const DebugCallback> callback = nullptr)
      : callback_(std::move(callback)) {}
  const char* name() const override { return "Debug"; }
  std::vector<OutputSpec> infer(const std::vector<Variable>& inputs,
                                const Dictionary&) const override {
    const Variable& x = inputs.at(0);
    return {OutputSpec{x.shape(), x.dtype(), x.dynamic_axes(), false}};
  }
  void forward(OpCall& call) const override {
    notify(call.attributes, NodePass::Forward, *call.inputs[0]);
    const Tensor& x = *call.inputs[0];
    std::memcpy(call.output->data, x.data, x.size() * size_of(x.dtype));
  }
  void backward(OpCall& call, size_t, Tensor& input_gradient, bool accumulate) const override {
    const Tensor& g = *call.output_gradient;
    notify(call.attributes, NodePass::Backward, g);
    if (!accumulate) {
      std::memcpy(input_gradient.data, g.data, g.size() * size_of(g.dtype));
      return;
    }
    dispatch(g.dtype, [&](auto zero) {
      using T = decltype(zero);
      T* out = input_gradient.ptr<T>();
      const T* in = g.ptr<T>();
      for (size_t i = 0, n = g.size(); i < n; ++i) out[i] += in[i];
    });
  }
  OpTraits traits(const Dictionary&) const override {
    return {.backward_reads_inputs = InputSet::none(), .backward_reads_output = false};
  }

 private:
  void notify(const Dictionary& attributes, NodePass pass, const Tensor& t) const {
    if (callback_)
      (*callback_)(DebugEvent{pass, size_t(attributes.get<uint64_t>("debug_node")), value_of(t)});
  }

  std::shared_ptr<const DebugCallback> callback_;
};

}  // namespace

const OpDef& debug_op() {
  static const DebugOp op;
  return op;
}

DebugGraph debug_graph(const Function& model, DebugCallback callback) {
  LOOM_CHECK(callback, ArgumentError, "debug_graph: the callback is empty");
  const auto op =
      std::make_shared<const DebugOp>(std::make_shared<const DebugCallback>(std::move(callback)));
  DebugGraph result;
  std::unordered_map<const VariableImpl*, Variable> copied;    // model's variable -> debugged
  std::unordered_map<const VariableImpl*, Variable> declared;  // delay operands not copied yet
  // A debug node reading v, reporting as `node` (what it follows in model).
  auto follow = [&](const Variable& v, const Variable& node) {
    Dictionary attributes;
    attributes["debug_node"] = uint64_t(result.nodes.size());
    result.nodes.push_back(node);
    Function debug = make_primitive(*op, {v}, std::move(attributes));
    debug.impl()->owned_op = op;
    return debug.output();
  };
  auto leaf = [&](const Variable& v) -> Variable {
    if (auto it = copied.find(v.impl().get()); it != copied.end()) return it->second;
    return copied[v.impl().get()] = follow(v, v);
  };
  auto input = [&](const Variable& v, const FunctionImpl& reader) -> Variable {
    if (!v.is_output()) return leaf(v);
    if (auto it = copied.find(v.impl().get()); it != copied.end()) return it->second;
    // The operand of a delay op closing a loop: a placeholder until it exists.
    auto [it, added] = declared.try_emplace(v.impl().get());
    if (added) it->second = forward_declaration(v, Variable(reader.outputs[0]));
    return it->second;
  };
  for (const auto& f : topological_order(model.outputs())) {
    std::vector<Variable> inputs;
    for (const Variable& in : f->inputs) inputs.push_back(input(in, *f));
    if (dynamic_cast<const DebugOp*>(f->op)) {  // a debug node already (loaded): left out
      copied[f->outputs[0].get()] = inputs[0];
      continue;
    }
    Function copy = remake_primitive(*f, std::move(inputs));
    if (f->random) copy.impl()->random = f->random;
    std::vector<Variable> outputs = copy.outputs();
    for (size_t i = 0; i < outputs.size(); ++i)
      copied[f->outputs[i].get()] = follow(outputs[i], Variable(f->outputs[i], f));
  }
  std::vector<Variable> outputs;
  for (const Variable& o : model.outputs())
    outputs.push_back(o.is_output() ? copied.at(o.impl().get()) : leaf(o));
  result.model = outputs.size() == 1 ? Function(outputs[0]) : combine(outputs);
  if (!declared.empty()) {
    std::unordered_map<Variable, Variable> loops;
    for (const auto& [v, p] : declared) loops.emplace(p, copied.at(v));
    result.model.replace_placeholders(loops);
  }
  return result;
}

}  // namespace loom
