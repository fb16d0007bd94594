#include "loom/distributed/communicator.h"

// MPI's C API only: the deprecated C++ bindings would add libmpi_cxx to every program's link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include <unistd.h>

namespace loom::distributed {

namespace {

// Tag of the messages by which workers that timed out in a collective find each other.
constexpr int kLivenessTag = 7001;
// The largest all-reduce: larger tensors are reduced in place in pieces of this size. Many
// all-reduces in flight at once progress together: 16 M floats in 1 MiB pieces took 110-150 ms
// where one MPI_Allreduce took 200-245 ms and one MPI_Iallreduce 330-390 ms (2 workers, CI
// machine).
constexpr size_t kPieceBytes = size_t{1} << 20;
// Tensors below this size travel packed in buckets of up to this size; larger ones are
// reduced where they are. Small enough that a backward pass fills several buckets, which
// start while it goes on (seed 002's convnet, 395 KB of gradients: the output layers' travel
// during the convolutions' backward); large enough that a bucket carries some thousand biases.
constexpr size_t kBucketBytes = size_t{64} << 10;
// How long a collective is polled back to back (MPI progresses a non-blocking collective only
// inside MPI calls, and MPI's blocking calls spin too) before the polls leave pauses.
constexpr auto kSpinTime = std::chrono::milliseconds(100);
constexpr auto kPause = std::chrono::microseconds(200);

std::string mpi_message(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, const char* call) {
  LOOM_CHECK(code == MPI_SUCCESS, CommunicationError, call, " failed: ", mpi_message(code));
}

int as_int(size_t n, const char* what) {
  LOOM_CHECK(n <= size_t(std::numeric_limits<int>::max()), ArgumentError, what, ": ", n,
             " elements are more than one MPI call carries (2^31 - 1)");
  return static_cast<int>(n);
}

std::string ranks_text(const std::vector<size_t>& ranks) {
  std::string s;
  for (size_t r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

struct Communicator::Mpi {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<MPI_Request> pending;  // the requests of the collective in progress
  // Buffers of an AllReduceSum destroyed in the middle of a round, which MPI may still write.
  std::vector<std::shared_ptr<void>> abandoned;
  bool initialized_here = false;  // else the program did, and ends MPI itself
};

Communicator::Communicator() {
  int initialized = 0;  // by the program itself, which then owns MPI
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized && !launched_by_mpi()) return;
  mpi_ = std::make_unique<Mpi>();
  if (!initialized) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    mpi_->initialized_here = true;
  }
  // Loom's own communicator, so its tags never meet the program's messages; errors come back
  // as codes (and become exceptions) instead of ending the process.
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->comm), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(mpi_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(mpi_->comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(mpi_->comm, &size), "MPI_Comm_size");
  rank_ = static_cast<size_t>(rank);
  workers_ = static_cast<size_t>(size);
}

Communicator::~Communicator() = default;

std::shared_ptr<Communicator> mpi_communicator() {
  static std::mutex mutex;
  static std::shared_ptr<Communicator> world;
  std::lock_guard lock(mutex);
  if (!world) {
    world.reset(new Communicator());
    // A program that never calls finalize() still ends MPI cleanly (mpirun reports a worker
    // that exits without MPI_Finalize as failed).
    if (world->mpi_) std::atexit([] { world->finalize(); });
  }
  return world;
}

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  LOOM_CHECK(timeout.count() > 0, ArgumentError, "Communicator: the time limit must be > 0, got ",
             timeout.count(), " ms");
  timeout_ = timeout;
}

void Communicator::begin(const char* what) {
  LOOM_CHECK(!finalized_, StateError, "Communicator::", what, ": the communicator was finalized");
  LOOM_CHECK(!failed_, StateError, "Communicator::", what,
             ": the communicator failed earlier (a worker was lost, or a sum was left "
             "unfinished); restart the job");
  LOOM_CHECK(!in_flight_, StateError, "Communicator::", what,
             ": an AllReduceSum is under way; finish it first (every worker must call the "
             "collectives in the same order)");
  ++collectives_;
  started_ = std::chrono::steady_clock::now();
  if (mpi_) mpi_->pending.clear();
}

bool Communicator::test(const char* what) {
  auto& requests = mpi_->pending;
  int done = 0;
  const int code =
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
  if (code != MPI_SUCCESS) {
    failed_ = true;
    throw CommunicationError(detail::concat("Communicator::", what, " (collective ", collectives_,
                                            ") failed: ", mpi_message(code)));
  }
  return done != 0;
}

void Communicator::wait(const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout_;
  auto& requests = mpi_->pending;
  const auto spin_end = Clock::now() + kSpinTime;
  for (;;) {
    if (test(what)) break;
    const auto now = Clock::now();
    if (now >= deadline) lost(what);
    // A long wait (a slower worker) leaves the core to others.
    if (now >= spin_end) std::this_thread::sleep_for(kPause);
  }
  requests.clear();
  communication_time_ += Clock::now() - started_;
}

void Communicator::lost(const char* what) {
  // The collective cannot be cancelled; the communicator is unusable from here on.
  failed_ = true;
  // Every worker still alive times out in the same collective (within the skew of when they
  // entered it) and sends its sequence number to all others; who has not sent one within one
  // more time limit is lost.
  const int n = static_cast<int>(workers_);
  const int me = static_cast<int>(rank_);
  std::vector<uint64_t> received(workers_, 0);
  std::vector<MPI_Request> receives, sends;
  std::vector<int> peer_of_receive;
  const uint64_t sequence = collectives_;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    receives.emplace_back();
    peer_of_receive.push_back(p);
    MPI_Irecv(&received[p], 1, MPI_UINT64_T, p, kLivenessTag, mpi_->comm, &receives.back());
    sends.emplace_back();
    MPI_Isend(&sequence, 1, MPI_UINT64_T, p, kLivenessTag, mpi_->comm, &sends.back());
  }
  std::vector<bool> answered(workers_, false);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  size_t answers = 0;
  while (answers < receives.size() && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < receives.size(); ++i) {
      if (answered[peer_of_receive[i]]) continue;
      int done = 0;
      MPI_Test(&receives[i], &done, MPI_STATUS_IGNORE);
      if (done) {
        answered[peer_of_receive[i]] = true;
        ++answers;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<size_t> lost_workers;
  for (int p = 0; p < n; ++p)
    if (p != me && !answered[p]) lost_workers.push_back(static_cast<size_t>(p));
  const double seconds = double(timeout_.count()) / 1000.0;
  if (lost_workers.empty()) {
    std::string others;
    for (int p = 0; p < n; ++p)
      if (p != me && received[p] != sequence)
        others += detail::concat(others.empty() ? "" : ", ", "worker ", p, " is in collective ",
                                 received[p]);
    throw WorkerLostError(
        detail::concat("Communicator::", what, " (collective ", sequence, ") on worker ", rank_,
                       " did not complete in ", seconds,
                       " s although every worker answered: the workers called different "
                       "collectives (",
                       others.empty() ? "all in this one" : others,
                       "); every worker must call the same ones in the same order"),
        {});
  }
  throw WorkerLostError(
      detail::concat("Communicator::", what, " (collective ", sequence, ") on worker ", rank_,
                     " of ", workers_, ": lost worker", lost_workers.size() > 1 ? "s " : " ",
                     ranks_text(lost_workers), ": it did not take part within ", seconds,
                     " s and did not answer since (it has stopped or hangs); the job cannot "
                     "continue, restart it from the last checkpoint"),
      lost_workers);
}

void Communicator::barrier() {
  begin("barrier");
  if (!mpi_) return;
  mpi_->pending.emplace_back();
  check_mpi(MPI_Ibarrier(mpi_->comm, &mpi_->pending.back()), "MPI_Ibarrier");
  wait("barrier");
}

void Communicator::start_all_reduce(void* data, size_t count, DataType dtype) {
  mpi_->pending.emplace_back();
  const MPI_Datatype type = dtype == DataType::Float32 ? MPI_FLOAT : MPI_DOUBLE;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, as_int(count, "all_reduce_sum"), type, MPI_SUM,
                           mpi_->comm, &mpi_->pending.back()),
            "MPI_Iallreduce");
  const double share = 2.0 * double(workers_ - 1) / double(workers_);
  bytes_sent_ += uint64_t(share * double(count * size_of(dtype)));
}

