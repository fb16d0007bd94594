// The debugging aids of loom/graph/debugging.h as the executor drives them: node timing (every
// node timed, calls counted exactly, in loops per step), checked mode (NaN/Inf raise naming the
// node), the profiler's files, trace levels, and debug nodes (debug_graph).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "loom/graph/debugging.h"
#include "loom/graph/executor.h"
#include "loom/graph/graph_impl.h"
#include "loom/graph/graph_test_util.h"
#include "loom/ops/ops.h"
#include "loom/ops/registry.h"
#include "loom/serialize/model_file.h"

namespace loom {
namespace {

// Turns an aid on for one test and off again, whatever the test does.
struct Aids {
  ~Aids() {
    set_node_timing(false);
    set_checked_mode(false);
    set_computation_network_trace_level(0);
    reset_node_timing();
  }
};

struct Net {
  Variable x = input_variable({3}, {.name = "x"});
  Variable y = input_variable({2}, {.name = "y"});
  Parameter w = parameter(NDArrayView::from_vector<float>({3, 2}, random_floats(6, 1)), "w");
  Parameter b = parameter(NDArrayView::from_vector<float>({2}, random_floats(2, 2)), "b");
  Variable z = plus(times(x, w), b, "z");
  Variable loss = squared_error(z, y, "loss");
  ValueMap data(size_t n) const {
    return {{x, Value::create_batch<float>({3}, random_floats(3 * n, 3))},
            {y, Value::create_batch<float>({2}, random_floats(2 * n, 4))}};
  }
};

std::vector<std::string> uids_of(const Variable& root) {
  std::vector<std::string> uids;
  for (const auto& f : topological_order({root})) uids.push_back(f->uid);
  std::sort(uids.begin(), uids.end());
  return uids;
}

TEST(NodeTiming, EveryNodeTimedAndCallsCountedExactly) {
  Aids aids;
  Net net;
  Executor exec({net.loss}, {net.w, net.b});
  set_node_timing(true);
  for (int i = 0; i < 3; ++i) {
    exec.forward(net.data(4), true);
    exec.backward(net.loss);
  }
  exec.forward(net.data(2), false);  // a fourth forward without backward
  const std::vector<NodeTiming> timings = node_timings({net.loss});
  ASSERT_EQ(timings.size(), 3u);  // times, plus, squared_error
  std::vector<std::string> uids;
  for (const NodeTiming& t : timings) {
    SCOPED_TRACE(t.uid);
    uids.push_back(t.uid);
    EXPECT_EQ(t.forward_calls, 4u);
    EXPECT_EQ(t.backward_calls, 3u);
    EXPECT_GE(t.forward_seconds, 0.0);
    EXPECT_GE(t.backward_seconds, 0.0);
  }
  EXPECT_EQ(uids, uids_of(net.loss));  // sorted by uid, as CNTK's network prints them
  for (const NodeTiming& t : timings) EXPECT_EQ(t.uid.rfind(t.op, 0), 0u);  // uid: op + number

  // The report: CNTK's line per node; printing resets the counts.
  const std::string report = node_timing_report({net.loss});
  std::istringstream lines(report);
  std::string line;
  size_t n = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(line.substr(0, uids[n].size()), uids[n]);
    EXPECT_NE(line.find(" forward avg "), std::string::npos) << line;
    EXPECT_NE(line.find("(fwd# 4|bwd# 3)"), std::string::npos) << line;
    ++n;
  }
  EXPECT_EQ(n, 3u);
  for (const NodeTiming& t : node_timings({net.loss})) EXPECT_EQ(t.forward_calls, 0u);

