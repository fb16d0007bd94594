#!/usr/bin/python3
"""The reference for bench_ops: each Loom op's PyTorch equivalent on the same shapes.

bench_ops writes one JSON object a line (--spec) for each row it timed: the Loom op's name,
the case ("batch": a minibatch of `batch` samples; "seq": ragged sequences of the given
lengths), its attributes, and each input's sample shape, value range, whether it is per sample
(else one tensor shared by all, as Loom's Parameter), whether it is sparse (one-hot samples,
which this script takes as class ids) and whether Loom differentiates it. This
script builds the same inputs and times PyTorch's op with the same protocol as Loom's side:
the median per-call time of --runs runs of at least --run-seconds each, forward under
torch.no_grad and forward+backward with requires_grad inputs and out.backward(gradient).

Over sequences, the ops that work step by step (all but the sequence and delay ops) run on the
steps packed into one batch, [sum of lengths, sample...] (a PackedSequence's data, and how Loom
runs them); the ops that look along the sequence run on the padded [sequences, steps,
sample...] tensor with its lengths. Where Loom writes its result into a buffer of its own and
PyTorch would return a view (reshape, slice, transpose, sequence first and slice), the view is
made contiguous, so both sides write the result.

One line a row: "result op=NAME case=CASE forward_us=F forward_backward_us=B" (nan where a
pass is not timed), "result op=NAME case=CASE no_reference" or "result op=NAME case=CASE failed
ERROR" (the op's entry below does not fit its attributes); last "rows_timed=N".

Run with Debian's interpreter: /usr/bin/python3 bench/ops_torch.py --spec FILE
"""
import argparse
import functools
import json
import math
import statistics
import sys
import time
from functools import partial

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_missing: /usr/bin/python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(3)


def dim(a, key="axis"):
    """A static axis in Loom's attributes (its index) -> the tensor's dim, behind the one
    leading axis of samples or steps."""
    axis = a[key]
    return axis + 1 if axis >= 0 else axis


def dims(a, x, key="axis"):
    """The dims of x that an axis attribute names: an index, a list of them, or the name of all
    static axes (every dim but the leading one); as indices from 0, in order."""
    axes = a[key] if isinstance(a[key], list) else [a[key]]
    if any(isinstance(axis, str) for axis in axes):  # "AllStaticAxes"
        return tuple(range(1, x.dim()))
    return tuple(sorted(axis + 1 if axis >= 0 else x.dim() + axis for axis in axes))


def reduce(f):
    """A reduction over the attributes' axes that keeps them where keepdims says (default
    true, as Loom's)."""
    return lambda a, x: f(x, dims(a, x), a.get("keepdims", True))


def prod(x, d, keepdim):
    """torch.prod takes one dim: over several (adjacent, as all static axes are), the product
    of them flattened."""
    out = x.flatten(d[0], d[-1]).prod(d[0])
    return out.view(*(1 if i in d else n for i, n in enumerate(x.shape))) if keepdim else out


def arg(f):
    """Argmax/argmin: the position along one axis, or the flat position in the sample, kept as
    extent 1, in the input's type (Loom's)."""
    def position(a, x):
        d = dims(a, x)
        if len(d) == 1:
            return f(x, d[0], keepdim=True).to(x.dtype)
        return f(x.flatten(1), 1, keepdim=True).to(x.dtype).view(-1, *[1] * (x.dim() - 1))
    return position


def unpooling(a, x, pooling_input):
    """Loom's max unpooling finds the maxima of the pooling input's windows itself, so PyTorch's
    equivalent is the max pooling that gives their positions and max_unpool2d from them."""
    window = a["window"]
    strides = a["strides"] * len(window) if len(a["strides"]) == 1 else a["strides"]
    _, where = F.max_pool2d(pooling_input, window, strides, return_indices=True)
    return F.max_unpool2d(x, where, window, strides, output_size=pooling_input.shape[-2:])


