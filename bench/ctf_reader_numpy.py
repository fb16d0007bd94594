# numpy's loadtxt on bench_ctf_reader's dense CTF file: the 784 feature columns of each line
# ("|features v1 ... v784 |labels ..."), as float32. Prints the best of REPEATS as seconds=.
#
#   /usr/bin/python3 bench/ctf_reader_numpy.py FILE REPEATS
import sys
import time

import numpy as np


def main():
    path, repeats = sys.argv[1], int(sys.argv[2])
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        x = np.loadtxt(path, dtype=np.float32, delimiter=" ", usecols=range(1, 785),
                       comments=None)
        best = min(best, time.perf_counter() - start)
    print(f"numpy {np.__version__}: {x.shape[0]} lines of {x.shape[1]} values")
    print(f"seconds={best:.6f}")


if __name__ == "__main__":
    main()
