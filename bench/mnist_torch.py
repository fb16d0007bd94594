#!/usr/bin/python3
"""The PyTorch side of bench_mnist: Fashion-MNIST training and inference rows, and seed 002's
recipe for accuracy.

Rows (--row NAME; bench_mnist runs each in its own process and measures its peak RSS):

    conv_train_256, conv_train_64   seed 002's convnet, one training step per minibatch
    conv_infer_256                  the convnet forward in eval mode, no autograd
    mlp_train_64, mlp_train_256     784-200-200-10 relu MLP, one training step per minibatch

A training step is CNTK's: cross entropy with softmax SUMMED over the minibatch, the
classification error computed as the Trainer does, and momentum SGD with CNTK's per-sample
parameters (lr 0.001 per sample applied to the summed gradient, momentum 0.9990239141819757
per sample, i.e. beta = 0.9990239141819757 ** M per minibatch of M, unit gain:
v = beta v + (1 - beta) lr g; p -= v; CNTK-SEMANTICS.md §2.4). Minibatches are drawn from the
60,000 training images in a random order each sweep (index_select into pre-built tensors).
After a warm-up, steps are timed for --seconds; the last lines are machine-readable:

    samples_per_second=<samples / second>
    steps=<timed steps>
    threads=<torch threads>

--accuracy trains seed 002's convnet with seed 002's recipe (shuffle with np.random.seed(0),
54,000 training / 6,000 cross-validation images, the lr, momentum and minibatch-size schedules
per epoch of 54,000 samples, minibatches cut in order across epochs as MinibatchSourceFromData
does) for --epochs epochs and prints the cross-validation and test accuracy.

Run with Debian's interpreter: /usr/bin/python3 bench/mnist_torch.py --row mlp_train_64
"""
import argparse
import gzip
import os
import resource
import sys
import time

# Before torch starts its OpenMP pool and loads OpenBLAS: idle threads sleep instead of
# spinning (the machine has two cores), and OpenBLAS, under PyTorch's own threads, uses one.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    print("torch_missing: /usr/bin/python3 cannot import torch and numpy "
          "(apt-get install python3-torch python3-numpy)")
    sys.exit(3)

DATA = "/usr/share/datasets/fashion-mnist"
MOMENTUM_PER_SAMPLE = 0.9990239141819757
LR_PER_SAMPLE = 0.001
ROWS = ("conv_train_256", "conv_train_64", "conv_infer_256", "mlp_train_64", "mlp_train_256")


def read_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(split):
    """Images [N,1,28,28] float32 in [0,1] and int64 labels."""
    x = read_idx(f"{split}-images-idx3-ubyte.gz").astype(np.float32)[:, None] / 255.0
    y = read_idx(f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def convnet():
    # Seed 002: default_options(activation=relu, pad=False), glorot_uniform weights, zero bias.
    model = nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(32, 48, 3), nn.ReLU(),
        nn.MaxPool2d(3, 2),
        nn.Conv2d(48, 64, 3), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(576, 96), nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(96, 10))
    return glorot(model)


def mlp():
    return glorot(nn.Sequential(nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(),
                                nn.Linear(200, 10)))


def glorot(model):
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return model


class CntkMomentumSGD:
    """CNTK's momentum_sgd with per-sample lr and momentum and unit gain, on the summed loss."""

    def __init__(self, params):
        self.params = list(params)
        self.velocity = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, lr_per_sample, momentum_per_sample, minibatch):
        beta = momentum_per_sample ** minibatch
        for p, v in zip(self.params, self.velocity):
            v.mul_(beta).add_(p.grad, alpha=(1 - beta) * lr_per_sample)
            p.sub_(v)
            p.grad = None


def train_step(model, opt, x, y, momentum_per_sample):
    z = model(x)
    loss = F.cross_entropy(z, y, reduction="sum")
    errors = (z.argmax(dim=1) != y).sum()  # the Trainer's metric, every step
    loss.backward()
    opt.step(LR_PER_SAMPLE, momentum_per_sample, x.shape[0])
    return loss.item(), errors.item()


