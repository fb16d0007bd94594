"""Loss functions (CNTK's cntk.losses): one value per sample, which the Trainer sums over the
minibatch; lambda_rank gives CNTK's one number for the minibatch (no dynamic axes), which the
Trainer divides by the samples of the scores. Also at loom.X, as CNTK re-exports them.

The primitives (cross_entropy_with_softmax, also along an axis, cosine_distance,
cosine_distance_with_negative_samples, weighted_binary_cross_entropy, lambda_rank) come from the
op table (loom/ops/losses.cpp); the losses CNTK's Python builds from other ops (fmeasure,
hierarchical_softmax_layer) are built here the same way, so that their gradients come from their
parts.
"""
import inspect

import numpy as np

from loom import _loom
from loom._loom import ArgumentError, ShapeError
from loom.ops._table import op_functions as _op_functions

globals().update(_op_functions('losses'))
# nce_loss's defaults: those of the table's _nce_loss (C++ NceOptions).
_NCE = inspect.signature(_nce_loss).parameters  # noqa: F821 (the table's function)


def _variable(x, dtype=None):
    """x as a Variable or Function (numbers and arrays become constants of dtype)."""
    if isinstance(x, (_loom.variables.Variable, _loom.ops.functions.Function)):
        return x
    from loom import ops
    dtype = dtype or np.float32
    return ops.constant(np.asarray(x, dtype=dtype), dtype=dtype)


def _operands(*xs):
    """The operands as Variables, arrays made constants of the first Variable's data type."""
    dtype = None
    for x in xs:
        if isinstance(x, (_loom.variables.Variable, _loom.ops.functions.Function)):
            dtype = np.float64 if '64' in str(x.dtype) else np.float32
            break
    return [_variable(x, dtype) for x in xs]


def fmeasure(output, target, beta=1):
    """1 - F_beta of output against target (CNTK's composite): with c = sum(output * target),
    precision = c / sum(output), recall = c / sum(target), and
    1 - (1 + beta**2) * precision * recall / (beta**2 * precision + recall). The sums run over
    all static axes, or over the last two of a rank-3 sample (the first is the class axis)."""
    from loom import ops
    o, t = _operands(output, target)
    if len(t.shape) != len(o.shape):
        raise ShapeError(f'fmeasure: output shape {tuple(o.shape)} and target shape '
                         f'{tuple(t.shape)} differ in rank')
    if isinstance(beta, bool) or not np.isfinite(beta):
        raise ArgumentError(f'fmeasure: beta must be a finite number, not {beta!r}')
    axis = (1, 2) if len(o.shape) == 3 else None
    correct = ops.reduce_sum(o * t, axis=axis)
    precision = correct / ops.reduce_sum(o, axis=axis)
    recall = correct / ops.reduce_sum(t, axis=axis)
    b2 = float(beta) ** 2
    return 1 - (1 + b2) * precision * recall / (b2 * precision + recall)


def nce_loss(weights, biases, inputs, labels, noise_distribution,
             num_samples=_NCE['num_samples'].default,
             allow_duplicates=_NCE['allow_duplicates'].default,
             seed=_NCE['seed'].default, name=''):
    """Noise contrastive estimation (CNTK's nce_loss, after Dyer's notes): per sample, the
    logistic loss of telling the label from num_samples classes drawn from noise_distribution
    (shared by the minibatch, drawn anew each minibatch), each weighted by its importance.
    weights (classes, dim) (in C++ dim may be inferred), biases (classes, 1), inputs (dim,)
    and labels (classes,) per sample (one-hot, sparse or dense), noise_distribution (classes,)
    of weights >= 0 (normalized here). seed: CNTK's auto_select (cntk.random.auto_select, the
    default) or None draws from the global seed sequence; an int repeats the same draws for the
    same seed."""
    x, y = _operands(inputs, labels)
    dtype = np.float64 if '64' in str(x.dtype) else np.float32
    noise = _variable(noise_distribution, dtype)
    return _nce_loss(weights, biases, x, y, noise, num_samples,  # noqa: F821 (the table's)
                     allow_duplicates, seed, name)


