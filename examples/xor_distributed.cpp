// Seed 000's distributed training: the XOR network of xor_manual_loop with its sgd learner
// wrapped in data_parallel_distributed_learner, each worker reading its own partition of every
// minibatch, checkpointing as xor_checkpointed_loop does (the main worker writes). Run it under
// `mpirun -np N`; alone it is one worker. --session trains with training_session instead of
// the manual loop (and tests at the end).
//
//   mpirun -np 2 xor_distributed [--session] [--max-samples N] [--quantization-bits B]
//                                [--parameters-out PATH]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "loom/loom.h"

using namespace loom;

int main(int argc, char** argv) {
  bool session = false;
  size_t max_samples = 800, quantization_bits = 32;
  std::string parameters_out;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--session") {
      session = true;
    } else if (flag == "--max-samples" && i + 1 < argc) {
      max_samples = std::stoul(argv[++i]);
    } else if (flag == "--quantization-bits" && i + 1 < argc) {
      quantization_bits = std::stoul(argv[++i]);
    } else if (flag == "--parameters-out" && i + 1 < argc) {
      parameters_out = argv[++i];
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  auto communicator = distributed::mpi_communicator();
  const size_t rank = communicator->rank(), workers = communicator->num_workers();

  const char* input_file = "input";
  if (communicator->is_main())
    std::ofstream(input_file) << "|xy 0 0\t|r 0\n|xy 1 0\t|r 1\n|xy 0 1\t|r 1\n|xy 1 1\t|r 0\n";
  communicator->barrier();  // the others read the file the main worker wrote

  set_fixed_random_seed(1);
  Variable xy = input_variable(2);
  Variable label = input_variable(1);
  Function model = Sequential({Dense(2, {.activation = tanh}), Dense(1)});
  Variable z = model(xy);
  Variable loss = squared_error(z, label);

  StreamDefs streams{{"xy", StreamDef{.field = "xy", .shape = 2}},
                     {"r", StreamDef{.field = "r", .shape = 1}}};
  const size_t minibatch_size = 4, checkpoint_frequency = 100;
  MinibatchSource mb_source(std::make_shared<CTFDeserializer>(input_file, streams));

  // Make sure the learner is distributed.
  auto learner = distributed::data_parallel_distributed_learner(
      sgd(model.parameters(), learning_rate_schedule(0.1, UnitType::sample)), 0,
      int(quantization_bits));
  Trainer trainer(z, {loss, loss}, {learner}, {std::make_shared<ProgressPrinter>(10)});

  if (session) {
    MinibatchSource test_mb_source(std::make_shared<CTFDeserializer>(input_file, streams),
                                   {.randomize = false, .max_samples = 100});
    training_session(
        {.trainer = trainer,
         .mb_source = mb_source,
         .mb_size = minibatch_size,
         .model_inputs_to_streams = {{xy, mb_source["xy"]}, {label, mb_source["r"]}},
         .max_samples = max_samples,
         .checkpoint_config = {.filename = "training_session", .frequency = checkpoint_frequency},
         .test_config = {.source = test_mb_source,
                         .minibatch_size = minibatch_size,
                         .model_inputs_to_streams = {{xy, test_mb_source["xy"]},
                                                     {label, test_mb_source["r"]}}}})
        .train();
  } else {
    const std::string checkpoint = "manual_loop_distributed";
    std::unordered_map<Variable, StreamInformation> input_map{{xy, mb_source["xy"]},
                                                              {label, mb_source["r"]}};
    if (std::filesystem::exists(checkpoint)) {
      std::printf("Trying to restore from checkpoint\n");
      mb_source.restore_from_checkpoint(trainer.restore_from_checkpoint(checkpoint));
    } else {
      std::printf("No restore file found\n");
    }
    size_t last_checkpoint = trainer.total_number_of_samples_seen() / checkpoint_frequency;
    bool train = true;
    while (train && trainer.total_number_of_samples_seen() < max_samples) {
      // Make sure each worker gets its own data only.
      auto data = mb_source.next_minibatch(minibatch_size, input_map, workers, rank);
      train = trainer.train_minibatch(data);
      if (trainer.total_number_of_samples_seen() / checkpoint_frequency != last_checkpoint) {
        trainer.save_checkpoint(checkpoint, mb_source.get_checkpoint_state());
        last_checkpoint = trainer.total_number_of_samples_seen() / checkpoint_frequency;
      }
    }
  }
  std::printf("Worker %zu of %zu: samples seen %zu\n", rank, workers,
              trainer.total_number_of_samples_seen());

  if (!parameters_out.empty() && communicator->is_main()) {
    std::ofstream out(parameters_out);
    for (const Parameter& p : model.parameters())
      for (float v : p.value().to_vector<float>()) out << v << "\n";
  }
  communicator->finalize();
  return 0;
}
