"""PyTorch reference for loom/ops/torch_crosscheck_test.cpp.

Usage: torch_conv_pool.py DIR... (one process for all cases: importing torch is slow).
Each DIR/case.txt names the op and its geometry; DIR holds the
inputs as raw little-endian float32 (x.bin, w.bin, dy.bin); this writes y.bin, dx.bin and,
for a convolution, dw.bin. Padding is given per side (CNTK's may be asymmetric), so the input
is padded explicitly: zeros for convolution and average pooling, -inf for max pooling.
Exits with status 77 when torch is missing.
"""
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)


def load(path, shape):
    return torch.from_numpy(np.fromfile(path, dtype="<f4").reshape(shape)).double()


def save(path, t):
    t.detach().numpy().astype("<f4").tofile(path)


def main(d):
    spec = dict(line.split("=", 1) for line in open(f"{d}/case.txt").read().split())
    ints = lambda k: [int(v) for v in spec[k].split(",")]
    op, x_shape, pads = spec["op"], ints("x"), ints("pads")  # pads: lo0,hi0,lo1,hi1
    # F.pad takes the last axis first.
    pad_arg = []
    for i in reversed(range(len(pads) // 2)):
        pad_arg += [pads[2 * i], pads[2 * i + 1]]
    x = load(f"{d}/x.bin", x_shape).requires_grad_()
    if op == "conv":
        w = load(f"{d}/w.bin", ints("w")).requires_grad_()
        y = F.conv2d(F.pad(x, pad_arg), w, stride=ints("stride"), dilation=ints("dilation"),
                     groups=int(spec["groups"]))
    else:
        k, s = ints("window"), ints("stride")
        if op == "max":
            y = F.max_pool2d(F.pad(x, pad_arg, value=float("-inf")), k, s)
        else:  # average of the elements inside the input: sum over the window / count
            ones = torch.ones_like(x)
            total = F.avg_pool2d(F.pad(x, pad_arg), k, s, divisor_override=1)
            count = F.avg_pool2d(F.pad(ones, pad_arg), k, s, divisor_override=1)
            y = total / count
    dy = load(f"{d}/dy.bin", list(y.shape))
    y.backward(dy)
    save(f"{d}/y.bin", y)
    save(f"{d}/dx.bin", x.grad)
    if op == "conv":
        save(f"{d}/dw.bin", w.grad)


if __name__ == "__main__":
    for d in sys.argv[1:]:
        main(d)
