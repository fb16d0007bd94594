"""PyTorch's side of bench_distributed: DistributedDataParallel (gloo, float all-reduce) on the
same models, minibatch and optimizer as Loom's float data-parallel rows, N processes on this
machine.

usage: /usr/bin/python3 distributed_torch.py --model mlp|convnet --workers N --threads T
                                             --steps S

A step is one global minibatch of 256 Fashion-MNIST-shaped samples, 256 / N per worker (random
pixels and labels: reading the IDX files is not what is compared), cross-entropy summed over
the minibatch, SGD with seed 002's momentum 0.999 per sample (per minibatch 0.78) and 0.001 per
sample. 3 warm-up steps, then S timed ones. Rank 0 prints "RESULT samples_per_second=...".
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

MINIBATCH, WARM_UP = 256, 3


def model_of(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200),
                             nn.ReLU(), nn.Linear(200, 10))
    # Seed 002's convnet: 28 -> conv5 pad -> 28 -> pool3/2 -> 13 -> conv3 -> 11 -> pool3/2 -> 5
    # -> conv3 -> 3 -> 576 -> 96 -> 10.
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                         nn.Conv2d(32, 48, 3), nn.ReLU(), nn.MaxPool2d(3, 2),
                         nn.Conv2d(48, 64, 3), nn.ReLU(), nn.Flatten(), nn.Linear(576, 96),
                         nn.ReLU(), nn.Dropout(0.5), nn.Linear(96, 10))


def worker(rank, args, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(model_of(args.model))
    # Loom's 0.001 per sample on a summed loss is lr 0.001 on a sum; momentum per minibatch.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.999 ** MINIBATCH)
    local = MINIBATCH // args.workers
    generator = torch.Generator().manual_seed(rank)
    x = torch.rand(local, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (local,), generator=generator)

    def step():
        optimizer.zero_grad(set_to_none=True)
        # DDP averages the gradients over the workers: the sum over the global minibatch / N.
        loss = F.cross_entropy(model(x), y, reduction="sum") * args.workers
        loss.backward()
        optimizer.step()

    for _ in range(WARM_UP):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        print(f"RESULT samples_per_second={args.steps * MINIBATCH / seconds:.1f} "
              f"ms_per_step={1000 * seconds / args.steps:.3f}", flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "convnet"], default="mlp")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.workers)


if __name__ == "__main__":
    main()
