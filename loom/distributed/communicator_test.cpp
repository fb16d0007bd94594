#include "loom/distributed/communicator.h"

#include <gtest/gtest.h>

#include <vector>

namespace loom::distributed {
namespace {

// A program started without mpirun is the only worker and never starts MPI; the collectives
// give back what they were given.
TEST(CommunicatorTest, WithoutALauncherTheProcessIsTheOnlyWorker) {
  ASSERT_FALSE(launched_by_mpi()) << "run the unit tests without mpirun";
  auto comm = mpi_communicator();
  EXPECT_EQ(comm, mpi_communicator());  // one per process
  EXPECT_EQ(comm->rank(), 0u);
  EXPECT_EQ(comm->num_workers(), 1u);
  EXPECT_TRUE(comm->is_main());
  const WorkerDescriptor me = comm->current_worker();
  EXPECT_EQ(me.global_rank, 0u);
  EXPECT_FALSE(me.host_id.empty());
  const std::vector<WorkerDescriptor> all = comm->workers();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].host_id, me.host_id);
  comm->barrier();

  std::vector<NDArrayView> tensors{NDArrayView::from_vector<float>({2}, {1.5f, -2.0f}),
                                   NDArrayView::from_vector<double>({1}, {3.0})};
  comm->all_reduce_sum(tensors);
  EXPECT_EQ(tensors[0].to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(tensors[1].to_vector<double>(), (std::vector<double>{3.0}));
  double values[2] = {4.0, 5.0};
  comm->all_reduce_sum(values);
  EXPECT_EQ(values[0], 4.0);

  const std::vector<std::byte> out{std::byte{1}, std::byte{2}};
  std::vector<std::byte> in(2);
  const size_t two[1] = {2};
  comm->all_to_all(out, two, in, two);
  EXPECT_EQ(in, out);
  EXPECT_EQ(comm->all_gather_bytes(out), (std::vector<std::vector<std::byte>>{out}));
  EXPECT_EQ(comm->bytes_sent(), 0u);  // nothing left the process
}

TEST(CommunicatorTest, RefusesBadArguments) {
  auto comm = mpi_communicator();
  EXPECT_THROW(comm->set_timeout(std::chrono::milliseconds(0)), ArgumentError);
  std::vector<NDArrayView> sparse{NDArrayView::sparse_csr<float>({2, 2}, {0, 1, 1}, {0}, {1.0f})};
  EXPECT_THROW(comm->all_reduce_sum(sparse), ArgumentError);
  const std::vector<std::byte> out(2);
  std::vector<std::byte> in(1);
  const size_t two[1] = {2}, one[1] = {1};
  EXPECT_THROW(comm->all_to_all(out, two, in, one), ArgumentError);  // own block differs
  EXPECT_THROW(comm->all_to_all(out, one, in, one), ArgumentError);  // sizes miss the buffer
  EXPECT_THROW(comm->all_gather(in, two), ArgumentError);
}

// An AllReduceSum takes its tensors in any order, round after round; while a round is under
// way no other collective may start, and a round cannot finish before every tensor is ready.
TEST(CommunicatorTest, AllReduceSumRoundsAndTheirRules) {
  auto comm = mpi_communicator();
  AllReduceSum sum(*comm, {{DataType::Float32, 2}, {DataType::Float64, 1}, {DataType::Float32, 3}});
  for (int round = 0; round < 2; ++round) {
    NDArrayView a = NDArrayView::from_vector<float>({2}, {1.0f, 2.0f});
    NDArrayView b = NDArrayView::from_vector<double>({1}, {3.0});
    NDArrayView c = NDArrayView::from_vector<float>({3}, {4.0f, 5.0f, 6.0f});
    EXPECT_FALSE(sum.started());
    sum.ready(2, c);
    EXPECT_TRUE(sum.started());
    EXPECT_TRUE(sum.is_ready(2));
    EXPECT_FALSE(sum.is_ready(0));
    EXPECT_THROW(sum.ready(2, c), StateError);     // twice in a round
    EXPECT_THROW(sum.ready(0, b), ArgumentError);  // another data type
    EXPECT_THROW(sum.ready(1, NDArrayView::from_vector<double>({2}, {1, 2})), ArgumentError);
    EXPECT_THROW(sum.ready(3, a), ArgumentError);  // no such tensor
    EXPECT_THROW(sum.finish(), StateError);        // two are missing
    EXPECT_THROW(comm->barrier(), StateError);     // the round is under way
    sum.ready(0, a);
    sum.ready(1, b);
    sum.finish();
    EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{4.0f, 5.0f, 6.0f}));
    comm->barrier();  // the round is over
  }
  {  // a round left unfinished frees the communicator when the sum goes away (one worker)
    AllReduceSum left(*comm, {{DataType::Float32, 1}});
    left.ready(0, NDArrayView::from_vector<float>({1}, {1.0f}));
  }
  comm->barrier();
}

}  // namespace
}  // namespace loom::distributed
