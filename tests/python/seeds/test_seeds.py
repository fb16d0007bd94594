"""The seeds' scripts run under Loom and print what the seeds print (CNTK-SEMANTICS.md,
SEED-API.md §6): seed 003's learner values exactly, seed 000's XOR training, checkpoint restore
and training session, seed 002's logistic regression and (shortened) MNIST runs on
Fashion-MNIST."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(script, cwd, **env):
    result = subprocess.run([sys.executable, os.path.join(HERE, script)], cwd=cwd,
                            capture_output=True, text=True, env={**os.environ, **env},
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def lines(text):
    return text.splitlines()


SEED_003 = """
unit = sample
 [array([[-0.5, -0.5],
       [-0.5, -0.5],
       [-0.5, -0.5],
       [-0.5, -0.5]], dtype=float32), array([-0.5, -0.5], dtype=float32), array([[-0.5, -0.5, -0.5, -0.5],
       [-0.5, -0.5, -0.5, -0.5],
       [-0.5, -0.5, -0.5, -0.5]], dtype=float32), array([-0.5, -0.5, -0.5, -0.5], dtype=float32)]

unit = minibatch
 [array([[-0.25, -0.25],
       [-0.25, -0.25],
       [-0.25, -0.25],
       [-0.25, -0.25]], dtype=float32), array([-0.25, -0.25], dtype=float32), array([[-0.25, -0.25, -0.25, -0.25],
       [-0.25, -0.25, -0.25, -0.25],
       [-0.25, -0.25, -0.25, -0.25]], dtype=float32), array([-0.25, -0.25, -0.25, -0.25], dtype=float32)]
