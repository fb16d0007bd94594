"""Evaluation metrics (CNTK's cntk.metrics): one value per sample; ndcg_at_1 and
edit_distance_error give CNTK's one number for the minibatch (no dynamic axes), which the Trainer
and the Evaluator divide by the samples of their first input. Also at loom.X, as CNTK re-exports
them.

ndcg_at_1 and edit_distance_error are CNTK's primitives from the op table
(loom/ops/losses.cpp); classification_error along an axis of a sample of rank 2 or more is
CNTK's composite, built here from other ops.
"""
import numpy as np

from loom import _loom
from loom._loom import ArgumentError
from loom.losses import _operands, _same_shapes, _static_axis
from loom.ops._table import op_functions as _op_functions

globals().update(_op_functions('metrics'))


def classification_error(output_vector, target_vector, axis=-1,
                         topN=_loom.ops.kClassificationErrorTopN, name=''):
    """1 where target_vector's class (its largest entry) is not among the topN largest entries of
    output_vector, else 0; not differentiable.

    A vector sample is Loom's ClassificationError primitive (among equal scores the earlier
    entry ranks first). Along an axis of a sample of rank 2 or more it is CNTK's composite: each
    slice along the axis is wrong where the target differs from (output == its max), and the
    value is the mean over the slices; topN must then be 1, as in CNTK."""
    z, t = _operands(output_vector, target_vector)
    shape = tuple(z.shape)
    if isinstance(topN, bool) or not isinstance(topN, (int, np.integer)) or topN < 1:
        raise ArgumentError(f'classification_error: topN must be an int of at least 1, not '
                            f'{topN!r}')
    if len(shape) <= 1:
        # A vector, or a placeholder's shape not known yet: the primitive checks it later.
        if shape:
            _static_axis('classification_error', axis, shape)
        from loom import ops
        return ops.classification_error(z, t, int(topN), name=name)
    index = _static_axis('classification_error', axis, shape)
    if topN != 1:
        raise ArgumentError('classification_error: topN is not supported along an axis of a '
                            f'sample of rank {len(shape)} (CNTK neither)')
    _same_shapes('classification_error', z, t, ('output_vector', 'target_vector'))
    from loom import ops
    predicted = ops.equal(z, ops.reduce_max(z, axis=index))
    wrong = ops.reduce_sum(ops.not_equal(t, predicted), axis=index)
    return ops.reduce_mean(ops.greater_equal(wrong, 1), axis=None, name=name)


__all__ = sorted(name for name, value in globals().items()
                 if callable(value) and not name.startswith('_')
                 and getattr(value, '__module__', '').startswith('loom')
                 and name != 'ArgumentError')
