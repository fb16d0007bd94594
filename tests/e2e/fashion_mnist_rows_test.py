"""Fashion-MNIST images as sequences of rows through Recurrence(LSTM(128)): two short epochs of
4096 images; the loss must fall and the test error end well below chance (90%)."""
import os

from example import expect, matching, run

if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
    print("SKIPPED: dataset-fashion-mnist is not installed (scripts/setup.sh installs it)")
    raise SystemExit(0)

lines = run("fashion_mnist_rows", "2", "--samples", "4096")
expect("Composite(rows: Sequence[Tensor[28]]) -> Tensor[10]" in lines, "the model not printed")
epochs = matching(lines, r"Finished Epoch\[(\d)\]: loss = ([\d.]+) \* (\d+), "
                         r"metric = ([\d.]+)% \* \d+ .*")
expect(len(epochs) == 2, "expected two epoch lines")
losses = [float(m.group(2)) for m in epochs]
expect(losses[1] < losses[0], f"the loss did not fall: {losses}")
test = matching(lines, r"Test error: ([\d.]+)%")
expect(len(test) == 1, "no test error")
expect(float(test[0].group(1)) < 50, f"test error {test[0].group(1)}% is not well below chance")
print("fashion_mnist_rows: 1 passed, 0 failed")
