#include "loom/io/minibatch_source.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/core/random.h"
#include "loom/graph/debugging.h"
#include "loom/io/large_allocations.h"
#include "loom/io/reader_threads.h"
#include "loom/kernels/detail.h"

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

// The generator of a sweep's shuffles after its first `draws` draws: shuffling n items draws
// n - 1 uniforms, one Philox block each, so a window's shuffle starts at a computed offset.
RandomGenerator generator_after(uint64_t seed, size_t sweep, uint64_t draws) {
  RandomGenerator rng(seed, sweep);
  Dictionary state = rng.checkpoint();
  state["offset"] = draws;
  rng.restore(state);
  return rng;
}

// Starts loading the first `bytes` (at most 1 KB) from `p` into the caches: the hardware's
// prefetcher follows a longer run once it has begun, and a minibatch of images (38.5 MB) would
// only evict its own first lines.
void prefetch_to_cache(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  bytes = std::min<size_t>(bytes, 1024);
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o);
  if (bytes > 0) __builtin_prefetch(c + bytes - 1);
}

}  // namespace

MinibatchSource::MinibatchSource(std::shared_ptr<Deserializer> deserializer,
                                 MinibatchSourceConfig config)
    : MinibatchSource(std::vector<std::shared_ptr<Deserializer>>{std::move(deserializer)}, config) {
}

MinibatchSource::MinibatchSource(std::vector<std::shared_ptr<Deserializer>> deserializers,
                                 MinibatchSourceConfig config)
    : config_(config) {
  reuse_large_allocations();
  LOOM_CHECK(config.max_samples == INFINITELY_REPEAT || config.max_sweeps == INFINITELY_REPEAT,
             ArgumentError,
             "MinibatchSource: max_samples and max_sweeps are mutually exclusive; set one");
  LOOM_CHECK(
      config.randomization_window_in_chunks == 0 || config.randomization_window_in_samples == 0,
      ArgumentError,
      "MinibatchSource: randomization_window_in_chunks and randomization_window_in_samples "
      "are mutually exclusive; set randomization_window_in_chunks = 0 to use the other");
  LOOM_CHECK(!config.randomize || config.randomization_window_in_chunks > 0 ||
                 config.randomization_window_in_samples > 0,
             ArgumentError,
             "MinibatchSource: randomizing needs a positive randomization_window_in_chunks or "
             "randomization_window_in_samples");
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
      corpus.first_sequence.push_back(g);
      for (const SequenceInfo& info : d->sequence_infos(k)) {
        LOOM_CHECK(info.num_samples <= std::numeric_limits<uint32_t>::max(), DataError,
                   "MinibatchSource: sequence (id = ", info.key, ") of deserializer ", c, " holds ",
                   info.num_samples, " samples; a sequence holds at most 2^32 - 1");
        const auto length = static_cast<uint32_t>(info.num_samples);
        if (c == 0)
          sequence_length_.push_back(length);
        else if (g < sequence_length_.size())
          sequence_length_[g] = std::max(sequence_length_[g], length);
        ++g;
      }
    }
    corpus.first_sequence.push_back(g);
    if (c == 0) num_sequences = g;
    LOOM_CHECK(g == num_sequences, ArgumentError, "MinibatchSource: deserializer ", c, " holds ", g,
               " sequences, deserializer 0 holds ", num_sequences,
               "; combined deserializers must hold equally many");
    corpora_.push_back(std::move(corpus));
  }
  const std::vector<size_t>& first = corpora_[0].first_sequence;
  for (size_t k = 0; k + 1 < first.size(); ++k)
    chunk_samples_.push_back(std::accumulate(sequence_length_.begin() + first[k],
                                             sequence_length_.begin() + first[k + 1], size_t{0}));
  sweep_size_ = std::accumulate(chunk_samples_.begin(), chunk_samples_.end(), size_t{0});
  LOOM_CHECK(sweep_size_ > 0, DataError, "MinibatchSource: the data holds no samples");

  if (config.max_samples != INFINITELY_REPEAT) {
    end_position_ = config.max_samples == FULL_DATA_SWEEP ? sweep_size_ : config.max_samples;
  } else if (config.max_sweeps != INFINITELY_REPEAT) {
    size_t sweeps = config.max_sweeps == FULL_DATA_SWEEP ? 1 : config.max_sweeps;
    if (__builtin_mul_overflow(sweeps, sweep_size_, &end_position_))
      end_position_ = INFINITELY_REPEAT;
  }
  build_order(0);
  build_window(0);
}

