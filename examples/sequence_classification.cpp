// CNTK's sequence-classification test as a Loom program: 1,247 word sequences (sparse, 2,000
// words) in 5 classes from CNTK's own Train.ctf, read by the CTF reader as sequences (the
// label on a sequence's first line), classified by Embedding(50), Recurrence(LSTM(25)),
// sequence::last, Dense(5) trained with sgd; then the error over one sweep of the data in
// file order, against chance (80 %) and against always guessing the most frequent class.
//
//   sequence_classification PATH/Tests/EndToEndTests/Text/SequenceClassification/Data/Train.ctf
//                           [--sweeps N]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "loom/loom.h"

using namespace loom;

int main(int argc, char** argv) {
  std::string path;
  size_t sweeps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--sweeps" && i + 1 < argc)
      sweeps = std::stoul(argv[++i]);
    else
      path = arg;
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: sequence_classification PATH_TO_Train.ctf [--sweeps N]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const size_t input_dim = 2000, num_classes = 5;
  set_fixed_random_seed(1);

  Variable features = sequence::input_variable({input_dim}, {.is_sparse = true, .name = "x"});
  Variable label = input_variable({num_classes}, {.name = "y"});
  Function last = sequence::last(placeholder("h"));  // sequence::last as a layer
  Function model = Sequential({Embedding(50), Recurrence(LSTM(25)), last, Dense(num_classes)});
  Variable z = model(features);
  Variable ce = cross_entropy_with_softmax(z, label);
  Variable pe = classification_error(z, label);
  std::printf("%s\n", Function(z).to_string().c_str());

  StreamDefs streams{{"x", StreamDef{.shape = input_dim, .is_sparse = true}},
                     {"y", StreamDef{.shape = num_classes}}};
  MinibatchSource reader(std::make_shared<CTFDeserializer>(path, streams), {.max_sweeps = sweeps});
  InputMap input_map{{features, reader["x"]}, {label, reader["y"]}};

  auto learner = sgd(model.parameters(), learning_rate_schedule(0.1, UnitType::sample));
  Trainer trainer(z, {ce, pe}, {learner},
                  {std::make_shared<ProgressPrinter>(ProgressPrinterOptions{.freq = 100})});
  for (auto mb = reader.next_minibatch(200, input_map); !mb.empty();
       mb = reader.next_minibatch(200, input_map))
    trainer.train_minibatch(mb);
  trainer.summarize_training_progress();

  // One sweep in file order: the error, and how often each class is the label.
  MinibatchSource sweep(std::make_shared<CTFDeserializer>(path, streams),
                        {.randomize = false, .max_sweeps = 1});
  InputMap sweep_map{{features, sweep["x"]}, {label, sweep["y"]}};
  std::vector<size_t> counts(num_classes, 0);
  size_t total = 0;
  double errors = 0;
  for (auto mb = sweep.next_minibatch(500, sweep_map); !mb.empty();
       mb = sweep.next_minibatch(500, sweep_map)) {
    const size_t n = mb[label].number_of_sequences;
    for (size_t c : mb[label].data.argmax()) ++counts[c];
    errors += trainer.test_minibatch(mb) * double(n);
    total += n;
  }
  const size_t most = *std::max_element(counts.begin(), counts.end());
  const double error = 100 * errors / double(total);
  const double majority = 100 * (1 - double(most) / double(total));
  std::printf(
      "Training error over %zu sequences: %.2f%% (chance 80.00%%, most frequent class "
      "%.2f%%)\n",
      total, error, majority);
  std::printf(error < majority / 2 ? "Well below chance\n" : "NOT well below chance\n");
  return 0;
}
