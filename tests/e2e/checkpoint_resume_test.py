"""Kill training with SIGKILL at random moments and resume it from its checkpoint: the
final parameters must be byte-identical to a run never killed, and the progress lines
printed after the restore must be exactly the uninterrupted run's remaining lines.

Checkpoints are written every minibatch, so a good share of the kills land while a
checkpoint is being written (a temporary file is left beside it); the previous checkpoint
must then be used. The test counts those kills and requires some."""
import glob
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from example import expect, fail

KILLS = 24
ARGS = ["--max-samples", "800", "--checkpoint-frequency", "4", "--dropout", "0.25",
        "--momentum", "0.9", "--parameters-out", "parameters.bin"]


def binary():
    return os.path.join(sys.argv[1], "xor_checkpointed_loop")


def start(work):
    return subprocess.Popen([binary(), *ARGS], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def progress_lines(output):
    """What the trainer printed: every line but the example's own restore messages."""
    own = ("No restore file found", "Trying to restore", "Restore has finished")
    return [l for l in output.splitlines() if not l.startswith(own)]


def finish(proc):
    out, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        sys.stderr.write(err)
        fail(f"xor_checkpointed_loop exited with {proc.returncode}")
    return out


def main():
    root = sys.argv[2]
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)

    reference_dir = os.path.join(root, "reference")
    os.makedirs(reference_dir)
    began = time.monotonic()
    reference_out = finish(start(reference_dir))
    duration = time.monotonic() - began
    reference_lines = progress_lines(reference_out)
    with open(os.path.join(reference_dir, "parameters.bin"), "rb") as f:
        reference_parameters = f.read()
    expect(len(reference_lines) > 15, f"too few progress lines: {reference_out}")
    line_time = duration / len(reference_lines)

    rng = random.Random(2026)
    mid_write = 0
    for k in range(KILLS):
        work = os.path.join(root, f"run{k}")
        os.makedirs(work)
        proc = start(work)
        # Kill after a random number of lines, a random fraction of a line's time later: the
        # kills spread over the whole run whatever the machine's speed.
        for _ in range(rng.randrange(len(reference_lines))):
            if not proc.stdout.readline():
                break
        time.sleep(rng.uniform(0.0, line_time))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        if glob.glob(os.path.join(work, "manual_loop_checkpointed.tmp-*")):
            mid_write += 1
        resumed_out = finish(start(work))
        with open(os.path.join(work, "parameters.bin"), "rb") as f:
            parameters = f.read()
        expect(parameters == reference_parameters,
               f"kill {k}: the resumed run ended with different parameters")
        lines = progress_lines(resumed_out)
        expect(reference_lines[len(reference_lines) - len(lines):] == lines,
               f"kill {k}: the resumed run printed lines the uninterrupted run did not:\n" +
               "\n".join(lines[:5]))
        restored = "Restore has finished successfully" in resumed_out
        print(f"kill {k}: {'resumed' if restored else 'started afresh'}, "
              f"{len(lines)} of {len(reference_lines)} progress lines after the restart")
        shutil.rmtree(work)
    print(f"{KILLS} kills, {mid_write} while a checkpoint was being written")
    expect(mid_write >= 1, "no kill landed while a checkpoint was being written")


main()
