"""Seed 002's Fashion-MNIST networks under `mpirun -np 4`, shortened: the convnet trains one
epoch of 1,024 samples with each of CNTK's three distributed learners (data-parallel, 1-bit
SGD, block momentum); rank 0 alone prints the epoch, the synchronisations and the test over
500 images, every worker the same sample count; and 1-bit SGD sends at most 1/16 of the bytes
of float data-parallel training, for the convnet and the MLP (the figures for full runs are in
docs/distributed.md)."""
import os
import re
import subprocess
import sys

from example import expect, fail, matching

if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
    print("SKIPPED: dataset-fashion-mnist is not installed (scripts/setup.sh installs it)")
    raise SystemExit(0)

build_dir, work_dir = sys.argv[1], sys.argv[2]
os.makedirs(work_dir, exist_ok=True)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")
WORKERS = 4


def run(*args):
    """mnist_distributed under mpirun -np 4; returns its output lines."""
    command = ["mpirun", "--oversubscribe", "-np", str(WORKERS),
               os.path.join(build_dir, "mnist_distributed"), *args]
    proc = subprocess.run(command, cwd=work_dir, capture_output=True, text=True, env=ENV,
                          timeout=300)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        fail(f"{' '.join(command)} exited with {proc.returncode}")
    return proc.stdout.splitlines()


def bytes_sent(lines, learner, samples):
    workers = matching(lines, rf"Worker (\d) of 4 \({learner}\): samples seen (\d+), "
                              rf"bytes sent (\d+)")
    expect(sorted(int(m.group(1)) for m in workers) == list(range(WORKERS)),
           f"{learner}: not every worker reported")
    expect(all(int(m.group(2)) == samples for m in workers),
           f"{learner}: every worker must count the {samples} samples of all workers")
    return int(workers[0].group(3))


def compare_bytes(sent, model):
    ratio = sent["data_parallel"] / sent["one_bit"]
    print(f"{model}, 4 workers: float sends {sent['data_parallel']} bytes per worker, "
          f"1-bit {sent['one_bit']} (1/{ratio:.1f})")
    expect(ratio >= 16, f"{model}: 1-bit SGD must send at most 1/16 of float's bytes")


convnet_sent = {}
for learner in ("data_parallel", "one_bit", "block_momentum"):
    lines = run("--convnet", "--learner", learner, "--samples", "1024", "--test-samples", "500",
                "--block-size", "2048")
    epochs = matching(lines, r"Finished Epoch\[1 of 1\]: loss = ([\d.]+) \* 1024, "
                             r"metric = ([\d.]+)% \* 1024 .*")
    expect(len(epochs) == 1, f"{learner}: expected one epoch line (rank 0 alone prints)")
    tests = matching(lines, r"Finished Evaluation \[1\]: Minibatch\[1-\d+\]: "
                            r"metric = ([\d.]+)% \* 500;")
    expect(len(tests) == 1, f"{learner}: expected one test line over the 500 images")
    expect(float(tests[0].group(1)) < 90, f"{learner}: test error {tests[0].group(1)}% is chance")
    syncs = [l for l in lines if l.startswith("Distributed training: #Syncs elapsed = ")]
    expect(len(syncs) >= 1, f"{learner}: no synchronisation line")
    convnet_sent[learner] = bytes_sent(lines, learner, 1024)
compare_bytes(convnet_sent, "convnet, 1024 samples")

# The MLP: 1-bit SGD's bytes against float's, for the same samples.
sent = {learner: bytes_sent(run("--learner", learner, "--samples", "4096", "--test-samples",
                                "100"), learner, 4096)
        for learner in ("data_parallel", "one_bit")}
compare_bytes(sent, "MLP, 4096 samples")
print("mnist_distributed: passed")
