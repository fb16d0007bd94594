#include "loom/io/htk_deserializer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "loom/core/trace.h"

namespace loom {

namespace {

// CNTK's chunks: utterances in order, a new chunk once the current one holds over 15 minutes
// of 10 ms frames.
constexpr size_t kChunkFrames = 15 * 60 * 100;

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

float big_endian_float(const unsigned char* p) {
  const uint32_t bits = big_endian(p, 4);
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

constexpr uint16_t kCompressed = 02000;  // parmKind's _C

// An HTK feature file's layout, read from its header (and a compressed file's scale and bias).
struct HTKFile {
  size_t frames = 0;  // the frames of data (a compressed file's nSamples less 4)
  size_t dim = 0;     // values a frame
  bool compressed = false;
  std::vector<float> scale = {}, bias = {};  // compressed: value = (int16 + bias) / scale
  uint64_t data_start = 12;

  size_t value_bytes() const { return compressed ? 2 : 4; }
};

// Reads the header of the file `in` (named `path`, listed at `where`) and checks it against the
// file's size.
HTKFile read_htk_header(std::ifstream& in, const std::string& path, const std::string& where) {
  const std::string file = "HTK feature file '" + path + "' (" + where + ")";
  unsigned char h[12];
  in.read(reinterpret_cast<char*>(h), 12);
  LOOM_CHECK(in.gcount() == 12, DataError, file, ": the 12-byte header is cut short (", in.gcount(),
             " bytes)");
  const size_t samples = big_endian(h, 4), bytes_per_frame = big_endian(h + 8, 2);
  const uint16_t kind = uint16_t(big_endian(h + 10, 2));
  HTKFile f{.compressed = (kind & kCompressed) != 0};
  LOOM_CHECK(bytes_per_frame > 0 && bytes_per_frame % f.value_bytes() == 0, DataError, file,
             ": damaged header: sampSize ", bytes_per_frame, " is not a positive multiple of ",
             f.value_bytes(),
             f.compressed ? " (int16 values of a compressed file)" : " (float32 values)");
  f.dim = bytes_per_frame / f.value_bytes();
  f.frames = samples;
  if (f.compressed) {
    LOOM_CHECK(samples >= 4, DataError, file, ": damaged header: nSamples ", samples,
               " of a compressed file must count the scale and bias as 4 frames");
    f.frames = samples - 4;
    std::vector<unsigned char> ab(8 * f.dim);
    in.read(reinterpret_cast<char*>(ab.data()), std::streamsize(ab.size()));
    LOOM_CHECK(size_t(in.gcount()) == ab.size(), DataError, file,
               ": the compressed file's scale and bias (A and B, ", f.dim,
               " float32 each after the header) are cut short");
    for (size_t i = 0; i < f.dim; ++i) {
      f.scale.push_back(big_endian_float(ab.data() + 4 * i));
      f.bias.push_back(big_endian_float(ab.data() + 4 * (f.dim + i)));
      LOOM_CHECK(std::isfinite(f.scale[i]) && f.scale[i] != 0 && std::isfinite(f.bias[i]),
                 DataError, file, ": damaged: the compressed file's scale A[", i,
                 "] = ", f.scale[i], " and bias B[", i, "] = ", f.bias[i],
                 " must be finite, the scale nonzero");
    }
    f.data_start += ab.size();
  }
  const auto size = std::filesystem::file_size(path);
  LOOM_CHECK(size == 12 + uint64_t(samples) * bytes_per_frame, DataError, file,
             ": damaged: the header says ", samples, " frames of ", bytes_per_frame, " bytes",
             f.compressed ? " (4 of them the compressed file's scale and bias)" : "",
             ", the file holds ", size - 12, " bytes after the header");
  return f;
}

}  // namespace

std::vector<SequenceInfo> HTKKeyedDeserializer::sequence_infos(size_t chunk) const {
  LOOM_CHECK(chunk < chunk_infos_.size(), ArgumentError, "HTK deserializer: chunk ", chunk,
             " does not exist");
  std::vector<SequenceInfo> out;
  for (size_t s = chunk_first_[chunk]; s < chunk_first_[chunk + 1]; ++s)
    out.push_back({frames_[s], s});
  return out;
}

void HTKKeyedDeserializer::set_frames(std::vector<size_t> frames) {
  frames_ = std::move(frames);
  chunk_infos_.clear();
  chunk_first_.clear();
  for (size_t u = 0; u < frames_.size(); ++u) {
    if (chunk_infos_.empty() || chunk_infos_.back().num_samples > kChunkFrames) {
      chunk_infos_.push_back({});
      chunk_first_.push_back(u);
    }
    chunk_infos_.back().num_sequences += 1;
    chunk_infos_.back().num_samples += frames_[u];
  }
  chunk_first_.push_back(frames_.size());
}

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
        const HTKFile h = read_htk_header(file, path, u.where);
        LOOM_CHECK(h.dim == def.shape, DataError, "HTK feature file '", path, "' (", u.where,
                   "): frames of ", h.dim, " values, stream '", name, "' has shape ", def.shape);
        const size_t total = ranged ? last + 1 : h.frames;
        LOOM_CHECK(total <= h.frames, DataError, "HTKFeatureDeserializer: ", u.where, ": range [",
                   u.first, ",", last, "] is outside '", path, "', which holds ", h.frames,
                   " frames");
        u.frames = total - u.first;
        LOOM_CHECK(u.frames > 0, DataError, "HTK feature file '", path, "' (", u.where,
                   "): holds no frames");
        LOOM_CHECK(!def.broadcast || u.frames == 1, DataError, "HTK feature file '", path, "' (",
                   u.where, "): utterance '", u.key, "' of broadcast stream '", name, "' holds ",
                   u.frames, " frames; a broadcast stream's utterances hold one");
        u.path = path;
        if (u.frames <= def.max_sequence_length) list.push_back(std::move(u));
      }
    }
    // CNTK drops every utterance of a key listed more than once.
    std::unordered_map<std::string, size_t>& index = index_.emplace_back();
    std::unordered_map<std::string, size_t> count;
    for (const Utterance& u : list) ++count[u.key];
    size_t duplicates = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (count[list[i].key] == 1)
        index.emplace(list[i].key, i);
      else
        ++duplicates;
    }
    if (duplicates > 0)
      warn(what + ": " + std::to_string(duplicates) +
           " utterances under keys listed more than once are dropped");
    LOOM_CHECK(!index.empty(), DataError, what, ": no utterances to read in ", def.scp.front());
  }
  // The first stream leads; the others follow by key.
  std::vector<std::string> keys;
  std::vector<size_t> missing(streams_.size());
  for (const Utterance& u : utterances_[0]) {
    if (!index_[0].contains(u.key)) continue;
    bool everywhere = true;
    for (size_t s = 1; s < streams_.size(); ++s)
      if (!index_[s].contains(u.key)) {
        ++missing[s];
        everywhere = false;
      }
    if (everywhere) keys.push_back(u.key);
  }
  for (size_t s = 1; s < streams_.size(); ++s)
    if (missing[s] > 0)
      warn("HTKFeatureDeserializer: stream '" + streams_[s].name + "' lacks " +
           std::to_string(missing[s]) + " of the utterances of stream '" + streams_[0].name +
           "'; they are dropped");
  LOOM_CHECK(!keys.empty(), DataError, "HTKFeatureDeserializer: no key is in every stream's ",
             "scp files (stream '", streams_[0].name, "' lists ", utterances_[0].size(),
             " utterances)");
  // A sequence is as long as its utterances in the streams that are not broadcast.
  const auto lead = std::ranges::find_if(defs_, [](const StreamDef& d) { return !d.broadcast; });
  std::vector<size_t> frames;
  for (const std::string& k : keys)
    frames.push_back(lead == defs_.end() ? 1 : utterance(size_t(lead - defs_.begin()), k).frames);
  check_frames(keys, frames,
               lead == defs_.end() ? "" : "stream '" + streams_[lead - defs_.begin()].name + "'");
  keys_ = std::move(keys);
  set_frames(std::move(frames));
}

