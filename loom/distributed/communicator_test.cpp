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

}  // namespace
}  // namespace loom::distributed
