// Seed 000's training session: the XOR network of xor_manual_loop trained by training_session
// with a checkpoint every 100 samples and a final test on the same file, not randomized. Run it
// again and it restores the last checkpoint and continues where it stopped; a second argument
// raises max_samples (default 800) so that a resumed run has more to do.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "loom/loom.h"

using namespace loom;

int main(int argc, char** argv) {
  const char* input_file = "input";
  const size_t max_samples = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 800;
  std::ofstream(input_file) << "|xy 0 0\t|r 0\n|xy 1 0\t|r 1\n|xy 0 1\t|r 1\n|xy 1 1\t|r 0\n";

  Variable xy = input_variable({2});
  Variable label = input_variable({1});
  Function model = Sequential({Dense(2, {.activation = tanh}), Dense(1)});
  Variable z = model(xy);
  Variable loss = squared_error(z, label);

  StreamDefs streams{{"xy", StreamDef{.field = "xy", .shape = 2}},
                     {"r", StreamDef{.field = "r", .shape = 1}}};
  const size_t minibatch_size = 4, checkpoint_frequency = 100;
  const std::string checkpoint = "training_session";

  // Minibatch sources
  MinibatchSource mb_source(std::make_shared<CTFDeserializer>(input_file, streams));
  MinibatchSource test_mb_source(std::make_shared<CTFDeserializer>(input_file, streams),
                                 {.randomize = false, .max_samples = 100});

  auto learner = sgd(model.parameters(), learning_rate_schedule(0.1, UnitType::sample));
  Trainer trainer(z, {loss, loss}, {learner}, {std::make_shared<ProgressPrinter>(1)});

  auto session = training_session(
      {.trainer = trainer,
       .mb_source = mb_source,
       .mb_size = minibatch_size,
       .model_inputs_to_streams = {{xy, mb_source["xy"]}, {label, mb_source["r"]}},
       .max_samples = max_samples,
       .checkpoint_config = {.filename = checkpoint, .frequency = checkpoint_frequency},
       .test_config = {
           .source = test_mb_source,
           .minibatch_size = minibatch_size,
           .model_inputs_to_streams = {{xy, test_mb_source["xy"]}, {label, test_mb_source["r"]}}}});
  session.train();
  std::printf("Samples seen %zu\n", trainer.total_number_of_samples_seen());
  return 0;
}
