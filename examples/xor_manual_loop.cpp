// Seed 000's manual minibatch loop: XOR from a CTF file, Dense(2, tanh) then Dense(1),
// squared_error as loss and metric, sgd at 0.1 per sample, ProgressPrinter(freq=10),
// minibatch 4 for 800 samples; then an evaluation loop over the same file, not randomized.
#include <cstdio>
#include <fstream>

#include "loom/loom.h"

using namespace loom;

int main(int argc, char** argv) {
  // The data exactly matches the XOR table.
  const char* input_file = argc > 1 ? argv[1] : "input";
  std::ofstream(input_file) << "|xy 0 0\t|r 0\n|xy 1 0\t|r 1\n|xy 0 1\t|r 1\n|xy 1 1\t|r 0\n";

  Variable xy = input_variable({2});
  Variable label = input_variable({1});
  Function model = Sequential({Dense(2, {.activation = tanh}), Dense(1)});
  Variable z = model(xy);
  Variable loss = squared_error(z, label);

  StreamDefs streams{{"xy", StreamDef{.field = "xy", .shape = 2}},
                     {"r", StreamDef{.field = "r", .shape = 1}}};

  auto learner = sgd(model.parameters(), learning_rate_schedule(0.1, UnitType::sample));
  Trainer trainer(z, {loss, loss}, {learner}, {std::make_shared<ProgressPrinter>(10)});

  MinibatchSource mb_source(std::make_shared<CTFDeserializer>(input_file, streams));
  std::unordered_map<Variable, StreamInformation> input_map{{xy, mb_source["xy"]},
                                                            {label, mb_source["r"]}};

  // Run a manual training minibatch loop.
  const size_t minibatch_size = 4, max_samples = 800;
  bool train = true;
  while (train && trainer.total_number_of_samples_seen() < max_samples) {
    auto data = mb_source.next_minibatch(minibatch_size, input_map);
    train = trainer.train_minibatch(data);
  }

  // Run a manual evaluation loop using the same data file for evaluation.
  MinibatchSource test_mb_source(std::make_shared<CTFDeserializer>(input_file, streams),
                                 {.randomize = false, .max_samples = 100});
  std::unordered_map<Variable, StreamInformation> test_input_map{{xy, test_mb_source["xy"]},
                                                                 {label, test_mb_source["r"]}};
  size_t total_samples = 0;
  double error = 0;
  auto data = test_mb_source.next_minibatch(32, test_input_map);
  while (!data.empty()) {
    size_t n = data.at(label).number_of_samples;
    total_samples += n;
    error += trainer.test_minibatch(data) * double(n);
    data = test_mb_source.next_minibatch(32, test_input_map);
  }
  std::printf("Error %f\n", error / double(total_samples));
  return 0;
}
