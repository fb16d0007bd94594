"""Seed 000's distributed training under mpirun: data-parallel training on 2 workers ends with
the parameters of one process reading the same global minibatches (float tolerance), 1-bit SGD
runs, and the distributed training session checkpoints (the main worker writes) and resumes
on every worker from the same file."""
import os
import shutil
import subprocess
import sys

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
print("xor_distributed: 1 passed, 0 failed")
