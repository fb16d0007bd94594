// Seed 001: minibatch sources a program writes itself (UserMinibatchSource), feeding an LSTM
// classifier of sparse word sequences through training_session.
//
// Part 1 is the seed's MyDataSource: two sequences held in memory, read one after the other,
// trained with sgd at 0.5 per sample, minibatches of 4 samples, 80 samples, a summary every 20
// ("Finished Epoch[1 of 10]: [Training] loss = ..."). Part 2 is the seed's multi-worker source
// done right: it reads a file, keeps only the sequences of its worker (sequence id modulo the
// number of workers), and its checkpoint state is its position in the file, so a session
// resumes where it stopped. It trains with a data-parallel learner, alone or under
// `mpirun -np N`.
//
//   user_minibatch_source_lstm                      both parts, as the seed
//   user_minibatch_source_lstm --multi-worker --max-samples N --checkpoint FILE
//                              [--parameters-out PATH]
//       part 2 only, checkpointing every 28 samples and resuming from FILE when it exists
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loom/loom.h"

using namespace loom;

namespace {

// The seed's toy data in CNTK's text format: sequence id, a word (sparse, one per line) and,
// on a sequence's first line, its label (dense one-hot).
const char* kMbData =
    "0      |x 560:1        |y 1 0 0 0 0\n"
    "0   |x 0:1\n"
    "0   |x 0:1\n"
    "1   |x 560:1        |y 0 1 0 0 0\n"
    "1   |x 0:1\n"
    "1   |x 0:1\n"
    "1   |x 424:1\n";

const char* kSampleData =
    "0      |x 560:1        |y 1 0 0 0 0\n"
    "0   |x 0:1\n"
    "0   |x 0:1\n"
    "1   |x 560:1        |y 0 1 0 0 0\n"
    "1   |x 0:1\n"
    "1   |x 0:1\n"
    "1   |x 424:1\n"
    "2   |x 160:1        |y 0 0 1 0 0\n"
    "2   |x 5:1\n"
    "2   |x 6:1\n"
    "3   |x 460:1        |y 0 0 0 1 0\n"
    "3   |x 3:1\n"
    "3   |x 3:1\n"
    "3   |x 425:1\n";

// One line: its sequence id, its word, and its label if it has one.
struct Line {
  size_t seq_id = 0;
  size_t word = 0;
  std::vector<float> label;
};

Line parse_line(const std::string& text) {
  Line line;
  std::istringstream in(text);
  std::string field;
  in >> line.seq_id >> field;  // "|x"
  in >> field;                 // "560:1"
  line.word = std::stoul(field.substr(0, field.find(':')));
  if (in >> field)  // "|y"
    for (float v; in >> v;) line.label.push_back(v);
  return line;
}

// One sequence: its words and its label.
struct Sequence {
  std::vector<size_t> words;
  std::vector<float> label;
};

// The minibatch of these sequences, with the seed's counts.
Minibatch<StreamInformation> minibatch_of(const std::vector<Sequence>& seqs, size_t f_dim,
                                          const StreamInformation& fsi,
                                          const StreamInformation& lsi, bool sweep_end) {
  std::vector<std::vector<size_t>> features;
  std::vector<float> labels;
  size_t feature_samples = 0;
  for (const Sequence& s : seqs) {
    features.push_back(s.words);
    feature_samples += s.words.size();
    labels.insert(labels.end(), s.label.begin(), s.label.end());
  }
  const size_t num_seq = seqs.size();
  return {
      {fsi, {Value::one_hot_sequences(f_dim, features), num_seq, feature_samples, sweep_end}},
      {lsi, {Value::create_batch<float>(lsi.sample_shape, labels), num_seq, num_seq, sweep_end}}};
}

// The seed's MyDataSource: all data in memory; whole sequences while they fit into
// num_samples (at least one); sweep_end on the call that wraps around.
class MyDataSource : public UserMinibatchSource {
 public:
  MyDataSource(size_t f_dim, size_t l_dim) : f_dim_(f_dim) {
    std::istringstream in(kMbData);
    for (std::string text; std::getline(in, text);) {
      Line line = parse_line(text);
      Sequence& s = data_[line.seq_id];
      s.words.push_back(line.word);
      if (!line.label.empty()) s.label = line.label;
    }
    fsi = {"features", 0, StorageFormat::SparseCSR, DataType::Float32, {f_dim}};
    lsi = {"labels", 1, StorageFormat::Dense, DataType::Float32, {l_dim}};
    for (const auto& entry : data_) sequences_.push_back(entry.first);
  }

