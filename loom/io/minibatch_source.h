// MinibatchSource: cuts the data of one or more deserializers into minibatches along a
// deterministic timeline that repeats the corpus sweep after sweep (CNTK-SEMANTICS.md §3.2).
// Each sweep's order is a function of (randomization_seed, sweep index) only, so a position
// (a global sample count) is all a checkpoint needs: restoring rebuilds that sweep's chunk order
// and the units of the position's window and walks them to the position, loading no data. Only
// the units and chunks of the current randomization window are held in memory (besides 4 bytes
// a sequence, its length), and the next minibatch is read on a background thread while the
// caller computes (prefetch); neither changes what is delivered.
#pragma once

#include <cstdint>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/io/deserializer.h"
#include "loom/io/minibatch_source_interface.h"
#include "loom/io/reader_threads.h"

namespace loom {

struct MinibatchSourceConfig {
  // Shuffle chunks, then sequences within windows of chunks, anew in every sweep.
  bool randomize = true;
  // Where the timeline ends, in samples or in sweeps (FULL_DATA_SWEEP: one sweep); exclusive.
  size_t max_samples = INFINITELY_REPEAT;
  size_t max_sweeps = INFINITELY_REPEAT;
  // Seeds the order of every sweep and the random transforms of image deserializers.
  uint64_t randomization_seed = 0;
  // A sweep's chunks, in random order, are cut into windows of this many chunks, and the units
  // of each window are shuffled together (CNTK: 4 GB / 32 MB); the source holds the chunks of
  // one window (and those of the minibatch being read). Exclusive with the next; set it to 0
  // to use that one.
  size_t randomization_window_in_chunks = DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS;
  // Windows of consecutive chunks of the sweep's order holding at least this many samples
  // (at least one chunk) instead (0: off).
  size_t randomization_window_in_samples = 0;
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
  // Read and pack the next minibatch on a background thread while the caller computes; it is
  // read for the same minibatch size and partition as the last call (another call discards it
  // and reads anew). What is delivered is the same either way.
  bool prefetch = true;
  // Threads that load the chunks a minibatch needs at once (0: as many as compute uses); what
  // is delivered does not depend on it.
  size_t num_reader_threads = 0;
};

// Counters of a source's chunk cache, for tests and benchmarks.
struct ChunkStats {
  size_t loads = 0;          // chunks loaded from the deserializers so far
  size_t resident = 0;       // chunks held now
  size_t peak_resident = 0;  // most chunks held at once
};

class MinibatchSource : public MinibatchSourceInterface {
 public:
  // With several deserializers, the i-th sequences of all of them form sequence i; they must
  // hold equally many sequences, and chunks (for randomization and partitions) are those of
  // the first. Stream names must be unique across deserializers. The source calls the
  // deserializers from its background thread: do not use them elsewhere while it reads.
  MinibatchSource(std::vector<std::shared_ptr<Deserializer>> deserializers,
                  MinibatchSourceConfig config = {});
  MinibatchSource(std::shared_ptr<Deserializer> deserializer, MinibatchSourceConfig config = {});
  // Waits for the minibatch being read ahead (and drops it, when moving).
  ~MinibatchSource() override;
  MinibatchSource(MinibatchSource&& other);
  MinibatchSource& operator=(MinibatchSource&&) = delete;

  // The next minibatch of about minibatch_size_in_samples samples (counted in the longest
  // stream, or the one that defines the minibatch size; at least one whole sequence), for
  // worker partition_index of num_data_partitions. The size is global: all workers walk the
  // same timeline and each gets its share of it (possibly no sequence; then every stream has
  // number_of_sequences == 0). Empty once max_samples or max_sweeps is reached. An error met
  // while reading ahead is thrown here, by the call that would have read that minibatch.
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

  // Samples of the global timeline delivered so far (to all workers together).
  std::optional<size_t> position() const override { return delivered_.position; }

