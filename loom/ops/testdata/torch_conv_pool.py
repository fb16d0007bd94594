"""PyTorch reference for loom/ops/torch_crosscheck_test.cpp.

Usage: torch_conv_pool.py DIR... (one process for all cases: importing torch is slow).
Each DIR/case.txt names the op and its geometry; DIR holds the
inputs as raw little-endian float32 (x.bin, w.bin, b.bin, dy.bin); this writes y.bin, dx.bin
and, for a convolution or batch normalization, dw.bin (the kernel's or the scale's gradient)
and db.bin (the bias's). Padding is given per side (CNTK's may be asymmetric), so the input is
padded explicitly: zeros for convolution and average pooling, -inf for max pooling. Batch
normalization runs in training mode (the minibatch's statistics, epsilon 1e-5), per channel
("bn") or per element ("bn_elementwise").
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
    op, x_shape = spec["op"], ints("x")
    x = load(f"{d}/x.bin", x_shape).requires_grad_()
    if op.startswith("bn"):
        w = load(f"{d}/w.bin", [-1]).requires_grad_()
        b = load(f"{d}/b.bin", [-1]).requires_grad_()
        flat = x if op == "bn" else x.reshape(x_shape[0], -1)
        y = F.batch_norm(flat, None, None, w, b, training=True, eps=1e-5).reshape(x_shape)
        finish(d, x, y, w, b)
        return
    pads = ints("pads")  # lo0,hi0,lo1,hi1
    # F.pad takes the last axis first.
    pad_arg = []
    for i in reversed(range(len(pads) // 2)):
        pad_arg += [pads[2 * i], pads[2 * i + 1]]
    w = b = None
    if op == "conv":
        w = load(f"{d}/w.bin", ints("w")).requires_grad_()
        if spec["bias"] == "1":
            b = load(f"{d}/b.bin", [-1]).requires_grad_()
        y = F.conv2d(F.pad(x, pad_arg), w, b, stride=ints("stride"), dilation=ints("dilation"),
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
    finish(d, x, y, w, b)


def finish(d, x, y, w, b):
    """Back-propagates dy.bin and writes the output and the gradients."""
    dy = load(f"{d}/dy.bin", list(y.shape))
    y.backward(dy)
    save(f"{d}/y.bin", y)
    save(f"{d}/dx.bin", x.grad)
    if w is not None:
        save(f"{d}/dw.bin", w.grad)
    if b is not None:
        save(f"{d}/db.bin", b.grad)


if __name__ == "__main__":
    for d in sys.argv[1:]:
        main(d)