def roi_pooling(a, x, rois):
    """torchvision's roi_pool with each sample's regions as one image's boxes (the row fails
    without torchvision)."""
    from torchvision.ops import roi_pool
    return roi_pool(x, list(rois), a["roi_output_shape"], a["spatial_scale"])


def crop(a, x, referent):
    """x's window of the referent's height and width at (offset_y, offset_x), written out."""
    y, x0 = a["offset_y"], a["offset_x"]
    return x[..., y:y + referent.shape[-2], x0:x0 + referent.shape[-1]].contiguous()


def hardmax(x):
    """1 at the first largest element of each sample, 0 elsewhere."""
    flat = x.flatten(1)
    return torch.zeros_like(flat).scatter_(1, flat.argmax(1, keepdim=True), 1.0).view_as(x)


def flag(t, x):
    """A comparison's result as Loom gives it: 1 or 0 in the operands' type."""
    return t.to(x.dtype)


def cross_entropy(a, z, t):
    """Over a vector sample F.cross_entropy; along an axis of a larger sample (the "axis"
    attribute) CNTK's composite: logsumexp along it less the targets' dot product with z."""
    if "axis" not in a:
        return F.cross_entropy(z, t, reduction="none")
    d = dim(a)
    return torch.logsumexp(z, d, keepdim=True) - (t * z).sum(d, keepdim=True)


def classification_error(a, z, t):
    """Whether the largest score and the target's largest entry are at different positions; along
    an axis of a larger sample (the "axis" attribute) per slice, averaged over the slices."""
    if "axis" not in a:
        return flag(z.argmax(-1) != t.argmax(-1), z)
    d = dim(a)
    return flag(z.argmax(d) != t.argmax(d), z).flatten(1).mean(1)


