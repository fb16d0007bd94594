"""Seed 002's advanced training on a small part of Fashion-MNIST: the log file gets the first
10 minibatches and every 50th, a checkpoint is kept for every epoch, cross-validation runs
every 3 epochs and its callback cuts the learning rate, the test runs at the end, and the
loss progression has one value per epoch."""
import os
import sys

from example import expect, matching, run

if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
    print("SKIPPED: dataset-fashion-mnist is not installed (scripts/setup.sh installs it)")
    raise SystemExit(0)

lines = run("mnist_advanced_training", "--epochs", "7", "--samples", "1024",
            "--cv-samples", "512", "--test-samples", "512")
work = sys.argv[2]
expect(lines[0] == "Redirecting log to file my.log", "the printer did not redirect to my.log")
progression = matching(lines, r"loss progression = (.*)")
expect(len(progression) == 1, "no loss progression line")
losses = [float(v) for v in progression[0].group(1).split(", ")]
expect(len(losses) == 7, f"expected 7 epoch losses, got {losses}")

with open(os.path.join(work, "my.log")) as f:
    log = f.read().splitlines()
epochs = matching(log, r"Finished Epoch\[(\d+)\]: loss = [\d.]+ \* 1024, metric = [\d.]+% \* 1024 .*")
expect([int(m.group(1)) for m in epochs] == list(range(1, 8)), "epoch lines 1..7 of 1024 samples")
expect(len(matching(log, r" Minibatch\[ *\d+- *\d+\]: loss = .*")) >= 10, "first 10 minibatches")
expect(len(matching(log, r"Finished Evaluation \[\d+\]: Minibatch\[1-\d+\]: metric = .* \* 512;")) >= 1,
       "no evaluation line over the 512 test samples")

for i in range(7):
    expect(os.path.exists(os.path.join(work, f"model_mn.cmf{i}")), f"checkpoint {i} missing")
cuts = matching(lines, r"Improvement of metric from ([\d.]+) to ([\d.]+) insufficient\. "
                       r"Halving learning rate to ([\d.e-]+)\.")
for m in cuts:
    before, after = float(m.group(1)), float(m.group(2))
    expect((before - after) / before < 0.05 + 0.001, f"a cut after a large improvement: {m.group(0)}")
