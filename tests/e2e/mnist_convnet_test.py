"""Seed 002's convnet trains briefly on Fashion-MNIST: three short epochs of 4096 samples;
the training error must fall from epoch to epoch, and the test error end far below chance."""
import os
import subprocess
import sys

from example import expect, matching, run

if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"):
    print("SKIPPED: dataset-fashion-mnist is not installed (scripts/setup.sh installs it)")
    raise SystemExit(0)

lines = run("mnist_convnet", "3", "--samples", "4096")
epochs = matching(lines, r"Finished Epoch\[(\d)\]: loss = ([\d.]+) \* 4096, "
                         r"metric = ([\d.]+)% \* 4096 .*")
expect(len(epochs) == 3, "expected three epoch lines of 4096 samples each")
errors = [float(m.group(3)) for m in epochs]
losses = [float(m.group(2)) for m in epochs]
expect(losses[2] < losses[0], f"the loss did not fall: {losses}")
expect(errors[2] < errors[0], f"the training error did not fall: {errors}")
test = matching(lines, r"Finished Evaluation \[1\]: Minibatch\[1-313\]: metric = ([\d.]+)% \* 10000;")
expect(len(test) == 1, "no test line over the 10000 test images")
expect(float(test[0].group(1)) < 60, f"test error {test[0].group(1)}% is not far below chance")

# The seed's deployment section: the model applied to its input prints with its type, is saved,
# and classify_digit loads it and classifies one test image.
expect("Composite(keep: Sequence[tensor]) -> Sequence[tensor]" in lines, "model_mn not printed")
expect("Composite(Tensor[28,28]) -> Tensor[10]" in lines, "the applied model not printed")
build_dir, work_dir = sys.argv[1], sys.argv[2]
expect(os.path.exists(os.path.join(work_dir, "mnist.cmf")), "mnist.cmf was not saved")
proc = subprocess.run([os.path.join(build_dir, "classify_digit")], cwd=work_dir,
                      capture_output=True, text=True, timeout=300)
sys.stdout.write(proc.stdout)
expect(proc.returncode == 0, f"classify_digit failed: {proc.stderr}")
recognized = matching(proc.stdout.splitlines(), r"Recognized as: (\d) \(label (\d)\)")
expect(len(recognized) == 1, "classify_digit printed no class")

# `loom eval` of the saved model on the IDX test files gives the example's test error.
folder = "/usr/share/datasets/fashion-mnist"
proc = subprocess.run([os.path.join(build_dir, "tools", "loom"), "eval", "mnist.cmf",
                       "--data", f"features={folder}/t10k-images-idx3-ubyte.gz",
                       "--scale", f"features={1 / 255!r}",
                       "--data", f"labels={folder}/t10k-labels-idx1-ubyte.gz",
                       "--labels", "labels", "--output", "scores.csv"],
                      cwd=work_dir, capture_output=True, text=True, timeout=300)
sys.stdout.write(proc.stdout)
expect(proc.returncode == 0, f"loom eval failed: {proc.stderr}")
example_error = matching(lines, r"Test error: ([\d.]+)%")
eval_error = matching(proc.stdout.splitlines(), r"Classification error: ([\d.]+)% \(\d+ of 10000 samples\)")
expect(len(example_error) == 1 and len(eval_error) == 1, "no test error to compare")
expect(example_error[0].group(1) == eval_error[0].group(1),
       f"loom eval's error {eval_error[0].group(1)}% differs from the example's {example_error[0].group(1)}%")
print("mnist_convnet: 1 passed, 0 failed")
