// Communicator: the workers of a distributed training run and the collectives between them,
// over MPI (CNTK's DistributedCommunicator / MPICommunicator). docs/distributed.md has the
// design.
//
// A program started by mpirun (or another MPI launcher) is one worker of num_workers(); MPI
// is initialized when mpi_communicator() is first called, for the calling thread
// (MPI_THREAD_FUNNELED: only that thread may call the collectives). A program that initialized
// MPI itself keeps it: Loom uses it and leaves MPI_Finalize to the program. A program started
// on its own is the only worker: it never initializes MPI, needs no MPI daemon, and every
// collective returns its input unchanged.
//
// Every worker must call the same collectives in the same order. Each collective has a time
// limit: when it has not completed in that time, the worker asks the others whether they are
// still there and, within one more time limit, throws WorkerLostError naming the workers that
// did not answer. A worker that died (or hangs) thus makes the others fail within twice the
// time limit instead of waiting forever. After such an error the communicator is unusable
// (StateError) and finalize() aborts the job.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/ndarray_view.h"

namespace loom::distributed {

// MPI reported an error in a call.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

// A collective did not complete within the time limit and some workers did not answer.
class WorkerLostError : public CommunicationError {
 public:
  WorkerLostError(const std::string& message, std::vector<size_t> lost)
      : CommunicationError(message), lost_(std::move(lost)) {}
  // The ranks of the workers that did not answer.
  const std::vector<size_t>& lost_workers() const { return lost_; }

 private:
  std::vector<size_t> lost_;
};

// A worker of the job (CNTK's WorkerDescriptor): its rank and the name of its host.
struct WorkerDescriptor {
  size_t global_rank = 0;
  std::string host_id;
};

class Communicator {
 public:
  // The default time limit of one collective.
  static constexpr std::chrono::seconds kDefaultTimeout{300};

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  size_t rank() const { return rank_; }
  size_t num_workers() const { return workers_; }
  bool is_main() const { return rank_ == 0; }
  // This worker, and every worker in rank order (a collective: every worker calls it).
  WorkerDescriptor current_worker() const;
  std::vector<WorkerDescriptor> workers();

  // The time limit of each collective (> 0).
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }

  void barrier();
  // Sums the tensors over all workers, in place (an AllReduceSum given them all at once).
  // Every worker must pass tensors of the same data types and sizes in the same order.
  void all_reduce_sum(std::span<NDArrayView> tensors);
  // Sums the values over all workers, in place.
  void all_reduce_sum(std::span<double> values);
  // Sends worker j the j-th block of `send` and receives into the j-th block of `recv` what
  // worker j sends to this one; blocks lie one after another, send_bytes[j] and recv_bytes[j]
  // long, and the sizes must agree pairwise (this worker's own block is copied).
  void all_to_all(std::span<const std::byte> send, std::span<const size_t> send_bytes,
                  std::span<std::byte> recv, std::span<const size_t> recv_bytes);
  // Fills `blocks` (worker j's block, bytes[j] long, after worker j - 1's) with every worker's
  // block; this worker's must be in place. Every worker passes the same sizes.
  void all_gather(std::span<std::byte> blocks, std::span<const size_t> bytes);
  // Every worker's bytes, when the sizes are not known beforehand.
  std::vector<std::vector<std::byte>> all_gather_bytes(std::span<const std::byte> mine);

  // The bytes this worker has sent, counted as a bandwidth-optimal algorithm sends them: an
  // all-reduce of B bytes 2(N-1)/N B, an all-to-all the blocks for the other workers, an
  // all-gather its own block N-1 times.
  uint64_t bytes_sent() const { return bytes_sent_; }
  // The time this worker has spent in collectives: the transfers and the waits for slower
  // workers that the worker could not hide behind its own work (an AllReduceSum counts the
  // time of its calls, not the computation between them).
  std::chrono::nanoseconds communication_time() const { return communication_time_; }

  // Ends MPI (MPI_Finalize, when Loom initialized it); later collectives are a StateError. After a
  // WorkerLostError it aborts the whole job instead (MPI_Abort), since MPI cannot shut down
  // with a worker gone. Does nothing for a single worker started without a launcher, or when
  // called again.
  void finalize();