MinibatchSource::MinibatchSource(MinibatchSource&& other)
    : MinibatchSourceInterface(std::move(other)), config_((other.discard_ahead(), other.config_)) {
  // The read-ahead task refers to `other`: with it gone, every member moves.
  corpora_ = std::move(other.corpora_);
  streams_ = std::move(other.streams_);
  stream_corpus_ = std::move(other.stream_corpus_);
  sequence_length_ = std::move(other.sequence_length_);
  chunk_samples_ = std::move(other.chunk_samples_);
  sweep_size_ = other.sweep_size_;
  end_position_ = other.end_position_;
  place_ = std::move(other.place_);
  order_ = std::move(other.order_);
  window_ = std::move(other.window_);
  resident_ = std::move(other.resident_);
  stats_ = other.stats_;
  delivered_ = std::move(other.delivered_);
}

MinibatchSource::~MinibatchSource() {
  wait_ahead();
}

void MinibatchSource::wait_ahead() const {
  if (!ahead_.valid()) return;
  reader_.run_waiting_jobs();  // when the reader has not started it
  ahead_.wait();
}

MinibatchSource::Location MinibatchSource::Corpus::locate(size_t sequence) const {
  // The last chunk that begins at or before the sequence (an empty chunk begins where the next
  // does).
  const auto after = std::upper_bound(first_sequence.begin(), first_sequence.end(), sequence);
  const auto k = static_cast<size_t>(after - first_sequence.begin()) - 1;
  return {k, sequence - first_sequence[k]};
}

void MinibatchSource::build_order(size_t sweep) {
  if (order_.sweep == sweep) return;
  SweepOrder& o = order_;
  o.sweep = sweep;
  const std::vector<size_t>& first = corpora_[0].first_sequence;
  const size_t num_chunks = chunk_samples_.size();
  o.chunks.resize(num_chunks);
  std::iota(o.chunks.begin(), o.chunks.end(), size_t{0});
  // Chunks in random order, cut into windows whose units are shuffled together: a window is all
  // a reader over data larger than memory needs to hold. Without randomization the units stay
  // in corpus order, one chunk a window.
  if (config_.randomize) {
    RandomGenerator rng(config_.randomization_seed, sweep);
    shuffle(o.chunks.begin(), o.chunks.end(), rng);
  }
  const size_t window_chunks = config_.randomize ? config_.randomization_window_in_chunks : 1;
  // A window without units (its chunks are empty) joins the next one, or the last: the units'
  // order stays the same.
  o.window_begin.assign(1, 0);
  o.first_unit.assign(1, 0);
  size_t begin = 0, samples = 0, units = 0;
  for (size_t r = 0; r < num_chunks;) {
    const size_t k = o.chunks[r++];
    samples += chunk_samples_[k];
    units += config_.frame_mode ? chunk_samples_[k] : first[k + 1] - first[k];
    const bool full = window_chunks > 0 ? r - begin >= window_chunks
                                        : samples >= config_.randomization_window_in_samples;
    if (!full && r < num_chunks) continue;
    if (units > 0) {
      o.window_begin.push_back(r);
      o.first_unit.push_back(o.first_unit.back() + units);
    } else if (r == num_chunks) {
      o.window_begin.back() = r;
    }
    begin = r;
    samples = units = 0;
  }
  o.last_window.assign(corpora_.size(), {});
  for (size_t c = 0; c < corpora_.size(); ++c) {
    std::vector<size_t>& last = o.last_window[c];
    last.assign(corpora_[c].first_sequence.size() - 1, 0);
    for (size_t w = 0; w + 1 < o.window_begin.size(); ++w)
      for (size_t r = o.window_begin[w]; r < o.window_begin[w + 1]; ++r) {
        const size_t k = o.chunks[r];
        if (first[k] == first[k + 1]) continue;
        const size_t to = corpora_[c].locate(first[k + 1] - 1).chunk;
        for (size_t kc = corpora_[c].locate(first[k]).chunk; kc <= to; ++kc) last[kc] = w;
      }
  }
}

