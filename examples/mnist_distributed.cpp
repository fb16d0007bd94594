// Seed 002's Fashion-MNIST networks trained on several workers: the MLP (784-200-200-10, relu)
// or, with --convnet, the seed's convnet, each worker reading its partition of every
// minibatch through training_session, with the learner wrapped in one of CNTK's three
// distributed learners: data-parallel with float or 1-bit aggregation, or block momentum.
// Run it under `mpirun -np N`; rank 0 prints CNTK's progress lines (epochs, synchronizations,
// the test), every worker the bytes it sent.
//
//   mpirun -np 4 mnist_distributed [--learner data_parallel|one_bit|block_momentum]
//       [--block-size N (block momentum's samples per block; default 8192)] [--convnet]
//       [--epochs N (default 1)] [--samples N (of the 54,000; default all)]
//       [--test-samples N (of the 10,000; default all)] [--warm-start N (samples every worker
//       trains on alike before distributing: distributed_after; default 0)] [--no-momentum]
//       [--seed N (the initial weights; default 1)] [--data FOLDER]
//
// --no-momentum trains with the recipe's momentum at 0 throughout: the recipe for 1-bit SGD,
// whose error feedback is unstable with momentum at this learning rate. On the MLP after 6
// epochs on 4 workers (docs/distributed.md, "Accuracy"): float 13.09 % test error (mean of 3
// seeds), 1-bit without momentum 13.58 % (19.96 % with it, seed 1), block momentum 13.53 %.
#include <cstdio>
#include <string>

#include "examples/fashion_mnist.h"

using namespace loom;

int main(int argc, char** argv) {
  std::string algorithm = "data_parallel", folder = examples::kFashionMnistFolder;
  bool convnet = false, momentum = true;
  size_t seed = 1;
  size_t epochs = 1, samples = 54000, test_samples = 10000, block_size = 8192, warm_start = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--convnet") {
      convnet = true;
    } else if (flag == "--no-momentum") {
      momentum = false;
    } else if (i + 1 < argc && flag == "--learner") {
      algorithm = argv[++i];
    } else if (i + 1 < argc && flag == "--epochs") {
      epochs = std::stoul(argv[++i]);
    } else if (i + 1 < argc && flag == "--seed") {
      seed = std::stoul(argv[++i]);
    } else if (i + 1 < argc && flag == "--block-size") {
      block_size = std::stoul(argv[++i]);
    } else if (i + 1 < argc && flag == "--warm-start") {
      warm_start = std::stoul(argv[++i]);
    } else if (i + 1 < argc && flag == "--samples") {
      samples = std::stoul(argv[++i]);
    } else if (i + 1 < argc && flag == "--test-samples") {
      test_samples = std::stoul(argv[++i]);
    } else if (i + 1 < argc && flag == "--data") {
      folder = argv[++i];
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  examples::MnistData data = examples::load_mnist(folder, samples, 6000, test_samples);
  const size_t epoch_size = data.X_train.shape()[0];

  set_fixed_random_seed(seed);
  Variable x = input_variable({28, 28});
  Variable y = input_variable(10, {.is_sparse = true});
  Function model =
      convnet ? examples::create_model_mn()
              : Sequential({Dense(200, {.activation = relu}), Dense(200, {.activation = relu}),
                            Dense(10, {.activation = None})});
  Function criterion = examples::criterion_mn(model, x, y);

  auto recipe = examples::mnist_recipe(epoch_size);
  // Block momentum's local learner counts its own samples (as CNTK's), 1/N of the epoch's, so
  // its learning rate and momentum schedules run over the worker's share of an epoch and change
  // at the same epochs as the others'.
  const size_t workers = distributed::mpi_communicator()->num_workers();
  auto local_recipe =
      examples::mnist_recipe(algorithm == "block_momentum" ? epoch_size / workers : epoch_size);
  auto local = momentum_sgd(model.parameters(), local_recipe.lrs,
                            momentum ? local_recipe.momentums : momentum_schedule(0.0));
  std::shared_ptr<distributed::DistributedLearner> learner;
  if (algorithm == "data_parallel") {
    learner = distributed::data_parallel_distributed_learner(local, warm_start);
  } else if (algorithm == "one_bit") {
    learner = distributed::data_parallel_distributed_learner(local, warm_start, 1);
  } else if (algorithm == "block_momentum") {
    learner = distributed::block_momentum_distributed_learner(local, block_size,
                                                              {.distributed_after = warm_start});
  } else {
    std::fprintf(stderr, "unknown learner %s\n", algorithm.c_str());
    return 2;
  }
  auto communicator = learner->communicator();
  // Every worker reports the same numbers (over all workers); rank 0 prints them, and the first
  // and every 100th synchronisation.
  auto printer =
      std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.rank = communicator->rank(),
                                                               .num_epochs = epochs,
                                                               .distributed_freq = 100,
                                                               .distributed_first = 1});
  Trainer trainer(model(x), criterion, {learner}, {printer});

  // The source's sweeps end training on every worker at the same minibatch.
  MinibatchSource source = MinibatchSourceFromData(
      {{"features", data.X_train}, {"labels", data.Y_train}}, {.max_sweeps = epochs});
  MinibatchSource test_source = MinibatchSourceFromData(
      {{"features", data.X_test}, {"labels", data.Y_test}}, {.randomize = false, .max_sweeps = 1});
  training_session({.trainer = trainer,
                    .mb_source = source,
                    .mb_size = recipe.minibatch_sizes,
                    .model_inputs_to_streams = {{x, source["features"]}, {y, source["labels"]}},
                    .progress_frequency = epoch_size,
                    .test_config = {.source = test_source,
                                    .minibatch_size = 1024,
                                    .model_inputs_to_streams = {{x, test_source["features"]},
                                                                {y, test_source["labels"]}}}})
      .train();
  std::printf("Worker %zu of %zu (%s): samples seen %zu, bytes sent %llu\n", communicator->rank(),
              communicator->num_workers(), algorithm.c_str(),
              trainer.total_number_of_samples_seen(),
              static_cast<unsigned long long>(communicator->bytes_sent()));
  communicator->finalize();
  return 0;
}
