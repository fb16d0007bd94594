#!/usr/bin/env python3
"""loom serve under load: requests/s and latency percentiles (p50, p99) with wrk, for one image
per request at concurrency 1 and 32, on seed 002's convnet (mnist.cmf, which
examples/mnist_convnet saves; trained briefly here when no --model is given).

    python3 bench/serve.py BUILD_DIR [--model mnist.cmf] [--seconds 10] [--max-batch 32]
                                     [--batch-delay-ms 0]

wrk (Debian's `wrk`) generates the load over loopback; the server and wrk share the machine,
so figures from a busy machine understate the server."""
import argparse
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("build_dir")
parser.add_argument("--model")
parser.add_argument("--seconds", type=int, default=10)
parser.add_argument("--max-batch", type=int, default=32)
parser.add_argument("--batch-delay-ms", type=float, default=0)
args = parser.parse_args()
if not shutil.which("wrk"):
    sys.exit("wrk is not installed (apt-get install wrk)")
build_dir = os.path.abspath(args.build_dir)
work = tempfile.mkdtemp(prefix="loom_serve_bench_")
model = os.path.abspath(args.model) if args.model else os.path.join(work, "mnist.cmf")
if not args.model:
    print("training mnist_convnet briefly (1 epoch of 2048 samples) for mnist.cmf ...", flush=True)
    subprocess.run([os.path.join(build_dir, "mnist_convnet"), "1", "--samples", "2048"], cwd=work,
                   check=True, stdout=subprocess.DEVNULL, timeout=1800)

# One Fashion-MNIST-shaped image: a deterministic pattern of pixels in [0, 1].
image = [[((r * 28 + c) * 37 % 256) / 255 for c in range(28)] for r in range(28)]
body = json.dumps({"inputs": [image]})
script = os.path.join(work, "post.lua")
with open(script, "w") as f:
    f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
    f.write(f"wrk.body = {json.dumps(body)}\n")

server = subprocess.Popen([os.path.join(build_dir, "tools", "loom"), "serve", model, "--port", "0",
                           "--name", "mnist", "--max-batch", str(args.max_batch),
                           "--batch-delay-ms", str(args.batch_delay_ms)],
                          stdout=subprocess.PIPE, text=True)
try:
    ready, _, _ = select.select([server.stdout], [], [], 120)
    if not ready:
        sys.exit("the server did not start within 120 s")
    line = server.stdout.readline()
    print(line.strip())
    url = f"http://127.0.0.1:{int(line.rsplit(':', 1)[1])}/v1/models/mnist:predict"

    def seconds(text):
        value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
        return float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1}[unit]

    rows = []
    for connections in (1, 32):
        out = subprocess.run(["wrk", "-t", str(min(connections, 4)), "-c", str(connections), "-d",
                              f"{args.seconds}s", "--latency", "-s", script, url],
                             capture_output=True, text=True, timeout=args.seconds + 120).stdout
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
        p50 = seconds(re.search(r"\s50%\s+(\S+)", out).group(1))
        p99 = seconds(re.search(r"\s99%\s+(\S+)", out).group(1))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        rows.append((connections, rps, p50, p99, int(errors.group(1)) if errors else 0))
    print(f"\nloom serve, one 28x28 image per request, max batch {args.max_batch}, "
          f"batch delay {args.batch_delay_ms} ms, {os.cpu_count()} CPUs")
    print(f"{'concurrency':>11} {'requests/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}")
    for c, rps, p50, p99, errors in rows:
        print(f"{c:>11} {rps:>11.1f} {p50 * 1e3:>8.2f} {p99 * 1e3:>8.2f} {errors:>8}")
finally:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=60)
    shutil.rmtree(work, ignore_errors=True)