void MinibatchSource::build_window(size_t window) {
  if (window_.sweep == order_.sweep && window_.index == window) return;
  const SweepOrder& o = order_;
  const std::vector<size_t>& first = corpora_[0].first_sequence;
  window_.sweep = o.sweep;
  window_.index = window;
  std::vector<Unit>& units = window_.units;
  units.clear();
  for (size_t r = o.window_begin[window]; r < o.window_begin[window + 1]; ++r) {
    for (size_t g = first[o.chunks[r]]; g < first[o.chunks[r] + 1]; ++g) {
      if (config_.frame_mode) {
        for (size_t f = 0; f < sequence_length_[g]; ++f) units.push_back({g, f, 1, r});
      } else {
        units.push_back({g, 0, sequence_length_[g], r});
      }
    }
  }
  if (config_.randomize) {
    // The sweep's draws before: the chunks' shuffle, then each earlier window's.
    const size_t draws = o.chunks.size() - 1 + o.first_unit[window] - window;
    RandomGenerator rng = generator_after(config_.randomization_seed, o.sweep, draws);
    shuffle(units.begin(), units.end(), rng);
  }
  window_.last_use.assign(corpora_.size(), {});
  for (size_t c = 0; c < corpora_.size(); ++c) {
    std::vector<size_t>& last = window_.last_use[c];
    last.assign(corpora_[c].first_sequence.size() - 1, 0);
    for (size_t i = 0; i < units.size(); ++i) last[corpora_[c].locate(units[i].sequence).chunk] = i;
  }
}

