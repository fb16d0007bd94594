// CNTK's speech readers (CNTK's Source/Readers/HTKDeserializers):
//
// HTKFeatureDeserializer: HTK feature files listed in an SCP file, one utterance a line:
//   [key=]path[[first,last]]
// (key: the path's file name without extension when absent; [first,last]: the utterance is
// frames first..last, inclusive, of the file; a path that starts with ".../" is relative to the
// SCP file's folder, any other relative path to the working directory). An HTK file is a
// 12-byte big-endian header (int32 nSamples, int32 sampPeriod in 100 ns, int16 sampSize in
// bytes, int16 parmKind) and nSamples frames of sampSize / 4 big-endian float32 values. A
// compressed file (parmKind's _C flag, 02000) holds, after the header, the scale A and the bias
// B (dim big-endian float32 each) and then frames of dim big-endian int16 values v, read as
// (v + B[i]) / A[i]; its nSamples counts A and B as 4 frames (HTK book 5.10.1, CNTK's
// htkfeatio.h). A stream of dim d with context (l, r) delivers each frame as d (1 + l + r)
// values: frames t - l .. t + r, the first and last frame repeated past the utterance's ends
// (CNTK's augmentneighbors). A broadcast stream (CNTK's expandToUtterance: a per-utterance
// vector such as an i-vector) lists utterances of one frame each and delivers that frame for
// every frame of the utterance. Utterances longer than max_sequence_length frames are skipped.
// Each utterance is a sequence (MinibatchSource's frame_mode splits them into frames).
//
// HTKMLFDeserializer: labels from HTK master label files, "#!MLF!#" then per utterance
//   "*/key.lab"
//   start end label [...]       (times in 100 ns, or frames when end - start < 99999)
//   .
// each label mapped to its line in the label mapping file (the state list); a frame's label is
// a one-hot vector of the stream's dim (sparse; with phone_boundaries the first frame of each
// range holds 2 instead of 1, as CNTK's). Ranges must be consecutive from frame 0.
//
// Utterances are matched by key, as CNTK's bundler matches them: a deserializer's first stream
// leads (its keys, in its order) and its other streams follow by key; in a MinibatchSource
// (align_htk_by_key) the first HTK deserializer leads and the others follow by key. An
// utterance that a follower lacks (features without labels, a stream without that key) is
// dropped, with a warning that counts them; keys listed more than once in a stream are
// dropped, all of their utterances (CNTK's rule). A follower's utterance of another length
// than the leader's is a DataError (a broadcast stream's is repeated to the leader's length).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/io/deserializer.h"

namespace loom {

// What the HTK deserializers share: utterances named by key, matched across deserializers by
// align_htk_by_key, and CNTK's chunks of about 15 minutes of 10 ms frames.
class HTKKeyedDeserializer : public Deserializer {
 public:
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;

  // The delivered utterances' keys and lengths in frames, in sequence order.
  virtual std::vector<std::string> keys() const = 0;
  const std::vector<size_t>& frames() const { return frames_; }
  virtual bool has(const std::string& key) const = 0;
  // Delivers exactly these utterances (keys it has), in this order, frames[i] frames long:
  // DataError naming the utterance when it holds another number of frames (a broadcast
  // stream's one frame is repeated).
  virtual void select(const std::vector<std::string>& keys, const std::vector<size_t>& frames) = 0;
  // Whether its first stream is broadcast: it cannot lead (CNTK: cannot expand the primary).
  virtual bool broadcasts_first_stream() const { return false; }

 protected:
  // Sets the sequences' lengths and makes the chunks.
  void set_frames(std::vector<size_t> frames);

 private:
  std::vector<size_t> frames_;
  std::vector<ChunkInfo> chunk_infos_;
  std::vector<size_t> chunk_first_;
};

class HTKFeatureDeserializer : public HTKKeyedDeserializer {
 public:
  // Streams: name -> StreamDef with .scp (SCP files, read in order), .shape (the file's values
  // a frame), .context, .broadcast, .defines_mb_size and .max_sequence_length. Reads the SCP
  // files and every feature file's header: IOError for a file that cannot be opened, DataError
  // naming the file (and SCP line) for a damaged header or compressed file's scale and bias, a
  // frame size other than the stream's dim, a range outside the file, a broadcast stream's
  // utterance of more than one frame or utterances of different lengths under one key;
  // ArgumentError for stream definitions it cannot use (no scp, a field, a dim of 0).
  explicit HTKFeatureDeserializer(const StreamDefs& streams);
  ~HTKFeatureDeserializer() override;

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  // Reads the chunk's utterances (DataError naming the file when it changed since).
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

  std::vector<std::string> keys() const override { return keys_; }
  bool has(const std::string& key) const override;
  void select(const std::vector<std::string>& keys, const std::vector<size_t>& frames) override;
  bool broadcasts_first_stream() const override { return defs_[0].broadcast; }

 private:
  struct Utterance;
  // Checks that every stream's utterance of each key holds frames[i] frames (broadcast: 1).
  void check_frames(const std::vector<std::string>& keys, const std::vector<size_t>& frames,
                    const std::string& leader) const;
  const Utterance& utterance(size_t stream, const std::string& key) const;

  std::vector<StreamInformation> streams_;
  std::vector<StreamDef> defs_;
  std::vector<std::vector<Utterance>> utterances_;              // by stream, in SCP order
  std::vector<std::unordered_map<std::string, size_t>> index_;  // by stream: key -> utterance
  std::vector<std::string> keys_;                               // the delivered utterances
};

class HTKMLFDeserializer : public HTKKeyedDeserializer {
 public:
  // One stream: name -> StreamDef with .mlf (the master label files) and .shape (the number
  // of labels). IOError for a file that cannot be opened; DataError naming the file and line
  // (1-based) for a malformed line, a label missing from the mapping or out of the stream's
  // dim, ranges that are not consecutive from frame 0, or a key given twice.
  static constexpr bool kPhoneBoundaries = false;  // CNTK's default phoneBoundaries
  HTKMLFDeserializer(const std::string& label_mapping_file, const StreamDefs& streams,
                     bool phone_boundaries = kPhoneBoundaries);
  ~HTKMLFDeserializer() override;

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

  std::vector<std::string> keys() const override;
  bool has(const std::string& key) const override { return index_.contains(key); }
  void select(const std::vector<std::string>& keys, const std::vector<size_t>& frames) override;

 private:
  struct Range {
    uint32_t first, count, label;
  };
  struct Utterance {
    std::string key;
    std::vector<Range> ranges;
    size_t frames = 0;
  };

  std::vector<StreamInformation> streams_;
  bool phone_boundaries_;
  std::vector<Utterance> all_;                     // in file order
  std::unordered_map<std::string, size_t> index_;  // key -> utterance
  std::vector<size_t> order_;                      // the delivered utterances: indices into all_
};

// Matches the HTK deserializers among these by key (CNTK's bundler): the first one leads, every
// one delivers the utterances all of them hold, in the leader's order and with its lengths.
// Warns with the number of utterances dropped for each follower that lacks some; DataError when
// none is left; ArgumentError when the leader's first stream is broadcast.
void align_htk_by_key(const std::vector<std::shared_ptr<Deserializer>>& deserializers);

}  // namespace loom