void Communicator::all_reduce_sum(std::span<NDArrayView> tensors) {
  std::vector<AllReduceSum::Entry> entries;
  for (const auto& t : tensors) {
    // Checked before the collective starts: a round left half given fails the communicator.
    LOOM_CHECK(!t.is_sparse(), ArgumentError,
               "Communicator::all_reduce_sum: sparse tensors are not supported; densify first");
    entries.push_back({t.dtype(), t.size()});
  }
  // A plan of its own each call: a caller that sums the same tensors every step keeps an
  // AllReduceSum instead.
  AllReduceSum sum(*this, std::move(entries));
  for (size_t i = 0; i < tensors.size(); ++i) sum.ready(i, tensors[i]);
  sum.finish();
}

AllReduceSum::AllReduceSum(Communicator& communicator, std::vector<Entry> entries)
    : communicator_(communicator),
      entries_(std::move(entries)),
      bucket_of_(entries_.size()),
      offset_of_(entries_.size()),
      buckets_(std::make_shared<std::vector<Bucket>>()),
      tensors_(entries_.size()) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    const size_t bytes = e.size * size_of(e.dtype);
    auto& b = *buckets_;
    const bool joins = !b.empty() && b.back().packed && bytes < kBucketBytes &&
                       entries_[b.back().first].dtype == e.dtype &&
                       b.back().data.size() + bytes <= kBucketBytes;
    if (joins) {
      b.back().end = i + 1;
    } else {
      b.push_back({i, i + 1, bytes < kBucketBytes, {}});
    }
    offset_of_[i] = b.back().data.size();
    if (b.back().packed) b.back().data.resize(offset_of_[i] + bytes);
    bucket_of_[i] = b.size() - 1;
  }
  for (const auto& b : *buckets_) missing_.push_back(b.end - b.first);
}