MinibatchSource::Unit MinibatchSource::take_unit(bool& sweep_end) {
  const Unit u = window_.units[place_.cursor];
  place_.timeline += u.length;
  if (++place_.cursor == window_.units.size()) {
    place_.cursor = 0;
    if (++place_.window + 1 == order_.window_begin.size()) {
      sweep_end = true;
      place_.window = 0;
      build_order(++place_.sweep);
    }
    build_window(place_.window);
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
  const ProfileScope profiled(ProfilerEvent::GetMinibatch);
  const Request request{minibatch_size_in_samples, num_data_partitions, partition_index};
  Minibatch<StreamInformation> result;
  if (ahead_.valid() && ahead_request_ == request) {
    wait_ahead();
    result = ahead_.get();  // rethrows what failed on the background thread
  } else {
    discard_ahead();
    result = read(request);
  }
  delivered_ = place_;
  if (config_.prefetch && !result.empty()) {
    ahead_request_ = request;
    ahead_ = reader_.run<Minibatch<StreamInformation>>([this, request] {
      const ProfileScope profiled(ProfilerEvent::PrefetchMinibatch);
      return read(request);
    });
  }
  return result;
}

void MinibatchSource::discard_ahead() {
  if (!ahead_.valid()) return;
  wait_ahead();
  ahead_ = {};  // its error, if any, belongs to a minibatch nobody asked for
  place_ = delivered_;
  build_order(place_.sweep);
  build_window(place_.window);
}

ChunkStats MinibatchSource::chunk_stats() const {
  wait_ahead();
  return stats_;
}

Minibatch<StreamInformation> MinibatchSource::read(const Request& request) {
  Minibatch<StreamInformation> result;
  bool sweep_end = false;
  std::vector<Piece> pieces;
  if (config_.truncation_length > 0) {
    pieces = take_truncated(request, sweep_end);
    if (place_.slots.empty()) return result;  // the data have ended
  } else {
    if (place_.position >= end_position_) return result;
    pieces = take_pieces(request, sweep_end);
  }
  load_chunks(pieces);
  for (size_t s = 0; s < streams_.size(); ++s)
    result.emplace(streams_[s], pack(s, pieces, sweep_end));
  release_chunks();
  return result;
}

std::vector<MinibatchSource::Piece> MinibatchSource::take_pieces(const Request& request,
                                                                 bool& sweep_end) {
  std::vector<Piece> mine;
  // With fewer chunks than workers, chunk ownership would leave workers idle; then units are
  // dealt by their position in the sweep, as without randomization.
  const bool by_chunk = config_.randomize && chunk_samples_.size() >= request.partitions;
  const size_t budget = std::min(request.size, end_position_ - place_.position);
  for (size_t taken = 0; taken < budget;) {
    const Unit& next = window_.units[place_.cursor];
    if (taken > 0 && budget - taken < next.length) break;
    const bool owned =
        (by_chunk ? next.chunk_rank : order_.first_unit[place_.window] + place_.cursor) %
            request.partitions ==
        request.index;
    const size_t sweep = place_.sweep;
    const Unit u = take_unit(sweep_end);
    if (owned) mine.push_back({u, sweep, u.frame, 1, !config_.frame_mode, true});
    taken += u.length;
  }
  place_.position = place_.timeline;
  return mine;
}

std::vector<MinibatchSource::Piece> MinibatchSource::take_truncated(const Request& request,
                                                                    bool& sweep_end) {
  const size_t T = config_.truncation_length;
  const size_t wanted = std::max<size_t>(1, request.size / T);
  LOOM_CHECK(wanted >= request.partitions, ArgumentError, "truncation_length ", T,
             " with minibatch size ", request.size, " gives ", wanted,
             " parallel sequences, fewer than the ", request.partitions,
             " workers; use a larger minibatch or a shorter truncation_length");
  std::vector<Slot>& slots = place_.slots;
  const Slot idle{{kNoUnit, 0, 0, 0}, 0, 0};
  // Slots beyond the wanted ones finish their sequences first; only idle ones at the end go.
  while (slots.size() > wanted && slots.back().unit.sequence == kNoUnit) slots.pop_back();
  slots.resize(std::max(slots.size(), wanted), idle);
  for (size_t s = 0; s < wanted; ++s) {
    if (slots[s].unit.sequence == kNoUnit && place_.timeline < end_position_) {
      const size_t sweep = place_.sweep;
      slots[s] = {take_unit(sweep_end), sweep, 0};
    }
  }
  while (!slots.empty() && slots.back().unit.sequence == kNoUnit) slots.pop_back();

  // This worker's slots s = partition_index (mod num_data_partitions), at index s / workers.
  std::vector<Piece> mine;
  for (size_t s = 0; s < slots.size(); ++s) {
    Slot& slot = slots[s];
    const bool owned = s % request.partitions == request.index;
    if (slot.unit.sequence == kNoUnit) {
      if (owned) mine.push_back({slot.unit, 0, 0, 0, false});
      continue;
    }
    const size_t length = std::min(T, slot.unit.length - slot.read);
    if (owned) mine.push_back({slot.unit, slot.sweep, slot.read, length, false, slot.read == 0});
    place_.position += length;
    slot.read += length;
    if (slot.read == slot.unit.length) slot = idle;
  }
  return mine;
}

void MinibatchSource::load_chunks(const std::vector<Piece>& pieces) {
  std::vector<Resident> missing;
  for (const Piece& p : pieces) {
    if (p.unit.sequence == kNoUnit) continue;
    for (size_t c = 0; c < corpora_.size(); ++c) {
      const size_t k = corpora_[c].locate(p.unit.sequence).chunk;
      auto same = [&](const Resident& r) { return holds(r, p.sweep, c, k); };
      auto held = std::find_if(resident_.begin(), resident_.end(), same);
      if (held != resident_.end()) {
        held->sweep = std::max(held->sweep, p.sweep);  // kept until that sweep is past it
      } else if (std::none_of(missing.begin(), missing.end(), same)) {
        missing.push_back({p.sweep, c, k, nullptr});
      }
    }
  }
  for_each_item(missing.size(), reader_threads(config_.num_reader_threads), [&](size_t i) {
    Resident& r = missing[i];
    r.data = corpora_[r.corpus].deserializer->load_chunk_in_sweep(r.chunk, r.sweep,
                                                                  config_.randomization_seed);
  });
  resident_.insert(resident_.end(), missing.begin(), missing.end());
  stats_.loads += missing.size();
  stats_.resident = resident_.size();
  stats_.peak_resident = std::max(stats_.peak_resident, stats_.resident);
}

bool MinibatchSource::holds(const Resident& r, size_t sweep, size_t corpus, size_t chunk) const {
  return r.corpus == corpus && r.chunk == chunk &&
         (r.sweep == sweep || corpora_[corpus].deserializer->same_in_every_sweep());
}

void MinibatchSource::release_chunks() {
  // When one window holds every chunk, the next sweep reads every chunk again: those whose
  // data are the same in every sweep stay until the data end.
  const bool one_window = order_.window_begin.size() == 2 && place_.position < end_position_;
  // A chunk is passed when its sweep is behind, or the units of its sweep that read it are
  // all taken and no truncation slot still reads it.
  auto passed = [&](const Resident& r) {
    if (one_window && corpora_[r.corpus].deserializer->same_in_every_sweep()) return false;
    if (r.sweep > place_.sweep) return false;
    if (r.sweep == place_.sweep) {
      const size_t last = order_.last_window[r.corpus][r.chunk];
      if (last > place_.window ||
          (last == place_.window && window_.last_use[r.corpus][r.chunk] >= place_.cursor))
        return false;
    }
    return std::none_of(place_.slots.begin(), place_.slots.end(), [&](const Slot& s) {
      return s.unit.sequence != kNoUnit && s.sweep == r.sweep &&
             corpora_[r.corpus].locate(s.unit.sequence).chunk == r.chunk;
    });
  };
  std::erase_if(resident_, passed);
  stats_.resident = resident_.size();
}

const Chunk& MinibatchSource::chunk(size_t sweep, size_t corpus, size_t index) const {
  for (const Resident& r : resident_)
    if (holds(r, sweep, corpus, index)) return *r.data;
  throw StateError(detail::concat("MinibatchSource: chunk ", index, " of deserializer ", corpus,
                                  " (sweep ", sweep, ") is not loaded"));
}

MinibatchData MinibatchSource::pack(size_t stream, const std::vector<Piece>& pieces,
                                    bool sweep_end) const {
  const StreamInformation& info = streams_[stream];
  const Corpus& corpus = corpora_[stream_corpus_[stream]];
  size_t local = stream - corpus.first_stream, dim = info.sample_shape.total_size();

  // Randomized pieces lie anywhere in the chunks and miss every cache, and each level of a
  // piece's data (its offsets, then its values) needs the one before. Each level's loads are
  // started for all pieces before any is used, so their latencies overlap instead of adding up
  // (one at a time they took most of a minibatch's reading).
  struct Slice {
    const Chunk* chunk = nullptr;
    size_t index = 0;              // the sequence in the chunk
    size_t first = 0, length = 0;  // samples of the stream in the chunk
  };
  const size_t batch = pieces.size();
  std::vector<Slice> slices(batch);
  for (size_t b = 0; b < batch; ++b) {
    const Piece& p = pieces[b];
    if (p.unit.sequence == kNoUnit) continue;
    const Location loc = corpus.locate(p.unit.sequence);
    slices[b].chunk = &chunk(p.sweep, stream_corpus_[stream], loc.chunk);
    slices[b].index = loc.index;
    prefetch_to_cache(&slices[b].chunk->streams[local].sample_begin[loc.index], 2 * sizeof(size_t));
  }
  size_t max_length = 0, samples = 0;
  for (size_t b = 0; b < batch; ++b) {
    Slice& slice = slices[b];
    const Piece& p = pieces[b];
    if (slice.chunk == nullptr) continue;
    const StreamChunkData& d = slice.chunk->streams[local];
    size_t length = d.length(slice.index);
    if (!p.whole) {
      LOOM_CHECK(length == sequence_length_[p.unit.sequence], DataError,
                 config_.frame_mode ? "frame_mode" : "truncation_length", ": stream '", info.name,
                 "' has ", length,
                 " samples in sequence (id = ", slice.chunk->sequences[slice.index].key,
                 "), which has ", sequence_length_[p.unit.sequence], "; ",
                 config_.frame_mode ? "frame mode" : "truncated BPTT",
                 " needs every stream at full length");
      length = p.length;
    }
    slice.first = d.sample_begin[slice.index] + p.first;
    slice.length = length;
    max_length = std::max(max_length, length);
    samples += length;
    if (info.is_sparse())
      prefetch_to_cache(&d.nnz_begin[slice.first], (length + 1) * sizeof(size_t));
  }

  // A stream of samples, each piece one sample, is a batch (no piece is missing).
  const bool samples_batch =
      corpus.deserializer->holds_samples(local) && samples == batch && max_length == 1;
  // Dense sequences are packed (rows in the layout's order, no padding); a batch is the layout
  // of sequences of one sample, whose rows are in the minibatch's order.
  std::vector<size_t> lengths(batch);
  std::vector<bool> begins(batch);
  for (size_t b = 0; b < batch; ++b) {
    lengths[b] = slices[b].length;
    begins[b] = pieces[b].begins;  // false: continues its sequence (truncated BPTT)
  }
  SequenceLayout layout = SequenceLayout::from_lengths(std::move(lengths), std::move(begins));
  // Dense samples keep their shape ([1,28,28] images); CSR needs one row per sample.
  NDShape shape =
      info.is_sparse() ? NDShape{batch, max_length, dim} : info.sample_shape.prepend(layout.rows());
  NDArrayView data = dispatch(info.dtype, [&](auto zero) {
    using T = decltype(zero);
    if (!info.is_sparse()) {
      for (const Slice& slice : slices) {
        if (slice.length == 0) continue;
        const auto bytes =
            slice.chunk->streams[local].value_bytes<T>(slice.first * dim, slice.length * dim);
        prefetch_to_cache(bytes.data(), bytes.size());
      }
      NDArrayView view = NDArrayView::uninitialized(info.dtype, shape);
      T* out = view.data<T>();
      auto copy = [&](size_t begin, size_t end) {
        for (size_t b = begin; b < end; ++b) {
          const Slice& slice = slices[b];
          for (size_t t = 0; t < slice.length; ++t)
            slice.chunk->streams[local].copy_values((slice.first + t) * dim, dim,
                                                    out + layout.row(b, t) * dim);
        }
      };
      // Read in the caller's thread (sync, or a read-ahead not yet started), the copy runs on
      // compute's threads, which would wait for it anyway.
      if (on_background_thread())
        copy(0, batch);
      else
        kernels::detail::parallel_for(batch, samples * dim, copy);
      return view;
    }
    size_t nnz = 0;
    for (const Slice& slice : slices) {
      if (slice.length == 0) continue;
      const StreamChunkData& d = slice.chunk->streams[local];
      const size_t begin = d.nnz_begin[slice.first], end = d.nnz_begin[slice.first + slice.length];
      prefetch_to_cache(d.indices.data() + begin, (end - begin) * sizeof(int32_t));
      prefetch_to_cache(d.values<T>().data() + begin, (end - begin) * sizeof(T));
      nnz += end - begin;
    }
    LOOM_CHECK(nnz <= size_t(std::numeric_limits<int32_t>::max()), DataError, "stream '", info.name,
               "': a minibatch of more than 2^31 non-zero values");
    // One CSR row per (sequence, position); padding rows stay empty.
    std::vector<int32_t> offsets(batch * max_length + 1, 0), columns;
    std::vector<T> values;
    columns.reserve(nnz);
    values.reserve(nnz);
    size_t row = 0;
    for (const Slice& slice : slices) {
      for (size_t t = 0; t < max_length; ++t, ++row) {
        if (t < slice.length) {
          const StreamChunkData& d = slice.chunk->streams[local];
          const size_t s = slice.first + t;
          columns.insert(columns.end(), d.indices.begin() + d.nnz_begin[s],
                         d.indices.begin() + d.nnz_begin[s + 1]);
          values.insert(values.end(), d.values<T>().begin() + d.nnz_begin[s],
                        d.values<T>().begin() + d.nnz_begin[s + 1]);
        }
        offsets[row + 1] = static_cast<int32_t>(columns.size());
      }
    }
    return NDArrayView::sparse_csr<T>(shape, std::move(offsets), std::move(columns), values);
  });
  if (samples_batch)
    return MinibatchData{Value(data.reshaped(NDShape{batch}.append(info.sample_shape)), false),
                         batch, samples, sweep_end};
  if (!info.is_sparse())
    return MinibatchData{Value::packed(std::move(data), std::move(layout)), batch, samples,
                         sweep_end};
  return MinibatchData{
      Value(std::move(data), true, NDMask::of_lengths(layout.lengths, max_length, layout.begins)),
      batch, samples, sweep_end};
}

Dictionary MinibatchSource::get_checkpoint_state() const {
  const Place& at = delivered_;
  Dictionary d;
  d[kPositionKey] = uint64_t{at.position};
  if (config_.truncation_length == 0) return d;
  d[kTimelineKey] = uint64_t{at.timeline};
  DictionaryVector slots;
  for (const Slot& slot : at.slots) {
    Dictionary s;
    if (slot.unit.sequence != kNoUnit) {
      s["sequence"] = uint64_t{slot.unit.sequence};
      s["length"] = uint64_t{slot.unit.length};
      s["read"] = uint64_t{slot.read};
      s["sweep"] = uint64_t{slot.sweep};
    }
    slots.emplace_back(s);
  }
  d[kSlotsKey] = std::move(slots);
  return d;
}

void MinibatchSource::restore_from_checkpoint(const Dictionary& state) {
  discard_ahead();
  restore(state);
  delivered_ = place_;
}

void MinibatchSource::restore(const Dictionary& state) {
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
    place_.position = position;
    return;
  }
  const size_t timeline = static_cast<size_t>(state.get<uint64_t>(kTimelineKey));
  std::vector<Slot> slots;
  for (const DictionaryValue& v : state.get<DictionaryVector>(kSlotsKey)) {
    const Dictionary s(v.get<DictionaryMap>());
    Slot slot{{kNoUnit, 0, 0, 0}, 0, 0};
    if (s.contains("sequence")) {
      slot.unit = {size_t(s.get<uint64_t>("sequence")), 0, size_t(s.get<uint64_t>("length")), 0};
      slot.read = size_t(s.get<uint64_t>("read"));
      // States written before slots kept their sweep: the sweep of the timeline position.
      slot.sweep = s.contains("sweep") ? size_t(s.get<uint64_t>("sweep")) : timeline / sweep_size_;
      LOOM_CHECK(slot.unit.sequence < sequence_length_.size() &&
                     sequence_length_[slot.unit.sequence] == slot.unit.length &&
                     slot.read < slot.unit.length,
                 ArgumentError, "MinibatchSource::restore_from_checkpoint: a slot's sequence ",
                 slot.unit.sequence, " of length ", slot.unit.length,
                 " is not in this data; was the checkpoint taken with other data?");
    }
    slots.push_back(slot);
  }
  move_to(timeline);
  place_.slots = std::move(slots);
  place_.position = position;
}

