"""One worker of seed 000 under mpirun: prints its rank and the number of workers, runs the
seed's script (tests/python/seeds/seed000_training_session.py, given as the argument) in the
current folder, then prints the model's parameters, which data-parallel training keeps equal on
every worker."""
import runpy
import sys

import numpy as np

import loom as C

print("worker", C.distributed.Communicator.rank(), "of", C.distributed.Communicator.num_workers())
seed = runpy.run_path(sys.argv[1], run_name="__main__")
values = np.concatenate([p.value.ravel() for p in seed['model'].parameters])
print("parameters", values.tobytes().hex())
