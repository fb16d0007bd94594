#include "loom/io/minibatch_source.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/core/random.h"

namespace loom {

namespace {

constexpr const char* kPositionKey = "minibatchSourcePosition";
// Truncated BPTT: the timeline position of the slots' units, and the slots.
constexpr const char* kTimelineKey = "truncationTimeline";
constexpr const char* kSlotsKey = "truncationSlots";

template <typename T>
void shuffle(T first, T last, RandomGenerator& rng) {
  for (auto n = last - first; n > 1; --n) {
    auto j = std::min(static_cast<decltype(n)>(rng.uniform() * double(n)), n - 1);
    std::swap(first[n - 1], first[j]);
  }
}

}  // namespace

MinibatchSource::MinibatchSource(std::shared_ptr<Deserializer> deserializer,
                                 MinibatchSourceConfig config)
    : MinibatchSource(std::vector<std::shared_ptr<Deserializer>>{std::move(deserializer)}, config) {
}

MinibatchSource::MinibatchSource(std::vector<std::shared_ptr<Deserializer>> deserializers,
                                 MinibatchSourceConfig config)
    : config_(config) {
  LOOM_CHECK(config.max_samples == INFINITELY_REPEAT || config.max_sweeps == INFINITELY_REPEAT,
             ArgumentError,
             "MinibatchSource: max_samples and max_sweeps are mutually exclusive; set one");
  LOOM_CHECK(!config.randomize || config.randomization_window_in_chunks > 0, ArgumentError,
             "MinibatchSource: randomization_window_in_chunks must be positive when randomizing");
  LOOM_CHECK(!config.frame_mode || config.truncation_length == 0, ArgumentError,
             "MinibatchSource: frame_mode and truncation_length are mutually exclusive");
  LOOM_CHECK(!deserializers.empty(), ArgumentError, "MinibatchSource: no deserializer given");

  size_t num_sequences = 0;
  for (size_t c = 0; c < deserializers.size(); ++c) {
    const auto& d = deserializers[c];
    LOOM_CHECK(d != nullptr, ArgumentError, "MinibatchSource: deserializer ", c, " is null");
    Corpus corpus{d, {}, streams_.size()};
    for (StreamInformation s : d->stream_infos()) {
      for (const StreamInformation& other : streams_)
        LOOM_CHECK(other.name != s.name, ArgumentError, "MinibatchSource: stream '", s.name,
                   "' is delivered by two deserializers");
      s.id = streams_.size();
      streams_.push_back(std::move(s));
      stream_corpus_.push_back(c);
    }
    size_t g = 0;
    for (size_t k = 0; k < d->chunk_infos().size(); ++k) {
      std::vector<SequenceInfo> infos = d->sequence_infos(k);
      if (c == 0) chunk_sequences_.emplace_back();
      for (size_t i = 0; i < infos.size(); ++i, ++g) {
        corpus.locations.push_back({k, i});
        if (c == 0) {
          sequence_length_.push_back(infos[i].num_samples);
          sequence_chunk_.push_back(k);
          chunk_sequences_.back().push_back(g);
        } else if (g < sequence_length_.size()) {
          sequence_length_[g] = std::max(sequence_length_[g], infos[i].num_samples);
        }
      }
    }
    if (c == 0) num_sequences = g;
    LOOM_CHECK(g == num_sequences, ArgumentError, "MinibatchSource: deserializer ", c, " holds ", g,
               " sequences, deserializer 0 holds ", num_sequences,
               "; combined deserializers must hold equally many");
    corpora_.push_back(std::move(corpus));
  }
  loaded_.resize(corpora_.size());
  sweep_size_ = std::accumulate(sequence_length_.begin(), sequence_length_.end(), size_t{0});
  LOOM_CHECK(sweep_size_ > 0, DataError, "MinibatchSource: the data holds no samples");

  if (config.max_samples != INFINITELY_REPEAT) {
    end_position_ = config.max_samples == FULL_DATA_SWEEP ? sweep_size_ : config.max_samples;
  } else if (config.max_sweeps != INFINITELY_REPEAT) {
    size_t sweeps = config.max_sweeps == FULL_DATA_SWEEP ? 1 : config.max_sweeps;
    if (__builtin_mul_overflow(sweeps, sweep_size_, &end_position_))
      end_position_ = INFINITELY_REPEAT;
  }
  build_sweep(0);
}

void MinibatchSource::build_sweep(size_t sweep) {
  sweep_ = sweep;
  cursor_ = 0;
  order_.clear();
  auto add = [&](size_t g, size_t chunk_rank) {
    if (config_.frame_mode) {
      for (size_t f = 0; f < sequence_length_[g]; ++f) order_.push_back({g, f, 1, chunk_rank});
    } else {
      order_.push_back({g, 0, sequence_length_[g], chunk_rank});
    }
  };
  size_t num_chunks = chunk_sequences_.size();
  if (!config_.randomize) {
    for (size_t g = 0; g < sequence_length_.size(); ++g) add(g, sequence_chunk_[g]);
    return;
  }
  // Chunks in random order, then the units of each window of chunks in random order: a
  // window is all a reader over data larger than memory needs to hold.
  RandomGenerator rng(config_.randomization_seed, sweep);
  std::vector<size_t> chunks(num_chunks);
  std::iota(chunks.begin(), chunks.end(), size_t{0});
  shuffle(chunks.begin(), chunks.end(), rng);
  for (size_t w = 0; w < num_chunks; w += config_.randomization_window_in_chunks) {
    size_t first = order_.size();
    size_t last_chunk = std::min(num_chunks, w + config_.randomization_window_in_chunks);
    for (size_t k = w; k < last_chunk; ++k)
      for (size_t g : chunk_sequences_[chunks[k]]) add(g, k);
    shuffle(order_.begin() + first, order_.end(), rng);
  }
}

std::shared_ptr<const Chunk> MinibatchSource::chunk(size_t corpus, size_t index) {
  auto& cache = loaded_[corpus];
  auto it = cache.find(index);
  if (it == cache.end())
    it = cache.emplace(index, corpora_[corpus].deserializer->load_chunk(index)).first;
  return it->second;
}

MinibatchSource::Unit MinibatchSource::take_unit(bool& sweep_end) {
  const Unit u = order_[cursor_];
  timeline_ += u.length;
  if (++cursor_ == order_.size()) {
    sweep_end = true;
    build_sweep(sweep_ + 1);
  }
  return u;
}

Minibatch<StreamInformation> MinibatchSource::next_minibatch(size_t minibatch_size_in_samples,
                                                             size_t num_data_partitions,
                                                             size_t partition_index) {
  LOOM_CHECK(minibatch_size_in_samples > 0, ArgumentError,
             "next_minibatch: the minibatch size must be positive");
  LOOM_CHECK(num_data_partitions > 0 && partition_index < num_data_partitions, ArgumentError,
             "next_minibatch: partition_index ", partition_index,
             " is not below num_data_partitions ", num_data_partitions);
  if (config_.truncation_length > 0)
    return next_truncated(minibatch_size_in_samples, num_data_partitions, partition_index);
  Minibatch<StreamInformation> result;
  if (position_ >= end_position_) return result;

  // With fewer chunks than workers, chunk ownership would leave workers idle; then units are
  // dealt by their position in the sweep, as without randomization.
  bool by_chunk = config_.randomize && chunk_sequences_.size() >= num_data_partitions;
  size_t budget = std::min(minibatch_size_in_samples, end_position_ - position_);
  std::vector<Piece> mine;
  bool sweep_end = false;
  for (size_t taken = 0; taken < budget;) {
    const Unit& next = order_[cursor_];
    if (taken > 0 && budget - taken < next.length) break;
    const bool owned =
        (by_chunk ? next.chunk_rank : cursor_) % num_data_partitions == partition_index;
    const Unit u = take_unit(sweep_end);
    if (owned) mine.push_back({u, u.frame, 1, !config_.frame_mode, true});
    taken += u.length;
  }
  position_ = timeline_;
  for (size_t s = 0; s < streams_.size(); ++s)
    result.emplace(streams_[s], pack(s, mine, sweep_end));
  return result;
}

Minibatch<StreamInformation> MinibatchSource::next_truncated(size_t minibatch_size,
                                                             size_t num_data_partitions,
                                                             size_t partition_index) {
  const size_t T = config_.truncation_length;
  const size_t wanted = std::max<size_t>(1, minibatch_size / T);
  LOOM_CHECK(wanted >= num_data_partitions, ArgumentError, "truncation_length ", T,
             " with minibatch size ", minibatch_size, " gives ", wanted,
             " parallel sequences, fewer than the ", num_data_partitions,
             " workers; use a larger minibatch or a shorter truncation_length");
  // Slots beyond the wanted ones finish their sequences first; only idle ones at the end go.
  while (slots_.size() > wanted && slots_.back().unit.sequence == kNoUnit) slots_.pop_back();
  slots_.resize(std::max(slots_.size(), wanted), Slot{{kNoUnit, 0, 0, 0}, 0});
  bool sweep_end = false;
  for (size_t s = 0; s < wanted; ++s)
    if (slots_[s].unit.sequence == kNoUnit && timeline_ < end_position_)
      slots_[s] = {take_unit(sweep_end), 0};
  while (!slots_.empty() && slots_.back().unit.sequence == kNoUnit) slots_.pop_back();
  Minibatch<StreamInformation> result;
  if (slots_.empty()) return result;  // the data have ended

  // This worker's slots s = partition_index (mod num_data_partitions), at index s / workers.
  std::vector<Piece> mine;
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& slot = slots_[s];
    if (slot.unit.sequence == kNoUnit) {
      if (s % num_data_partitions == partition_index) mine.push_back({slot.unit, 0, 0, false});
      continue;
    }
    const size_t length = std::min(T, slot.unit.length - slot.read);
    if (s % num_data_partitions == partition_index)
      mine.push_back({slot.unit, slot.read, length, false, slot.read == 0});
    position_ += length;
    slot.read += length;
    if (slot.read == slot.unit.length) slot = {{kNoUnit, 0, 0, 0}, 0};
  }
  for (size_t s = 0; s < streams_.size(); ++s)
    result.emplace(streams_[s], pack(s, mine, sweep_end));
  return result;
}

