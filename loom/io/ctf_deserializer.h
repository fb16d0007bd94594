// CTFDeserializer: reads CNTK text format (CTF) files, CNTK-SEMANTICS.md §3.1:
//   [sequence id] |stream v1 v2 ... |sparse_stream i:v i:v ... |# comment
// Rows with the same id (or without one) form a sequence; if the file starts with '|' (or
// skip_sequence_ids is set) every line is a sequence of its own. The parser follows CNTK's
// TextParser: malformed input prints a WARNING naming the file and byte offset and costs one
// unit of max_errors; when none is left, loading fails with a DataError. Numbers are read as
// strtod reads them (the nearest double; float32 streams round that to float). The file is
// parsed once when the deserializer is made (every error surfaces there) and each chunk again
// when it is loaded; only the index of its sequences stays in memory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/io/deserializer.h"

namespace loom {

struct CTFOptions {
  // Malformed samples, rows or sequences tolerated before loading fails.
  size_t max_errors = 0;
  // 0: errors only, 1: also warnings, 2: also per-sequence information (CNTK's traceLevel).
  int trace_level = 1;
  // Treat every line as a sequence even when lines start with ids.
  bool skip_sequence_ids = false;
  size_t chunk_size_bytes = size_t{32} << 20;
  // Threads that parse chunks at once (0: as many as compute uses). What is read, printed and
  // thrown does not depend on it.
  size_t num_threads = 0;
};

class CTFDeserializer : public Deserializer {
 public:
  // Reads and parses the whole file now, a few chunks at a time, so every error surfaces here.
  // Throws IOError when the file cannot be read, DataError when it is malformed beyond
  // options.max_errors, and ArgumentError for bad stream definitions.
  CTFDeserializer(const std::string& path, const StreamDefs& streams, CTFOptions options = {});
  ~CTFDeserializer() override;

  const std::vector<StreamInformation>& stream_infos() const override { return streams_; }
  const std::vector<ChunkInfo>& chunk_infos() const override { return chunk_infos_; }
  std::vector<SequenceInfo> sequence_infos(size_t chunk) const override;
  // Reads and parses the chunk's bytes of the file (on options.num_threads threads); safe to
  // call concurrently. DataError when the file changed since it was indexed.
  std::shared_ptr<const Chunk> load_chunk(size_t chunk) override;

 private:
  struct Index;  // the sequences' places in the file and what parsing them needs
  std::vector<StreamInformation> streams_;
  std::vector<ChunkInfo> chunk_infos_;
  std::unique_ptr<const Index> index_;
};

}  // namespace loom