# Loom op -> f(attributes, *inputs) on tensors with one leading axis (samples, or packed steps).
# Ops absent from both tables have no PyTorch equivalent: StraightThrough (a sign with a
# pass-through gradient needs a custom autograd Function, not an op).
PER_STEP = {
    "Plus": lambda a, x, y: x + y,
    "Minus": lambda a, x, y: x - y,
    "ElementTimes": lambda a, x, y: x * y,
    "ElementDivide": lambda a, x, y: x / y,
    "ElementMax": lambda a, x, y: torch.maximum(x, y),
    "ElementMin": lambda a, x, y: torch.minimum(x, y),
    "Pow": lambda a, x, y: torch.pow(x, y),
    "LogPlus": lambda a, x, y: torch.logaddexp(x, y),
    "Equal": lambda a, x, y: flag(x == y, x),
    "NotEqual": lambda a, x, y: flag(x != y, x),
    "Less": lambda a, x, y: flag(x < y, x),
    "LessEqual": lambda a, x, y: flag(x <= y, x),
    "Greater": lambda a, x, y: flag(x > y, x),
    "GreaterEqual": lambda a, x, y: flag(x >= y, x),
    "And": lambda a, x, y: flag((x > 0) & (y > 0), x),
    "Or": lambda a, x, y: flag((x > 0) | (y > 0), x),
    "Xor": lambda a, x, y: flag((x > 0) ^ (y > 0), x),
    # F.prelu takes one slope per channel; Loom's alpha is elementwise.
    "PReLU": lambda a, alpha, x: torch.where(x >= 0, x, alpha * x),
    "Negate": lambda a, x: -x,
    "Tanh": lambda a, x: torch.tanh(x),
    "Sigmoid": lambda a, x: torch.sigmoid(x),
    "ReLU": lambda a, x: torch.relu(x),
    "Exp": lambda a, x: torch.exp(x),
    "Log": lambda a, x: torch.log(x),
    "Sqrt": lambda a, x: torch.sqrt(x),
    "Square": lambda a, x: torch.square(x),
    "Abs": lambda a, x: torch.abs(x),
    "Floor": lambda a, x: torch.floor(x),
    "Ceil": lambda a, x: torch.ceil(x),
    "Round": lambda a, x: torch.round(x),  # halves to even where Loom's go up: the same cost
    "Reciprocal": lambda a, x: torch.reciprocal(x),
    "Sin": lambda a, x: torch.sin(x),
    "Cos": lambda a, x: torch.cos(x),
    "Tan": lambda a, x: torch.tan(x),
    "Asin": lambda a, x: torch.asin(x),
    "Acos": lambda a, x: torch.acos(x),
    "Atan": lambda a, x: torch.atan(x),
    "Sinh": lambda a, x: torch.sinh(x),
    "Cosh": lambda a, x: torch.cosh(x),
    "Asinh": lambda a, x: torch.asinh(x),
    "Atanh": lambda a, x: torch.atanh(x),
    "StopGradient": lambda a, x: x.detach(),
    "ZerosLike": lambda a, x: torch.zeros_like(x),
    "OnesLike": lambda a, x: torch.ones_like(x),
    "Pass": lambda a, x: x.clone(),
    "Not": lambda a, x: flag(x <= 0, x),
    "ELU": lambda a, x: F.elu(x, alpha=a["alpha"]),
    "SELU": lambda a, x: a["scale"] * F.elu(x, alpha=a["alpha"]),  # F.selu fixes both
    "LeakyReLU": lambda a, x: F.leaky_relu(x, a["alpha"]),
    "Softplus": lambda a, x: F.softplus(x, beta=a["steepness"]),
    # F.hardsigmoid fixes the slope at 1/6; CNTK's takes alpha and beta.
    "HardSigmoid": lambda a, x: torch.clamp(x * a["alpha"] + a["beta"], 0, 1),
    "Select": lambda a, c, x, y: torch.where(c != 0, x, y),
    "Clip": lambda a, x, low, high: torch.clamp(x, low, high),
    "Softsign": lambda a, x: F.softsign(x),
    "Times": lambda a, x, w: torch.matmul(x, w),
    "SquaredError": lambda a, x, y: torch.square(x - y).sum(-1),
    "CrossEntropyWithSoftmax": cross_entropy,
    "BinaryCrossEntropy": lambda a, p, t: F.binary_cross_entropy(p, t, reduction="none").sum(-1),
    "ClassificationError": classification_error,
    "ReduceSum": reduce(lambda x, d, k: x.sum(d, keepdim=k)),
    "ReduceMean": reduce(lambda x, d, k: x.mean(d, keepdim=k)),
    "ReduceMax": reduce(lambda x, d, k: x.amax(d, keepdim=k)),
    "ReduceMin": reduce(lambda x, d, k: x.amin(d, keepdim=k)),
    "ReduceProd": reduce(prod),
    "ReduceLogSumExp": reduce(lambda x, d, k: torch.logsumexp(x, d, keepdim=k)),
    "ReduceL1": reduce(lambda x, d, k: torch.linalg.vector_norm(x, 1, d, keepdim=k)),
    "ReduceL2": reduce(lambda x, d, k: torch.linalg.vector_norm(x, 2, d, keepdim=k)),
    "ReduceSumSquare": reduce(lambda x, d, k: torch.square(x).sum(d, keepdim=k)),
    "Argmax": arg(torch.argmax),
    "Argmin": arg(torch.argmin),
    "Reshape": lambda a, x: x.reshape(x.shape[0], *a["shape"]).clone(),
    "Slice": lambda a, x: x.narrow(dim(a), a["begin"], a["end"] - a["begin"]).contiguous(),
    "Splice": lambda a, *xs: torch.cat(xs, dim(a)),
    "Transpose": lambda a, x: x.permute(0, *(p + 1 for p in a["perm"])).contiguous(),
    "Softmax": lambda a, x: F.softmax(x, dim(a)),
    "LogSoftmax": lambda a, x: F.log_softmax(x, dim(a)),
    "Hardmax": lambda a, x: hardmax(x),
    "Unpooling": unpooling,
    "ROIPooling": roi_pooling,
    "Crop": crop,
    # size = 2 depth_radius + 1 channels, alpha divided by it, k the bias: CNTK's formula.
    "LocalResponseNormalization": lambda a, x: F.local_response_norm(
        x, 2 * a["depth_radius"] + 1, alpha=a["alpha"], beta=a["beta"], k=a["bias"]),
}