  // Off: nothing is recorded.
  set_node_timing(false);
  exec.forward(net.data(4), true);
  exec.backward(net.loss);
  for (const NodeTiming& t : node_timings({net.loss})) {
    EXPECT_EQ(t.forward_calls, 0u);
    EXPECT_EQ(t.backward_calls, 0u);
  }
}

// A view (docs/executor.md, "Views") runs no forward but is timed and counted as any node.
TEST(NodeTiming, ViewsAreCountedAsAnyNode) {
  Aids aids;
  Variable x = input_variable({6}, {.name = "x"});
  Function y = negate(reshape(x, {2, 3}));
  Executor exec({y});
  set_node_timing(true);
  exec.forward({{x, Value::create_batch<float>({6}, std::vector<float>(12, 1.0f))}}, false);
  const std::vector<NodeTiming> timings = node_timings({y});
  ASSERT_EQ(timings.size(), 2u);  // reshape, negate
  for (const NodeTiming& t : timings) EXPECT_EQ(t.forward_calls, 1u) << t.uid;
}

TEST(NodeTiming, LoopNodesCountEveryStep) {
  Aids aids;
  Variable x = sequence::input_variable({2}, {.name = "x"});
  Variable p = placeholder({2}, DataType::Float32, x.dynamic_axes());
  Function h = plus(x, sequence::past_value(p), "h");
  h.replace_placeholders({{p, h.output()}});
  Executor exec({h.output()});
  set_node_timing(true);
  exec.forward(
      {{x, Value::create_sequences<float>({2}, {random_floats(6, 5), random_floats(4, 6)})}},
      false);
  for (const NodeTiming& t : node_timings({h.output()})) EXPECT_EQ(t.forward_calls, 3u) << t.uid;
}

// (log(-1) is CNTK's clamp, -85.1, not NaN: 0 / 0 makes the NaN.)
TEST(CheckedMode, NaNRaisesNamingTheNode) {
  Aids aids;
  Variable x = input_variable({2}, {.name = "x"});
  Function lg = element_divide(x, x, "lg");
  const ValueMap bad{{x, Value::create_batch<float>({2}, {1.f, 0.f})}};
  Executor exec({lg.output()});
  exec.forward(bad, false);  // off: NaN passes
  set_checked_mode(true);
  try {
    exec.forward(bad, false);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()),
              "checked mode: lg (" + lg.uid() +
                  ") ElementDivide operation unexpectedly produced NaN values");
  }
  exec.forward({{x, Value::create_batch<float>({2}, {1.f, 2.f})}}, false);  // fine values pass
}

TEST(CheckedMode, InfiniteGradientRaisesNamingNodeAndInput) {
  Aids aids;
  Variable x = input_variable({2}, {.name = "x", .needs_gradient = true});
  Function root = sqrt(x, "root");
  Executor exec({root.output()}, {x});
  set_checked_mode(true);
  exec.forward({{x, Value::create_batch<float>({2}, {0.f, 4.f})}}, true);  // sqrt(0) = 0 is fine
  try {
    exec.backward(root.output());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "checked mode: root (" + root.uid() +
                                         ") Sqrt operation unexpectedly produced infinite "
                                         "gradients on its input x: Tensor[2]");
  }
}

// Inside a recurrent loop, once every step has added its part: h_t = sqrt(x_t + h_{t-1}) on
// x = (0, 4) gives h_0 = 0, whose gradient is infinite.
TEST(CheckedMode, InfiniteGradientInsideARecurrentLoopRaises) {
  Aids aids;
  Variable x = sequence::input_variable({1}, {.name = "x", .needs_gradient = true});
  Variable p = placeholder({1}, DataType::Float32, x.dynamic_axes());
  Function h = sqrt(plus(x, sequence::past_value(p)), "root");
  h.replace_placeholders({{p, h}});
  Executor exec({h.output()}, {x});
  const ValueMap data{{x, Value::create_sequences<float>({1}, {{0.f, 4.f}})}};
  exec.forward(data, true);
  exec.backward(h.output());  // off: the infinity passes
  set_checked_mode(true);
  exec.forward(data, true);
  try {
    exec.backward(h.output());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("checked mode: root (" + h.uid() +
                                         ") Sqrt operation unexpectedly produced infinite "
                                         "gradients on its input"),
              std::string::npos)
        << e.what();
  }
}

