"""ONNX export checked by independent tools: onnx_models writes an MLP, seed 002's convnet, a
convnet with batch normalization and average/global pooling, and a model of the elementwise,
shape and reduction ops, an LSTM classifier and a GRU/RNN model over sequences of different
lengths, each with a batch of inputs and Loom's outputs. Debian's onnx checker
must accept every file; OpenCV's ONNX importer (python3-opencv) and onnxruntime (npm's
onnxruntime-node, installed by scripts/setup.sh) must give Loom's outputs within 1e-4.
OpenCV 4.6 cannot read the ops model (ReduceSum with its axes as an input, opset 13) nor the
sequence models (sequence_lens); onnxruntime checks those, and the windows model (a transposed
convolution, layer normalization, pooling with an overhanging last window, gathers, max
unpooling)."""
import os
import subprocess
import sys

# python3-onnx and python3-opencv are Debian's: run under Debian's interpreter.
try:
    import cv2
    import numpy as np
    import onnx
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    raise

from example import expect, fail, run

TOLERANCE = 1e-4
NPM_PREFIX = os.environ.get("LOOM_NPM_PREFIX", "/opt/loom-npm")  # scripts/setup.sh installs there
build_dir, work_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
run("onnx_models", ".")
os.chdir(work_dir)

models = []
for line in open("manifest.txt"):
    name, ins, outs, *kind = line.split()
    models.append((name, [int(d) for d in ins.split(",")], [int(d) for d in outs.split(",")],
                   kind == ["sequences"]))
expect([m[0] for m in models] == ["mlp", "convnet", "bn_convnet", "ops", "lstm", "gru_rnn",
                                  "windows"], "unexpected models")


def compare(what, name, got, want):
    expect(got.size == want.size, f"{what} on {name}: {got.size} values, Loom {want.size}")
    diff = float(np.abs(got.reshape(want.shape) - want).max())
    print(f"{what} {name}: max |difference| {diff:.3g}")
    expect(diff <= TOLERANCE, f"{what} on {name} differs from Loom by {diff}")


ort_modules = os.path.join(NPM_PREFIX, "node_modules")
have_ort = os.path.isdir(os.path.join(ort_modules, "onnxruntime-node"))
if not have_ort:
    print(f"SKIPPED onnxruntime: {ort_modules}/onnxruntime-node is not installed "
          "(scripts/setup.sh installs it with npm; LOOM_NPM_PREFIX names another prefix)")
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnxruntime_eval.js")

for name, in_shape, out_shape, sequences in models:
    model = onnx.load(name + ".onnx")
    onnx.checker.check_model(model, full_check=True)  # raises on any violation
    expect(model.opset_import[0].version == 13, f"{name}: opset {model.opset_import[0].version}")
    x = np.fromfile(name + ".in", dtype=np.float32).reshape(in_shape)
    want = np.fromfile(name + ".out", dtype=np.float32).reshape(out_shape)

    if name not in ("ops", "windows") and not sequences:
        net = cv2.dnn.readNetFromONNX(name + ".onnx")
        # cv2 turns a 3-D array into a 2-D image with channels: a [N, 28, 28] batch goes in as
        # [N, 1, 28, 28], which the model's first node (a Reshape) gives its shape.
        net.setInput(x.reshape(in_shape[0], 1, 28, 28) if name == "convnet" else x)
        compare("OpenCV", name, net.forward(), want)

    if have_ort:
        proc = subprocess.run(["node", script, ort_modules, name + ".onnx", name + ".in",
                               ",".join(map(str, in_shape)), name + ".ort",
                               *([name + ".lens"] if sequences else [])],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            fail(f"onnxruntime on {name}: {proc.stderr}")
        compare("onnxruntime", name, np.fromfile(name + ".ort", dtype=np.float32), want)

# `loom export` of the convnet's model file gives a file OpenCV evaluates the same.
subprocess.run([os.path.join(build_dir, "tools", "loom"), "export", "convnet.cmf", "--onnx",
                "cli.onnx"], check=True, capture_output=True, timeout=120)
onnx.checker.check_model(onnx.load("cli.onnx"), full_check=True)
net = cv2.dnn.readNetFromONNX("cli.onnx")
name, in_shape, out_shape, _ = models[1]
net.setInput(np.fromfile("convnet.in", dtype=np.float32).reshape(in_shape[0], 1, 28, 28))
compare("OpenCV (loom export)", "convnet", net.forward(),
        np.fromfile("convnet.out", dtype=np.float32).reshape(out_shape))
print("PASSED")
