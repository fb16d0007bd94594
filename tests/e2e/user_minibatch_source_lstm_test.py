"""Seed 001's user minibatch sources (examples/user_minibatch_source_lstm.cpp).

1. The seed's run: MyDataSource prints four `Finished Epoch[k of 10]: [Training]` lines of 20
   samples, the loss falls and the metric reaches 0 % within them; the multi-worker source
   trains too.
2. The multi-worker source partitions by worker rank: 2 data-parallel workers under mpirun end
   with the parameters of one process.
3. Killed with SIGKILL at random moments and started again until it finishes, a session over the
   multi-worker source (its checkpoint state is its file position) ends with the parameters of
   a run never killed, byte for byte."""
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time

from example import expect, fail, matching, run

build_dir, work_dir = sys.argv[1], sys.argv[2]
binary = os.path.join(build_dir, "user_minibatch_source_lstm")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")
EPOCH = (r"Finished Epoch\[(\d+) of 10\]: \[Training\] loss = (\d+\.\d{6}) \* 20, "
         r"metric = (\d+\.\d\d)% \* 20 .*")

# 1. The seed's run.
lines = run("user_minibatch_source_lstm")
part2 = lines.index("Part 2: MyMultiWorkerDataSource")
for name, part in (("MyDataSource", lines[:part2]), ("MyMultiWorkerDataSource", lines[part2:])):
    epochs = matching(part, EPOCH)
    expect([int(m[1]) for m in epochs] == [1, 2, 3, 4], f"{name}: expected epochs 1-4 of 10")
    losses = [float(m[2]) for m in epochs]
    metrics = [float(m[3]) for m in epochs]
    expect(all(a > b for a, b in zip(losses, losses[1:])), f"{name}: the loss does not fall")
    expect(losses[-1] < 0.2, f"{name}: the last loss {losses[-1]} is not small")
    expect(metrics[-1] == 0.0, f"{name}: the metric does not reach 0 % within four epochs")
expect("Learning rate per sample: 0.5" in lines, "no 'Learning rate per sample: 0.5' line")
print("seed run: the loss falls and the metric reaches 0 % in both parts")


def launch(folder, *args, workers=1, fresh=True):
    path = os.path.join(work_dir, folder)
    if fresh:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
    command = [binary, "--multi-worker", *args]
    if workers > 1:
        command = ["mpirun", "--oversubscribe", "--tag-output", "-np", str(workers), *command]
    return subprocess.Popen(command, cwd=path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)


def finish(proc):
    out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        sys.stdout.write(out)
        sys.stderr.write(err)
        fail(f"{' '.join(proc.args)} exited with {proc.returncode}")
    return out, err


def parameters(folder):
    with open(os.path.join(work_dir, folder, "parameters.bin"), "rb") as f:
        data = f.read()
    return data, struct.unpack(f"{len(data) // 4}f", data)


# 2. Two workers = one process.
OUT = ["--parameters-out", "parameters.bin"]
finish(launch("single", "--max-samples", "160", *OUT))
out, _ = finish(launch("two", "--max-samples", "160", *OUT, workers=2))
expect(out.count("Samples seen 160") == 2, "the two workers did not each count 160 samples")
_, one = parameters("single")
_, two = parameters("two")
expect(len(one) == len(two) and all(abs(a - b) <= 1e-4 for a, b in zip(one, two)),
       "2 data-parallel workers over the partitioned source ended with other parameters than "
       "one process")
print("2 workers: the parameters of one process (within 1e-4)")

# 3. Kill and resume.
KILLS = 8
LONG = ["--max-samples", "2800", "--checkpoint", "ckpt", *OUT]
began = time.monotonic()
reference_out, _ = finish(launch("reference", *LONG))
line_time = (time.monotonic() - began) / len(reference_out.splitlines())
reference, _ = parameters("reference")
rng = random.Random(2026)
restored = 0
for k in range(KILLS):
    folder = f"run{k}"
    proc = launch(folder, *LONG)
    for _ in range(rng.randrange(len(reference_out.splitlines()))):
        if not proc.stdout.readline():
            break
    time.sleep(rng.uniform(0.0, line_time))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    out, err = finish(launch(folder, *LONG, fresh=False))
    restored += "Restoring training session" in err
    expect("Samples seen 2800" in out, f"kill {k}: the resumed run did not reach 2800 samples")
    expect(parameters(folder)[0] == reference,
           f"kill {k}: the resumed run ended with other parameters than the uninterrupted one")
    shutil.rmtree(os.path.join(work_dir, folder))
expect(restored >= KILLS // 2, f"only {restored} of {KILLS} runs resumed from a checkpoint")
print(f"{KILLS} runs killed, {restored} resumed from a checkpoint: the uninterrupted run's "
      "parameters byte for byte")
print("user_minibatch_source_lstm: 3 passed, 0 failed")