def time_row(row, seconds, warmup):
    minibatch = int(row.rsplit("_", 1)[1])
    x_all, y_all = load("train")
    if row.startswith("mlp"):
        x_all = x_all.reshape(len(x_all), 784)
    torch.manual_seed(1)
    model = convnet() if row.startswith("conv") else mlp()
    opt = CntkMomentumSGD(model.parameters())
    infer = "infer" in row
    if infer:
        model.eval()
    gen = torch.Generator().manual_seed(2)
    order, cursor = torch.randperm(len(x_all), generator=gen), 0

    def step():
        nonlocal order, cursor
        if cursor + minibatch > len(order):
            order, cursor = torch.randperm(len(x_all), generator=gen), 0
        idx = order[cursor:cursor + minibatch]
        cursor += minibatch
        x, y = x_all.index_select(0, idx), y_all.index_select(0, idx)
        if infer:
            with torch.no_grad():
                model(x)
            return None
        return train_step(model, opt, x, y, MOMENTUM_PER_SAMPLE)

    for _ in range(warmup):
        step()
    steps, t0 = 0, time.perf_counter()
    while True:
        last = step()
        steps += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            break
    if last is not None:
        print(f"last minibatch: loss {last[0] / minibatch:.4f}, errors {last[1]}/{minibatch}")
    print(f"samples_per_second={steps * minibatch / elapsed:.1f}")
    print(f"steps={steps}")
    print(f"threads={torch.get_num_threads()}")
    print(f"peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")


def schedule(values, count, epoch_size):
    return values[min(count // epoch_size, len(values) - 1)]


def accuracy(epochs, seed):
    x, y = load("train")
    x_test, y_test = load("t10k")
    np.random.seed(0)  # seed 002's one shuffle
    idx = torch.from_numpy(np.random.permutation(len(x)))
    x, y = x[idx], y[idx]
    x_train, x_cv, y_train, y_cv = x[:54000], x[54000:], y[:54000], y[54000:]
    epoch = len(x_train)
    lrs = [0.001] * 12 + [0.0005] * 6 + [0.00025] * 6 + [0.000125] * 3 + [0.0000625] * 3 + [
        0.00003125]
    momentums = [0] * 5 + [MOMENTUM_PER_SAMPLE]
    minibatch_sizes = [256] * 6 + [512] * 9 + [1024] * 7 + [2048] * 8 + [4096]
    torch.manual_seed(seed)
    model = convnet()
    opt = CntkMomentumSGD(model.parameters())
    seen, cursor = 0, 0
    for e in range(epochs):
        model.train()
        loss_sum, err_sum, n, t0 = 0.0, 0, 0, time.perf_counter()
        end = (e + 1) * epoch
        while seen < end:
            # CNTK cuts minibatches in order across sweeps and ends an epoch within a minibatch.
            m = min(schedule(minibatch_sizes, seen, epoch), end - seen)
            rows = torch.arange(cursor, cursor + m) % epoch
            cursor = (cursor + m) % epoch
            z = model(x_train[rows])
            loss = F.cross_entropy(z, y_train[rows], reduction="sum")
            err_sum += (z.argmax(dim=1) != y_train[rows]).sum().item()
            loss.backward()
            opt.step(schedule(lrs, seen, epoch), schedule(momentums, seen, epoch), m)
            loss_sum += loss.item()
            n += m
            seen += m
        dt = time.perf_counter() - t0
        print(f"Finished Epoch[{e + 1}]: loss = {loss_sum / n:.6f} * {n}, metric = "
              f"{100.0 * err_sum / n:.2f}% * {n} {dt:.3f}s ({n / dt:.1f} samples/s);", flush=True)
    model.eval()
    for name, xs, ys in (("cv", x_cv, y_cv), ("test", x_test, y_test)):
        with torch.no_grad():
            errors = sum((model(xs[i:i + 1000]).argmax(dim=1) != ys[i:i + 1000]).sum().item()
                         for i in range(0, len(xs), 1000))
        print(f"{name}_error={100.0 * errors / len(xs):.2f}%")
        print(f"{name}_accuracy={100.0 - 100.0 * errors / len(xs):.2f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--row", choices=ROWS)
    p.add_argument("--accuracy", action="store_true")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=1, help="torch seed of --accuracy's weights and dropout")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args()
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        print(f"data_missing: {DATA} (apt-get install dataset-fashion-mnist)")
        sys.exit(4)
    torch.set_num_threads(a.threads)
    if a.accuracy:
        accuracy(a.epochs, a.seed)
    elif a.row:
        time_row(a.row, a.seconds, a.warmup)
    else:
        p.error("give --row NAME or --accuracy")


if __name__ == "__main__":
    main()
