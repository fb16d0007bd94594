"""Kill a training_session with SIGKILL at random moments and start it again until it
finishes: its final parameters (batch-normalization statistics included) must be
byte-identical to a run never killed, and the lines it printed after its last restore must be
exactly the uninterrupted run's last lines (timings aside).

session_resume's summary, cross-validation (whose callback changes the learning rate) and
checkpoint fall due at the same steps, and it checkpoints every other minibatch, so kills land
before, inside and after those actions, and some inside checkpoint writes (the test counts
them and requires some). Every fourth run is killed twice in a row before it may finish."""
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

from example import expect, fail

KILLS = 24
ARGS = ["--max-samples", "2048", "--parameters-out", "parameters.bin"]
TIMING = re.compile(r" \d+\.\d{3}s \( *\d+\.\d samples/s\);$")


def start(work):
    return subprocess.Popen([os.path.join(sys.argv[1], "session_resume"), *ARGS], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lines_of(output):
    return [TIMING.sub(";", l) for l in output.splitlines()]


def finish(proc):
    out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        sys.stderr.write(err)
        fail(f"session_resume exited with {proc.returncode}")
    return out, err


def kill_at_random(work, rng, line_count, line_time):
    """Starts a run and kills it after a random number of lines plus a random fraction of a
    line's time; returns whether a checkpoint was being written then."""
    proc = start(work)
    for _ in range(rng.randrange(line_count)):
        if not proc.stdout.readline():
            break
    time.sleep(rng.uniform(0.0, line_time))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return bool(glob.glob(os.path.join(work, "session_resume*.tmp-*")))


def main():
    root = sys.argv[2]
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)

    reference_dir = os.path.join(root, "reference")
    os.makedirs(reference_dir)
    began = time.monotonic()
    reference_out, _ = finish(start(reference_dir))
    duration = time.monotonic() - began
    reference = lines_of(reference_out)
    with open(os.path.join(reference_dir, "parameters.bin"), "rb") as f:
        reference_parameters = f.read()
    expect(sum("learning rate halved" in l for l in reference) >= 3,
           "the callback changed the learning rate too rarely to test anything")
    expect(sum(l.startswith("Finished Epoch") for l in reference) == 64,
           "expected 64 epoch summaries (one per 32 samples)")
    line_time = duration / len(reference)

    rng = random.Random(2026)
    mid_write = restored = 0
    for k in range(KILLS):
        work = os.path.join(root, f"run{k}")
        os.makedirs(work)
        for _ in range(2 if k % 4 == 3 else 1):
            mid_write += kill_at_random(work, rng, len(reference), line_time)
        out, err = finish(start(work))
        with open(os.path.join(work, "parameters.bin"), "rb") as f:
            expect(f.read() == reference_parameters,
                   f"kill {k}: the resumed run ended with different parameters")
        lines = lines_of(out)
        expect(lines == reference[len(reference) - len(lines):],
               f"kill {k}: the resumed run printed lines the uninterrupted run did not:\n" +
               "\n".join(lines[:6]))
        restored += "Restoring training session" in err
        print(f"kill {k}: {'resumed' if 'Restoring' in err else 'started afresh'}, "
              f"{len(lines)} of {len(reference)} lines after the restart")
        shutil.rmtree(work)
    print(f"{KILLS} runs killed ({KILLS // 4} of them twice), {mid_write} kills while a "
          f"checkpoint was being written, {restored} resumed from a checkpoint")
    expect(mid_write >= 1, "no kill landed while a checkpoint was being written")
    expect(restored >= KILLS // 2, "too few runs resumed from a checkpoint")


main()