MinibatchData MinibatchSource::pack(size_t stream, const std::vector<Piece>& pieces,
                                    bool sweep_end) {
  const StreamInformation& info = streams_[stream];
  const Corpus& corpus = corpora_[stream_corpus_[stream]];
  size_t local = stream - corpus.first_stream, dim = info.sample_shape.total_size();

  struct Slice {
    std::shared_ptr<const Chunk> chunk;
    size_t first, length;  // samples of the stream in the chunk
  };
  std::vector<Slice> slices;
  size_t max_length = 0, samples = 0;
  for (const Piece& p : pieces) {
    if (p.unit.sequence == kNoUnit) {
      slices.push_back({nullptr, 0, 0});
      continue;
    }
    Location loc = corpus.locations[p.unit.sequence];
    auto c = chunk(stream_corpus_[stream], loc.chunk);
    const StreamChunkData& d = c->streams[local];
    size_t length = d.length(loc.index);
    if (!p.whole) {
      LOOM_CHECK(length == sequence_length_[p.unit.sequence], DataError,
                 config_.frame_mode ? "frame_mode" : "truncation_length", ": stream '", info.name,
                 "' has ", length, " samples in sequence (id = ", c->sequences[loc.index].key,
                 "), which has ", sequence_length_[p.unit.sequence], "; ",
                 config_.frame_mode ? "frame mode" : "truncated BPTT",
                 " needs every stream at full length");
      length = p.length;
    }
    slices.push_back({c, d.sample_begin[loc.index] + p.first, length});
    max_length = std::max(max_length, length);
    samples += length;
  }

  size_t batch = pieces.size();
  // Dense samples keep their shape ([1,28,28] images); CSR needs one row per sample.
  NDShape shape = info.is_sparse() ? NDShape{batch, max_length, dim}
                                   : NDShape{batch, max_length}.append(info.sample_shape);
  NDArrayView data = dispatch(info.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (!info.is_sparse()) {
      NDArrayView view(info.dtype, shape);
      T* out = view.data<T>();
      for (size_t b = 0; b < batch; ++b) {
        if (slices[b].length == 0) continue;
        const std::vector<T>& values = slices[b].chunk->streams[local].values<T>();
        std::copy_n(values.begin() + slices[b].first * dim, slices[b].length * dim,
                    out + b * max_length * dim);
      }
      return view;
    }
    // One CSR row per (sequence, position); padding rows stay empty.
    std::vector<int32_t> offsets(batch * max_length + 1, 0), columns;
    std::vector<T> values;
    size_t row = 0;
    for (size_t b = 0; b < batch; ++b) {
      for (size_t t = 0; t < max_length; ++t, ++row) {
        if (t < slices[b].length) {
          const StreamChunkData& d = slices[b].chunk->streams[local];
          size_t s = slices[b].first + t;
          columns.insert(columns.end(), d.indices.begin() + d.nnz_begin[s],
                         d.indices.begin() + d.nnz_begin[s + 1]);
          values.insert(values.end(), d.values<T>().begin() + d.nnz_begin[s],
                        d.values<T>().begin() + d.nnz_begin[s + 1]);
        }
        LOOM_CHECK(columns.size() <= size_t(std::numeric_limits<int32_t>::max()), DataError,
                   "stream '", info.name, "': a minibatch of more than 2^31 non-zero values");
        offsets[row + 1] = static_cast<int32_t>(columns.size());
      }
    }
    return NDArrayView::sparse_csr<T>(shape, std::move(offsets), std::move(columns), values);
  });
  NDMask mask(batch, max_length);
  for (size_t b = 0; b < batch; ++b) {
    mask.invalidate_from(b, slices[b].length);
    // A piece that continues its sequence (truncated BPTT) starts Valid, not SequenceBegin.
    if (!pieces[b].begins && slices[b].length > 0) mask.set(b, 0, MaskKind::Valid);
  }
  return MinibatchData{Value(std::move(data), true, std::move(mask)), batch, samples, sweep_end};
}