@functools.lru_cache(maxsize=1)
def noise_terms(noise, k):
    """What nce_loss reads of its noise distribution, which CNTK computes once when it builds
    the function: q normalized, log(k q) and the entropy term sum(k q log(k q)) (0 log 0 = 0)."""
    q = noise / noise.sum()
    return q, torch.log(k * q), torch.xlogy(k * q, k * q).sum()


def nce(a, w, b, x, labels, noise):
    """CNTK's nce_loss (loom/ops/losses.cpp's NceOp) on class ids: k noise classes drawn for the
    minibatch (torch.multinomial, timed), their rows and the labels' gathered from the weights
    and biases at once (one scatter into each gradient), the noise logits as one product. A
    class's importance weight is q over its expected count in the draw: k q with duplicates;
    without, 1 - (1 - q)^k stands for CNTK's estimate (from 10 trial draws, which PyTorch has no
    equivalent of)."""
    k = a["num_samples"]
    q, log_p, entropy = noise_terms(noise, k)
    drawn = torch.multinomial(q, k, replacement=a["allow_duplicates"])
    q_drawn = q[drawn]
    expected = k * q_drawn if a["allow_duplicates"] else -torch.expm1(k * torch.log1p(-q_drawn))
    ids = torch.cat([drawn, labels])
    rows, biases = w[ids], b[ids, 0]
    z_noise = torch.addmm(biases[:k], x, rows[:k].t())
    z_label = (x * rows[k:]).sum(-1) + biases[k:]
    return (torch.logaddexp(z_label, log_p[labels]) - z_label - entropy +
            k * (q_drawn / expected * torch.logaddexp(z_noise, log_p[drawn])).sum(-1))


PER_STEP["NCE"] = nce


class Padded:
    """The layout of padded sequences [N, T, sample...]: lengths and the mask of real steps."""

    def __init__(self, lengths):
        self.lengths = torch.tensor(lengths)
        self.n, self.t = len(lengths), max(lengths)
        self.mask = torch.arange(self.t)[None, :] < self.lengths[:, None]

    def steps(self, x, offset=0):
        """mask (shifted: step t + offset is real) broadcast against x."""
        m = torch.arange(self.t)[None, :] + offset < self.lengths[:, None]
        return m.view(self.n, self.t, *[1] * (x.dim() - 2))

    def last(self, x):
        return x[torch.arange(self.n), self.lengths - 1]


def past_value(a, s, x, initial):
    k = a["offset"]
    return torch.cat([initial.expand(s.n, k, *initial.shape), x[:, :s.t - k]], 1)


def future_value(a, s, x, initial):
    k = a["offset"]
    shifted = torch.cat([x[:, k:], initial.expand(s.n, k, *initial.shape)], 1)
    return torch.where(s.steps(x, k), shifted, initial)


# Loom's sequence and delay ops -> f(attributes, padded layout, *inputs) on padded tensors.
OVER_TIME = {
    "SequenceFirst": lambda a, s, x: x[:, 0].contiguous(),
    "SequenceLast": lambda a, s, x: s.last(x),
    "SequenceSlice": lambda a, s, x: x[:, a["begin_index"]:a["end_index"]].contiguous(),
    "SequenceReduceSum": lambda a, s, x: x.sum(1),  # the padding is 0
    "SequenceReduceMax": lambda a, s, x: x.masked_fill(~s.steps(x), -math.inf).amax(1),
    "SequenceIsFirst": lambda a, s, x: flag(torch.arange(s.t).expand(s.n, s.t) == 0, x),
    "SequenceIsLast": lambda a, s, x: flag(
        torch.arange(s.t)[None, :] == (s.lengths - 1)[:, None], x),
    "PastValue": past_value,
    "FutureValue": future_value,
}


