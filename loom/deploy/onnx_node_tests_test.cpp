// ONNX's backend node tests against Loom's importer. tests/e2e/onnx_node_tests_test.py writes
// the node tests of Debian's python3-onnx (a model.onnx and test_data_set_0/input_*.pb and
// output_*.pb per test) into a temporary folder and runs this test with LOOM_ONNX_NODE_TESTS
// naming it; without the variable the test is skipped. Every node test whose graph uses only
// ops Loom imports is loaded (a fixed axis 0 static: the tests' tensors have no batch axis),
// evaluated on its inputs and compared with ONNX's outputs. The test prints the counts per op
// and fails when such a node test fails that onnx_node_tests_failing.txt does not list, or one
// it lists passes. docs/onnx.md, "ONNX's node tests", says more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "loom/deploy/onnx.h"
#include "loom/deploy/onnx.pb.h"
#include "loom/deploy/onnx_common.h"
#include "loom/deploy/onnx_tensors.inc"
#include "loom/serialize/container.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
namespace pb = onnx_proto;

constexpr double kRtol = 1e-3, kAtol = 1e-4;

// The node tests of ops Loom imports that fail, and why (onnx_node_tests_failing.txt: a line
// "## reason" starts a group, the lines after it name its node tests).
std::map<std::string, std::string> failing_node_tests() {
  std::ifstream in(LOOM_SOURCE_DIR "/loom/deploy/onnx_node_tests_failing.txt");
  if (!in) throw IOError("cannot read onnx_node_tests_failing.txt");
  std::map<std::string, std::string> failing;
  std::string line, reason;
  while (std::getline(in, line)) {
    if (line.starts_with("## ")) {
      reason = line.substr(3);
    } else if (!line.starts_with("#")) {
      std::istringstream names(line);
      for (std::string name; names >> name;) failing[name] = reason;
    }
  }
  return failing;
}

template <typename Message>
Message parse(const fs::path& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path.string());
  Message m;
  if (!m.ParseFromArray(bytes.data(), int(bytes.size())))
    throw DataError(path.string() + ": not a protocol buffer of the expected type");
  return m;
}

