"""Seed 000 with 2 workers under mpirun (LOOM_MPIEXEC): each worker runs the whole script in a
folder of its own (its first loops are not distributed and would race for one checkpoint file);
the distributed loop reads each worker's partition of every minibatch and counts the samples of
both, only the main worker writes the distributed checkpoints, the session's test runs on both,
and the workers end with equal parameters."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = os.path.join(HERE, "..", "seeds", "seed000_training_session.py")
PROGRESS = re.compile(r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* (\d+), ")


def test_seed_000_with_two_data_parallel_workers(tmp_path):
    folders = [tmp_path / f"rank{r}" for r in range(2)]
    command = [os.environ.get("LOOM_MPIEXEC", "mpirun"), "--oversubscribe", "--tag-output"]
    for i, folder in enumerate(folders):
        folder.mkdir()
        command += [":"] if i else []
        command += ["-np", "1", "-wdir", str(folder), sys.executable,
                    os.path.join(HERE, "run_seed000.py"), SEED]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    out = {r: [l.split(":", 1)[1] for l in result.stdout.splitlines()
               if l.startswith(f"[1,{r}]<stdout>:")] for r in range(2)}
    parameters = []
    for r in range(2):
        lines = out[r]
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
        parameters.append([l for l in lines if l.startswith("parameters ")])
    assert len(parameters[0]) == 1 and parameters[0] == parameters[1]
    # Each worker's own (not distributed) loop checkpoints; the distributed ones, the main only.
    assert (folders[0] / "manual_loop_checkpointed").exists()
    assert (folders[1] / "manual_loop_checkpointed").exists()
    for name in ("manual_loop_distributed", "training_session"):
        assert (folders[0] / name).exists() and not (folders[1] / name).exists(), name
