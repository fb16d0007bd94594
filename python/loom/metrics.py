"""Evaluation metrics (CNTK's cntk.metrics): one value per sample. Also at loom.X, as CNTK
re-exports them."""
from loom._loom import classification_error  # noqa: F401
from loom.ops._table import op_functions as _op_functions

globals().update(_op_functions('metrics'))