 private:
  friend std::shared_ptr<Communicator> mpi_communicator();
  friend class AllReduceSum;
  Communicator();

  struct Mpi;
  // Counts a collective about to start; StateError once the communicator failed or ended, or
  // while an AllReduceSum is under way.
  void begin(const char* what);
  // Starts summing count values of dtype at data over all workers, in place.
  void start_all_reduce(void* data, size_t count, DataType dtype);
  // One MPI_Testall of the pending requests (MPI progresses them only inside its calls);
  // true when all are complete.
  bool test(const char* what);
  // Waits (MPI_Test polling) for the pending requests of the collective `what` until the time
  // limit, then finds the lost workers and throws WorkerLostError.
  void wait(const char* what);
  [[noreturn]] void lost(const char* what);

  std::unique_ptr<Mpi> mpi_;  // null for a single worker without a launcher
  size_t rank_ = 0, workers_ = 1;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
  uint64_t bytes_sent_ = 0;
  std::chrono::nanoseconds communication_time_{0};
  std::chrono::steady_clock::time_point started_;  // of the current collective
  uint64_t collectives_ = 0;                       // how many this worker has started
  bool failed_ = false, finalized_ = false;
  bool in_flight_ = false;  // an AllReduceSum has started and not finished
};

// A sum over all workers, in place, of a fixed list of tensors that become ready one at a
// time, such as the gradients of a backward pass: the transfers of the first ones overlap with
// the work that makes the others ready. Consecutive tensors of one data type under 64 KiB
// travel packed in buckets of up to 64 KiB; larger ones are reduced where they are, in pieces
// of up to 1 MiB.
// A bucket starts as soon as its last tensor is ready and every bucket before it has started
// (MPI needs the same order on every worker). Each round gives every tensor, then finish();
// an AllReduceSum is used round after round. Every worker must plan the same entries, and
// call the same collectives before and after each round.
class AllReduceSum {
 public:
  struct Entry {
    DataType dtype;
    size_t size;  // elements
  };
  // The communicator must outlive the AllReduceSum.
  AllReduceSum(Communicator& communicator, std::vector<Entry> entries);
  AllReduceSum(const AllReduceSum&) = delete;
  AllReduceSum& operator=(const AllReduceSum&) = delete;
  // A round left unfinished (an exception between ready() and finish()) leaves MPI writing
  // into the buffers: they are kept, and the communicator fails from then on.
  ~AllReduceSum();

  // Tensor i of the round is ready (dense, of entry i's data type and size): its bucket may
  // start. It receives the sum, and must not change or go away until finish(). The first
  // call of a round starts the collective; every call lets MPI progress.
  void ready(size_t i, const NDArrayView& tensor);
  bool is_ready(size_t i) const { return tensors_[i].has_value(); }
  // Whether the round has started (some tensor is ready).
  bool started() const { return given_ > 0; }
  // Waits for the sums (every tensor must be ready) and writes them into the tensors; the
  // next ready() starts a new round.
  void finish();

 private:
  struct Bucket {
    size_t first, end;  // entries [first, end)
    bool packed;        // small tensors copied into data; else one tensor reduced in place
    std::vector<std::byte> data;
  };
  // Starts the buckets, in order, whose tensors are all ready.
  void start_ready_buckets();

  Communicator& communicator_;
  std::vector<Entry> entries_;
  std::vector<size_t> bucket_of_, offset_of_;     // per entry: its bucket, its bytes' offset there
  std::shared_ptr<std::vector<Bucket>> buckets_;  // shared with the communicator if abandoned
  std::vector<std::optional<NDArrayView>> tensors_;  // this round's
  std::vector<size_t> missing_;                      // per bucket, tensors not yet ready
  size_t given_ = 0, started_ = 0;                   // tensors given, buckets started
};

// The process's communicator over all workers (MPI_COMM_WORLD), made on first use.
std::shared_ptr<Communicator> mpi_communicator();

// True when the process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE,
// MPICH's hydra PMI_SIZE); otherwise Loom never initializes MPI.
bool launched_by_mpi();

}  // namespace loom::distributed
