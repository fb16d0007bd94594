"""Seed 002's advanced training on a small part of Fashion-MNIST: the log file gets the first
10 minibatches and every 50th, the TensorBoard event file the same epochs and tests (read back
with tfevents.py, every checksum checked) and the model's graph, a checkpoint is kept for
every epoch, cross-validation runs every 3 epochs and its callback cuts the learning rate, the
test runs at the end, and the loss progression has one value per epoch."""
import os
import re
import sys

import tfevents
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

# TensorBoard: the version event, the graph, then per epoch summary/avg_loss and avg_metric (as
# fractions) equal to my.log's epoch lines, and per evaluation the test metric at the step of
# the training minibatches so far. An epoch of 1024 samples has no 50th minibatch.
path, events = tfevents.read_log_dir(os.path.join(work, "my_tensorboard_logdir"))
expect(events[0].get("file_version") == "brain.Event:2", f"first event of {path}: {events[0]}")
nodes = events[1].get("graph_def")
expect(nodes is not None, "the second event holds no graph")
names = set()
for node in nodes:
    expect(node["name"] not in names, f"two graph nodes named {node['name']}")
    for name in node["inputs"]:
        expect(name.split(":")[0] in names, f"{node['name']} reads {name}, not defined before it")
    names.add(node["name"])
ops = [node["op"] for node in nodes]
expect(ops.count("Input") == 2 and "Parameter" in ops and "Convolution" in ops,
       f"graph ops: {ops}")

scalars = [(tag, e["step"], value) for e in events for tag, value in e["scalars"]]
expected = []
for k, m in enumerate(epochs, start=1):
    loss, metric = re.search(r"loss = ([\d.]+) .* metric = ([\d.]+)%", m.group(0)).groups()
    expected += [("summary/avg_loss", k, float(loss), 6e-7),
                 ("summary/avg_metric", k, float(metric) / 100, 5e-5)]
training = [s for s in scalars if not s[0].endswith("test_avg_metric")]
expect(len(training) == len(expected), f"{len(training)} training scalars, {len(expected)} expected")
for (tag, step, value), (etag, estep, evalue, tolerance) in zip(training, expected):
    expect((tag, step) == (etag, estep) and abs(value - evalue) <= tolerance,
           f"{tag}@{step} = {value}, expected {etag}@{estep} = {evalue} from my.log")
evaluations = matching(log, r"Finished Evaluation \[\d+\]: Minibatch\[1-\d+\]: "
                            r"metric = ([\d.]+)% \* \d+;")
tests = [s for s in scalars if s[0].endswith("test_avg_metric")]
expect(len(tests) == len(evaluations), f"test scalars {tests} for {len(evaluations)} evaluations")
steps = [step for _, step, _ in tests]
expect(steps == sorted(steps) and steps[0] > 0, f"test metric steps {steps}")
for (tag, step, value), m in zip(tests, evaluations):
    expect(tag == "minibatch/test_avg_metric" and abs(value - float(m.group(1)) / 100) <= 5e-5,
           f"{tag}@{step} = {value}, my.log: {m.group(0)}")
