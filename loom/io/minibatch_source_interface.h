// MinibatchSourceInterface: what every training and evaluation loop reads data through (the
// Trainer loop of a program, training_session, Function::train/test). Loom's reader
// (MinibatchSource: CTF, IDX and in-memory data) implements it, and so does a source a program
// writes itself by deriving from UserMinibatchSource (user_minibatch_source.h), as CNTK's C++
// MinibatchSource is the base of both its composite reader and Python's UserMinibatchSource.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/core/dictionary.h"
#include "loom/graph/variable.h"
#include "loom/io/stream.h"

namespace loom {

// What next_minibatch returns: one MinibatchData per stream, keyed by StreamInformation, or by
// the variables of an input map (CNTK's `mb[reader.streams.labels]`, `data[label]`). A
// std::unordered_map whose operator[] never inserts: mb[key] is that stream's data, or an
// ArgumentError that names the key and the keys the minibatch holds (none once the source has
// ended).
template <class Key>
class Minibatch : public std::unordered_map<Key, MinibatchData> {
 public:
  using std::unordered_map<Key, MinibatchData>::unordered_map;

  const MinibatchData& operator[](const Key& key) const {
    auto it = this->find(key);
    if (it == this->end()) throw_missing(key);
    return it->second;
  }
  MinibatchData& operator[](const Key& key) {
    return const_cast<MinibatchData&>(std::as_const(*this)[key]);
  }

 private:
  // Defined for StreamInformation and Variable keys (minibatch_source_interface.cpp).
  [[noreturn]] void throw_missing(const Key& key) const;
};

inline constexpr size_t INFINITELY_REPEAT = std::numeric_limits<size_t>::max();
inline constexpr size_t FULL_DATA_SWEEP = std::numeric_limits<size_t>::max() - 1;
// CNTK's default randomization window: 128 chunks of 32 MB (4 GB).
inline constexpr size_t DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS = 128;

class MinibatchSourceInterface {
 public:
  virtual ~MinibatchSourceInterface() = default;

  // The streams the source delivers.
  virtual std::vector<StreamInformation> stream_infos() const = 0;

  // The next minibatch of about num_samples samples, this worker's share of it when
  // number_of_workers > 1 (possibly no sequence); empty once the source has ended.
  virtual Minibatch<StreamInformation> next_minibatch(size_t num_samples,
                                                      size_t number_of_workers = 1,
                                                      size_t worker_rank = 0) = 0;

  // The position in the data, as a Dictionary a checkpoint stores (with string keys), and
  // back: restoring makes the next minibatches those that followed when the state was taken.
  virtual Dictionary get_checkpoint_state() const = 0;
  virtual void restore_from_checkpoint(const Dictionary& state) = 0;

  // Whether the source never ends by itself (CNTK's is_infinite; a user source is finite).
  virtual bool is_infinite() const { return false; }
  // Samples of the global timeline read so far by all workers together, where the source
  // knows it (Loom's reader does; distributed training takes its decisions from it).
  virtual std::optional<size_t> position() const { return std::nullopt; }

  // The minibatch keyed by the variables of input_map (variable -> stream), checked: every
  // stream returned must be one of stream_infos(), its counts must be those of its Value, all
  // streams must hold equally many sequences, and every mapped stream must be there (else an
  // ArgumentError or DataError naming the stream and both counts). Each stream's data come as
  // the source gives them (CNTK's): a stream bound to a variable without a sequence axis must
  // hold sequences of one step (which the variable takes as they are) or samples, else a
  // ShapeError naming the variable. (A class that declares next_minibatch hides this overload: call
  // it through the interface, or add `using MinibatchSourceInterface::next_minibatch;`.)
  Minibatch<Variable> next_minibatch(
      size_t num_samples, const std::unordered_map<Variable, StreamInformation>& input_map,
      size_t number_of_workers = 1, size_t worker_rank = 0);

  // The stream with this name; ArgumentError listing the known names otherwise.
  StreamInformation operator[](const std::string& name) const;
  StreamInformation stream_info(const std::string& name) const { return (*this)[name]; }
};

}  // namespace loom
