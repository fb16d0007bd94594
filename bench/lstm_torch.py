#!/usr/bin/python3
"""The PyTorch side of bench_lstm: recurrent training and inference rows, and the Fashion-MNIST
rows recipe for accuracy.

Rows (--row NAME; bench_lstm runs each in its own process and measures its peak RSS):

    lstm_train      Embedding(1000->50), LSTM(128), last step, Linear(5); 32 sequences per
                    minibatch with lengths uniform in 5..50; cross entropy, SGD lr 0.1
    gru_train       the same with GRU(128)
    rows_train_256  Fashion-MNIST rows: 28 steps of 28 pixels, LSTM(128), last step,
                    Linear(10); minibatch 256 (random pixels: the speed does not depend on them)
    lstm_infer      lstm_train's forward in eval mode, no autograd

Variable-length rows run nn.LSTM/nn.GRU two ways, each timed for half of --seconds, and keep
the faster: on a PackedSequence (pack_padded_sequence, enforce_sorted=False: PyTorch's own
kernels, no work on padding) and on the padded [T, N, 50] tensor (nn.LSTM then runs oneDNN's LSTM
primitive; the last step of each sequence is gathered). Weights are CNTK's initialization
(glorot uniform, zero biases; the second bias nn.LSTM has is kept at zero). Minibatches are
drawn before the clock starts. The last lines are machine-readable:

    samples_per_second=<sequences / second>
    tokens_per_second=<steps / second>
    samples_per_cpu_second=<sequences / second of the process's CPU time>
    mode=<packed | padded>
    threads=<torch threads>

--accuracy trains the Fashion-MNIST rows model with examples/fashion_mnist_rows.cpp's recipe
(54,000 training images in seed 002's np.random.seed(0) order, minibatches of 128 in order,
Adam with lr 0.001 and CNTK's unit-gain form, summed cross entropy) for --epochs epochs and
prints the test accuracy.

Run with Debian's interpreter: /usr/bin/python3 bench/lstm_torch.py --row lstm_train
"""
import argparse
import gzip
import os
import resource
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence
except ImportError:
    print("torch_missing: /usr/bin/python3 cannot import torch and numpy "
          "(apt-get install python3-torch python3-numpy)")
    sys.exit(3)

DATA = "/usr/share/datasets/fashion-mnist"
ROWS = ("lstm_train", "gru_train", "rows_train_256", "lstm_infer")


class Model(nn.Module):
    """[Embedding], LSTM or GRU, the last step of each sequence, Linear."""

    def __init__(self, cell, inputs, hidden, classes, vocabulary=0):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, inputs) if vocabulary else None
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(inputs, hidden)
        self.out = nn.Linear(hidden, classes)
        with torch.no_grad():  # CNTK's initialization
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    nn.init.xavier_uniform_(p)
                else:
                    p.zero_()
        self.rnn.bias_hh_l0.requires_grad_(False)

    def forward(self, x, lengths, packed):
        """x: [T, N] token ids or [T, N, inputs]; lengths: int64 [N]."""
        e = self.embed(x) if self.embed is not None else x
        if packed:
            _, h = self.rnn(pack_padded_sequence(e, lengths, enforce_sorted=False))
            last = (h[0] if isinstance(h, tuple) else h)[-1]
        else:
            out, _ = self.rnn(e)
            last = out[lengths - 1, torch.arange(len(lengths))]
        return self.out(last)


def minibatches(row, count, gen):
    """count minibatches (x, lengths, labels) drawn as the row says."""
    out = []
    for _ in range(count):
        if row == "rows_train_256":
            n, t = 256, 28
            x = torch.rand(t, n, 28, generator=gen)
            lengths = torch.full((n,), t, dtype=torch.int64)
            labels = torch.randint(0, 10, (n,), generator=gen)
        else:
            n = 32
            lengths = torch.randint(5, 51, (n,), generator=gen)
            x = torch.randint(0, 1000, (int(lengths.max()), n), generator=gen)
            labels = torch.randint(0, 5, (n,), generator=gen)
        out.append((x, lengths, labels))
    return out