AllReduceSum::~AllReduceSum() {
  if (given_ == 0) return;
  communicator_.in_flight_ = false;
  if (!communicator_.mpi_) return;
  // A round left unfinished: the workers' collectives no longer match, and requests in flight
  // cannot be cancelled (MPI forbids it for collectives). Their buffers stay with the
  // communicator, which no longer runs collectives.
  communicator_.failed_ = true;
  communicator_.mpi_->abandoned.push_back(buckets_);
  for (auto& t : tensors_)
    if (t) communicator_.mpi_->abandoned.push_back(std::make_shared<NDArrayView>(*t));
}

void AllReduceSum::ready(size_t i, const NDArrayView& tensor) {
  LOOM_CHECK(i < entries_.size(), ArgumentError, "AllReduceSum::ready: tensor ", i, " of ",
             entries_.size());
  LOOM_CHECK(!tensors_[i], StateError, "AllReduceSum::ready: tensor ", i,
             " was given already in this round");
  LOOM_CHECK(!tensor.is_sparse(), ArgumentError,
             "AllReduceSum::ready: sparse tensors are not supported; densify first");
  LOOM_CHECK(tensor.dtype() == entries_[i].dtype && tensor.size() == entries_[i].size,
             ArgumentError, "AllReduceSum::ready: tensor ", i, " is ", to_string(tensor.dtype()),
             " with ", tensor.size(), " elements; the plan has ", to_string(entries_[i].dtype),
             " with ", entries_[i].size);
  const auto start = std::chrono::steady_clock::now();
  if (given_ == 0) {
    communicator_.begin("all_reduce_sum");
    communicator_.in_flight_ = true;
  }
  tensors_[i] = tensor;
  ++given_;
  if (!communicator_.mpi_) return;  // one worker: the sum is the tensor
  Bucket& b = (*buckets_)[bucket_of_[i]];
  if (b.packed)
    std::memcpy(b.data.data() + offset_of_[i], tensor.raw_data(),
                tensor.size() * size_of(tensor.dtype()));
  --missing_[bucket_of_[i]];
  start_ready_buckets();
  communicator_.test("all_reduce_sum");
  communicator_.communication_time_ += std::chrono::steady_clock::now() - start;
}