  // Waits for the minibatch being read ahead, then counts.
  ChunkStats chunk_stats() const;

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
  // A sweep's chunks (of the first deserializer) in timeline order, cut into randomization
  // windows (without randomization: one chunk each); all of it per chunk, none per sequence.
  struct SweepOrder {
    size_t sweep = static_cast<size_t>(-1);  // none yet
    std::vector<size_t> chunks;              // the chunk at each rank
    std::vector<size_t> window_begin;  // window w: ranks [window_begin[w], window_begin[w + 1])
    std::vector<size_t> first_unit;    // window w: the sweep index of its first unit (and the end)
    // last_window[corpus][chunk]: the last window with a unit in the chunk.
    std::vector<std::vector<size_t>> last_window;
  };
  // The units of one window of the sweep order, in timeline order (shuffled anew from the seed
  // whenever the window is reached).
  struct Window {
    size_t sweep = static_cast<size_t>(-1), index = 0;  // none yet
    std::vector<Unit> units;
    // last_use[corpus][chunk]: the index in units of the last unit in the chunk (for chunks whose
    // last window is this one).
    std::vector<std::vector<size_t>> last_use;
  };
  // What a minibatch holds of a unit of `sweep`: all of it (whole), or samples [first, first +
  // length) of every stream; no unit (an empty sequence) when unit.sequence is kNoUnit.
  struct Piece {
    Unit unit;
    size_t sweep = 0;
    size_t first = 0, length = 0;
    bool whole = false, begins = true;
  };
  // A slot of truncated BPTT: the unit it runs through, its sweep and the samples already read.
  struct Slot {
    Unit unit;
    size_t sweep = 0;
    size_t read = 0;
  };
  static constexpr size_t kNoUnit = static_cast<size_t>(-1);
  struct Corpus {
    std::shared_ptr<Deserializer> deserializer;
    std::vector<size_t> first_sequence;  // chunk k: global sequences [first[k], first[k + 1])
    size_t first_stream;                 // global id of its stream 0

    Location locate(size_t sequence) const;
  };
  // Where on the timeline reading stands.
  struct Place {
    size_t position = 0;      // global samples delivered
    size_t timeline = 0;      // global samples of the units taken (position but with truncation)
    size_t sweep = 0;         // sweep of the next unit
    size_t window = 0;        // its window in the sweep order
    size_t cursor = 0;        // its index in the window's units
    std::vector<Slot> slots;  // truncated BPTT: one per parallel sequence, of all workers
  };
  // A loaded chunk: chunk `chunk` of corpus `corpus` as read in `sweep`.
  struct Resident {
    size_t sweep, corpus, chunk;
    std::shared_ptr<const Chunk> data;
  };
  // The arguments of next_minibatch.
  struct Request {
    size_t size, partitions, index;
    bool operator==(const Request&) const = default;
  };

  // Makes order_ the chunk order of `sweep` (when it is another's).
  void build_order(size_t sweep);
  // Makes window_ window `window` of order_ (when it is another).
  void build_window(size_t window);
  // The next unit of the timeline; sets sweep_end when it completes a sweep.
  Unit take_unit(bool& sweep_end);
  // Moves place_ to the unit boundary `timeline` (ArgumentError when it is none).
  void move_to(size_t timeline);
  void restore(const Dictionary& state);
  // Waits for the minibatch being read ahead and drops it (and its error).
  void discard_ahead();
  // Waits for the minibatch being read ahead, reading it here if the reader has not started.
  void wait_ahead() const;
  // Reads the next minibatch at place_: the units, their chunks, the packed streams.
  Minibatch<StreamInformation> read(const Request& request);
  std::vector<Piece> take_pieces(const Request& request, bool& sweep_end);
  std::vector<Piece> take_truncated(const Request& request, bool& sweep_end);
  // Loads the chunks of the pieces not held yet; drops those no unit ahead needs.
  void load_chunks(const std::vector<Piece>& pieces);
  void release_chunks();
  // Whether r holds chunk `chunk` of corpus `corpus` as read in `sweep`.
  bool holds(const Resident& r, size_t sweep, size_t corpus, size_t chunk) const;
  const Chunk& chunk(size_t sweep, size_t corpus, size_t index) const;
  MinibatchData pack(size_t stream, const std::vector<Piece>& pieces, bool sweep_end) const;

  MinibatchSourceConfig config_;
  std::vector<Corpus> corpora_;
  std::vector<StreamInformation> streams_;
  std::vector<size_t> stream_corpus_;        // global stream id -> corpus
  std::vector<uint32_t> sequence_length_;    // by global sequence index (the longest corpus's)
  std::vector<size_t> chunk_samples_;        // first corpus: chunk -> samples
  size_t sweep_size_ = 0;                    // samples per sweep
  size_t end_position_ = INFINITELY_REPEAT;  // samples

  // Owned by the thread that reads (the background thread while ahead_ is pending).
  Place place_;
  SweepOrder order_;  // of place_.sweep
  Window window_;     // place_.window of it
  std::vector<Resident> resident_;
  ChunkStats stats_;

  // Owned by the caller's thread.
  Place delivered_;  // where the caller stands: place_ when nothing is read ahead
  Request ahead_request_ = {0, 0, 0};
  mutable BackgroundThread reader_;  // reads ahead; the destructor waits for ahead_ first
  std::future<Minibatch<StreamInformation>> ahead_;
};

}  // namespace loom
