// Debugging aids (CNTK's cntk.debugging and trace levels): per-node forward/backward timing,
// checked mode (NaN/Inf checks after each node), the computation network trace level, the
// performance profiler, and debug nodes that stop before and after each node of a graph. The
// executor calls observe_node for each node it runs while any of them is on
// (node_observation_active(): one relaxed atomic load per forward or backward pass).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "loom/core/trace.h"
#include "loom/core/value.h"
#include "loom/graph/function.h"
#include "loom/graph/tensor.h"

namespace loom {

class FunctionImpl;
class OpDef;

// CNTK's set_trace_level (TraceLevel and get_trace_level are loom/core/trace.h's). Setting Info
// also sets the computation network trace level to 2 (CNTK's), and leaving Info sets it back
// to 0.
void set_trace_level(TraceLevel level);

// CNTK's computation network trace level: 0 off; >= 1 each executor prints its nodes and their
// shapes when it plans; >= 1000 every node prints the absolute sum of its value after forward
// (and of its inputs' gradients after backward) to stderr; >= 1000000 the whole values too.
void set_computation_network_trace_level(int level);
int computation_network_trace_level();

// Per-node timing: the executor times each node's forward and backward (CNTK's
// enable_node_timing/disable_node_timing).
void set_node_timing(bool enable);
bool node_timing_enabled();

// What node timing recorded for one node since it was last printed (or reset).
struct NodeTiming {
  std::string uid, name, op;
  size_t forward_calls = 0, backward_calls = 0;
  double forward_seconds = 0, backward_seconds = 0;
};
// The timings of every primitive of the graph of roots, sorted by uid (CNTK's order: the
// network's nodes by name); nodes that never ran have zero calls. No roots: every node timed.
std::vector<NodeTiming> node_timings(const std::vector<Variable>& roots);
// CNTK's Function::PrintNodeTiming text, one line per node (as node_timings orders them):
// "%-30s forward avg %07fs, backward avg %07fs (fwd# %d|bwd# %d)". As CNTK's, it resets the
// timings of these nodes.
std::string node_timing_report(const std::vector<Variable>& roots);
void reset_node_timing();

// Checked mode: after each node's forward its output, and after its backward the gradients it
// wrote, are checked for NaN and infinite values; a DataError names the node, its op and the
// input whose gradient is bad. (Inside a recurrent loop the values are checked step by step;
// the gradients a loop writes are not checked.)
void set_checked_mode(bool enable);
bool checked_mode();

// CNTK's force_deterministic_algorithms: recorded; Loom's CPU kernels never choose an algorithm
// by measured speed, so a fixed seed and thread count already give the same results.
void force_deterministic_algorithms();
bool deterministic_algorithms_forced();

// The performance profiler (CNTK's start_profiler/enable_profiler/disable_profiler/
// stop_profiler). start_profiler creates dir and starts it disabled; while enabled, every
// node's forward and backward is recorded; stop_profiler writes dir/<time>_summary_.txt (CNTK's
// summary report: its rows of the training loop's parts (ProfilerEvent, below), then per node
// and pass, each with the mean, standard deviation, min, max, count and total time) and
// dir/<time>_detail_.json (each event in chrome://tracing's format, at most reserve_mem bytes of
// them) and returns the summary's path. sync_gpu is kept for CNTK's signature (Loom runs on the
// CPU). StateError: starting twice, stopping when not started.
struct ProfilerOptions {
  bool sync_gpu = true;
  size_t reserve_mem = 32 * 1024 * 1024;  // CNTK's default_profiler_buffer_size
};
inline constexpr const char* kProfilerDir = "profiler";  // CNTK's default dir
void start_profiler(const std::string& dir = kProfilerDir, const ProfilerOptions& options = {});
std::string stop_profiler();
void enable_profiler();
void disable_profiler();

// CNTK's fixed profiler events: the summary's "Main Thread" and "Data Reader" rows (before the
// nodes), each timed by a ProfileScope in the part of the training loop it names.
enum class ProfilerEvent {
  Minibatch,            // "_Minibatch Iteration": Trainer::train_minibatch
  GetMinibatch,         // "__Get Minibatch": MinibatchSource::next_minibatch
  ForwardBackward,      // "__Forward + Backward": the Trainer's executor
  GradientAggregation,  // "__Gradient Aggregation": a distributed learner's collectives
  WeightUpdate,         // "__Weight Update": the learners
  PostProcessing,       // "__Post Processing": the training session between minibatches
  PrefetchMinibatch,    // "Prefetch Minibatch": a source's read-ahead thread
};
// Records the time from its construction to its destruction as `event`, when the profiler is
// enabled at its construction (otherwise one atomic load).
class ProfileScope {
 public:
  explicit ProfileScope(ProfilerEvent event);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  ProfilerEvent event_;
  bool active_;
  std::chrono::steady_clock::time_point begin_;
};

// For the executor: whether any per-node aid is on (timing, checked mode, trace level >= 1000,
// an enabled profiler).
namespace detail {
extern std::atomic<bool> g_observe_nodes;
}
inline bool node_observation_active() {
  return detail::g_observe_nodes.load(std::memory_order_relaxed);
}
enum class NodePass { Forward, Backward };
// Runs one node's forward or backward (run) under the aids that are on: times it, then checks
// and traces results (its output after forward, the gradients it wrote after backward;
// gradient_inputs[i] is the input index of results[i] in backward).
void observe_node(const FunctionImpl& f, NodePass pass, const std::function<void()>& run,
                  std::span<const Tensor* const> results,
                  std::span<const size_t> gradient_inputs = {});
// The checks and traces of observe_node alone, of results a node wrote over several runs (a
// recurrent loop's gradients, complete once every step has added its part).
void inspect_results(const FunctionImpl& f, NodePass pass, std::span<const Tensor* const> results,
                     std::span<const size_t> gradient_inputs = {});
// At trace level >= 1: the executor's plan, one line per node.
void trace_plan(const std::vector<std::shared_ptr<FunctionImpl>>& order);

// Debug nodes (debug_model): a copy of model's graph where every leaf and every primitive's
// output is followed by a Debug node, an identity that calls callback with the value passing
// through in forward and with its gradient in backward. nodes[i] is what debug node i
// follows in model: a leaf, or a primitive's output (the copy shares model's leaves and so
// its parameters). The callback lives with the debug nodes (their op holds it; clones share
// it). A graph with debug nodes saves and loads: loaded, each is the registered Debug op
// (debug_op()), the identity reporting to no one, in any process (CNTK's could not be
// loaded; docs/decisions.md). Debug nodes in model are left out of the copy.
struct DebugEvent {
  NodePass pass;
  size_t node;  // index into DebugGraph::nodes
  Value value;  // forward: the node's value; backward: the gradient reaching it
};
using DebugCallback = std::function<void(const DebugEvent&)>;
struct DebugGraph {
  Function model;
  std::vector<Variable> nodes;
};
DebugGraph debug_graph(const Function& model, DebugCallback callback);
// The op registry's Debug op (loom/ops/registry.h): what a debug node loaded from a model file
// runs, the identity without a callback.
const OpDef& debug_op();

}  // namespace loom
