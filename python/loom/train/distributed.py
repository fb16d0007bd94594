"""Distributed training over MPI (CNTK's cntk.train.distributed, also cntk.distributed). Started
without mpirun, a script is the only worker: Communicator.rank() is 0 and num_workers() is 1."""
from loom._loom.train.distributed import (Communicator, DistributedLearner,  # noqa: F401
                                          WorkerDescriptor, block_momentum_distributed_learner,
                                          data_parallel_distributed_learner, mpi_communicator)