int64_t default_opset(const pb::ModelProto& model) {
  for (const pb::OperatorSetIdProto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

// The values of a tensor of the test data (numpy_helper writes raw data) as doubles: float,
// double, float16, bfloat16, bool (0/1) and the integer types, which Loom imports as float
// values.
std::vector<double> numbers(const pb::TensorProto& t) {
  const size_t n = NDShape(std::vector<size_t>(t.dims().begin(), t.dims().end())).total_size();
  return onnx_detail::tensor_values(t, [&]<typename T>(const auto& field) {
    std::vector<T> v(n);
    if (t.has_raw_data()) {
      if (t.raw_data().size() != v.size() * sizeof(T)) throw DataError(t.name() + ": bad size");
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      v.assign(field.begin(), field.end());
    }
    return std::vector<double>(v.begin(), v.end());
  });
}

// A tensor of the test data as an array of the given type.
NDArrayView to_array(const pb::TensorProto& t, DataType dtype) {
  const NDShape shape(std::vector<size_t>(t.dims().begin(), t.dims().end()));
  const std::vector<double> v = numbers(t);
  if (dtype == DataType::Float64) return NDArrayView::from_vector(shape, v);
  return NDArrayView::from_vector(shape, std::vector<float>(v.begin(), v.end()));
}

// The model with every graph input but the first made an initializer holding its test data:
// ONNX's node tests give a node's weights, shapes and axes as inputs, which models have as
// initializers and Loom needs as constants.
pb::ModelProto with_constant_operands(pb::ModelProto model, const fs::path& data) {
  pb::GraphProto& g = *model.mutable_graph();
  for (int j = 1; j < g.input_size(); ++j) {
    pb::TensorProto t = parse<pb::TensorProto>(data / ("input_" + std::to_string(j) + ".pb"));
    t.set_name(g.input(j).name());
    *g.add_initializer() = t;
  }
  return model;
}

std::vector<double> doubles(const NDArrayView& a) {
  if (a.dtype() == DataType::Float64) return a.to_vector<double>();
  const std::vector<float> v = a.to_vector<float>();
  return {v.begin(), v.end()};
}

// Loads the model, evaluates it on the test's inputs and compares the outputs with ONNX's; the
// error, if any, and whether it loaded.
struct Outcome {
  bool loaded = false;
  std::string error;  // empty: matched
};
Outcome run_model(const pb::ModelProto& model, const fs::path& data, const std::string& name) {
  Outcome out;
  try {
    const std::string bytes = model.SerializeAsString();
    const Function f = load_onnx_from_bytes(
        std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), name,
        {.fixed_axis0_is_batch = false});
    out.loaded = true;
    ValueMap args;
    std::set<std::string> initializers;
    for (const pb::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
    for (int j = 0; j < model.graph().input_size(); ++j) {
      const std::string& input = model.graph().input(j).name();
      if (initializers.count(input)) continue;
      auto t = parse<pb::TensorProto>(data / ("input_" + std::to_string(j) + ".pb"));
      // onnx 1.12 writes bfloat16 test data as its bits, a uint16 tensor.
      if (t.data_type() == pb::TensorProto::UINT16 &&
          model.graph().input(j).type().tensor_type().elem_type() == pb::TensorProto::BFLOAT16)
        t.set_data_type(pb::TensorProto::BFLOAT16);
      for (const Variable& a : f.arguments())
        if (a.name() == input)
          args.insert_or_assign(a, ArgumentData(to_array(t, a.dtype())).to_value(a));
    }
    const std::vector<Variable> outputs = f.outputs();
    const ValueMap values = f.eval(args, outputs);
    for (size_t j = 0; j < outputs.size(); ++j) {
      const auto want = parse<pb::TensorProto>(data / ("output_" + std::to_string(j) + ".pb"));
      const NDShape expected(std::vector<size_t>(want.dims().begin(), want.dims().end()));
      const NDArrayView got = values.at(outputs[j]).data();
      // A value without a batch axis is one sample: [1, shape...].
      const NDShape shape = outputs[j].has_batch_axis() ? expected : expected.prepend(1);
      if (got.shape() != shape)
        throw DataError(detail::concat("output ", j, " has shape ", got.shape().to_string(),
                                       ", ONNX's ", shape.to_string()));
      const std::vector<double> g = doubles(got), e = numbers(want);
      for (size_t i = 0; i < e.size(); ++i)
        if (!(std::abs(g[i] - e[i]) <= kAtol + kRtol * std::abs(e[i])) &&
            !(std::isnan(g[i]) && std::isnan(e[i])) && g[i] != e[i])
          throw DataError(
              detail::concat("output ", j, " element ", i, " is ", g[i], ", ONNX's ", e[i]));
    }
  } catch (const Error& e) {
    out.error = e.what();
  }
  return out;
}

// The counts of one op's node tests.
struct Counts {
  int mapped = 0, loaded = 0, matched = 0;
  int older = 0;     // of the mapped: at an opset from 7 to 12, read at it
  int at7 = 0;       // of the mapped: at an opset below 7, read at 7 (its ops are the same there)
  int constant = 0;  // of the loaded: loaded with constant operands (with_constant_operands)
};

TEST(OnnxNodeTests, MatchOnnxOutputs) {
  const char* root = std::getenv("LOOM_ONNX_NODE_TESTS");
  if (!root) GTEST_SKIP() << "LOOM_ONNX_NODE_TESTS is not set (ctest -R onnx_node_tests sets it)";
  const std::vector<std::string> imported = onnx_imported_op_types();
  const std::set<std::string> ops(imported.begin(), imported.end());
  const std::map<std::string, std::string> failing = failing_node_tests();  // test -> reason

  std::vector<fs::path> dirs;
  for (const fs::directory_entry& d : fs::directory_iterator(root)) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_GT(dirs.size(), 500u) << root << " holds too few node tests";

  std::map<std::string, Counts> per_op;
  Counts total;
  int unmapped = 0;
  std::set<std::string> seen;
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    const auto model = parse<pb::ModelProto>(dir / "model.onnx");
    bool mapped = model.graph().node_size() > 0;
    for (const pb::NodeProto& n : model.graph().node())
      mapped = mapped && (n.domain().empty() || n.domain() == "ai.onnx") && ops.count(n.op_type());
    if (!mapped) {
      ++unmapped;
      continue;
    }
    // A test of one op's function body (name_expanded) counts under that op.
    std::string op = model.graph().node(0).op_type();
    if (model.graph().node_size() > 1) {
      const std::string base = name.substr(0, name.rfind("_expanded"));
      const fs::path base_model = dir.parent_path() / base / "model.onnx";
      op = (fs::exists(base_model) ? parse<pb::ModelProto>(base_model).graph().node(0).op_type()
                                   : base) +
           " (expanded)";
    }
    // Loom reads opsets 7 to 17; the generator rewrites a test at an older opset (1 or 6) whose
    // ops mean the same at 7 as model_at_opset7.onnx.
    const int64_t opset = default_opset(model);
    const fs::path at7 = dir / "model_at_opset7.onnx";
    const bool read_at7 = opset < onnx_detail::kOldestOpset && fs::exists(at7);
    const pb::ModelProto& tried = read_at7 ? parse<pb::ModelProto>(at7) : model;
    const fs::path data = dir / "test_data_set_0";
    Outcome outcome = run_model(tried, data, name);
    // Where the model does not load as it is, its result with constant operands stands (how
    // far Loom gets).
    const bool constant = !outcome.loaded && tried.graph().input_size() > 1;
    if (constant) outcome = run_model(with_constant_operands(tried, data), data, name);
    Counts& c = per_op[op];
    for (Counts* k : {&c, &total}) {
      ++k->mapped;
      k->loaded += outcome.loaded;
      k->matched += outcome.error.empty();
      k->older += opset >= onnx_detail::kOldestOpset && opset < onnx_detail::kOpset;
      k->at7 += read_at7;
      k->constant += constant && outcome.loaded;
    }
    seen.insert(name);
    const auto listed = failing.find(name);
    if (outcome.error.empty() && listed != failing.end())
      ADD_FAILURE() << name << " passes: take it off onnx_node_tests_failing.txt ("
                    << listed->second << ")";
    if (!outcome.error.empty() && listed == failing.end())
      ADD_FAILURE() << name << " fails: " << outcome.error;
  }
  for (const auto& [test, reason] : failing)
    if (!seen.count(test))
      ADD_FAILURE() << test << " in onnx_node_tests_failing.txt is no mapped node test";

  std::cout << "ONNX node tests of ops Loom imports: mapped / loaded / matched\n";
  for (const auto& [op, c] : per_op) {
    std::cout << "  " << op << ": " << c.mapped << " / " << c.loaded << " / " << c.matched;
    if (c.older) std::cout << " (" << c.older << " at opsets 7 to 12)";
    if (c.at7) std::cout << " (" << c.at7 << " at opsets 1 to 6, read at opset 7)";
    std::cout << "\n";
  }
  std::cout << "total: " << total.mapped << " mapped, " << total.loaded << " loaded, "
            << total.matched << " matched (" << total.older << " at opsets 7 to 12; " << total.at7
            << " at opsets 1 to 6, read at opset 7; " << total.constant
            << " loaded with constant operands); " << unmapped
            << " node tests use ops Loom does not import\n";
}

}  // namespace
}  // namespace loom
