// Seed 000's manual minibatch loop with checkpointing: at start it restores the trainer and
// the minibatch source from the checkpoint if there is one, and while training it saves both
// every checkpoint_frequency samples. Run it, kill it at any moment, run it again: it resumes
// and ends with exactly the parameters of a run never killed.
//
//   xor_checkpointed_loop [--checkpoint PATH] [--max-samples N] [--checkpoint-frequency N]
//                         [--dropout RATE] [--momentum M] [--parameters-out PATH]
//
// The options beyond the seed's (dropout, momentum) let the resume test exercise random
// state and learner state; --parameters-out writes the final parameters' bytes.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "loom/loom.h"

using namespace loom;

int main(int argc, char** argv) {
  std::string checkpoint = "manual_loop_checkpointed", parameters_out;
  size_t max_samples = 800, checkpoint_frequency = 100;
  double dropout_rate = 0, momentum = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--checkpoint") {
      checkpoint = value;
    } else if (flag == "--max-samples") {
      max_samples = std::stoul(value);
    } else if (flag == "--checkpoint-frequency") {
      checkpoint_frequency = std::stoul(value);
    } else if (flag == "--dropout") {
      dropout_rate = std::stod(value);
    } else if (flag == "--momentum") {
      momentum = std::stod(value);
    } else if (flag == "--parameters-out") {
      parameters_out = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe before a kill

  const char* input_file = "input";
  std::ofstream(input_file) << "|xy 0 0\t|r 0\n|xy 1 0\t|r 1\n|xy 0 1\t|r 1\n|xy 1 1\t|r 0\n";

  set_fixed_random_seed(1);
  Variable xy = input_variable({2});
  Variable label = input_variable({1});
  Variable hidden = Dense(2, {.activation = tanh})(xy);
  if (dropout_rate > 0) hidden = dropout(hidden, dropout_rate);
  Function model = Dense(1)(hidden);
  Variable z = model;
  Variable loss = squared_error(z, label);

  StreamDefs streams{{"xy", StreamDef{.field = "xy", .shape = 2}},
                     {"r", StreamDef{.field = "r", .shape = 1}}};
  MinibatchSource mb_source(std::make_shared<CTFDeserializer>(input_file, streams));
  std::unordered_map<Variable, StreamInformation> input_map{{xy, mb_source["xy"]},
                                                            {label, mb_source["r"]}};

  auto lr = learning_rate_schedule(0.1, UnitType::sample);
  auto learner = momentum > 0 ? momentum_sgd(model.parameters(), lr, momentum_schedule(momentum))
                              : sgd(model.parameters(), lr);
  Trainer trainer(z, {loss, loss}, {learner}, {std::make_shared<ProgressPrinter>(10)});

  // Try to restore if the checkpoint exists.
  if (std::filesystem::exists(checkpoint)) {
    std::printf("Trying to restore from checkpoint\n");
    Dictionary mb_source_state = trainer.restore_from_checkpoint(checkpoint);
    mb_source.restore_from_checkpoint(mb_source_state);
    std::printf("Restore has finished successfully\n");
  } else {
    std::printf("No restore file found\n");
  }

  const size_t minibatch_size = 4;
  size_t last_checkpoint = trainer.total_number_of_samples_seen() / checkpoint_frequency;
  bool train = true;
  while (train && trainer.total_number_of_samples_seen() < max_samples) {
    auto data = mb_source.next_minibatch(minibatch_size, input_map);
    train = trainer.train_minibatch(data);
    if (trainer.total_number_of_samples_seen() / checkpoint_frequency != last_checkpoint) {
      trainer.save_checkpoint(checkpoint, mb_source.get_checkpoint_state());
      last_checkpoint = trainer.total_number_of_samples_seen() / checkpoint_frequency;
    }
  }

  if (!parameters_out.empty()) {
    std::ofstream out(parameters_out, std::ios::binary);
    for (const Parameter& p : model.parameters()) {
      auto v = p.value().to_vector<float>();
      out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    }
  }
  return 0;
}
