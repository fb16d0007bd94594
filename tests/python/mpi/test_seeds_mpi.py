"""Seeds 000 and 001 with 2 data-parallel workers under mpirun (LOOM_MPIEXEC). Each worker runs
the whole script in a folder of its own (seed 000's first loops are not distributed and would
race for one checkpoint file).

Seed 000: the distributed loop reads each worker's partition of every minibatch and counts the
samples of both, only the main worker writes the distributed checkpoints, the session's test
runs on both, and the workers end with equal parameters.
Seed 001: the multi-worker source keeps each worker's sequences, and 2 workers end with the
parameters of one process."""
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "..", "seeds")
PROGRESS = re.compile(r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* (\d+), ")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def run(folder, script, variable, workers):
    """{rank: (the lines it printed, its parameters)} of `script` run by `workers` workers under
    mpirun, each in folder/rank<r>."""
    program = [sys.executable, os.path.join(HERE, "run_seed.py"), os.path.join(SEEDS, script),
               variable]
    # Each worker's output in a file of its own (output/1/rank.<r>/stdout): whole lines.
    command = [os.environ.get("LOOM_MPIEXEC", "mpirun"), "--oversubscribe", "--output-filename",
               str(folder / "output")]
    for r in range(workers):
        (folder / f"rank{r}").mkdir()
        command += ([":"] if r else []) + ["-np", "1", "-wdir", str(folder / f"rank{r}"), *program]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return {r: ((folder / "output" / "1" / f"rank.{r}" / "stdout").read_text().splitlines(),
                np.load(folder / f"rank{r}" / "parameters.npy")) for r in range(workers)}


def test_seed_000_with_two_data_parallel_workers(tmp_path):
    out = run(tmp_path, "seed000_training_session.py", "model", workers=2)
    for r in range(2):
        lines = out[r][0]
        assert lines[0] == f"worker {r} of 2"
        error = [l for l in lines if l.startswith("Error ")]
        assert len(error) == 1 and float(error[0].split()[1]) < 0.01
        assert lines.count("No restore file found") == 2
        # The distributed loop: 200 minibatches of 4 samples, 2 read by each worker, counted
        # for both (800 samples in all).
        start = [i for i, l in enumerate(lines) if l == "No restore file found"][1]
        progress = [PROGRESS.match(l) for l in lines[start + 2:start + 22]]
        assert all(progress), lines[start:start + 22]
        assert [(int(m[1]), int(m[2]), int(m[4])) for m in progress] == [
            (10 * i + 1, 10 * i + 10, 40) for i in range(20)]
        assert any(re.match(r"Finished Evaluation \[1\]: Minibatch\[1-\d+\]: metric = "
                            r"\d+\.\d\d% \* \d+;", l) for l in lines), lines[-5:]
    np.testing.assert_array_equal(out[0][1], out[1][1])
    # Each worker's own (not distributed) loop checkpoints; the distributed ones, the main only.
    for r in range(2):
        assert (tmp_path / f"rank{r}" / "manual_loop_checkpointed").exists()
    for name in ("manual_loop_distributed", "training_session"):
        assert (tmp_path / "rank0" / name).exists(), name
        assert not (tmp_path / "rank1" / name).exists(), name


def test_seed_001_two_workers_end_as_one_process(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = run(tmp_path / "one", "seed001_user_minibatch_source.py", "dist_learner", workers=1)
    two = run(tmp_path / "two", "seed001_user_minibatch_source.py", "dist_learner", workers=2)
    assert one[0][0][0] == "worker 0 of 1" and two[1][0][0] == "worker 1 of 2"
    for r in range(2):
        lines = two[r][0]
        part = lines[lines.index("Part 2: MyMultiWorkerDataSource"):]
        assert sum(l.startswith("Finished Epoch[") for l in part[:6]) == 4, part[:6]
    np.testing.assert_array_equal(two[0][1], two[1][1])
    np.testing.assert_allclose(two[0][1], one[0][1], atol=1e-4)