  StreamInformation fsi, lsi;

  std::vector<StreamInformation> stream_infos() const override { return {fsi, lsi}; }

  Minibatch<StreamInformation> next_minibatch(size_t num_samples, size_t /*number_of_workers*/,
                                              size_t /*worker_rank*/) override {
    std::vector<Sequence> seqs;
    size_t f_count = 0, l_count = 0;
    bool sweep_end = false;
    while (std::max(f_count, l_count) < num_samples) {
      if (next_seq_idx_ == sequences_.size()) {
        sweep_end = true;
        next_seq_idx_ = 0;
      }
      const Sequence& s = data_.at(sequences_[next_seq_idx_]);
      if (!seqs.empty() && std::max(f_count + s.words.size(), l_count + 1) > num_samples) break;
      f_count += s.words.size();
      l_count += 1;
      seqs.push_back(s);
      ++next_seq_idx_;
    }
    return minibatch_of(seqs, f_dim_, fsi, lsi, sweep_end);
  }

  Dictionary get_checkpoint_state() const override {
    Dictionary d;
    d["next_seq_idx"] = uint64_t{next_seq_idx_};
    return d;
  }
  void restore_from_checkpoint(const Dictionary& state) override {
    next_seq_idx_ = size_t(state.get<uint64_t>("next_seq_idx"));
  }

 private:
  size_t f_dim_;
  std::map<size_t, Sequence> data_;
  std::vector<size_t> sequences_;
  size_t next_seq_idx_ = 0;
};

// The seed's MyMultiWorkerDataSource, corrected: it reads a file sequence by sequence; every
// worker walks the same sequences (num_samples is the global minibatch size) and keeps those
// whose id modulo number_of_workers is its rank; its state is the file offset of the next
// sequence to read.
class MyMultiWorkerDataSource : public UserMinibatchSource {
 public:
  MyMultiWorkerDataSource(const std::string& path, size_t f_dim, size_t l_dim)
      : file_(path, std::ios::binary), f_dim_(f_dim) {
    if (!file_) throw IOError("cannot open " + path);
    fsi = {"features", 0, StorageFormat::SparseCSR, DataType::Float32, {f_dim}};
    lsi = {"labels", 1, StorageFormat::Dense, DataType::Float32, {l_dim}};
  }

  StreamInformation fsi, lsi;

  std::vector<StreamInformation> stream_infos() const override { return {fsi, lsi}; }

  Minibatch<StreamInformation> next_minibatch(size_t num_samples, size_t number_of_workers,
                                              size_t worker_rank) override {
    std::vector<Sequence> mine;
    size_t f_count = 0, l_count = 0;
    bool sweep_end = false;
    while (std::max(f_count, l_count) < num_samples) {
      const std::streamoff start = io_pos_;
      size_t seq_id = 0;
      bool wrapped = false;
      Sequence s = read_sequence(seq_id, wrapped);
      // A sequence that does not fit is left for the next minibatch (at least one is taken).
      if (f_count > 0 && std::max(f_count + s.words.size(), l_count + 1) > num_samples) {
        io_pos_ = start;
        break;
      }
      sweep_end |= wrapped;
      f_count += s.words.size();
      l_count += 1;
      if (seq_id % number_of_workers == worker_rank) mine.push_back(std::move(s));
    }
    return minibatch_of(mine, f_dim_, fsi, lsi, sweep_end);
  }

  Dictionary get_checkpoint_state() const override {
    Dictionary d;
    d["io_pos"] = int64_t{io_pos_};
    return d;
  }
  void restore_from_checkpoint(const Dictionary& state) override {
    io_pos_ = state.get<int64_t>("io_pos");
  }

 private:
  // The sequence starting at io_pos_ (at the end of the file: the first one, and wrapped is
  // set); io_pos_ moves to the line after it.
  Sequence read_sequence(size_t& seq_id, bool& wrapped) {
    file_.clear();
    file_.seekg(io_pos_);
    if (file_.peek() == EOF) {
      wrapped = true;
      file_.clear();
      file_.seekg(0);
    }
    Sequence s;
    std::string text;
    for (bool first = true;; first = false) {
      io_pos_ = file_.tellg();
      if (!std::getline(file_, text)) break;
      Line line = parse_line(text);
      if (!first && line.seq_id != seq_id) break;
      seq_id = line.seq_id;
      s.words.push_back(line.word);
      if (!line.label.empty()) s.label = line.label;
    }
    return s;
  }