void AllReduceSum::start_ready_buckets() {
  for (; started_ < buckets_->size() && missing_[started_] == 0; ++started_) {
    Bucket& b = (*buckets_)[started_];
    const DataType dtype = entries_[b.first].dtype;
    if (b.packed) {
      communicator_.start_all_reduce(b.data.data(), b.data.size() / size_of(dtype), dtype);
      continue;
    }
    NDArrayView& t = *tensors_[b.first];
    const size_t element = size_of(dtype), piece = kPieceBytes / element;
    auto* data = static_cast<std::byte*>(t.raw_data());
    for (size_t first = 0; first < t.size(); first += piece)
      communicator_.start_all_reduce(data + first * element, std::min(piece, t.size() - first),
                                     dtype);
  }
}

void AllReduceSum::finish() {
  LOOM_CHECK(given_ == entries_.size(), StateError,
             "AllReduceSum::finish: ", entries_.size() - given_, " of ", entries_.size(),
             " tensors are not ready");
  if (entries_.empty()) communicator_.begin("all_reduce_sum");  // still a collective
  given_ = 0;
  if (communicator_.mpi_) {
    communicator_.started_ = std::chrono::steady_clock::now();
    communicator_.wait("all_reduce_sum");
    for (size_t j = 0; j < entries_.size(); ++j) {
      const Bucket& b = (*buckets_)[bucket_of_[j]];
      if (b.packed)
        std::memcpy(tensors_[j]->raw_data(), b.data.data() + offset_of_[j],
                    entries_[j].size * size_of(entries_[j].dtype));
    }
  }
  communicator_.in_flight_ = false;
  started_ = 0;
  for (size_t k = 0; k < buckets_->size(); ++k)
    missing_[k] = (*buckets_)[k].end - (*buckets_)[k].first;
  for (auto& t : tensors_) t.reset();
}

void Communicator::all_reduce_sum(std::span<double> values) {
  NDArrayView view =
      NDArrayView::from_vector<double>(NDShape{values.size()}, std::span<const double>(values));
  all_reduce_sum(std::span<NDArrayView>(&view, 1));
  std::memcpy(values.data(), view.data<double>(), values.size() * sizeof(double));
}

namespace {
// MPI's counts and displacements of blocks of the given sizes laid one after another.
struct Layout {
  std::vector<int> counts, displacements;
  size_t total = 0;
};
Layout layout_of(std::span<const size_t> bytes, const char* what) {
  Layout l;
  for (size_t b : bytes) {
    l.counts.push_back(as_int(b, what));
    l.displacements.push_back(as_int(l.total, what));
    l.total += b;
  }
  return l;
}
}  // namespace