TEST(Profiler, WritesTheSummaryListingEveryNode) {
  Net net;
  const std::string dir = ::testing::TempDir() + "loom_profiler_test";
  std::filesystem::remove_all(dir);
  Executor exec({net.loss}, {net.w, net.b});
  EXPECT_THROW(stop_profiler(), StateError);
  start_profiler(dir);
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_THROW(start_profiler(dir), StateError);
  exec.forward(net.data(4), true);  // started but not enabled: not recorded
  enable_profiler();
  for (int i = 0; i < 2; ++i) {
    exec.forward(net.data(4), true);
    exec.backward(net.loss);
  }
  disable_profiler();
  exec.forward(net.data(4), true);
  const std::string summary = stop_profiler();
  EXPECT_FALSE(node_observation_active());
  std::ifstream in(summary);
  ASSERT_TRUE(in) << summary;
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  EXPECT_EQ(s.rfind("CNTK Performance Profiler Summary Report\n", 0), 0u) << s;
  for (const std::string& uid : uids_of(net.loss))
    for (const char* pass : {" Forward", " Backward"}) {
      const size_t at = s.find(uid + pass);
      ASSERT_NE(at, std::string::npos) << uid << pass << "\n" << s;
      const std::string line = s.substr(at, s.find('\n', at) - at);
      EXPECT_NE(line.find(" ms                2 "), std::string::npos) << line;  // count 2
    }
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    if (e.path().extension() == ".json") {
      std::ifstream detail(e.path());
      std::stringstream j;
      j << detail.rdbuf();
      EXPECT_NE(j.str().find("\"ph\":\"B\""), std::string::npos);
    }
  }
  EXPECT_EQ(files, 2u);  // the summary and the detail file
  std::filesystem::remove_all(dir);
}

TEST(TraceLevel, InfoSetsTheNetworkTraceLevel) {
  EXPECT_EQ(get_trace_level(), TraceLevel::Warning);
  set_trace_level(TraceLevel::Info);
  EXPECT_EQ(computation_network_trace_level(), 2);
  set_trace_level(TraceLevel::Error);
  EXPECT_EQ(get_trace_level(), TraceLevel::Error);
  EXPECT_EQ(computation_network_trace_level(), 0);
  set_trace_level(TraceLevel::Warning);
}

TEST(TraceLevel, PlanPrintedAt1) {
  Aids aids;
  Net net;
  set_computation_network_trace_level(1);
  ::testing::internal::CaptureStderr();
  Executor exec({net.z});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("Executor: 2 nodes\n", 0), 0u) << err;
  EXPECT_NE(err.find("  z (" + Function(net.z).uid() + ") Plus("), std::string::npos) << err;
}

TEST(TraceLevel, NodeValuesDumpedAt1000) {
  Aids aids;
  Net net;
  Executor exec({net.z});
  set_computation_network_trace_level(1000);
  ::testing::internal::CaptureStderr();
  exec.forward({{net.x, Value::create_batch<float>({3}, {1.f, -2.f, 3.f})}}, false);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("Dump --> z (" + Function(net.z).uid() + ") Plus: [2] x 1 abs sum = "),
            std::string::npos)
      << err;
}

TEST(DebugGraph, CallbackSeesEveryNodeForwardThenBackward) {
  Variable x = input_variable({2}, {.name = "x", .needs_gradient = true});
  Parameter p = parameter(NDArrayView::from_vector<float>({2}, {10.f, 20.f}), "p");
  Variable z = element_times(x, p, "z");
  std::vector<std::pair<NodePass, size_t>> events;
  std::vector<Value> values;
  DebugGraph d = debug_graph(Function(z), [&](const DebugEvent& e) {
    events.emplace_back(e.pass, e.node);
    values.push_back(e.value);
  });
  ASSERT_EQ(d.nodes.size(), 3u);  // x, p, z
  EXPECT_EQ(d.nodes[0], x);
  EXPECT_EQ(d.nodes[1], Variable(p));
  EXPECT_EQ(d.nodes[2], z);
  EXPECT_EQ(d.model.parameters().size(), 1u);  // the parameter is shared
  Executor exec({d.model.output()}, {x, p});
  exec.forward({{x, Value::create_batch<float>({2}, {1.f, 2.f, 3.f, 4.f})}}, true);
  EXPECT_EQ(exec.output_value(d.model.output()).data().to_vector<float>(),
            (std::vector<float>{10.f, 40.f, 30.f, 80.f}));
  exec.backward(d.model.output());
  using P = NodePass;
  const std::vector<std::pair<NodePass, size_t>> expected{{P::Forward, 0},  {P::Forward, 1},
                                                          {P::Forward, 2},  {P::Backward, 2},
                                                          {P::Backward, 1}, {P::Backward, 0}};
  EXPECT_EQ(events, expected);
  EXPECT_EQ(values[1].data().to_vector<float>(), (std::vector<float>{10.f, 20.f}));
  EXPECT_EQ(values[2].data().to_vector<float>(), (std::vector<float>{10.f, 40.f, 30.f, 80.f}));
  EXPECT_EQ(values[3].data().to_vector<float>(), (std::vector<float>(4, 1.f)));
  EXPECT_EQ(exec.gradient_value(x).data().to_vector<float>(),
            (std::vector<float>{10.f, 20.f, 10.f, 20.f}));
}

