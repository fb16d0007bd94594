#!/usr/bin/python3
"""Loom's Python API against PyTorch and against Loom's C++ API, in one run.

1. Seed 002's explicit minibatch loop for logistic regression (784 -> 10, minibatch 32): numpy
   minibatches sliced in Python each step and passed to Trainer.train_minibatch, sgd at 0.1 per
   minibatch, cross_entropy_with_softmax and classification_error. The reference is the same
   loop in PyTorch (bench/logistic_regression_torch.py, run as a child process of this one, at
   its best thread setting). Target: Loom's samples/s at least 3x PyTorch's.
2. Seed 002's convnet trained through Function.train on numpy arrays (Fashion-MNIST, seed 002's
   recipe, one epoch of --conv-samples samples) against the same training in the C++ API
   (examples/mnist_convnet, built in the build tree), each side's samples/s as its
   ProgressPrinter reports the epoch; best of --conv-repeats alternating runs. Target: within 5 %.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_loop.py [--build build/release]
"""
import argparse
import contextlib
import gzip
import io
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import loom as C

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES, INPUT_DIM, CLASSES, MINIBATCH = 60000, 784, 10, 32
SECONDS_PER_REPEAT = 2.5
FASHION = "/usr/share/datasets/fashion-mnist/"


def logistic_regression_data():
    # The distribution of bench/logistic_regression: pixels uniform in [0, 1), the label the
    # class c whose pixels j (j % 10 == c) sum highest.
    rng = np.random.default_rng(20240601)
    x = rng.random((SAMPLES, INPUT_DIM), dtype=np.float32)
    scores = np.stack([x[:, c::CLASSES].sum(axis=1) for c in range(CLASSES)], axis=1)
    y = np.eye(CLASSES, dtype=np.float32)[scores.argmax(axis=1)]
    return x, y


def loom_loop(repeats, steps):
    X, Y = logistic_regression_data()
    C.cntk_py.set_fixed_random_seed(1)
    model = C.layers.Dense(CLASSES, activation=None)

    @C.Function
    def criterion_factory(data, label_one_hot):
        z = model(data)
        return C.cross_entropy_with_softmax(z, label_one_hot), C.classification_error(z, label_one_hot)

    criterion = criterion_factory(C.input_variable(INPUT_DIM), C.input_variable(CLASSES))
    trainer = C.Trainer(None, criterion, [C.sgd(model.parameters, C.learning_parameter_schedule(0.1))])
    x, y = criterion.arguments
    state = {"i": 0}

    def run(n):  # seed 002's loop: slice the numpy arrays, hand the minibatch to the trainer
        i = state["i"]
        for _ in range(n):
            trainer.train_minibatch({x: X[i:i + MINIBATCH], y: Y[i:i + MINIBATCH]})
            i = i + MINIBATCH if i + 2 * MINIBATCH <= SAMPLES else 0
        state["i"] = i

    run(200)
    first_loss = trainer.previous_minibatch_loss_average
    if not steps:
        t0 = time.perf_counter()
        run(2000)
        steps = max(1000, int(SECONDS_PER_REPEAT * 2000 / (time.perf_counter() - t0)))
    per_step = []
    for r in range(repeats):
        t0 = time.perf_counter()
        run(steps)
        s = (time.perf_counter() - t0) / steps
        per_step.append(s)
        print(f"  loom repeat {r + 1}: {steps} steps, {s * 1e6:.2f} us/step, "
              f"{MINIBATCH / s:.0f} samples/s", flush=True)
    print(f"  loom loss after warm-up {first_loss:.4f}, at the end "
          f"{trainer.previous_minibatch_loss_average:.4f}", flush=True)
    return MINIBATCH / min(per_step), MINIBATCH / statistics.median(per_step)


