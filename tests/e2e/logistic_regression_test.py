"""Seed 002's explicit-loop logistic regression: its printed lines, and a test error near
the seed's 8.11 %."""
from example import expect, matching, run

out = run("logistic_regression")
expect("criterion_lr: Composite(Tensor[2], SparseTensor[2]) -> Tuple[Tensor[1], Tensor[1]]" in out,
       "criterion printed wrongly")
expect("model_lr: Dense(Tensor[2]) -> Tensor[2]" in out, "model printed wrongly")
expect("Learning rate per minibatch: 0.1" in out, "no learning-rate line")
mb = matching(out, r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* 1600, "
                   r"metric = (\d+\.\d\d)% \* 1600;")
expect([(int(m[1]), int(m[2])) for m in mb] == [(i * 50 + 1, i * 50 + 50) for i in range(12)],
       "expected 12 progress lines of 50 minibatches")
expect(out[out.index("Learning rate per minibatch: 0.1") + 1].startswith(" Minibatch[   1-  50]"),
       "first progress line misformatted")
losses = [float(m[3]) for m in mb]
expect(losses[-1] < 0.3 < losses[0], f"loss did not fall: {losses}")
epoch = matching(out, r"Finished Epoch\[1\]: loss = (\d+\.\d{6}) \* 20000, "
                      r"metric = (\d+\.\d\d)% \* 20000 \d+\.\d{3}s \( *\d+\.\d samples/s\);")
expect(len(epoch) == 1, "no Finished Epoch[1] line")
ev = matching(out, r"Finished Evaluation \[1\]: Minibatch\[1-32\]: metric = (\d+\.\d\d)% \* 1024;")
expect(len(ev) == 1, "no Finished Evaluation line")
expect(6.0 <= float(ev[0][1]) <= 10.0, f"test error {ev[0][1]}% is not near 8.11%")
labels = matching(out, r"Label    : \[((?:\d, )*\d)\]")
predicted = matching(out, r"Predicted: \[((?:\d, )*\d)\]")
expect(len(labels) == 1 and len(predicted) == 1, "no Label/Predicted lines")
expect(labels[0][1] == "0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 0, 1",
       "labels differ from seed 002's")  # the same numpy-generated test data
agree = sum(a == b for a, b in zip(labels[0][1].split(", "), predicted[0][1].split(", ")))
expect(agree >= 16, f"only {agree} of 20 predictions match their labels")
print("logistic_regression: 1 passed, 0 failed")