// Sequences reach the callback packed, as the executor holds them, values and gradients alike;
// sequences of one step each come as a batch.
TEST(DebugGraph, CallbackSeesSequencesPacked) {
  Variable x = sequence::input_variable({2}, {.name = "x", .needs_gradient = true});
  Function z = element_times(x, constant(2.0, DataType::Float32, "two"), "z");
  std::vector<DebugEvent> events;
  DebugGraph d = debug_graph(z, [&](const DebugEvent& e) { events.push_back(e); });
  const std::vector<float> xs{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const Value seqs = Value::create_sequences<float>({2}, xs, {1, 0, 4});
  Executor exec({d.model.output()}, {x});
  exec.forward({{x, seqs}}, true);
  exec.backward(d.model.output());
  ASSERT_EQ(d.nodes.size(), 3u);  // x, the constant, z
  ASSERT_EQ(events.size(), 5u);   // x, the constant, z forward; z, x backward
  const std::vector<std::vector<float>> z_values{{2, 4}, {}, {6, 8, 10, 12, 14, 16, 18, 20}};
  const auto sequences_of = [&](size_t event) {
    const Value& v = events[event].value;
    EXPECT_TRUE(v.is_packed() && !v.has_padded_form()) << "event " << event;
    return v.as_sequences<float>();
  };
  EXPECT_EQ(sequences_of(0), seqs.as_sequences<float>());
  EXPECT_EQ(sequences_of(2), z_values);
  EXPECT_EQ(events[3].pass, NodePass::Backward);
  EXPECT_EQ(sequences_of(4),
            (std::vector<std::vector<float>>{{2, 2}, {}, std::vector<float>(8, 2)}));
  events.clear();
  exec.forward({{x, Value::create_sequences<float>({2}, {1, 2, 3, 4}, {1, 1})}}, false);
  EXPECT_FALSE(events[2].value.is_sequence());
  EXPECT_EQ(events[2].value.data().to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
}

TEST(DebugGraph, SavesAndLoadsAsIdentitiesThatReportToNoOne) {
  Variable x = input_variable({2}, {.name = "x", .needs_gradient = true});
  Parameter p = parameter(NDArrayView::from_vector<float>({2}, {10.f, 20.f}), "p");
  size_t events = 0;
  DebugGraph d =
      debug_graph(Function(element_times(x, p, "z")), [&](const DebugEvent&) { ++events; });
  Function loaded = load_model_from_bytes(save_model_to_bytes(d.model));
  size_t debug_nodes = 0;
  for (const auto& f : topological_order(loaded.outputs()))
    if (f->op == &debug_op()) ++debug_nodes;
  EXPECT_EQ(debug_nodes, 3u);  // x, p, z
  EXPECT_EQ(&find_op("Debug"), &debug_op());
  const Variable lx = loaded.argument("x");
  const ValueMap args{{lx, Value::create_batch<float>({2}, {1.f, 2.f, 3.f, 4.f})}};
  EXPECT_EQ(loaded.eval_one(args).data().to_vector<float>(),
            (std::vector<float>{10.f, 40.f, 30.f, 80.f}));
  EXPECT_EQ(loaded.grad(args, {lx}).at(lx).data().to_vector<float>(),
            (std::vector<float>{10.f, 20.f, 10.f, 20.f}));
  EXPECT_EQ(events, 0u);
  // The debug graph itself, and its clones, still report.
  d.model.clone(ParameterCloneMethod::Share).eval_one({{x, args.begin()->second}});
  EXPECT_EQ(events, 3u);
  // Debugged again, the loaded model's debug nodes are left out: one stop per node.
  std::vector<size_t> again;
  DebugGraph e = debug_graph(loaded, [&](const DebugEvent& ev) { again.push_back(ev.node); });
  EXPECT_EQ(e.nodes.size(), 3u);
  e.model.eval_one({{lx, args.begin()->second}});
  EXPECT_EQ(again, (std::vector<size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace loom