def draw(shape, low, high, g):
    """Uniform in [low, high], drawn again within 0.05 of 0 where the range crosses it (the
    conformance cases' rule, as bench_ops draws)."""
    x = torch.rand(shape, generator=g) * (high - low) + low
    if low < -0.05 and high > 0.05:
        while (near := x.abs() < 0.05).any():
            x[near] = torch.rand(int(near.sum()), generator=g) * (high - low) + low
    return x


def inputs(row, g):
    """The row's input tensors, and the padded layout when the op runs over them padded."""
    padded = Padded(row["lengths"]) if row["op"] in OVER_TIME else None
    steps = sum(row["lengths"]) if "lengths" in row else row["batch"]
    xs = []
    for spec in row["inputs"]:
        shape, low, high = spec["shape"], spec["low"], spec["high"]
        if spec["sparse"]:  # one-hot samples: their class ids
            xs.append(torch.randint(shape[0], [steps], generator=g))
        elif not spec["per_sample"]:
            xs.append(draw(shape, low, high, g))
        elif padded is None:
            xs.append(draw([steps, *shape], low, high, g))
        else:
            x = torch.zeros(padded.n, padded.t, *shape)
            x[padded.mask] = draw([steps, *shape], low, high, g)
            xs.append(x)
    return xs, padded


def per_call(fn, run_seconds, runs):
    """Median seconds per call of fn over `runs` runs of at least run_seconds each, after a
    warm-up call; the first run that lasts long enough sets the calls per run (bench_ops's
    per_call)."""

    def run(calls):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return time.perf_counter() - t0

    fn()
    calls = 1
    t = run(calls)
    while t < run_seconds:
        calls = max(2 * calls, math.ceil(calls * 1.2 * run_seconds / max(t, 1e-9)))
        t = run(calls)
    seconds = [t / calls] + [run(calls) / calls for _ in range(runs - 1)]
    return statistics.median(seconds)


def time_row(row, run_seconds, runs):
    """(forward µs, forward+backward µs or nan), or None without a PyTorch equivalent."""
    op, a = row["op"], row["attributes"]
    if op not in OVER_TIME and op not in PER_STEP:
        return None
    xs, padded = inputs(row, torch.Generator().manual_seed(1))
    f = partial(OVER_TIME[op], a, padded) if padded else partial(PER_STEP[op], a)
    with torch.no_grad():
        forward = per_call(lambda: f(*xs), run_seconds, runs)
    leaves = [x.requires_grad_() for x, spec in zip(xs, row["inputs"]) if spec["differentiable"]]
    out = f(*xs)
    if not leaves or not out.requires_grad:  # a comparison, or PyTorch has no gradient
        return forward * 1e6, math.nan
    gradient = torch.rand(out.shape, generator=torch.Generator().manual_seed(2)) + 0.5

    def step():
        for x in leaves:
            x.grad = None
        f(*xs).backward(gradient)

    return forward * 1e6, per_call(step, run_seconds, runs) * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", required=True, help="the rows, one JSON object a line")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--run-seconds", type=float, default=0.02)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with open(args.spec) as f:
        rows = [json.loads(line) for line in f]
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} thread(s), {len(rows)} rows",
          flush=True)
    for row in rows:
        label = f"result op={row['op']} case={row['case']}"
        try:
            timing = time_row(row, args.run_seconds, args.runs)
        except Exception as e:  # an op whose attributes this table does not read yet
            print(f"{label} failed {type(e).__name__}: {e}", flush=True)
            continue
        if timing is None:
            print(f"{label} no_reference", flush=True)
        else:
            print(f"{label} forward_us={timing[0]:.2f} forward_backward_us={timing[1]:.2f}",
                  flush=True)
    print(f"rows_timed={len(rows)}")


if __name__ == "__main__":
    main()
