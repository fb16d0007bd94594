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

  // The time limit of each collective (> 0).
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }

  void barrier();
  // Sums the tensors over all workers, in place. Small tensors travel packed together in
  // buckets of the same data type; large ones are reduced where they are, in pieces; all at
  // once. Every worker must pass tensors of the same data types and sizes in the same order.
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
  // The time this worker has spent in collectives, from the start of each to its end: the
  // transfers and the waits for slower workers.
  std::chrono::nanoseconds communication_time() const { return communication_time_; }

  // Ends MPI (MPI_Finalize, when Loom initialized it); later collectives are a StateError. After a
  // WorkerLostError it aborts the whole job instead (MPI_Abort), since MPI cannot shut down
  // with a worker gone. Does nothing for a single worker started without a launcher, or when
  // called again.
  void finalize();

 private:
  friend std::shared_ptr<Communicator> mpi_communicator();
  Communicator();

  struct Mpi;
  // Counts a collective about to start; StateError once the communicator failed or ended.
  void begin(const char* what);
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
};

// The process's communicator over all workers (MPI_COMM_WORLD), made on first use.
std::shared_ptr<Communicator> mpi_communicator();

// True when the process was started by an MPI launcher (mpirun sets OMPI_COMM_WORLD_SIZE,
// MPICH's hydra PMI_SIZE); otherwise Loom never initializes MPI.
bool launched_by_mpi();

}  // namespace loom::distributed