  std::ifstream file_;
  size_t f_dim_;
  std::streamoff io_pos_ = 0;
};

struct Model {
  Variable feature, label;
  Variable z, ce, errs;
};

// The seed's network: Recurrence(LSTM(20)), sequence::last, Dense(5).
Model make_model(size_t input_dim, size_t num_output_classes) {
  Model m;
  m.feature = sequence::input_variable({input_dim}, {.is_sparse = true});
  m.label = input_variable({num_output_classes});
  Variable rnn = Recurrence(LSTM(20), {.go_backwards = false})(m.feature);
  Variable end = sequence::last(rnn);
  m.z = Dense(num_output_classes)(end);
  m.ce = cross_entropy_with_softmax(m.z, m.label);
  m.errs = classification_error(m.z, m.label);
  return m;
}

void part1() {
  const size_t input_dim = 1000, num_output_classes = 5;
  MyDataSource mbs(input_dim, num_output_classes);
  Model m = make_model(input_dim, num_output_classes);
  auto learner = sgd(Function(m.z).parameters(), learning_rate_schedule(0.5, UnitType::sample));
  Trainer trainer(m.z, {m.ce, m.errs}, {learner},
                  {std::make_shared<ProgressPrinter>(
                      ProgressPrinterOptions{.tag = "Training", .num_epochs = 10})});
  InputMap input_map{{m.feature, mbs.fsi}, {m.label, mbs.lsi}};
  training_session({.trainer = trainer,
                    .mb_source = mbs,
                    .mb_size = 4,
                    .model_inputs_to_streams = input_map,
                    .max_samples = 80,
                    .progress_frequency = 20})
      .train();
}

void part2(size_t max_samples, const std::string& checkpoint, const std::string& parameters_out) {
  auto communicator = distributed::mpi_communicator();
  const char* path = "sample_data.ctf";
  if (communicator->is_main()) std::ofstream(path, std::ios::binary) << kSampleData;
  communicator->barrier();  // the others read the file the main worker wrote

  const size_t input_dim = 1000, num_output_classes = 5;
  MyMultiWorkerDataSource mbs(path, input_dim, num_output_classes);
  Model m = make_model(input_dim, num_output_classes);
  auto local_learner =
      sgd(Function(m.z).parameters(), learning_rate_schedule(0.5, UnitType::sample));
  auto dist_learner = distributed::data_parallel_distributed_learner(local_learner);
  auto trainer = std::make_shared<Trainer>(
      m.z, std::pair{m.ce, m.errs}, std::vector<std::shared_ptr<Learner>>{dist_learner},
      ProgressWriters{std::make_shared<ProgressPrinter>(
          ProgressPrinterOptions{.tag = "Training", .num_epochs = 10})});
  InputMap input_map{{m.feature, mbs.fsi}, {m.label, mbs.lsi}};
  CheckpointConfig checkpoint_config;
  if (!checkpoint.empty()) checkpoint_config = {.filename = checkpoint, .frequency = 28};
  training_session({.trainer = trainer,
                    .mb_source = mbs,
                    .mb_size = 7,
                    .model_inputs_to_streams = input_map,
                    .max_samples = max_samples,
                    .progress_frequency = 20,
                    .checkpoint_config = checkpoint_config})
      .train();
  std::printf("Samples seen %zu\n", trainer->total_number_of_samples_seen());

  if (!parameters_out.empty() && communicator->is_main()) {
    std::ofstream out(parameters_out, std::ios::binary);
    for (const Parameter& p : Function(m.z).parameters()) {
      auto v = p.value().to_vector<float>();
      out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    }
  }
  communicator->finalize();
}

}  // namespace

int main(int argc, char** argv) {
  bool multi_worker_only = false;
  size_t max_samples = 80;
  std::string checkpoint, parameters_out;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--multi-worker") {
      multi_worker_only = true;
    } else if (flag == "--max-samples" && i + 1 < argc) {
      max_samples = std::stoul(argv[++i]);
    } else if (flag == "--checkpoint" && i + 1 < argc) {
      checkpoint = argv[++i];
    } else if (flag == "--parameters-out" && i + 1 < argc) {
      parameters_out = argv[++i];
    } else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe before a kill
  set_fixed_random_seed(1);
  if (!multi_worker_only) {
    std::printf("Part 1: MyDataSource\n");
    part1();
    std::printf("Part 2: MyMultiWorkerDataSource\n");
  }
  part2(max_samples, checkpoint, parameters_out);
  return 0;
}
