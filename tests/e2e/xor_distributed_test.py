"""Seed 000's distributed training under mpirun: data-parallel training on 2 workers ends with
the parameters of one process reading the same global minibatches (float tolerance), 1-bit SGD
runs, the distributed training session checkpoints (the main worker writes) and resumes on
every worker from the same file, and a worker killed with SIGKILL mid-run ends the job with a
message naming it; started again, the job resumes and ends as an uninterrupted run does."""
import os
import shutil
import signal
import subprocess
import sys
import time

from example import expect, fail

build_dir, work_dir = sys.argv[1], sys.argv[2]
binary = os.path.join(build_dir, "xor_distributed")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def run(folder, workers, *args, fresh=True):
    """Runs xor_distributed (under mpirun for more than one worker); returns stdout, stderr."""
    path = os.path.join(work_dir, folder)
    if fresh:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    command = [binary, *args]
    if workers > 1:
        # --tag-output: each line whole, prefixed with its worker
        command = ["mpirun", "--oversubscribe", "--tag-output", "-np", str(workers), *command]
    proc = subprocess.run(command, cwd=path, capture_output=True, text=True, env=ENV,
                          timeout=120)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        fail(f"{' '.join(command)} exited with {proc.returncode}")
    return proc.stdout, proc.stderr


def parameters(folder):
    with open(os.path.join(work_dir, folder, "parameters.txt")) as f:
        return [float(v) for v in f.read().split()]


def close(a, b, tolerance=1e-4):
    return len(a) == len(b) and all(abs(x - y) <= tolerance for x, y in zip(a, b))


OUT = ["--parameters-out", "parameters.txt"]
single, _ = run("single", 1, "--max-samples", "400", *OUT)
expect("Worker 0 of 1: samples seen 400" in single, "one worker did not train 400 samples")
two, _ = run("two", 2, "--max-samples", "400", *OUT)
for rank in (0, 1):
    expect(f"Worker {rank} of 2: samples seen 400" in two,
           f"worker {rank} of 2 did not count 400 global samples")
expect(close(parameters("single"), parameters("two")),
       "2 data-parallel workers ended with other parameters than one process:\n"
       f"{parameters('single')}\n{parameters('two')}")

one_bit, _ = run("one_bit", 2, "--max-samples", "400", "--quantization-bits", "1", *OUT)
expect("Worker 1 of 2: samples seen 400" in one_bit, "1-bit SGD did not finish")

whole, _ = run("session_whole", 2, "--session", "--max-samples", "800", *OUT)
first, first_err = run("session", 2, "--session", "--max-samples", "400", *OUT)
expect("Restoring" not in first_err, "the first session run restored something")
second, second_err = run("session", 2, "--session", "--max-samples", "800", *OUT, fresh=False)
restored = [l for l in second_err.splitlines()
            if l.endswith("Restoring training session from the checkpoint 'training_session'")]
expect(len(restored) == 2,
       "both workers must restore the checkpoint the main worker wrote:\n" + second_err)
expect("Worker 1 of 2: samples seen 800" in second, "the resumed session did not reach 800")
expect(close(parameters("session"), parameters("session_whole"), 0),
       "the resumed distributed session ended with other parameters than an uninterrupted one")
expect("Finished Evaluation [1]" in second, "the distributed session did not test")

# kill -9 of worker 1 in the middle of a long session.
LONG = ["--session", "--max-samples", "20000", *OUT]
run("uninterrupted", 2, *LONG)
killed_dir = os.path.join(work_dir, "killed")
shutil.rmtree(killed_dir, ignore_errors=True)
os.makedirs(killed_dir)
job = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", binary, *LONG], cwd=killed_dir,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def worker_pid(rank):
    """The pid of the job's worker of that rank (mpirun's child with that rank)."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != job.pid:
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"OMPI_COMM_WORLD_RANK={rank}".encode() in f.read().split(b"\0"):
                    return int(pid)
        except (OSError, ValueError, IndexError):
            continue
    return None


try:
    # Wait (bounded) until the job has written a few checkpoints' worth of lines.
    for _ in range(300):
        if not job.stdout.readline():
            break
    victim = worker_pid(1)
    expect(victim is not None, "worker 1 of the job not found")
    os.kill(victim, signal.SIGKILL)
    began = time.monotonic()
    _, err = job.communicate(timeout=60)
    print(f"the job ended {time.monotonic() - began:.2f} s after worker 1 was killed")
finally:
    if job.poll() is None:
        job.kill()
expect(job.returncode != 0, "the job did not fail when a worker was killed")
expect("process rank 1" in err, "the job's error does not name the lost worker:\n" + err)
resumed, resumed_err = run("killed", 2, *LONG, fresh=False)
expect("Restoring training session" in resumed_err, "the restarted job did not resume")
expect(close(parameters("killed"), parameters("uninterrupted"), 0),
       "the resumed job ended with other parameters than an uninterrupted one")
print("xor_distributed: 1 passed, 0 failed")
