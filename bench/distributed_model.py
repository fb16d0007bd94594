#!/usr/bin/env python3
"""The speed-up model of docs/distributed.md ("Speed: a model to 64 machines"), computed.

Inputs are measured (bench_distributed: compute time per sample t on one core, quantization
time q per step) or exact (parameter counts, 1-bit compression r). A network has bandwidth W
and per-message latency alpha; a ring all-reduce of M bytes over N machines costs
2(N-1)alpha + 2(N-1)/N M/W. Per step:

  float data-parallel, no overlap:  T = t B/N + ring(4P)
  float data-parallel, overlapped:  Loom's buckets (consecutive gradients under 64 KiB packed
      up to 64 KiB, larger ones alone) start their all-reduce when the backward pass has
      finished their last gradient (each layer's share of the compute by its multiply-adds).
      All-reduces in flight share the bandwidth but not the latency: bucket i ends at
      max(ready_i + ring_i, end_(i-1) + bytes term_i); T = the later of the compute's end and
      the last bucket's
  1-bit:                            T = t B/N + q + ring(4P/r)   (quantization needs them all)
  block momentum:                   T = t b + ring(4P)/K + log2(N) alpha, N b samples per step

The speed-up is samples per second over one machine's (1/t).

  python3 bench/distributed_model.py
"""
import math

# Per model: t (s per sample, one core), q (s per step), and the layers in forward order as
# (parameters, forward multiply-adds per sample, whether the backward computes the input's
# gradient too).
MODELS = {
    # seed 002's MLP 784-200-200-10
    "MLP": dict(t=18.1e-6, q=0.46e-3, layers=[(157000, 156800, False), (40200, 40000, True),
                                              (2010, 2000, True)]),
    # seed 002's convnet: conv 5x5x32 (pad), pool, conv 3x3x48, pool, conv 3x3x64, dense 96,
    # dense 10
    "convnet": dict(t=297e-6, q=0.23e-3, layers=[(832, 28 * 28 * 32 * 25, False),
                                                 (13872, 11 * 11 * 48 * 288, True),
                                                 (27712, 3 * 3 * 64 * 432, True),
                                                 (55392, 576 * 96, True),
                                                 (970, 96 * 10, True)]),
}
NETWORKS = {"10 Gbit/s": (1.25e9, 25e-6), "100 Gbit/s": (12.5e9, 2e-6)}
B, b, K, R = 4096, 256, 16, 22
WORKERS = (8, 16, 32, 64)


def ring(n, nbytes, bandwidth, alpha):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bandwidth


BUCKET_BYTES = 64 << 10  # loom/distributed/communicator.cpp, kBucketBytes


def overlapped_step(model, n, bandwidth, alpha):
    """Forward, then the layers' backward last to first; a bucket's all-reduce starts when its
    last gradient is final."""
    layers = model["layers"]
    forward = sum(macs for _, macs, _ in layers)
    backward = [macs * (2 if dx else 1) for _, macs, dx in layers]
    seconds_per_mac = model["t"] / (forward + sum(backward))
    clock = forward * seconds_per_mac * B / n
    buckets = []  # [bytes, ready time, packed]
    for (params, _, _), work in reversed(list(zip(layers, backward))):
        clock += work * seconds_per_mac * B / n
        size = 4 * params
        if size < BUCKET_BYTES and buckets and buckets[-1][2] and \
                buckets[-1][0] + size <= BUCKET_BYTES:
            buckets[-1][0] += size
            buckets[-1][1] = clock
        else:
            buckets.append([size, clock, size < BUCKET_BYTES])
    end = 0.0
    for size, ready, _ in buckets:
        end = max(ready + ring(n, size, bandwidth, alpha), end + ring(n, size, bandwidth, 0))
    return max(clock, end)


def speedups(model, n, bandwidth, alpha):
    t, q = model["t"], model["q"]
    p = sum(params for params, _, _ in model["layers"])
    float_step = t * B / n + ring(n, 4 * p, bandwidth, alpha)
    one_bit = t * B / n + q + ring(n, 4 * p / R, bandwidth, alpha)
    block = t * b + ring(n, 4 * p, bandwidth, alpha) / K + math.log2(n) * alpha
    per_second = lambda samples, seconds: samples / seconds * t
    return (per_second(B, float_step), per_second(B, overlapped_step(model, n, bandwidth, alpha)),
            per_second(B, one_bit), per_second(n * b, block))


def main():
    print("| model, network: float / overlapped / 1-bit / block momentum | " +
          " | ".join(f"N = {n}" for n in WORKERS) + " |")
    print("|---" * (len(WORKERS) + 1) + "|")
    for name, model in MODELS.items():
        for network, (bandwidth, alpha) in NETWORKS.items():
            cells = [" / ".join(f"{s:.1f}" for s in speedups(model, n, bandwidth, alpha))
                     for n in WORKERS]
            print(f"| {name}, {network} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
