#include "loom/io/user_deserializer.h"

#include <algorithm>

namespace loom {

namespace {

std::string stream_names(const std::vector<StreamInformation>& streams) {
  std::string names;
  for (const StreamInformation& s : streams) names += (names.empty() ? "'" : ", '") + s.name + "'";
  return names;
}

}  // namespace

void UserDeserializer::describe() const {
  std::call_once(described_, [this] {
    auto* self = const_cast<UserDeserializer*>(this);
    std::vector<StreamInformation> streams = self->declared_stream_infos();
    LOOM_CHECK(!streams.empty(), ArgumentError,
               "UserDeserializer.stream_infos() returned no stream; a deserializer must provide "
               "at least one");
    size_t defining = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
      LOOM_CHECK(!streams[i].name.empty(), ArgumentError,
                 "UserDeserializer.stream_infos(): stream ", i, " has no name");
      for (size_t j = 0; j < i; ++j)
        LOOM_CHECK(streams[j].name != streams[i].name, ArgumentError,
                   "UserDeserializer.stream_infos(): stream '", streams[i].name,
                   "' is declared twice");
      LOOM_CHECK(!streams[i].is_sparse() || streams[i].sample_shape.rank() == 1, ArgumentError,
                 "UserDeserializer.stream_infos(): sparse stream '", streams[i].name,
                 "' has samples of shape ", streams[i].sample_shape.to_string(),
                 "; sparse samples must be vectors (dim,)");
      defining += streams[i].defines_mb_size ? 1 : 0;
      streams[i].id = i;
    }
    LOOM_CHECK(defining <= 1, ArgumentError, "UserDeserializer.stream_infos(): ", defining,
               " streams set defines_mb_size; at most one may");
    const size_t n = self->num_chunks();
    LOOM_CHECK(n > 0, ArgumentError,
               "UserDeserializer.num_chunks() returned 0; a deserializer must provide at least "
               "one chunk");
    streams_ = std::move(streams);
    std::vector<std::vector<SequenceInfo>> sequences;
    std::vector<ChunkInfo> infos;
    size_t key = 0;
    for (size_t k = 0; k < n; ++k) {
      std::shared_ptr<Chunk> c = self->checked_chunk(k, true);
      ChunkInfo info{c->sequences.size(), 0};
      for (SequenceInfo& s : c->sequences) {
        s.key = key++;
        info.num_samples += s.num_samples;
      }
      infos.push_back(info);
      sequences.push_back(std::move(c->sequences));
    }
    chunk_infos_ = std::move(infos);
    sequences_ = std::move(sequences);
  });
}

const std::vector<StreamInformation>& UserDeserializer::stream_infos() const {
  describe();
  return streams_;
}

const std::vector<ChunkInfo>& UserDeserializer::chunk_infos() const {
  describe();
  return chunk_infos_;
}

std::vector<SequenceInfo> UserDeserializer::sequence_infos(size_t chunk) const {
  describe();
  return sequences_.at(chunk);
}

std::shared_ptr<const Chunk> UserDeserializer::load_chunk(size_t chunk) {
  describe();
  LOOM_CHECK(chunk < chunk_infos_.size(), ArgumentError, "UserDeserializer: chunk ", chunk,
             " does not exist; num_chunks() is ", chunk_infos_.size());
  return checked_chunk(chunk, false);
}

std::shared_ptr<Chunk> UserDeserializer::checked_chunk(size_t chunk, bool first_time) {
  const std::string where = detail::concat("UserDeserializer.get_chunk(", chunk, ")");
  DataStreams got = get_chunk(chunk);
  DataStreams ordered;
  for (const StreamInformation& s : streams_) {
    auto it =
        std::find_if(got.begin(), got.end(), [&](const auto& g) { return g.first == s.name; });
    LOOM_CHECK(it != got.end(), DataError, where, " returned no data for stream '", s.name,
               "'; it must return {stream name: data} for each stream of stream_infos() (",
               stream_names(streams_), ")");
    const Value& v = it->second.value;
    LOOM_CHECK(v.is_sparse() == s.is_sparse(), DataError, where, ": stream '", s.name,
               "' is declared ", s.is_sparse() ? "sparse" : "dense", ", the data is ",
               v.is_sparse() ? "sparse" : "dense");
    LOOM_CHECK(v.dtype() == s.dtype, DataError, where, ": stream '", s.name, "' is declared ",
               to_string(s.dtype), ", the data is ", to_string(v.dtype()));
    LOOM_CHECK(v.sample_shape() == s.sample_shape, DataError, where, ": stream '", s.name,
               "' has samples of shape ", v.sample_shape().to_string(),
               ", stream_infos() declares ", s.sample_shape.to_string());
    LOOM_CHECK(v.num_sequences() > 0, DataError, where, ": stream '", s.name,
               "' holds no sequence; a chunk holds at least one");
    if (!ordered.empty()) {
      const auto& [first, data] = ordered.front();
      LOOM_CHECK(v.num_sequences() == data.value.num_sequences(), DataError, where, ": stream '",
                 s.name, "' holds ", v.num_sequences(), " sequences, stream '", first, "' ",
                 data.value.num_sequences(), "; all streams of a chunk hold equally many");
    }
    ordered.push_back(*it);
  }
  for (const auto& [name, data] : got)
    LOOM_CHECK(std::any_of(streams_.begin(), streams_.end(),
                           [&](const StreamInformation& s) { return s.name == name; }),
               DataError, where, " returned stream '", name,
               "', which stream_infos() does not declare (it declares ", stream_names(streams_),
               ")");
  const size_t n = ordered.front().second.value.num_sequences();
  std::shared_ptr<Chunk> out;
  try {
    ArrayDeserializer array(ordered, {.sequences_per_chunk = n});
    out = std::make_shared<Chunk>(*array.load_chunk(0));
  } catch (const Error& e) {
    throw DataError(where + ": " + e.what());
  }
  // Which stream fixes a sequence's length: the one that defines the minibatch size, else the
  // longest.
  for (size_t id = 0; id < streams_.size(); ++id) {
    if (!streams_[id].defines_mb_size) continue;
    for (size_t s = 0; s < n; ++s) out->sequences[s].num_samples = out->streams[id].length(s);
  }
  if (first_time) return out;
  const std::vector<SequenceInfo>& before = sequences_[chunk];
  LOOM_CHECK(out->sequences.size() == before.size(), DataError, where, " returned ",
             out->sequences.size(), " sequences, ", before.size(),
             " when it was first asked; get_chunk must return the same data every time");
  for (size_t s = 0; s < n; ++s) {
    LOOM_CHECK(out->sequences[s].num_samples == before[s].num_samples, DataError, where,
               ": sequence ", s, " holds ", out->sequences[s].num_samples, " samples, ",
               before[s].num_samples,
               " when it was first asked; get_chunk must return the same data every time");
    out->sequences[s].key = before[s].key;
  }
  return out;
}

}  // namespace loom
