// Evaluating a loaded CNTK model against the same model built in Loom (Loom issue 30: "a loaded
// model is as fast as the same model built in Loom"). The model: CNTK's ATIS slot tagger
// (v2_atis_slot_tagger.cmf: Embedding(150), Stabilizer, Recurrence(LSTM(300) with its dh
// stabilizer), Stabilizer, Dense(129)), evaluated three ways on the same batches of word
// sequences (sparse one-hot, as the model's argument takes them):
//   loaded         load_model: the LSTM loop recognised as one FusedRecurrence op
//                  (loom/serialize/cntk_recurrence.h)
//   loaded, loop   the file's graph as it is (function_from_cntk_dictionary(..., false)): the
//                  LSTM block's primitives in a PastValue loop, run step by step
//   built in Loom  the same layers made by Loom's layer functions (Recurrence(LSTM) fused), the
//                  loaded model's weights copied in
// Each runs an Executor's forward (inference) on prepared batches, the three in turn on each;
// the figure is the median ms per batch over the repeats, after two warm-up batches. The outputs
// are compared too (max |difference| to the Loom-built model).
//
//   bench_cntk_eval [FILE] [--batch N (32)] [--length T (20)] [--repeats R (20)] [--nodes]
//   (--nodes: then each model's time per node, Function::print_node_timing's report)
//   (default FILE: ../shared/cntk-models/v2_atis_slot_tagger.cmf beside the source tree)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "loom/graph/executor.h"
#include "loom/layers/recurrent.h"
#include "loom/loom.h"
#include "loom/serialize/cntk_model.h"
#include "loom/serialize/model_file.h"

using namespace loom;

namespace {

// The parameter called name among layer's, given from's value.
void copy_parameter(const Function& layer, const std::string& name, const Function& from,
                    const std::string& path) {
  for (const Parameter& p : layer.parameters())
    if (p.name() == name) return p.set_value(from.parameter(path).value());
  std::fprintf(stderr, "no parameter %s to copy %s into\n", name.c_str(), path.c_str());
  std::exit(1);
}

// A model's executor, its time per batch and its output on the first batch.
struct Timed {
  explicit Timed(const Function& m) : model(m), exec({m.output()}) {}
  Function model;
  Executor exec;
  std::vector<double> ms = {};
  std::vector<float> out = {};

  void forward(const Value& batch) { exec.forward({{model.arguments().at(0), batch}}, false); }
  double median() {
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

// The models in turn on each batch (a shared machine's load falls on all alike).
void run(std::vector<Timed*> models, const std::vector<Value>& batches, int repeats) {
  for (Timed* m : models) {
    for (int i = 0; i < 2; ++i) m->forward(batches[size_t(i) % batches.size()]);
    m->forward(batches[0]);
    for (const auto& s : m->exec.output_value(m->model.output()).as_sequences<float>())
      m->out.insert(m->out.end(), s.begin(), s.end());
  }
  for (int i = 0; i < repeats; ++i)
    for (Timed* m : models) {
      const auto t = std::chrono::steady_clock::now();
      m->forward(batches[size_t(i) % batches.size()]);
      m->ms.push_back(1e3 *
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    }
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  size_t batch = 32, length = 20;
  int repeats = 20;
  bool nodes = false;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
      batch = size_t(std::max(1, std::atoi(argv[++i])));
    else if (std::strcmp(argv[i], "--length") == 0 && i + 1 < argc)
      length = size_t(std::max(1, std::atoi(argv[++i])));
    else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
      repeats = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--nodes") == 0)
      nodes = true;
    else
      path = argv[i];
  }
  if (path.empty()) {
    const std::string source = __FILE__;
    path =
        source.substr(0, source.rfind('/')) + "/../../shared/cntk-models/v2_atis_slot_tagger.cmf";
  }

  const Function loaded = load_model(path);
  const Function loop =
      function_from_cntk_dictionary(cntk_v2_dictionary(read_file_bytes(path), path), path, false);

  // The same architecture from Loom's layers, with the loaded weights.
  const Variable x = sequence::input_variable({943}, {.is_sparse = true, .name = "x"});
  const Function embed = Embedding(150), s1 = Stabilizer(), s2 = Stabilizer();
  const Function lstm = Recurrence(LSTM(300, {.enable_self_stabilization = true}));
  const Function dense = Dense(129);
  const Function built = dense(s2(lstm(s1(embed(x)))));
  copy_parameter(embed, "E", loaded, "embed.E");
  copy_parameter(s1, "alpha", loaded, "Stabilizer2.alpha");  // CNTK's names count from the top
  copy_parameter(lstm, "b", loaded, "LSTM.b");
  copy_parameter(lstm, "W", loaded, "LSTM.W");
  copy_parameter(lstm, "H", loaded, "LSTM.H");
  copy_parameter(lstm, "alpha", loaded, "dh_stabilizer.alpha");
  copy_parameter(s2, "alpha", loaded, "Stabilizer1.alpha");
  copy_parameter(dense, "W", loaded, "out_projection.W");
  copy_parameter(dense, "b", loaded, "out_projection.b");

  std::mt19937 gen(1);
  std::vector<Value> batches;
  for (int b = 0; b < 8; ++b) {
    std::vector<std::vector<size_t>> words(batch, std::vector<size_t>(length));
    for (auto& s : words)
      for (size_t& w : s) w = gen() % 943;
    batches.push_back(Value::one_hot_sequences(943, words));
  }

  Timed native(built), fused(loaded), stepped(loop);
  run({&native, &fused, &stepped}, batches, repeats);
  const double native_ms = native.median(), fused_ms = fused.median(),
               stepped_ms = stepped.median();
  std::printf("ATIS tagger, %zu sequences of %zu words, median of %d batches\n", batch, length,
              repeats);
  std::printf("%-16s %10s %10s %14s\n", "model", "ms/batch", "/built", "max |diff|");
  std::printf("%-16s %10.3f %10.2f %14s\n", "built in Loom", native_ms, 1.0, "-");
  std::printf("%-16s %10.3f %10.2f %14.3g\n", "loaded", fused_ms, fused_ms / native_ms,
              max_difference(fused.out, native.out));
  std::printf("%-16s %10.3f %10.2f %14.3g\n", "loaded, loop", stepped_ms, stepped_ms / native_ms,
              max_difference(stepped.out, native.out));
  if (nodes) {
    set_node_timing(true);
    for (Timed* m : {&native, &fused, &stepped}) {
      for (int i = 0; i < repeats; ++i) m->forward(batches[size_t(i) % batches.size()]);
      std::printf("\n%s", node_timing_report({m->model.output()}).c_str());
    }
  }
  return 0;
}
