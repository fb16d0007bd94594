#include "loom/io/htk_deserializer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

namespace loom {

namespace {

// CNTK's chunks: utterances in order, a new chunk once the current one holds over 15 minutes
// of 10 ms frames.
constexpr size_t kChunkFrames = 15 * 60 * 100;

void make_htk_chunks(const std::vector<size_t>& frames, std::vector<ChunkInfo>& infos,
                     std::vector<size_t>& first) {
  infos.clear();
  first.clear();
  for (size_t u = 0; u < frames.size(); ++u) {
    if (infos.empty() || infos.back().num_samples > kChunkFrames) {
      infos.push_back({});
      first.push_back(u);
    }
    infos.back().num_sequences += 1;
    infos.back().num_samples += frames[u];
  }
  first.push_back(frames.size());
}

std::vector<SequenceInfo> htk_sequences(const std::vector<size_t>& first, size_t chunk,
                                        const auto& frames_of) {
  LOOM_CHECK(chunk + 1 < first.size(), ArgumentError, "HTK deserializer: chunk ", chunk,
             " does not exist");
  std::vector<SequenceInfo> out;
  for (size_t s = first[chunk]; s < first[chunk + 1]; ++s) out.push_back({frames_of(s), s});
  return out;
}

std::ifstream open_text(const std::string& path, const char* what) {
  std::ifstream in(path);
  LOOM_CHECK(in.good(), IOError, what, ": cannot open '", path, "'");
  return in;
}

uint32_t big_endian(const unsigned char* p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

struct HTKHeader {
  uint32_t frames;
  uint32_t period;
  uint16_t bytes_per_frame;
  uint16_t kind;
};

constexpr uint16_t kCompressed = 02000;

HTKHeader read_header(std::ifstream& in, const std::string& path) {
  unsigned char h[12];
  in.read(reinterpret_cast<char*>(h), 12);
  LOOM_CHECK(in.gcount() == 12, DataError, "HTK feature file '", path,
             "': the 12-byte header is cut short (", in.gcount(), " bytes)");
  HTKHeader header{big_endian(h, 4), big_endian(h + 4, 4), uint16_t(big_endian(h + 8, 2)),
                   uint16_t(big_endian(h + 10, 2))};
  LOOM_CHECK((header.kind & kCompressed) == 0, DataError, "HTK feature file '", path,
             "': compressed features (parmKind ", header.kind, " has _C) are not supported");
  LOOM_CHECK(header.bytes_per_frame > 0 && header.bytes_per_frame % 4 == 0, DataError,
             "HTK feature file '", path, "': damaged header: sampSize ", header.bytes_per_frame,
             " is not a positive multiple of 4 (float32 values)");
  return header;
}

}  // namespace

struct HTKFeatureDeserializer::Utterance {
  std::string key, path;
  size_t first = 0, frames = 0;
  std::string where;  // "scp file:line"
};

HTKFeatureDeserializer::HTKFeatureDeserializer(const StreamDefs& streams) {
  LOOM_CHECK(!streams.empty(), ArgumentError, "HTKFeatureDeserializer: no streams given");
  for (const auto& [name, def] : streams) {
    const std::string what = "HTKFeatureDeserializer: stream '" + name + "'";
    LOOM_CHECK(def.field.empty(), ArgumentError, what,
               " has a field; HTK feature streams take none (CNTK: does not support stream names)");
    LOOM_CHECK(!def.scp.empty(), ArgumentError, what, " has no scp files");
    LOOM_CHECK(def.shape > 0, ArgumentError, what, " has no shape (the values of a frame)");
    LOOM_CHECK(!def.broadcast, ArgumentError, what, ": broadcast is not supported");
    LOOM_CHECK(def.dtype == DataType::Float32 || def.dtype == DataType::Float64, ArgumentError,
               what, ": dtype must be float32 or float64");
    const size_t dim = def.shape * (1 + def.context.first + def.context.second);
    streams_.push_back({.name = name,
                        .id = streams_.size(),
                        .dtype = def.dtype,
                        .sample_shape = NDShape{dim},
                        .defines_mb_size = def.defines_mb_size});
    defs_.push_back(def);
    std::vector<Utterance>& list = utterances_.emplace_back();
    for (const std::string& scp : def.scp) {
      std::ifstream in = open_text(scp, "HTKFeatureDeserializer");
      const std::string dir = std::filesystem::path(scp).parent_path().string();
      std::string line;
      for (size_t number = 1; std::getline(in, line); ++number) {
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        if (line.empty()) continue;
        Utterance u;
        u.where = scp + ":" + std::to_string(number);
        std::string path = line;
        if (size_t eq = path.find('='); eq != std::string::npos) {
          u.key = path.substr(0, eq);
          path = path.substr(eq + 1);
        }
        bool ranged = false;
        size_t last = 0;
        if (!path.empty() && path.back() == ']') {
          size_t open = path.rfind('[');
          size_t comma = path.find(',', open == std::string::npos ? 0 : open);
          char* end = nullptr;
          LOOM_CHECK(open != std::string::npos && comma != std::string::npos, DataError,
                     "HTKFeatureDeserializer: ", u.where, ": malformed range in '", line,
                     "'; expected path[first,last]");
          const std::string a = path.substr(open + 1, comma - open - 1),
                            b = path.substr(comma + 1, path.size() - comma - 2);
          u.first = std::strtoull(a.c_str(), &end, 10);
          const bool a_ok = !a.empty() && *end == 0;
          last = std::strtoull(b.c_str(), &end, 10);
          LOOM_CHECK(a_ok && !b.empty() && *end == 0 && last >= u.first, DataError,
                     "HTKFeatureDeserializer: ", u.where, ": malformed range in '", line,
                     "'; expected path[first,last] with first <= last");
          path = path.substr(0, open);
          ranged = true;
        }
        if (path.rfind(".../", 0) == 0)
          path = (std::filesystem::path(dir) / path.substr(4)).string();
        if (u.key.empty()) u.key = std::filesystem::path(path).stem().string();
        std::ifstream file(path, std::ios::binary);
        LOOM_CHECK(file.good(), IOError, "HTKFeatureDeserializer: ", u.where,
                   ": cannot open feature file '", path, "'");
        const HTKHeader h = read_header(file, path);
        LOOM_CHECK(h.bytes_per_frame == def.shape * 4, DataError, "HTK feature file '", path, "' (",
                   u.where, "): frames of ", h.bytes_per_frame / 4, " values, stream '", name,
                   "' has shape ", def.shape);
        const auto size = std::filesystem::file_size(path);
        LOOM_CHECK(size == 12 + uint64_t(h.frames) * h.bytes_per_frame, DataError,
                   "HTK feature file '", path, "' (", u.where, "): damaged: the header says ",
                   h.frames, " frames of ", h.bytes_per_frame, " bytes, the file holds ", size - 12,
                   " bytes after the header");
        const size_t total = ranged ? last + 1 : h.frames;
        LOOM_CHECK(total <= h.frames, DataError, "HTKFeatureDeserializer: ", u.where, ": range [",
                   u.first, ",", last, "] is outside '", path, "', which holds ", h.frames,
                   " frames");
        u.frames = total - u.first;
        LOOM_CHECK(u.frames > 0, DataError, "HTK feature file '", path, "' (", u.where,
                   "): holds no frames");
        u.path = path;
        if (u.frames <= def.max_sequence_length) list.push_back(std::move(u));
      }
    }
    LOOM_CHECK(!list.empty(), DataError, what, ": no utterances to read in ", def.scp.front());
  }
  for (size_t s = 1; s < utterances_.size(); ++s) {
    LOOM_CHECK(utterances_[s].size() == utterances_[0].size(), DataError,
               "HTKFeatureDeserializer: stream '", streams_[s].name, "' lists ",
               utterances_[s].size(), " utterances, stream '", streams_[0].name, "' ",
               utterances_[0].size());
    for (size_t u = 0; u < utterances_[0].size(); ++u)
      LOOM_CHECK(utterances_[s][u].key == utterances_[0][u].key &&
                     utterances_[s][u].frames == utterances_[0][u].frames,
                 DataError, "HTKFeatureDeserializer: ", utterances_[s][u].where, " ('",
                 utterances_[s][u].key, "', ", utterances_[s][u].frames, " frames) does not match ",
                 utterances_[0][u].where, " ('", utterances_[0][u].key, "', ",
                 utterances_[0][u].frames, " frames)");
  }
  std::vector<size_t> frames;
  for (const Utterance& u : utterances_[0]) frames.push_back(u.frames);
  make_htk_chunks(frames, chunk_infos_, chunk_first_);
}

HTKFeatureDeserializer::~HTKFeatureDeserializer() = default;

std::vector<SequenceInfo> HTKFeatureDeserializer::sequence_infos(size_t chunk) const {
  return htk_sequences(chunk_first_, chunk, [&](size_t s) { return utterances_[0][s].frames; });
}

std::vector<std::string> HTKFeatureDeserializer::keys() const {
  std::vector<std::string> out;
  for (const Utterance& u : utterances_[0]) out.push_back(u.key);
  return out;
}

std::shared_ptr<const Chunk> HTKFeatureDeserializer::load_chunk(size_t chunk) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  for (size_t id = 0; id < streams_.size(); ++id) {
    const size_t d = defs_[id].shape, left = defs_[id].context.first,
                 right = defs_[id].context.second;
    StreamChunkData& data = out->streams.emplace_back();
    std::vector<float> frame_values;
    std::vector<double> out_values;
    for (size_t s = chunk_first_[chunk]; s < chunk_first_[chunk + 1]; ++s) {
      const Utterance& u = utterances_[id][s];
      std::ifstream file(u.path, std::ios::binary);
      LOOM_CHECK(file.good(), IOError, "HTKFeatureDeserializer: ", u.where,
                 ": cannot open feature file '", u.path, "'");
      const HTKHeader h = read_header(file, u.path);
      LOOM_CHECK(h.bytes_per_frame == d * 4 && u.first + u.frames <= h.frames, DataError,
                 "HTK feature file '", u.path, "' (", u.where, ") changed since it was indexed");
      std::vector<unsigned char> bytes(u.frames * d * 4);
      file.seekg(std::streamoff(12 + u.first * d * 4));
      file.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
      LOOM_CHECK(size_t(file.gcount()) == bytes.size(), DataError, "HTK feature file '", u.path,
                 "' (", u.where, ") is cut short");
      frame_values.resize(u.frames * d);
      for (size_t i = 0; i < frame_values.size(); ++i) {
        uint32_t bits = big_endian(bytes.data() + 4 * i, 4);
        std::memcpy(&frame_values[i], &bits, 4);
      }
      for (size_t t = 0; t < u.frames; ++t)
        for (size_t k = 0; k < left + 1 + right; ++k) {
          const ptrdiff_t src =
              std::clamp<ptrdiff_t>(ptrdiff_t(t + k) - ptrdiff_t(left), 0, ptrdiff_t(u.frames) - 1);
          out_values.insert(out_values.end(), frame_values.begin() + src * ptrdiff_t(d),
                            frame_values.begin() + (src + 1) * ptrdiff_t(d));
        }
      data.sample_begin.push_back(data.sample_begin.back() + u.frames);
    }
    if (streams_[id].dtype == DataType::Float32)
      data.values_f32.assign(out_values.begin(), out_values.end());
    else
      data.values_f64 = std::move(out_values);
  }
  return out;
}

HTKMLFDeserializer::HTKMLFDeserializer(const std::string& label_mapping_file,
                                       const StreamDefs& streams, bool phone_boundaries)
    : phone_boundaries_(phone_boundaries) {
  LOOM_CHECK(streams.size() == 1, ArgumentError,
             "HTKMLFDeserializer only accepts a single stream, not ", streams.size());
  const auto& [name, def] = streams.front();
  LOOM_CHECK(def.field.empty(), ArgumentError, "HTKMLFDeserializer: stream '", name,
             "' has a field; HTK label streams take none (CNTK: does not support stream names)");
  LOOM_CHECK(!def.mlf.empty(), ArgumentError,
             "HTKMLFDeserializer: no master label files specified for stream '", name, "'");
  LOOM_CHECK(def.shape > 0, ArgumentError, "HTKMLFDeserializer: stream '", name,
             "' has no shape (the number of labels)");
  streams_.push_back({.name = name,
                      .storage = StorageFormat::SparseCSR,
                      .dtype = def.dtype,
                      .sample_shape = NDShape{def.shape},
                      .defines_mb_size = def.defines_mb_size});

  std::unordered_map<std::string, uint32_t> labels;
  {
    std::ifstream in = open_text(label_mapping_file, "HTKMLFDeserializer");
    std::string line;
    for (size_t number = 1; std::getline(in, line); ++number) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty()) continue;
      LOOM_CHECK(labels.emplace(line, uint32_t(labels.size())).second, DataError,
                 "HTKMLFDeserializer: ", label_mapping_file, ":", number, ": label '", line,
                 "' is listed twice");
    }
    LOOM_CHECK(!labels.empty(), DataError, "HTKMLFDeserializer: the label mapping file '",
               label_mapping_file, "' lists no label");
  }
  std::unordered_map<std::string, size_t> seen;
  for (const std::string& mlf : def.mlf) {
    std::ifstream in = open_text(mlf, "HTKMLFDeserializer");
    std::string line;
    Utterance* current = nullptr;
    size_t number = 0;
    auto fail = [&](const std::string& why) {
      throw DataError("HTKMLFDeserializer: " + mlf + ":" + std::to_string(number) + ": " + why +
                      " in '" + line + "'");
    };
    while (std::getline(in, line)) {
      ++number;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      if (line.empty() || (number == 1 && line == "#!MLF!#")) continue;
      if (current == nullptr) {
        if (line.size() < 3 || line.front() != '"' || line.back() != '"')
          fail("expected a quoted utterance name");
        std::string key = line.substr(1, line.size() - 2);
        if (key.rfind("*/", 0) == 0) key = key.substr(2);
        key = key.substr(0, key.find_last_of('.'));
        if (!seen.emplace(key, all_.size()).second) fail("utterance '" + key + "' is given twice");
        current = &all_.emplace_back();
        current->key = key;
        continue;
      }
      if (line == ".") {
        if (current->ranges.empty()) fail("utterance '" + current->key + "' has no labels");
        current = nullptr;
        continue;
      }
      std::istringstream tokens(line);
      std::string start_text, end_text, label;
      tokens >> start_text >> end_text >> label;
      if (label.empty()) fail("expected 'start end label'");
      char* end = nullptr;
      const double start = std::strtod(start_text.c_str(), &end);
      if (*end != 0) fail("the start '" + start_text + "' is not a number");
      const double stop = std::strtod(end_text.c_str(), &end);
      if (*end != 0) fail("the end '" + end_text + "' is not a number");
      if (start < 0 || stop < start) fail("the end is before the start");
      // CNTK: times in 100 ns units unless the range is shorter than one 10 ms frame.
      size_t first = size_t(start), last = size_t(stop);
      if (stop - start >= 100000.0 - 1) {
        first = size_t(start / 100000.0 + 0.5);
        last = size_t(stop / 100000.0 + 0.5);
      }
      auto it = labels.find(label);
      if (it == labels.end()) fail("label '" + label + "' is not in " + label_mapping_file);
      if (it->second >= def.shape)
        fail("label '" + label + "' has index " + std::to_string(it->second) +
             ", outside the stream's dim " + std::to_string(def.shape));
      if (first != current->frames)
        fail(current->frames == 0
                 ? "the first range must start at frame 0"
                 : "ranges are not consecutive: this one starts at frame " + std::to_string(first) +
                       ", the last ended at frame " + std::to_string(current->frames));
      current->ranges.push_back({uint32_t(first), uint32_t(last - first), it->second});
      current->frames = last;
    }
    if (current != nullptr) {
      line = "";
      fail("the file ends inside utterance '" + current->key + "' (no '.' line)");
    }
  }
  // Zero-length ranges are allowed (CNTK keeps them); an utterance must have frames.
  for (const Utterance& u : all_)
    LOOM_CHECK(u.frames > 0, DataError, "HTKMLFDeserializer: utterance '", u.key,
               "' holds no frames");
  LOOM_CHECK(!all_.empty(), DataError, "HTKMLFDeserializer: ", def.mlf.front(),
             " holds no utterance");
  for (size_t i = 0; i < all_.size(); ++i) order_.push_back(i);
  rebuild_chunks();
}

