"""Evaluation metrics (CNTK's cntk.metrics): one value per sample; ndcg_at_1 and
edit_distance_error give CNTK's one number for the minibatch (no dynamic axes), which the Trainer
and the Evaluator divide by the samples of their first input. Also at loom.X, as CNTK re-exports
them.

classification_error (also along an axis), ndcg_at_1 and edit_distance_error are CNTK's
primitives from the op table (loom/ops/losses.cpp).
"""
from loom.ops._table import op_functions as _op_functions

globals().update(_op_functions('metrics'))

__all__ = sorted(name for name, value in globals().items()
                 if callable(value) and not name.startswith('_')
                 and getattr(value, '__module__', '').startswith('loom'))
