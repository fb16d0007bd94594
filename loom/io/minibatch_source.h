// MinibatchSource: cuts the data of one or more deserializers into minibatches along a
// deterministic timeline that repeats the corpus sweep after sweep (CNTK-SEMANTICS.md §3.2).
// Each sweep's order is a function of (randomization_seed, sweep index) only, so a position
// (a global sample count) is all a checkpoint needs: restoring replays the timeline to it.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/io/deserializer.h"
#include "loom/io/minibatch_source_interface.h"

namespace loom {

struct MinibatchSourceConfig {
  // Shuffle chunks, then sequences within windows of chunks, anew in every sweep.
  bool randomize = true;
  // Where the timeline ends, in samples or in sweeps (FULL_DATA_SWEEP: one sweep); exclusive.
  size_t max_samples = INFINITELY_REPEAT;
  size_t max_sweeps = INFINITELY_REPEAT;
  uint64_t randomization_seed = 0;
  // Chunks whose sequences are shuffled together (CNTK: 4 GB / 32 MB).
  size_t randomization_window_in_chunks = 128;
  // Split sequences into independent samples (each a sequence of length 1).
  bool frame_mode = false;
  // Truncated back-propagation through time (0: off): sequences are cut into pieces of this
  // many steps. A minibatch of M samples holds max(1, M / truncation_length) slots; each slot
  // runs through whole sequences one piece per minibatch, so the pieces of a sequence come in
  // consecutive minibatches at the same index (the sequence's index among this worker's
  // slots) and a recurrent state carries over from one piece to the next. A slot whose
  // sequence ends starts the next sequence in the next minibatch; a slot without data left is
  // an empty sequence, which keeps the slots after it at their index. Every stream must have
  // the sequence's length. Exclusive with frame_mode.
  size_t truncation_length = 0;
};

class MinibatchSource : public MinibatchSourceInterface {
 public:
  // With several deserializers, the i-th sequences of all of them form sequence i; they must
  // hold equally many sequences, and chunks (for randomization and partitions) are those of
  // the first. Stream names must be unique across deserializers.
  MinibatchSource(std::vector<std::shared_ptr<Deserializer>> deserializers,
                  MinibatchSourceConfig config = {});
  MinibatchSource(std::shared_ptr<Deserializer> deserializer, MinibatchSourceConfig config = {});

  // The next minibatch of about minibatch_size_in_samples samples (counted in the longest
  // stream, or the one that defines the minibatch size; at least one whole sequence), for
  // worker partition_index of num_data_partitions. The size is global: all workers walk the
  // same timeline and each gets its share of it (possibly no sequence; then every stream has
  // number_of_sequences == 0). Empty once max_samples or max_sweeps is reached.
  Minibatch<StreamInformation> next_minibatch(size_t minibatch_size_in_samples,
                                              size_t num_data_partitions = 1,
                                              size_t partition_index = 0) override;
  // The same minibatch keyed by the variables of an input map (MinibatchSourceInterface).
  using MinibatchSourceInterface::next_minibatch;

  std::vector<StreamInformation> stream_infos() const override { return streams_; }
  // Samples in one sweep over the data.
  size_t samples_per_sweep() const { return sweep_size_; }
  // Whether the timeline never ends: neither max_samples nor max_sweeps was set, or the sweeps
  // hold more samples than size_t counts (CNTK's MinibatchSource.is_infinite()).
  bool is_infinite() const override { return end_position_ == INFINITELY_REPEAT; }

  // Samples of the global timeline read so far (by all workers together).
  std::optional<size_t> position() const override { return position_; }

  // {"minibatchSourcePosition": global sample position}, and with truncation_length the
  // slots' sequences and how far each has been read.
  Dictionary get_checkpoint_state() const override;
  void restore_from_checkpoint(const Dictionary& state) override;

 private:
  // A unit of the timeline: a sequence, or one sample of it in frame mode.
  struct Unit {
    size_t sequence;    // global sequence index
    size_t frame;       // sample index in frame mode, else 0
    size_t length;      // samples
    size_t chunk_rank;  // position of its chunk in the sweep's chunk order
  };
  // Where a global sequence lives in one deserializer.
  struct Location {
    size_t chunk, index;
  };
  // What a minibatch holds of a unit: all of it (whole), or samples [first, first + length) of
  // every stream; no unit (an empty sequence) when unit.sequence is kNoUnit.
  struct Piece {
    Unit unit;
    size_t first = 0, length = 0;
    bool whole = false, begins = true;
  };
  // A slot of truncated BPTT: the unit it runs through and the samples already read.
  struct Slot {
    Unit unit;
    size_t read = 0;
  };
  static constexpr size_t kNoUnit = static_cast<size_t>(-1);
  struct Corpus {
    std::shared_ptr<Deserializer> deserializer;
    std::vector<Location> locations;  // by global sequence index
    size_t first_stream;              // global id of its stream 0
  };

  void build_sweep(size_t sweep);
  // The next unit of the timeline; sets sweep_end when it completes a sweep.
  Unit take_unit(bool& sweep_end);
  void move_to(size_t timeline);
  Minibatch<StreamInformation> next_truncated(size_t minibatch_size, size_t num_data_partitions,
                                              size_t partition_index);
  std::shared_ptr<const Chunk> chunk(size_t corpus, size_t index);
  MinibatchData pack(size_t stream, const std::vector<Piece>& pieces, bool sweep_end);

  MinibatchSourceConfig config_;
  std::vector<Corpus> corpora_;
  std::vector<StreamInformation> streams_;
  std::vector<size_t> stream_corpus_;    // global stream id -> corpus
  std::vector<size_t> sequence_length_;  // by global sequence index
  std::vector<size_t> sequence_chunk_;   // chunk (of the first corpus) of each sequence
  std::vector<std::vector<size_t>> chunk_sequences_;  // first corpus: chunk -> sequences
  size_t sweep_size_ = 0;                             // samples per sweep
  size_t end_position_ = INFINITELY_REPEAT;           // samples

  size_t position_ = 0;      // global samples delivered
  size_t timeline_ = 0;      // global samples of the units taken (position_ but with truncation)
  std::vector<Slot> slots_;  // truncated BPTT: one per parallel sequence, of all workers
  size_t sweep_ = 0;         // sweep of the next unit
  size_t cursor_ = 0;        // next unit in order_
  std::vector<Unit> order_;  // the current sweep's units in timeline order
  std::vector<std::unordered_map<size_t, std::shared_ptr<const Chunk>>> loaded_;
};

}  // namespace loom
