// CNTK's speech readers (CNTK's Source/Readers/HTKDeserializers):
//
// HTKFeatureDeserializer: HTK feature files listed in an SCP file, one utterance a line:
//   [key=]path[[first,last]]
// (key: the path's file name without extension when absent; [first,last]: the utterance is
// frames first..last, inclusive, of the file; a path that starts with ".../" is relative to the
// SCP file's folder, any other relative path to the working directory). An HTK file is a
// 12-byte big-endian header (int32 nSamples, int32 sampPeriod in 100 ns, int16 sampSize in
// bytes, int16 parmKind) and nSamples frames of sampSize / 4 big-endian float32 values
// (uncompressed; parmKind's _C flag is refused). A stream of dim d with context (l, r)
// delivers each frame as d (1 + l + r) values: frames t - l .. t + r, the first and last frame
// repeated past the utterance's ends (CNTK's augmentneighbors). Utterances longer than
// max_sequence_length frames are skipped. Each utterance is a sequence (MinibatchSource's
// frame_mode splits them into frames).
//
// HTKMLFDeserializer: labels from HTK master label files, "#!MLF!#" then per utterance
//   "*/key.lab"
//   start end label [...]       (times in 100 ns, or frames when end - start < 99999)
//   .
// each label mapped to its line in the label mapping file (the state list); a frame's label is
// a one-hot vector of the stream's dim (sparse; with phone_boundaries the first frame of each
// range holds 2 instead of 1, as CNTK's). Ranges must be consecutive from frame 0.
//
// Combined in one MinibatchSource (align_htk_by_key), a label deserializer delivers its
// utterances in the order of the feature deserializer's keys, so features and labels are
// frame-aligned; an utterance of different length in both, or without labels, is a DataError.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/io/deserializer.h"

namespace loom {

class HTKFeatureDeserializer : public Deserializer {
 public:
  // Streams: name -> StreamDef with .scp (SCP files, read in order), .shape (the file's values
  // a frame), .context, .defines_mb_size and .max_sequence_length; several streams must list
  // the same keys. Reads the SCP files and every feature file's header: IOError for a file
  // that cannot be opened, DataError naming the file (and SCP line) for a damaged header, a
  // frame size other than the stream's dim or a range outside the file; ArgumentError for
  // stream definitions it cannot use (no scp, a field, broadcast, a dim of 0).
  explicit HTKFeatureDeserializer(const StreamDefs& streams);
  ~HTKFeatureDeserializer() override;

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  // Reads the chunk's utterances (DataError naming the file when it changed since).
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

  // The utterances' keys, in sequence order.
  std::vector<std::string> keys() const;

 private:
  struct Utterance;
  std::vector<StreamInformation> streams_;
  std::vector<StreamDef> defs_;
  std::vector<std::vector<Utterance>> utterances_;  // by stream, then sequence
  std::vector<ChunkInfo> chunk_infos_;
  std::vector<size_t> chunk_first_;  // chunk k: sequences [chunk_first_[k], chunk_first_[k + 1])
};

class HTKMLFDeserializer : public Deserializer {
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
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

  // Delivers exactly these utterances, in this order (DataError naming a key without labels).
  void select(const std::vector<std::string>& keys);
  std::vector<std::string> keys() const;

 private:
  struct Range {
    uint32_t first, count, label;
  };
  struct Utterance {
    std::string key;
    std::vector<Range> ranges;
    size_t frames = 0;
  };
  void rebuild_chunks();

  std::vector<StreamInformation> streams_;
  bool phone_boundaries_;
  std::vector<Utterance> all_;  // in file order
  std::vector<size_t> order_;   // the delivered utterances: indices into all_
  std::vector<ChunkInfo> chunk_infos_;
  std::vector<size_t> chunk_first_;
};

// When deserializers holds an HTKFeatureDeserializer, makes every HTKMLFDeserializer deliver
// the feature deserializer's utterances in its order (CNTK matches sequences by key).
void align_htk_by_key(const std::vector<std::shared_ptr<Deserializer>>& deserializers);

}  // namespace loom
