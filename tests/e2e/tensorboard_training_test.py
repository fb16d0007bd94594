"""TensorBoard event file of tensorboard_training, read with tfevents.py (every length and
checksum checked): the version, the graph, then CNTK's scalars with the values the
ProgressPrinter beside it printed: minibatch/avg_loss and avg_metric at each printed window
(step: minibatches since the start), summary/avg_loss and avg_metric per epoch (step: the
epoch), minibatch/test_avg_metric after training (step 20), and a write_value."""
import os
import sys

import tfevents
from example import expect, matching, run

lines = run("tensorboard_training")
work = sys.argv[2]
path, events = tfevents.read_log_dir(os.path.join(work, "logdir"))
expect(events[0].get("file_version") == "brain.Event:2", f"first event of {path}: {events[0]}")
nodes = events[1].get("graph_def") or []
ops = sorted(node["op"] for node in nodes)
expect(ops.count("Input") == 2 and ops.count("Parameter") == 2 and "Times" in ops,
       f"graph ops {ops}")

# (tag, step, value, tolerance): the printed values are rounded; the event's are float32.
expected = []
epoch = 0
for line in lines:
    window = matching([line], r" Minibatch\[ *(\d+)- *(\d+)\]: loss = ([\d.]+) \* 24, "
                              r"metric = ([\d.]+)% \* 24;")
    summary = matching([line], r"Finished Epoch\[(\d+)\]: loss = ([\d.]+) \* 80, "
                               r"metric = ([\d.]+)% \* 80 .*")
    test = matching([line], r"Finished Evaluation \[1\]: Minibatch\[1-3\]: "
                            r"metric = ([\d.]+)% \* 24;")
    if window:
        step = epoch * 10 + int(window[0].group(2))
        expected += [("minibatch/avg_loss", step, float(window[0].group(3)), 6e-7),
                     ("minibatch/avg_metric", step, float(window[0].group(4)) / 100, 5e-5)]
    elif summary:
        epoch = int(summary[0].group(1))
        expected += [("summary/avg_loss", epoch, float(summary[0].group(2)), 6e-7),
                     ("summary/avg_metric", epoch, float(summary[0].group(3)) / 100, 5e-5)]
    elif test:
        expected.append(("minibatch/test_avg_metric", 20, float(test[0].group(1)) / 100, 5e-5))
expected.append(("learning_rate", 20, 0.1, 1e-7))
expect(len(expected) == 6 * 2 + 4 + 1 + 1, f"unexpected printer output: {lines}")

scalars = [(tag, e["step"], value) for e in events[2:] for tag, value in e["scalars"]]
expect(len(scalars) == len(expected), f"{len(scalars)} scalars, expected {len(expected)}")
for (tag, step, value), (etag, estep, evalue, tolerance) in zip(scalars, expected):
    expect((tag, step) == (etag, estep) and abs(value - evalue) <= tolerance,
           f"{tag}@{step} = {value}, expected {etag}@{estep} = {evalue}")
print(f"{len(scalars)} scalars match")