Dictionary MinibatchSource::get_checkpoint_state() const {
  Dictionary d;
  d[kPositionKey] = uint64_t{position_};
  if (config_.truncation_length == 0) return d;
  d[kTimelineKey] = uint64_t{timeline_};
  DictionaryVector slots;
  for (const Slot& slot : slots_) {
    Dictionary s;
    if (slot.unit.sequence != kNoUnit) {
      s["sequence"] = uint64_t{slot.unit.sequence};
      s["length"] = uint64_t{slot.unit.length};
      s["read"] = uint64_t{slot.read};
    }
    slots.emplace_back(s);
  }
  d[kSlotsKey] = std::move(slots);
  return d;
}

void MinibatchSource::restore_from_checkpoint(const Dictionary& state) {
  LOOM_CHECK(state.contains(kPositionKey), ArgumentError,
             "MinibatchSource::restore_from_checkpoint: the state has no '", kPositionKey, "'");
  LOOM_CHECK((config_.truncation_length > 0) == state.contains(kSlotsKey), ArgumentError,
             "MinibatchSource::restore_from_checkpoint: the state was taken ",
             state.contains(kSlotsKey) ? "with" : "without",
             " truncation_length, this source reads ",
             config_.truncation_length > 0 ? "with" : "without", " it");
  const size_t position = static_cast<size_t>(state.get<uint64_t>(kPositionKey));
  if (config_.truncation_length == 0) {
    move_to(position);
    position_ = position;
    return;
  }
  std::vector<Slot> slots;
  for (const DictionaryValue& v : state.get<DictionaryVector>(kSlotsKey)) {
    const Dictionary s(v.get<DictionaryMap>());
    Slot slot{{kNoUnit, 0, 0, 0}, 0};
    if (s.contains("sequence")) {
      slot.unit = {size_t(s.get<uint64_t>("sequence")), 0, size_t(s.get<uint64_t>("length")), 0};
      slot.read = size_t(s.get<uint64_t>("read"));
      LOOM_CHECK(slot.unit.sequence < sequence_length_.size() &&
                     sequence_length_[slot.unit.sequence] == slot.unit.length &&
                     slot.read < slot.unit.length,
                 ArgumentError, "MinibatchSource::restore_from_checkpoint: a slot's sequence ",
                 slot.unit.sequence, " of length ", slot.unit.length,
                 " is not in this data; was the checkpoint taken with other data?");
    }
    slots.push_back(slot);
  }
  move_to(static_cast<size_t>(state.get<uint64_t>(kTimelineKey)));
  slots_ = std::move(slots);
  position_ = position;
}

void MinibatchSource::move_to(size_t timeline) {
  // Replays the timeline: sweeps hold whole units, so the position lies on a unit boundary
  // of its sweep's order.
  const size_t before = timeline_;
  build_sweep(timeline / sweep_size_);
  size_t offset = timeline % sweep_size_, walked = 0;
  while (walked < offset) walked += order_[cursor_++].length;
  if (walked != offset) move_to(before);  // back to where this source was
  LOOM_CHECK(walked == offset, ArgumentError, "MinibatchSource::restore_from_checkpoint: position ",
             timeline, " is not at a sequence boundary of this data (sweep of ", sweep_size_,
             " samples); was the checkpoint taken with other data or options?");
  timeline_ = timeline;
}

}  // namespace loom
