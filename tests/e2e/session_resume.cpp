// The program session_resume_test.py kills and resumes: a training_session whose progress
// summary, cross-validation and checkpoint all fall due every 32 samples, with seed 002's
// cross-validation callback (halve the learning rate when the error improved by less than 5 %,
// remembering the previous error through the checkpoint's user state). The model has batch
// normalization and dropout, the learner momentum, the source is randomized over small chunks.
//
//   session_resume [--max-samples N] [--parameters-out PATH]
//
// Run it in an empty folder: it writes its data there, then resumes from the newest valid
// checkpoint on every later start.
#include <cstdio>
#include <fstream>
#include <string>

#include "loom/loom.h"

using namespace loom;

namespace {

// 256 samples of 8 features and one of 3 classes, by a fixed rule plus noise.
void write_data(const std::string& path, size_t samples, uint64_t seed) {
  std::ofstream out(path);
  RandomGenerator rng(seed, 0);
  for (size_t i = 0; i < samples; ++i) {
    float x[8], score[3] = {0, 0, 0};
    for (size_t j = 0; j < 8; ++j) {
      x[j] = float(rng.uniform()) * 2 - 1;
      score[j % 3] += x[j] * float(j + 1);
    }
    size_t label = 0;
    for (size_t c = 1; c < 3; ++c)
      if (score[c] > score[label]) label = c;
    out << "|x";
    for (float v : x) out << ' ' << v;
    out << "\t|y " << label << ":1\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t max_samples = 2048;
  std::string parameters_out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--max-samples") {
      max_samples = std::stoul(value);
    } else if (flag == "--parameters-out") {
      parameters_out = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe before a kill
  write_data("train.ctf", 256, 1);
  write_data("cv.ctf", 64, 2);

  set_fixed_random_seed(1);
  Variable x = input_variable({8}, {.name = "x"});
  Variable y = input_variable({3}, {.is_sparse = true, .name = "y"});
  Function model =
      Sequential({Dense(16, {.activation = relu}), BatchNormalization(), Dropout(0.2), Dense(3)});
  Variable z = model(x);
  Variable loss = cross_entropy_with_softmax(z, y);
  Variable metric = classification_error(z, y);

  StreamDefs streams{{"x", StreamDef{.field = "x", .shape = 8}},
                     {"y", StreamDef{.field = "y", .shape = 3, .is_sparse = true}}};
  auto source = std::make_shared<MinibatchSource>(
      std::make_shared<CTFDeserializer>("train.ctf", streams, CTFOptions{.chunk_size_bytes = 2048}),
      MinibatchSourceConfig{.randomization_window_in_chunks = 3});
  auto cv_source =
      std::make_shared<MinibatchSource>(std::make_shared<CTFDeserializer>("cv.ctf", streams),
                                        MinibatchSourceConfig{.randomize = false, .max_sweeps = 1});

  auto learner = momentum_sgd(model.parameters(), learning_parameter_schedule_per_sample(0.05),
                              momentum_schedule(0.9));
  auto trainer = std::make_shared<Trainer>(
      z, std::pair{loss, metric}, std::vector<std::shared_ptr<Learner>>{learner},
      ProgressWriters{std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 4})});

  double previous_error = 1;
  auto halve_when_stalled = [&](size_t index, double error, size_t, size_t) {
    if ((previous_error - error) / previous_error < 0.05) {
      learner->reset_learning_rate(
          learning_parameter_schedule_per_sample(learner->learning_rate() / 2));
      std::printf("CV %zu: error %.4f after %.4f: learning rate halved to %g\n", index, error,
                  previous_error, learner->learning_rate());
    }
    previous_error = error;
    return true;
  };
  CheckpointConfig checkpoint{
      .filename = "session_resume",
      .frequency = 32,
      .max_to_keep = 3,
      .save_state =
          [&] {
            Dictionary d;
            d["previous_error"] = previous_error;
            return d;
          },
      .restore_state =
          [&](const Dictionary& d) { previous_error = d.get<double>("previous_error"); }};

  training_session(
      {.trainer = trainer,
       .mb_source = source,
       .mb_size = 16,
       .model_inputs_to_streams = {{x, (*source)["x"]}, {y, (*source)["y"]}},
       .max_samples = max_samples,
       .progress_frequency = 32,
       .checkpoint_config = checkpoint,
       .cv_config = {.source = cv_source,
                     .frequency = 32,
                     .minibatch_size = 32,
                     .callback = halve_when_stalled,
                     .model_inputs_to_streams = {{x, (*cv_source)["x"]}, {y, (*cv_source)["y"]}}}})
      .train();

  if (!parameters_out.empty()) {
    std::ofstream out(parameters_out, std::ios::binary);
    for (const Parameter& p : model.parameters()) {
      auto v = p.value().to_vector<float>();
      out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    }
    for (const Constant& c : model.constants()) {  // batch normalization's statistics
      auto v = c.value().to_vector<float>();
      out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    }
  }
  return 0;
}
