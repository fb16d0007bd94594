"""Accuracy, not speed: is 1-bit SGD's divergence under momentum Loom's or the algorithm's?

PyTorch trains seed 002's Fashion-MNIST MLP (784-200-200-10, relu) with the recipe of
examples/fashion_mnist.h (0.001 per sample on summed gradients; minibatches of 256 for 6
epochs, then 512; unit-gain momentum 0.99902 per sample from epoch --momentum-epoch) on one
process, each gradient passed through CNTK's 1-bit column quantizer with error feedback
(--bits 1: per column of a weight's output axis, the values >= 0 and < 0 each reconstruct to
their mean; the residual carries to the next step) or not (--bits 32). It prints the training
error of each epoch. docs/distributed.md ("Accuracy") has its figures.

usage: /usr/bin/python3 one_bit_momentum_torch.py [--bits 1|32] [--samples N] [--epochs E]
                                                   [--momentum-epoch K] [--seed S]
"""
import argparse
import gzip

import numpy as np
import torch

FOLDER = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    with gzip.open(FOLDER + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def quantize(gradient, residual):
    """CNTK's 1-bit quantizer: (reconstruction, new residual), columns along the last axis."""
    v = (gradient + residual).reshape(-1, gradient.shape[-1])
    negative = v < 0
    n0 = negative.sum(1, keepdim=True).clamp(min=1)
    n1 = (~negative).sum(1, keepdim=True).clamp(min=1)
    mean0 = (v * negative).sum(1, keepdim=True) / n0
    mean1 = (v * ~negative).sum(1, keepdim=True) / n1
    q = torch.where(negative, mean0, mean1)
    return q.reshape(gradient.shape), (v - q).reshape(gradient.shape)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bits", type=int, default=1, choices=(1, 32))
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=7)
    parser.add_argument("--momentum-epoch", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    images = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255
    labels = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    order = np.random.RandomState(0).permutation(len(labels))[:args.samples]
    x, y = torch.tensor(images[order]), torch.tensor(labels[order])

    def glorot(fan_in, fan_out):
        return (torch.rand(fan_in, fan_out) * 2 - 1) * (6 / (fan_in + fan_out)) ** 0.5

    params = [glorot(784, 200), torch.zeros(200), glorot(200, 200), torch.zeros(200),
              glorot(200, 10), torch.zeros(10)]
    for p in params:
        p.requires_grad_(True)
    velocity = [torch.zeros_like(p) for p in params]
    residual = [torch.zeros_like(p) for p in params]
    for epoch in range(1, args.epochs + 1):
        minibatch = 256 if epoch <= 6 else 512
        momentum = 0.9990239141819757 if epoch >= args.momentum_epoch else 0.0
        errors = 0
        permutation = torch.randperm(args.samples)
        for start in range(0, args.samples, minibatch):
            i = permutation[start:start + minibatch]
            h = torch.relu(x[i] @ params[0] + params[1])
            h = torch.relu(h @ params[2] + params[3])
            z = h @ params[4] + params[5]
            loss = torch.nn.functional.cross_entropy(z, y[i], reduction="sum")
            errors += (z.argmax(1) != y[i]).sum().item()
            gradients = torch.autograd.grad(loss, params)
            with torch.no_grad():
                m = momentum ** len(i)
                for k, (p, g) in enumerate(zip(params, gradients)):
                    if args.bits == 1:
                        g, residual[k] = quantize(g, residual[k])
                    velocity[k].mul_(m).add_((1 - m) * g)
                    p.sub_(0.001 * velocity[k])
        print(f"epoch {epoch}: training error {100 * errors / args.samples:.2f} %", flush=True)


if __name__ == "__main__":
    main()