def torch_loop(repeats):
    script = os.path.join(HERE, "logistic_regression_torch.py")
    r = subprocess.run(["/usr/bin/python3", script, "--repeats", str(repeats)],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        print("  " + line, flush=True)
    figures = dict(re.findall(r"^(\w+)=(\S+)$", r.stdout, re.M))
    if r.returncode != 0 or "samples_per_second" not in figures:
        print("  (no PyTorch figures: " + r.stderr.strip()[-200:] + ")")
        return None
    return float(figures["samples_per_second"]), float(figures["median_samples_per_second"])


def fashion_mnist(samples):
    # As examples/fashion_mnist.h: the training images in np.random.seed(0)'s permutation.
    images = np.frombuffer(gzip.open(FASHION + "train-images-idx3-ubyte.gz").read()[16:],
                           np.uint8).reshape(-1, 28, 28).astype(np.float32) / 255
    labels = np.frombuffer(gzip.open(FASHION + "train-labels-idx1-ubyte.gz").read()[8:], np.uint8)
    np.random.seed(0)
    order = np.random.permutation(len(images))[:samples]
    import scipy.sparse
    y = scipy.sparse.csr_matrix((np.ones(samples, np.float32), (range(samples), labels[order])),
                                shape=(samples, 10))
    return np.ascontiguousarray(images[order]), y


def epoch_rate(text):
    m = re.search(r"Finished Epoch\[1\]: .*\(([\d.]+) samples/s\)", text)
    return float(m[1]) if m else None


def python_convnet(X, Y):
    C.cntk_py.set_fixed_random_seed(1)
    with C.layers.default_options(activation=C.relu, pad=False):
        model = C.layers.Sequential([
            C.layers.Convolution2D((5, 5), num_filters=32, reduction_rank=0, pad=True),
            C.layers.MaxPooling((3, 3), strides=(2, 2)),
            C.layers.Convolution2D((3, 3), num_filters=48),
            C.layers.MaxPooling((3, 3), strides=(2, 2)),
            C.layers.Convolution2D((3, 3), num_filters=64),
            C.layers.Dense(96),
            C.layers.Dropout(dropout_rate=0.5),
            C.layers.Dense(10, activation=None)])
    x, y = C.input_variable((28, 28)), C.input_variable(10, is_sparse=True)
    z = model(x)
    criterion = C.combine([C.cross_entropy_with_softmax(z, y), C.classification_error(z, y)])
    n = len(X)
    lrs = C.learning_parameter_schedule_per_sample(
        [0.001] * 12 + [0.0005] * 6 + [0.00025] * 6 + [0.000125] * 3 + [0.0000625] * 3 +
        [0.00003125], epoch_size=n)
    momentums = C.momentum_schedule_per_sample([0] * 5 + [0.9990239141819757], epoch_size=n)
    sizes = C.minibatch_size_schedule([256] * 6 + [512] * 9 + [1024] * 7 + [2048] * 8 + [4096],
                                      epoch_size=n)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        criterion.train((X, Y), minibatch_size=sizes, max_epochs=1,
                        parameter_learners=[C.momentum_sgd(model.parameters, lrs, momentums)],
                        callbacks=[C.logging.ProgressPrinter()])
    return epoch_rate(out.getvalue())


def cpp_convnet(build, samples, folder):
    program = os.path.join(os.path.abspath(build), "mnist_convnet")
    if not os.path.exists(program):
        return None
    r = subprocess.run([program, "1", "--samples", str(samples)], cwd=folder, capture_output=True,
                       text=True)
    return epoch_rate(r.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"),
                   help="the build folder holding examples/mnist_convnet's program")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=0, help="loop steps per repeat (default ~2.5 s)")
    p.add_argument("--conv-samples", type=int, default=12000)
    p.add_argument("--conv-repeats", type=int, default=3)
    p.add_argument("--skip-conv", action="store_true")
    a = p.parse_args()

    print(f"1. Logistic regression {INPUT_DIM} -> {CLASSES}, minibatch {MINIBATCH}, numpy "
          "minibatches from a Python loop", flush=True)
    loom_best, loom_median = loom_loop(a.repeats, a.steps)
    torch = torch_loop(a.repeats)
    print(f"loom_python_samples_per_second={loom_best:.1f} (median {loom_median:.1f})")
    if torch:
        ratio = loom_best / torch[0]
        print(f"torch_samples_per_second={torch[0]:.1f} (median {torch[1]:.1f})")
        print(f"ratio={ratio:.2f}x (median {loom_median / torch[1]:.2f}x), target 3x: "
              f"{'PASS' if ratio >= 3 else 'BELOW'}")

    if a.skip_conv:
        return
    print(f"\n2. Seed 002's convnet, one epoch of {a.conv_samples} Fashion-MNIST samples through "
          "Function.train: Python API vs C++ API", flush=True)
    X, Y = fashion_mnist(a.conv_samples)
    import tempfile
    folder = tempfile.mkdtemp()
    py_rates, cpp_rates = [], []
    for r in range(a.conv_repeats):
        cpp_rates.append(cpp_convnet(a.build, a.conv_samples, folder))
        py_rates.append(python_convnet(X, Y))
        print(f"  repeat {r + 1}: C++ {cpp_rates[-1]} samples/s, Python {py_rates[-1]} samples/s",
              flush=True)
    if None in cpp_rates or None in py_rates:
        print("  (no C++ figures: build the mnist_convnet example first)")
        return
    ratio = max(py_rates) / max(cpp_rates)
    print(f"conv_python_samples_per_second={max(py_rates):.1f}")
    print(f"conv_cpp_samples_per_second={max(cpp_rates):.1f}")
    print(f"conv_ratio={ratio:.3f} (Python / C++, best of {a.conv_repeats}), target within 5 %: "
          f"{'PASS' if ratio >= 0.95 else 'BELOW'}")


if __name__ == "__main__":
    main()