HTKFeatureDeserializer::~HTKFeatureDeserializer() = default;

const HTKFeatureDeserializer::Utterance& HTKFeatureDeserializer::utterance(
    size_t stream, const std::string& key) const {
  return utterances_[stream][index_[stream].at(key)];
}

bool HTKFeatureDeserializer::has(const std::string& key) const {
  return std::ranges::all_of(index_, [&](const auto& index) { return index.contains(key); });
}

void HTKFeatureDeserializer::check_frames(const std::vector<std::string>& keys,
                                          const std::vector<size_t>& frames,
                                          const std::string& leader) const {
  for (size_t s = 0; s < streams_.size(); ++s) {
    if (defs_[s].broadcast) continue;
    for (size_t i = 0; i < keys.size(); ++i) {
      const Utterance& u = utterance(s, keys[i]);
      LOOM_CHECK(u.frames == frames[i], DataError, "HTKFeatureDeserializer: ", u.where,
                 ": utterance '", keys[i], "' of stream '", streams_[s].name, "' holds ", u.frames,
                 " frames, ", leader, " ", frames[i]);
    }
  }
}

void HTKFeatureDeserializer::select(const std::vector<std::string>& keys,
                                    const std::vector<size_t>& frames) {
  LOOM_CHECK(keys.size() == frames.size(), ArgumentError,
             "HTKFeatureDeserializer::select: ", keys.size(), " keys and ", frames.size(),
             " lengths");
  for (const std::string& k : keys)
    LOOM_CHECK(has(k), DataError, "HTKFeatureDeserializer: no features for utterance '", k, "'");
  check_frames(keys, frames, "the first HTK deserializer's");
  keys_ = keys;
  set_frames(frames);
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
    for (const SequenceInfo& seq : out->sequences) {
      const Utterance& u = utterance(id, keys_[seq.key]);
      std::ifstream file(u.path, std::ios::binary);
      LOOM_CHECK(file.good(), IOError, "HTKFeatureDeserializer: ", u.where,
                 ": cannot open feature file '", u.path, "'");
      const HTKFile h = read_htk_header(file, u.path, u.where);
      LOOM_CHECK(h.dim == d && u.first + u.frames <= h.frames, DataError, "HTK feature file '",
                 u.path, "' (", u.where, ") changed since it was indexed");
      const size_t bytes_per_frame = d * h.value_bytes();
      std::vector<unsigned char> bytes(u.frames * bytes_per_frame);
      file.seekg(std::streamoff(h.data_start + u.first * bytes_per_frame));
      file.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
      LOOM_CHECK(size_t(file.gcount()) == bytes.size(), DataError, "HTK feature file '", u.path,
                 "' (", u.where, ") is cut short");
      frame_values.resize(u.frames * d);
      for (size_t i = 0; i < frame_values.size(); ++i)
        frame_values[i] =
            h.compressed ? (float(int16_t(big_endian(bytes.data() + 2 * i, 2))) + h.bias[i % d]) /
                               h.scale[i % d]
                         : big_endian_float(bytes.data() + 4 * i);
      // A broadcast stream's one frame is every frame of the sequence.
      for (size_t t = 0; t < seq.num_samples; ++t)
        for (size_t k = 0; k < left + 1 + right; ++k) {
          const ptrdiff_t at = defs_[id].broadcast ? 0 : ptrdiff_t(t);
          const ptrdiff_t src = std::clamp<ptrdiff_t>(at + ptrdiff_t(k) - ptrdiff_t(left), 0,
                                                      ptrdiff_t(u.frames) - 1);
          out_values.insert(out_values.end(), frame_values.begin() + src * ptrdiff_t(d),
                            frame_values.begin() + (src + 1) * ptrdiff_t(d));
        }
      data.sample_begin.push_back(data.sample_begin.back() + seq.num_samples);
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
        if (!index_.emplace(key, all_.size()).second)
          fail("utterance '" + key + "' is given twice");
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
  std::vector<size_t> frames;
  for (size_t i = 0; i < all_.size(); ++i) {
    order_.push_back(i);
    frames.push_back(all_[i].frames);
  }
  set_frames(std::move(frames));
}

HTKMLFDeserializer::~HTKMLFDeserializer() = default;

void HTKMLFDeserializer::select(const std::vector<std::string>& keys,
                                const std::vector<size_t>& frames) {
  LOOM_CHECK(keys.size() == frames.size(), ArgumentError,
             "HTKMLFDeserializer::select: ", keys.size(), " keys and ", frames.size(), " lengths");
  std::vector<size_t> order;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = index_.find(keys[i]);
    LOOM_CHECK(it != index_.end(), DataError, "HTKMLFDeserializer: no labels for utterance '",
               keys[i], "'");
    LOOM_CHECK(all_[it->second].frames == frames[i], DataError, "HTKMLFDeserializer: utterance '",
               keys[i], "' has ", all_[it->second].frames,
               " frames of labels, the first HTK deserializer's ", frames[i], " frames");
    order.push_back(it->second);
  }
  order_ = std::move(order);
  set_frames(frames);
}

