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

Minibatch<StreamInformation> MinibatchSource::next_minibatch(size_t minibatch_size_in_samples,
                                                             size_t num_data_partitions,
                                                             size_t partition_index) {
  LOOM_CHECK(minibatch_size_in_samples > 0, ArgumentError,
             "next_minibatch: the minibatch size must be positive");
  LOOM_CHECK(num_data_partitions > 0 && partition_index < num_data_partitions, ArgumentError,
             "next_minibatch: partition_index ", partition_index,
             " is not below num_data_partitions ", num_data_partitions);
  Minibatch<StreamInformation> result;
  if (position_ >= end_position_) return result;

  // With fewer chunks than workers, chunk ownership would leave workers idle; then units are
  // dealt by their position in the sweep, as without randomization.
  bool by_chunk = config_.randomize && chunk_sequences_.size() >= num_data_partitions;
  size_t budget = std::min(minibatch_size_in_samples, end_position_ - position_);
  std::vector<Unit> mine;
  bool sweep_end = false;
  for (size_t taken = 0; taken < budget;) {
    const Unit& u = order_[cursor_];
    if (taken > 0 && budget - taken < u.length) break;
    if ((by_chunk ? u.chunk_rank : cursor_) % num_data_partitions == partition_index)
      mine.push_back(u);
    taken += u.length;
    position_ += u.length;
    if (++cursor_ == order_.size()) {
      sweep_end = true;
      build_sweep(sweep_ + 1);
    }
  }
  for (size_t s = 0; s < streams_.size(); ++s)
    result.emplace(streams_[s], pack(s, mine, sweep_end));
  return result;
}

MinibatchData MinibatchSource::pack(size_t stream, const std::vector<Unit>& units, bool sweep_end) {
  const StreamInformation& info = streams_[stream];
  const Corpus& corpus = corpora_[stream_corpus_[stream]];
  size_t local = stream - corpus.first_stream, dim = info.sample_shape.total_size();

  struct Slice {
    std::shared_ptr<const Chunk> chunk;
    size_t first, length;  // samples of the stream in the chunk
  };
  std::vector<Slice> slices;
  size_t max_length = 0, samples = 0;
  for (const Unit& u : units) {
    Location loc = corpus.locations[u.sequence];
    auto c = chunk(stream_corpus_[stream], loc.chunk);
    const StreamChunkData& d = c->streams[local];
    size_t length = d.length(loc.index);
    if (config_.frame_mode) {
      LOOM_CHECK(length == sequence_length_[u.sequence], DataError, "frame_mode: stream '",
                 info.name, "' has ", length,
                 " samples in sequence (id = ", c->sequences[loc.index].key, "), which has ",
                 sequence_length_[u.sequence], "; frame mode needs every stream at full length");
      length = 1;
    }
    slices.push_back({c, d.sample_begin[loc.index] + u.frame, length});
    max_length = std::max(max_length, length);
    samples += length;
  }

  size_t batch = units.size();
  // Dense samples keep their shape ([1,28,28] images); CSR needs one row per sample.
  NDShape shape = info.is_sparse() ? NDShape{batch, max_length, dim}
                                   : NDShape{batch, max_length}.append(info.sample_shape);
  NDArrayView data = dispatch(info.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (!info.is_sparse()) {
      NDArrayView view(info.dtype, shape);
      T* out = view.data<T>();
      for (size_t b = 0; b < batch; ++b) {
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
      const StreamChunkData& d = slices[b].chunk->streams[local];
      for (size_t t = 0; t < max_length; ++t, ++row) {
        if (t < slices[b].length) {
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
  for (size_t b = 0; b < batch; ++b) mask.invalidate_from(b, slices[b].length);
  return MinibatchData{Value(std::move(data), true, std::move(mask)), batch, samples, sweep_end};
}

Dictionary MinibatchSource::get_checkpoint_state() const {
  Dictionary d;
  d[kPositionKey] = uint64_t{position_};
  return d;
}

void MinibatchSource::restore_from_checkpoint(const Dictionary& state) {
  LOOM_CHECK(state.contains(kPositionKey), ArgumentError,
             "MinibatchSource::restore_from_checkpoint: the state has no '", kPositionKey, "'");
  move_to(static_cast<size_t>(state.get<uint64_t>(kPositionKey)));
}

void MinibatchSource::move_to(size_t position) {
  // Replays the timeline: sweeps hold whole units, so the position lies on a unit boundary
  // of its sweep's order.
  build_sweep(position / sweep_size_);
  size_t offset = position % sweep_size_, walked = 0;
  while (walked < offset) walked += order_[cursor_++].length;
  if (walked != offset) move_to(position_);  // back to where this source was
  LOOM_CHECK(walked == offset, ArgumentError, "MinibatchSource::restore_from_checkpoint: position ",
             position, " is not at a sequence boundary of this data (sweep of ", sweep_size_,
             " samples); was the checkpoint taken with other data or options?");
  position_ = position;
}

}  // namespace loom