def time_mode(model, opt, batches, packed, train, seconds, warmup):
    def step(i):
        x, lengths, labels = batches[i % len(batches)]
        if not train:
            with torch.no_grad():
                model(x, lengths, packed)
            return 0
        z = model(x, lengths, packed)
        loss = F.cross_entropy(z, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for i in range(warmup):
        step(i)
    steps, sequences, tokens, t0, cpu0 = 0, 0, 0, time.perf_counter(), time.process_time()
    while True:
        step(steps)
        x, lengths, _ = batches[steps % len(batches)]
        sequences += len(lengths)
        tokens += int(lengths.sum())
        steps += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            break
    return sequences / elapsed, tokens / elapsed, sequences / (time.process_time() - cpu0), steps


def time_row(row, seconds, warmup):
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(2)
    if row == "rows_train_256":
        model = Model("lstm", 28, 128, 10)
    else:
        model = Model("gru" if row.startswith("gru") else "lstm", 50, 128, 5, vocabulary=1000)
    train = "infer" not in row
    if not train:
        model.eval()
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    batches = minibatches(row, 64, gen)
    # Fixed-length sequences need no packing.
    modes = (False,) if row == "rows_train_256" else (True, False)
    best = None
    for packed in modes:
        sps, tps, cpu, steps = time_mode(model, opt, batches, packed, train,
                                         seconds / len(modes), warmup)
        name = "packed" if packed else "padded"
        print(f"{name}: {sps:.1f} sequences/s, {tps:.0f} tokens/s ({steps} steps)")
        if best is None or sps > best[0]:
            best = (sps, tps, cpu, name)
    print(f"samples_per_second={best[0]:.1f}")
    print(f"tokens_per_second={best[1]:.1f}")
    print(f"samples_per_cpu_second={best[2]:.1f}")
    print(f"mode={best[3]}")
    print(f"threads={torch.get_num_threads()}")
    print(f"peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")


def read_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    rank = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(split):
    x = read_idx(f"{split}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read_idx(f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


class CntkAdam:
    """CNTK's adam (unit gain): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    p -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps), on the summed loss's gradient."""

    def __init__(self, params, lr, b1=0.9, b2=0.999, eps=1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        scale = self.lr * (1 - self.b2 ** self.t) ** 0.5 / (1 - self.b1 ** self.t)
        for p, m, v in zip(self.params, self.m, self.v):
            m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
            p.sub_(scale * m / (v.sqrt() + self.eps))
            p.grad = None


def accuracy(epochs, seed, minibatch=128, lr=0.001):
    x, y = load("train")
    x_test, y_test = load("t10k")
    np.random.seed(0)  # seed 002's shuffle; the first 54,000 train
    idx = torch.from_numpy(np.random.permutation(len(x))[:54000])
    x, y = x[idx], y[idx]
    torch.manual_seed(seed)
    model = Model("lstm", 28, 128, 10)
    opt = CntkAdam(model.parameters(), lr)
    lengths = torch.full((minibatch,), 28, dtype=torch.int64)
    for e in range(epochs):
        loss_sum, err_sum, n, t0 = 0.0, 0, 0, time.perf_counter()
        for i in range(0, len(x), minibatch):
            xb, yb = x[i:i + minibatch].transpose(0, 1), y[i:i + minibatch]
            z = model(xb, lengths[:len(yb)], False)
            loss = F.cross_entropy(z, yb, reduction="sum")
            err_sum += (z.argmax(dim=1) != yb).sum().item()
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            n += len(yb)
        dt = time.perf_counter() - t0
        print(f"Finished Epoch[{e + 1}]: loss = {loss_sum / n:.6f} * {n}, metric = "
              f"{100.0 * err_sum / n:.2f}% * {n} {dt:.3f}s ({n / dt:.1f} samples/s);", flush=True)
    with torch.no_grad():
        errors = 0
        for i in range(0, len(x_test), 1000):
            xb = x_test[i:i + 1000].transpose(0, 1)
            z = model(xb, torch.full((xb.shape[1],), 28, dtype=torch.int64), False)
            errors += (z.argmax(dim=1) != y_test[i:i + 1000]).sum().item()
    print(f"test_accuracy={100.0 - 100.0 * errors / len(x_test):.2f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--row", choices=ROWS)
    p.add_argument("--accuracy", action="store_true")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, help="torch threads (default: OMP_NUM_THREADS's)")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.accuracy:
        if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
            print(f"data_missing: {DATA} (apt-get install dataset-fashion-mnist)")
            sys.exit(4)
        accuracy(a.epochs, a.seed)
    elif a.row:
        time_row(a.row, a.seconds, a.warmup)
    else:
        p.error("give --row NAME or --accuracy")


if __name__ == "__main__":
    main()