time constant for momentum of 0.967... =  300.00000000000006
momentum for time constant of 300      =  0.9672161004820059
[-1.436 -1.436]
[-1.436 -1.436]
[-1.436 -1.436]
adadelta : [-0.0099 -0.0099]
agagrad  : [-0.3125 -0.3125]
adam     : [-9.9203 -9.9203]
adamax   : [-9.9227 -9.9227]
fsadagrad: [-8.8573 -8.8573]
rmsprop  : [-0.3125 -0.3125]
adadelta2: [-9.9228 -9.9228]
[-0.5397 -0.5397]
[-0.1562 -0.1562]
"""


def test_seed_003_prints_the_seeds_numbers_exactly(tmp_path):
    out = run("seed003_learners.py", tmp_path)
    # The one number that is plain Python (10 / log(1 / exp(-10 / 300))): its last digit is the
    # C library's, 300.00000000000006 with the seed's, 300.0000000000001 with glibc's.
    constant = re.compile(r"(time constant for momentum of 0.967... =  )300.0000000000\d*")
    assert constant.search(out) and abs(float(constant.search(out)[0].split()[-1]) - 300) < 1e-12
    assert constant.sub(r"\g<1>300", out) == constant.sub(r"\g<1>300", SEED_003)


PROGRESS = re.compile(r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* (\d+), "
                      r"metric = (\d+\.\d\d)% \* (\d+);")


def test_seed_000_manual_loops_checkpoints_and_training_session(tmp_path):
    out = lines(run("seed000_training_session.py", tmp_path))
    assert out[0] == "Learning rate per sample: 0.1"
    first_loop = [PROGRESS.match(l) for l in out[1:21]]
    assert all(first_loop), out[:21]
    assert [(int(m[1]), int(m[2])) for m in first_loop] == [(10 * i + 1, 10 * i + 10)
                                                            for i in range(20)]
    losses = [float(m[3]) for m in first_loop]
    assert min(losses) < 0.01 and losses[-1] < 0.01, losses
    # (loss, loss) as criterion: the metric is the loss in percent.
    assert all(abs(float(m[5]) - 100 * float(m[3])) < 0.006 for m in first_loop)
    error = [l for l in out if l.startswith("Error ")]
    assert len(error) == 1 and float(error[0].split()[1]) < 0.01
    assert out.count("No restore file found") == 2
    # The session: every minibatch printed (freq=1), then the test.
    session = [l for l in out[out.index("No restore file found", out.index(error[0]) + 2):]
               if PROGRESS.match(l)]
    assert [l for l in out if l.startswith("Finished Evaluation")] == [
        l for l in out if re.match(r"Finished Evaluation \[1\]: Minibatch\[1-25\]: "
                                   r"metric = \d+\.\d\d% \* 100;", l)]
    assert len(session) >= 200
    for name in ("manual_loop_checkpointed", "manual_loop_distributed", "training_session"):
        assert (tmp_path / name).exists(), name

    # Run again in the same folder: the loops and the session resume at 800 samples.
    again = lines(run("seed000_training_session.py", tmp_path))
    assert "Trying to restore from checkpoint" in again
    assert "Restore has finished successfully" in again
    assert "No restore file found" not in again
    tail = again[again.index("Restore has finished successfully") + 1:]
    assert not any(PROGRESS.match(l) for l in tail), "a restored loop trained again"
    assert any(l.startswith("Finished Evaluation [1]") for l in tail)


def test_seed_002_guided_tour(tmp_path):
    out = run("seed002_guided_tour.py", tmp_path, SEED002_SAMPLES="1000", SEED002_EPOCHS="1",
              SEED002_ADVANCED_EPOCHS="4")
    text = lines(out)
    # The numpy-only cells print as in the seed (np.random.seed(0) data).
    assert "data =\n [[2.2741797 3.5634756]\n [5.128736  5.790895 ]" in out
    assert "criterion_lr: Composite(Tensor[2], SparseTensor[2]) -> Tuple[Tensor[1], Tensor[1]]" in text
    # criterion_lr.train with ProgressPrinter(0): the geometric table.
    header = text.index(" average      since    average      since      examples")
    assert text[header + 3] == "Learning rate per minibatch: 0.1"
    rows = [l.split() for l in text[header + 4:header + 13]]
    assert [int(r[4]) for r in rows] == [32, 96, 224, 480, 992, 2016, 4064, 8160, 16352]
    # Logistic regression on the seed's synthetic data: the seed's test error is 8.11 %.
    evaluations = [re.match(r"Finished Evaluation \[(\d)\]: Minibatch\[1-32\]: "
                            r"metric = (\d+\.\d\d)% \* 1024;", l) for l in text]
    evaluations = [m for m in evaluations if m]
    assert [m[1] for m in evaluations] == ["1", "2"]
    for m in evaluations:
        assert abs(float(m[2]) - 8.11) < 1.5, m[0]
    assert "model_lr: Dense(Tensor[2]) -> Tensor[2]" in text
    labels = next(l for l in text if l.startswith("Label    :"))
    predicted = next(l for l in text if l.startswith("Predicted:"))
    assert labels == "Label    : [0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1]"
    agree = sum(a == b for a, b in zip(eval(labels[11:]), eval(predicted[11:])))
    assert agree >= 17, predicted
    # The explicit loop: ProgressPrinter(50) rows, the epoch summary, the evaluator.
    loop = [PROGRESS.match(l) for l in text if PROGRESS.match(l) and l.endswith("* 1600;")]
    assert [(int(m[1]), int(m[2])) for m in loop] == [(50 * i + 1, 50 * i + 50) for i in range(12)]
    assert any(re.match(r"Finished Epoch\[1\]: loss = 0\.\d{6} \* 20000, metric = \d+\.\d\d% "
                        r"\* 20000 ", l) for l in text)
    # MNIST (Fashion-MNIST, shortened): the seed's schedule reports, epochs and test.
    assert "Learning rate per 1 samples: 0.001" in text
    assert "Momentum per 1 samples: 0.0" in text
    epochs = [l for l in text if re.match(r"Finished Epoch\[\d\]: loss = \d+\.\d{6} \* 1000, ", l)]
    assert len(epochs) == 1, epochs
    assert any(re.match(r"Finished Evaluation \[1\]: Minibatch\[1-313\]: metric = \d+\.\d\d% \* "
                        r"10000;", l) for l in text)
    assert ("criterion_mn: Composite(images: Tensor[28,28], labels: SparseTensor[10]) -> "
            "Tuple[Tensor[1], Tensor[1]]") in text
    # The advanced run: log file, TensorBoard events, a checkpoint per epoch, CV control, test.
    assert "Redirecting log to file my.log" in text
    log = (tmp_path / "my.log").read_text()
    assert re.search(r"Finished Epoch\[4\]: loss = ", log)
    assert re.search(r"Finished Evaluation \[\d\]: Minibatch\[1-\d+\]: metric = .* \* 10000;", log)
    assert list((tmp_path / "my_tensorboard_logdir").iterdir())
    assert all((tmp_path / f"model_mn.cmf{i}").exists() for i in range(4))
    progression = next(l for l in text if l.startswith("loss progression = "))
    assert len(progression.split(", ")) == 4
    assert "Composite(keep: Sequence[tensor]) -> Sequence[tensor]" in text
    assert "Composite(Tensor[28,28]) -> Tensor[10]" in text
    assert re.search(r"^Recognized as: \d$", out, re.M)


EPOCH = re.compile(r"Finished Epoch\[(\d+) of 10\]: \[Training\] loss = (\d+\.\d{6}) \* 20, "
                   r"metric = (\d+\.\d\d)% \* 20 \d+\.\d{3}s \( *\d+\.\d samples/s\);$")


def test_seed_001_user_minibatch_sources(tmp_path):
    out = lines(run("seed001_user_minibatch_source.py", tmp_path))
    parts = [out.index(f"Part {i}: {name}") for i, name in
             ((1, "MyDataSource"), (2, "MyMultiWorkerDataSource"), (3, "the built-in CTF reader"))]
    assert parts == sorted(parts)
    for begin, end in zip(parts, parts[1:] + [len(out)]):
        part = out[begin + 1:end]
        assert part[0] == "Learning rate per sample: 0.5", part
        epochs = [EPOCH.match(l) for l in part[1:]]
        assert all(epochs) and [int(m[1]) for m in epochs] == [1, 2, 3, 4], part
        losses = [float(m[2]) for m in epochs]
        assert all(a > b for a, b in zip(losses, losses[1:])) and losses[-1] < 0.2, part
        assert [float(m[3]) for m in epochs[2:]] == [0, 0], part
    # MyDataSource gives the figures of examples/user_minibatch_source_lstm.cpp (the same seed;
    # CNTK's notebook printed 1.078, 0.424, 0.082, 0.031 from its own initial weights).
    losses = [float(EPOCH.match(l)[2]) for l in out[parts[0] + 2:parts[1]]]
    assert all(abs(a - b) < 1e-3 for a, b in zip(losses, [1.083, 0.457, 0.084, 0.031])), losses
