"""Runs mpi_worker MODE under mpirun with N workers and checks what they print.

usage: run_mpi.py MPIEXEC MPI_WORKER N MODE

Every mode but the failure modes must end with mpirun's status 0 and "PASS MODE" from every
worker. In lost_worker (worker 1 kills itself) and hung_worker (worker 1 stops answering) every
other worker must report "lost worker 1" within the bound the communicator promises: twice its
time limit (the limit again as slack for an oversubscribed machine). hung_worker's job must end
non-zero (the survivors abort it); lost_worker runs with --enable-recovery, under which Open MPI
4.1's mpirun exits 0 even after MPI_Abort, so there only the reports count.
"""
import re
import subprocess
import sys

mpiexec, program, workers, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
TIME_LIMIT_S = 2.0  # mpi_worker's Communicator::set_timeout in the failure modes
FAILURE_MODES = ("lost_worker", "hung_worker")

command = [mpiexec, "--oversubscribe", "-np", str(workers)]
if mode == "lost_worker":
    # Without it mpirun ends every worker as soon as one dies; with it the survivors run on
    # and must find out by themselves.
    command.append("--enable-recovery")
command += [program, mode]
result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        timeout=100)
out = result.stdout
print(out)


def fail(message):
    print(f"FAILED: {message}")
    sys.exit(1)


if mode in FAILURE_MODES:
    if mode == "hung_worker" and result.returncode == 0:
        fail("mpirun exited 0 although worker 1 was lost")
    lost = re.findall(r"LOST after ([0-9.]+) s on worker (\d+): (.*)", out)
    survivors = sorted(int(rank) for _, rank, _ in lost)
    if survivors != [r for r in range(workers) if r != 1]:
        fail(f"expected a LOST line from every worker but 1, got workers {survivors}")
    for seconds, rank, message in lost:
        if "lost worker 1:" not in message:
            fail(f"worker {rank}'s error does not name worker 1: {message}")
        if float(seconds) > 3 * TIME_LIMIT_S:
            fail(f"worker {rank} needed {seconds} s, more than twice the time limit and slack")
    print(f"{mode} with {workers} workers: every survivor named worker 1 in "
          f"{max(float(s) for s, _, _ in lost):.1f} s at most")
    sys.exit(0)

if result.returncode != 0:
    fail(f"mpirun exited {result.returncode}")
passed = re.findall(rf"PASS {mode} on worker (\d+) of (\d+)", out)
if sorted(int(r) for r, _ in passed) != list(range(workers)) or \
        any(int(n) != workers for _, n in passed):
    fail(f"expected PASS from each of {workers} workers, got {passed}")
print(f"{mode} with {workers} workers: passed")