void MinibatchSource::move_to(size_t timeline) {
  // Rebuilds the chunk order of the position's sweep, passes its windows before the position by
  // their samples and walks the units of the position's window: sweeps hold whole units, so the
  // position lies on a unit boundary. No data is read.
  const size_t sweep = timeline / sweep_size_, offset = timeline % sweep_size_;
  build_order(sweep);
  size_t window = 0, walked = 0;
  for (;; ++window) {
    size_t samples = 0;
    for (size_t r = order_.window_begin[window]; r < order_.window_begin[window + 1]; ++r)
      samples += chunk_samples_[order_.chunks[r]];
    if (walked + samples > offset) break;
    walked += samples;
  }
  build_window(window);
  size_t cursor = 0;
  while (walked < offset) walked += window_.units[cursor++].length;
  if (walked != offset) {
    build_order(place_.sweep);
    build_window(place_.window);
  }
  LOOM_CHECK(walked == offset, ArgumentError, "MinibatchSource::restore_from_checkpoint: position ",
             timeline, " is not at a sequence boundary of this data (sweep of ", sweep_size_,
             " samples); was the checkpoint taken with other data or options?");
  resident_.clear();
  stats_.resident = 0;
  place_ = Place{place_.position, timeline, sweep, window, cursor, {}};
}

}  // namespace loom