void Communicator::all_to_all(std::span<const std::byte> send, std::span<const size_t> send_bytes,
                              std::span<std::byte> recv, std::span<const size_t> recv_bytes) {
  const Layout out = layout_of(send_bytes, "all_to_all"), in = layout_of(recv_bytes, "all_to_all");
  LOOM_CHECK(send_bytes.size() == workers_ && recv_bytes.size() == workers_, ArgumentError,
             "Communicator::all_to_all: ", send_bytes.size(), " blocks to send and ",
             recv_bytes.size(), " to receive; expected one per worker (", workers_, ")");
  LOOM_CHECK(out.total == send.size() && in.total == recv.size(), ArgumentError,
             "Communicator::all_to_all: the blocks add up to ", out.total, " bytes to send and ",
             in.total, " to receive; the buffers hold ", send.size(), " and ", recv.size());
  LOOM_CHECK(send_bytes[rank_] == recv_bytes[rank_], ArgumentError,
             "Communicator::all_to_all: this worker's own block is ", send_bytes[rank_],
             " bytes to send but ", recv_bytes[rank_], " to receive");
  begin("all_to_all");
  if (!mpi_) {
    std::memcpy(recv.data(), send.data(), send.size());
    return;
  }
  mpi_->pending.emplace_back();
  check_mpi(MPI_Ialltoallv(send.data(), out.counts.data(), out.displacements.data(), MPI_BYTE,
                           recv.data(), in.counts.data(), in.displacements.data(), MPI_BYTE,
                           mpi_->comm, &mpi_->pending.back()),
            "MPI_Ialltoallv");
  bytes_sent_ += out.total - send_bytes[rank_];
  wait("all_to_all");
}

void Communicator::all_gather(std::span<std::byte> blocks, std::span<const size_t> bytes) {
  const Layout l = layout_of(bytes, "all_gather");
  LOOM_CHECK(bytes.size() == workers_ && l.total == blocks.size(), ArgumentError,
             "Communicator::all_gather: ", bytes.size(), " blocks of ", l.total,
             " bytes in all; expected one per worker (", workers_, ") filling the buffer's ",
             blocks.size());
  begin("all_gather");
  if (!mpi_) return;
  mpi_->pending.emplace_back();
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, blocks.data(), l.counts.data(),
                            l.displacements.data(), MPI_BYTE, mpi_->comm, &mpi_->pending.back()),
            "MPI_Iallgatherv");
  bytes_sent_ += uint64_t(bytes[rank_]) * (workers_ - 1);
  wait("all_gather");
}

std::vector<std::vector<std::byte>> Communicator::all_gather_bytes(
    std::span<const std::byte> mine) {
  std::vector<uint64_t> sizes(workers_, 0);
  sizes[rank_] = mine.size();
  all_gather(std::as_writable_bytes(std::span<uint64_t>(sizes)),
             std::vector<size_t>(workers_, sizeof(uint64_t)));
  const std::vector<size_t> bytes(sizes.begin(), sizes.end());
  const Layout l = layout_of(bytes, "all_gather_bytes");
  std::vector<std::byte> blocks(l.total);
  std::memcpy(blocks.data() + l.displacements[rank_], mine.data(), mine.size());
  all_gather(blocks, bytes);
  std::vector<std::vector<std::byte>> result;
  for (size_t j = 0; j < workers_; ++j) {
    const auto* first = blocks.data() + l.displacements[j];
    result.emplace_back(first, first + bytes[j]);
  }
  return result;
}

WorkerDescriptor Communicator::current_worker() const {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  return {.global_rank = rank_, .host_id = host};
}

std::vector<WorkerDescriptor> Communicator::workers() {
  const WorkerDescriptor me = current_worker();
  if (workers_ == 1) return {me};
  const auto hosts = all_gather_bytes(std::as_bytes(std::span(me.host_id)));
  std::vector<WorkerDescriptor> all;
  for (size_t j = 0; j < hosts.size(); ++j)
    all.push_back(
        {.global_rank = j,
         .host_id = std::string(reinterpret_cast<const char*>(hosts[j].data()), hosts[j].size())});
  return all;
}

void Communicator::finalize() {
  if (!mpi_ || finalized_) return;
  finalized_ = true;
  int ended = 0;  // the program that initialized MPI may have ended it already
  check_mpi(MPI_Finalized(&ended), "MPI_Finalized");
  if (ended) return;
  if (failed_) MPI_Abort(MPI_COMM_WORLD, 1);
  check_mpi(MPI_Comm_free(&mpi_->comm), "MPI_Comm_free");
  if (mpi_->initialized_here) check_mpi(MPI_Finalize(), "MPI_Finalize");
}

}  // namespace loom::distributed