HTKMLFDeserializer::~HTKMLFDeserializer() = default;

void HTKMLFDeserializer::rebuild_chunks() {
  std::vector<size_t> frames;
  for (size_t i : order_) frames.push_back(all_[i].frames);
  make_htk_chunks(frames, chunk_infos_, chunk_first_);
}

void HTKMLFDeserializer::select(const std::vector<std::string>& keys) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < all_.size(); ++i) index.emplace(all_[i].key, i);
  std::vector<size_t> order;
  for (const std::string& k : keys) {
    auto it = index.find(k);
    LOOM_CHECK(it != index.end(), DataError, "HTKMLFDeserializer: no labels for utterance '", k,
               "' of the features");
    order.push_back(it->second);
  }
  order_ = std::move(order);
  rebuild_chunks();
}

std::vector<std::string> HTKMLFDeserializer::keys() const {
  std::vector<std::string> out;
  for (size_t i : order_) out.push_back(all_[i].key);
  return out;
}

std::vector<SequenceInfo> HTKMLFDeserializer::sequence_infos(size_t chunk) const {
  return htk_sequences(chunk_first_, chunk, [&](size_t s) { return all_[order_[s]].frames; });
}

std::shared_ptr<const Chunk> HTKMLFDeserializer::load_chunk(size_t chunk) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  StreamChunkData& data = out->streams.emplace_back();
  std::vector<double> values;
  for (size_t s = chunk_first_[chunk]; s < chunk_first_[chunk + 1]; ++s) {
    const Utterance& u = all_[order_[s]];
    for (const Range& r : u.ranges)
      for (uint32_t f = 0; f < r.count; ++f) {
        data.indices.push_back(int32_t(r.label));
        values.push_back(phone_boundaries_ && f == 0 ? 2.0 : 1.0);
        data.nnz_begin.push_back(data.nnz_begin.back() + 1);
      }
    data.sample_begin.push_back(data.sample_begin.back() + u.frames);
  }
  if (streams_[0].dtype == DataType::Float32)
    data.values_f32.assign(values.begin(), values.end());
  else
    data.values_f64 = std::move(values);
  return out;
}

void align_htk_by_key(const std::vector<std::shared_ptr<Deserializer>>& deserializers) {
  const HTKFeatureDeserializer* features = nullptr;
  for (const auto& d : deserializers)
    if (!features) features = dynamic_cast<const HTKFeatureDeserializer*>(d.get());
  if (!features) return;
  const std::vector<std::string> keys = features->keys();
  std::vector<size_t> frames;
  for (size_t k = 0; k < features->chunk_infos().size(); ++k)
    for (const SequenceInfo& s : features->sequence_infos(k)) frames.push_back(s.num_samples);
  for (const auto& d : deserializers) {
    auto* labels = dynamic_cast<HTKMLFDeserializer*>(d.get());
    if (!labels) continue;
    labels->select(keys);
    size_t u = 0;
    for (size_t k = 0; k < labels->chunk_infos().size(); ++k)
      for (const SequenceInfo& s : labels->sequence_infos(k)) {
        LOOM_CHECK(s.num_samples == frames[u], DataError, "HTKMLFDeserializer: utterance '",
                   keys[u], "' has ", s.num_samples, " frames of labels and ", frames[u],
                   " frames of features");
        ++u;
      }
  }
}

}  // namespace loom