def _one_hot(index, num_classes, dtype):
    """A one-hot vector (num_classes,) of an index held as a (1,)-shaped float."""
    from loom import ops
    return ops.equal(index, ops.constant(np.arange(num_classes, dtype=dtype), dtype=dtype))


def hierarchical_softmax_layer(input_var, label_index, label_dim, label_classes=None):
    """CNTK's two-level softmax: the label_dim labels fall into label_classes classes of
    ceil(label_dim / label_classes) labels each (label_classes: ceil(sqrt(label_dim)) by
    default). Makes its own parameters hsoftmax_w1 (input_dim, label_classes), hsoftmax_b1
    (label_classes,), hsoftmax_w2s (label_classes, input_dim, n) and hsoftmax_b2s
    (label_classes, n), all glorot_normal, and returns (output_prob, class_probs, all_probs):
    the probability of label_index (1,), the class probabilities (label_classes,), and per
    class i the probabilities of its labels (n,)."""
    from loom import initializer, ops
    x, label = _operands(input_var, label_index)
    if len(x.shape) != 1:
        raise ShapeError(f'hierarchical_softmax_layer: input_var must be a vector, not of shape '
                         f'{tuple(x.shape)}')
    if tuple(label.shape) not in ((1,), ()):
        raise ShapeError('hierarchical_softmax_layer: label_index must hold one index per '
                         f'sample, not shape {tuple(label.shape)}')
    if isinstance(label_dim, bool) or not isinstance(label_dim, (int, np.integer)) or label_dim < 1:
        raise ArgumentError(f'hierarchical_softmax_layer: label_dim must be a positive int, not '
                            f'{label_dim!r}')
    input_dim = x.shape[0]
    if not label_classes:
        label_classes = int(np.ceil(np.sqrt(float(label_dim))))
    if isinstance(label_classes, bool) or not isinstance(label_classes, (int, np.integer)) \
            or label_classes < 1:
        raise ArgumentError('hierarchical_softmax_layer: label_classes must be a positive int, '
                            f'not {label_classes!r}')
    label_classes = int(label_classes)
    n = int(np.ceil(label_dim / label_classes))
    dtype = np.float64 if '64' in str(x.dtype) else np.float32

    target_class = ops.floor((label + 0.5) / n)
    target_in_class = ops.round(label - target_class * n)

    def param(shape, name):
        return ops.parameter(shape=shape, init=initializer.glorot_normal(), dtype=dtype,
                             name=name)
    w1 = param((input_dim, label_classes), 'hsoftmax_w1')
    b1 = param((label_classes,), 'hsoftmax_b1')
    w2s = param((label_classes, input_dim, n), 'hsoftmax_w2s')
    b2s = param((label_classes, n), 'hsoftmax_b2s')

    class_probs = ops.softmax(b1 + ops.times(x, w1))
    # The in-class scores of every class at once, (label_classes, n): x against each class's
    # (input_dim, n) slice of w2s, then a softmax within each class.
    scores = ops.reduce_sum(ops.reshape(x, (1, input_dim, 1)) * w2s, axis=1)
    probs_in_classes = ops.softmax(ops.reshape(scores, (label_classes, n)) + b2s, axis=-1)

    class_one_hot = _one_hot(target_class, label_classes, dtype)
    probs_in_class = ops.reduce_sum(ops.reshape(class_one_hot, (label_classes, 1)) *
                                    probs_in_classes, axis=0)
    prob_in_class = ops.reduce_sum(ops.reshape(probs_in_class, (n,)) *
                                   _one_hot(target_in_class, n, dtype))
    class_prob = ops.reduce_sum(class_one_hot * class_probs)
    output_prob = prob_in_class * class_prob

    all_probs = [ops.reshape(probs_in_classes[i], (n,)) * class_probs[i]
                 for i in range(label_classes)]
    return output_prob, class_probs, all_probs


__all__ = sorted(name for name, value in globals().items()
                 if callable(value) and not name.startswith('_')
                 and getattr(value, '__module__', '').startswith('loom')
                 and name not in ('ArgumentError', 'ShapeError'))
