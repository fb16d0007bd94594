#!/usr/bin/python3
"""The reference for bench_logistic_regression: the same training loop in PyTorch.

nn.Linear(784, 10), cross entropy on the logits, SGD at 0.1 on the minibatch mean loss (what
Loom's sgd(learning_parameter_schedule(0.1)) does with the summed loss), the classification
error computed every step as Loom's Trainer does, minibatch 32 on Fashion-MNIST-shaped synthetic
data. Tensors are built before timing. Each thread setting in --threads is timed (PyTorch gets
its best one) and the last lines are machine-readable:

    samples_per_second=<best over settings and repeats>
    median_samples_per_second=<median of the repeats at that setting>
    us_per_step=<at the best>
    threads=<the setting that gave the best>
    blas=<the BLAS library PyTorch's nn.Linear ran on>

PyTorch's CPU matmul goes to whatever libblas.so.3 the system provides (Debian's
python3-torch is built with BLAS_INFO=generic). scripts/setup.sh installs OpenBLAS, which then
is that library; its own threads are limited to one here (OPENBLAS_NUM_THREADS=1), PyTorch's
best setting for these small products, and blas= below names the library actually loaded.

Run with Debian's interpreter: /usr/bin/python3 bench/logistic_regression_torch.py
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads OpenBLAS

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_missing: /usr/bin/python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(3)

SAMPLES, INPUT_DIM, CLASSES, MINIBATCH = 60000, 784, 10, 32
SECONDS_PER_REPEAT = 2.5


def make_data():
    # Same distribution as the C++ benchmark (not the same numbers): pixels uniform in [0, 1),
    # label = the class c whose pixels j (j % 10 == c) sum highest, so the loss falls.
    g = torch.Generator().manual_seed(20240601)
    x = torch.rand(SAMPLES, INPUT_DIM, generator=g)
    scores = torch.zeros(SAMPLES, CLASSES)
    scores.index_add_(1, torch.arange(INPUT_DIM) % CLASSES, x)
    labels = scores.argmax(dim=1)
    xs = [t.contiguous() for t in x.split(MINIBATCH)]
    ys = [t.contiguous() for t in labels.split(MINIBATCH)]
    return xs, ys


def time_setting(threads, xs, ys, steps, repeats):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = torch.nn.Linear(INPUT_DIM, CLASSES)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = len(xs)
    state = {"next": 0, "loss": None}

    def run(n):
        i = state["next"]
        for _ in range(n):
            x, y = xs[i], ys[i]
            opt.zero_grad(set_to_none=True)
            logits = model(x)
            loss = F.cross_entropy(logits, y)  # mean: lr 0.1 on the mean = Loom's 0.1/M on the sum
            loss.backward()
            opt.step()
            with torch.no_grad():
                errors = (logits.argmax(dim=1) != y).sum()  # the Trainer's metric
            i = i + 1 if i + 1 < batches else 0
        state["next"] = i
        state["loss"], state["errors"] = loss, errors

    run(200)  # warm-up
    first_loss = state["loss"].item()
    if not steps:
        t0 = time.perf_counter()
        run(500)
        steps = max(100, int(SECONDS_PER_REPEAT * 500 / (time.perf_counter() - t0)))
    per_step = []
    for r in range(repeats):
        t0 = time.perf_counter()
        run(steps)
        s = (time.perf_counter() - t0) / steps
        per_step.append(s)
        print(f"  torch {threads} thread(s) repeat {r + 1}: {steps} steps, {s * 1e6:.2f} us/step, "
              f"{MINIBATCH / s:.0f} samples/s", flush=True)
    print(f"  torch loss after warm-up {first_loss:.4f}, at the end {state['loss'].item():.4f}",
          flush=True)
    return min(per_step), statistics.median(per_step)


def blas_library():
    """The libblas/openblas/blis file mapped into this process (after a matmul ran)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                name = path.rsplit("/", 1)[-1]
                if "blas" in name or "blis" in name:
                    return os.path.realpath(path)
    except OSError:
        pass
    return "unknown"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="comma-separated torch.set_num_threads values")
    p.add_argument("--steps", type=int, default=0, help="steps per repeat (default: ~2.5 s)")
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    print(f"PyTorch {torch.__version__}, logistic regression {INPUT_DIM} -> {CLASSES}, "
          f"minibatch {MINIBATCH}", flush=True)
    xs, ys = make_data()
    results = {}
    for t in (int(v) for v in a.threads.split(",")):
        results[t] = time_setting(t, xs, ys, a.steps, a.repeats)
        best, median = results[t]
        print(f"  torch {t} thread(s): best {MINIBATCH / best:.0f} samples/s ({best * 1e6:.2f} "
              f"us/step), median {MINIBATCH / median:.0f} samples/s", flush=True)
    threads = min(results, key=lambda t: results[t][0])
    best, median = results[threads]
    print(f"samples_per_second={MINIBATCH / best:.1f}")
    print(f"median_samples_per_second={MINIBATCH / median:.1f}")
    print(f"us_per_step={best * 1e6:.3f}")
    print(f"threads={threads}")
    print(f"blas={blas_library()}")


if __name__ == "__main__":
    main()
