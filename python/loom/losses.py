"""Loss functions (CNTK's cntk.losses): one value per sample, which the Trainer sums over the
minibatch. Also at loom.X, as CNTK re-exports them."""
from loom._loom import binary_cross_entropy, cross_entropy_with_softmax, squared_error  # noqa: F401
from loom.ops._table import op_functions as _op_functions

globals().update(_op_functions('losses'))
