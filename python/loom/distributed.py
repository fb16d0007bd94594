"""CNTK's cntk.distributed: the names of loom.train.distributed."""
from loom.train.distributed import *  # noqa: F401,F403
from loom.train.distributed import (Communicator, DistributedLearner,  # noqa: F401
                                    WorkerDescriptor, block_momentum_distributed_learner,
                                    data_parallel_distributed_learner, mpi_communicator)
