#!/usr/bin/python3
"""Per-op profile of Loom's training step from a `perf record --call-graph dwarf` run.

Every sample of the main thread taken inside Trainer::train_minibatch is charged to the
innermost op (`...Op::forward` / `...Op::backward`), learner update, or executor/trainer frame
on its stack; the share of libgomp frames (fork/join, barriers, spinning) is shown apart, as are
the samples of the other threads (OpenMP's workers, readers). Usage (bench/README.md):

    GOMP_SPINCOUNT=10000 perf record -F 2000 --call-graph dwarf,16384 -o step.data \
        build/release/bench_logistic_regression --no-reference --steps 20000 --repeats 2
    perf script -i step.data -F tid,ip,sym,dso | bench/op_profile.py [--us-per-step 20.0]
"""
import argparse
import re
import sys
from collections import Counter

OP = re.compile(r"(\w+Op)::(forward|backward)\b")
LEARNER = re.compile(r"(\w*Learner\w*)::")
OMP = re.compile(r"libgomp|GOMP_|gomp_")


def charge(frames):
    """The bucket of one main-thread stack (innermost frame first), or None outside a step."""
    if not any("Trainer::train_minibatch" in f for f in frames):
        return None
    in_omp = OMP.search(frames[0]) is not None
    for f in frames:
        m = OP.search(f)
        if m:
            return f"{m.group(1)}.{m.group(2)}", in_omp
        if LEARNER.search(f):
            return "learner update", in_omp
        if "Executor::" in f:
            return "executor (binding, bookkeeping, sums)", in_omp
        if "Trainer::" in f:
            return "trainer", in_omp
    return "other", in_omp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--us-per-step", type=float, default=0.0)
    args = ap.parse_args()
    stacks, frames, tid = [], [], None
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            if tid is not None:
                stacks.append((tid, frames))
            frames, tid = [], None
        elif tid is None:
            tid = line.split()[-1] if line.split() else "?"
        else:
            frames.append(line.strip())
    if tid is not None:
        stacks.append((tid, frames))
    main_tid = Counter(t for t, f in stacks if any("train_minibatch" in x for x in f)).most_common(1)
    main_tid = main_tid[0][0] if main_tid else None
    buckets, omp = Counter(), Counter()
    workers = 0
    for t, f in stacks:
        if t != main_tid:
            workers += 1
            continue
        c = charge(f)
        if c:
            buckets[c[0]] += 1
            omp[c[0]] += c[1]
    total = sum(buckets.values())
    if not total:
        sys.exit("no samples inside Trainer::train_minibatch")
    print(f"{'bucket':45s} {'% of step':>9s} {'us/step':>8s} {'of it in libgomp':>16s}")
    for name, n in buckets.most_common():
        us = f"{args.us_per_step * n / total:8.2f}" if args.us_per_step else f"{'-':>8s}"
        print(f"{name:45s} {100 * n / total:8.1f}% {us} {100 * omp[name] / n:15.0f}%")
    print(f"main-thread samples in the step: {total}; other threads' samples: {workers} "
          f"({100 * workers / total:.0f}% of the main thread's)")


if __name__ == "__main__":
    main()
