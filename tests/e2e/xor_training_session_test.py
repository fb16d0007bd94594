"""Seed 000's training session, run twice in one folder: the first run trains 400 samples and
checkpoints every 100; the second restores the checkpoint and continues to 800. Its output
must be exactly what an uninterrupted 800-sample run prints for those minibatches."""
import os
import shutil
import subprocess
import sys

from example import expect, fail, matching

build_dir, work_dir = sys.argv[1], sys.argv[2]
binary = os.path.join(build_dir, "xor_training_session")


def run_in(folder, *args, fresh):
    """Runs the example in folder (emptied first when fresh); returns (stdout, stderr) lines."""
    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    proc = subprocess.run([binary, *args], cwd=folder, capture_output=True, text=True,
                          timeout=600)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        fail(f"xor_training_session {' '.join(args)} exited with {proc.returncode}")
    return proc.stdout.splitlines(), proc.stderr.splitlines()


MB = r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* 4, metric = (\d+\.\d\d)% \* 4;"
EPOCH = r"Finished Epoch\[1\]: loss = (\d+\.\d{6}) \* (\d+), metric = (\d+\.\d\d)% \* \d+ .*"
TEST = r"Finished Evaluation \[1\]: Minibatch\[1-25\]: metric = (\d+\.\d\d)% \* 100;"

first, first_err = run_in(os.path.join(work_dir, "resumed"), "400", fresh=True)
expect(not any("Restoring" in l for l in first_err), "the first run restored something")
mb = matching(first, MB)
expect([int(m[1]) for m in mb] == list(range(1, 101)), "first run: expected minibatches 1-100")
expect(matching(first, EPOCH)[0][2] == "400", "first run: the epoch summary is not over 400")
expect(len(matching(first, TEST)) == 1, "first run: no test summary over 100 samples")
expect("Samples seen 400" in first, "first run did not stop at 400 samples")
expect(os.path.exists(os.path.join(work_dir, "resumed", "training_session")),
       "no checkpoint file written")

second, second_err = run_in(os.path.join(work_dir, "resumed"), "800", fresh=False)
expect("Restoring training session from the checkpoint 'training_session'" in second_err,
       "the second run did not restore the checkpoint")
resumed = matching(second, MB)
expect([int(m[1]) for m in resumed] == list(range(101, 201)),
       "second run: expected minibatches 101-200 (the progress writer's counts are restored)")
expect("Samples seen 800" in second, "second run did not continue to 800 samples")

whole, _ = run_in(os.path.join(work_dir, "uninterrupted"), "800", fresh=True)
expect([m[0] for m in matching(whole, MB)][100:] == [m[0] for m in resumed],
       "the resumed run's minibatches differ from the uninterrupted run's")
expect(matching(whole, EPOCH)[0][1] == matching(second, EPOCH)[0][1],
       "the resumed run's epoch loss differs from the uninterrupted run's")
expect(matching(whole, TEST)[0][0] == matching(second, TEST)[0][0],
       "the resumed run's test metric differs from the uninterrupted run's")
expect(float(matching(second, TEST)[0][1]) < 5, "test error is not small")
print("xor_training_session: 1 passed, 0 failed")
