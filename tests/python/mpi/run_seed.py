"""One worker of a seed's script under mpirun: prints its rank and the number of workers, runs
the script (the first argument) in the current folder, then saves the parameters of the
script's variable named by the second argument (a Function or a learner) to parameters.npy
there, so that the test can compare workers and runs."""
import runpy
import sys

import numpy as np

import loom as C

print("worker", C.distributed.Communicator.rank(), "of", C.distributed.Communicator.num_workers())
seed = runpy.run_path(sys.argv[1], run_name="__main__")
values = np.concatenate([p.value.ravel() for p in seed[sys.argv[2]].parameters])
np.save("parameters.npy", values)