std::vector<std::string> HTKMLFDeserializer::keys() const {
  std::vector<std::string> out;
  for (size_t i : order_) out.push_back(all_[i].key);
  return out;
}

std::shared_ptr<const Chunk> HTKMLFDeserializer::load_chunk(size_t chunk) {
  auto out = std::make_shared<Chunk>();
  out->sequences = sequence_infos(chunk);
  StreamChunkData& data = out->streams.emplace_back();
  std::vector<double> values;
  for (const SequenceInfo& seq : out->sequences) {
    const Utterance& u = all_[order_[seq.key]];
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
  std::vector<HTKKeyedDeserializer*> htk;
  for (const auto& d : deserializers)
    if (auto* keyed = dynamic_cast<HTKKeyedDeserializer*>(d.get())) htk.push_back(keyed);
  if (htk.empty()) return;
  const std::string leader = "stream '" + htk[0]->stream_infos()[0].name + "'";
  LOOM_CHECK(!htk[0]->broadcasts_first_stream(), ArgumentError, "MinibatchSource: ", leader,
             " is broadcast and cannot be the first stream of the first HTK deserializer, whose "
             "utterances the others follow (CNTK: cannot expand the primary stream)");
  const std::vector<std::string> all = htk[0]->keys();
  std::vector<std::string> keys;
  std::vector<size_t> frames;
  std::vector<size_t> missing(htk.size());
  for (size_t u = 0; u < all.size(); ++u) {
    bool everywhere = true;
    for (size_t d = 1; d < htk.size(); ++d)
      if (!htk[d]->has(all[u])) {
        ++missing[d];
        everywhere = false;
      }
    if (!everywhere) continue;
    keys.push_back(all[u]);
    frames.push_back(htk[0]->frames()[u]);
  }
  for (size_t d = 1; d < htk.size(); ++d)
    if (missing[d] > 0)
      warn("MinibatchSource: stream '" + htk[d]->stream_infos()[0].name + "' lacks " +
           std::to_string(missing[d]) + " of the " + std::to_string(all.size()) +
           " utterances of " + leader + "; they are dropped");
  LOOM_CHECK(!keys.empty(), DataError, "MinibatchSource: no utterance of ", leader,
             " is in every HTK deserializer: their keys do not match");
  for (HTKKeyedDeserializer* d : htk) d->select(keys, frames);
}

}  // namespace loom
