"""Random tensors, drawn anew at every evaluation (CNTK's cntk.random), made from the op table
(RandomDistribution's variants, loom/ops/random.cpp).

Each op owns its generator: seed=auto_select (CNTK's default) or None takes the next one of the
global sequence (cntk_py.set_fixed_random_seed), an int >= 0 fixes it, so the same seed gives
the same values. The generator's state is saved with the model and in checkpoints: a loaded model
continues the values where the saved one stopped. The ``_like`` forms have x's shape, dtype and
dynamic axes (batch, sequences) and give x a zero gradient."""
from loom import _loom
from loom.ops._table import op_functions as _op_functions

# CNTK's seed that stands for auto_select (cntk.random.auto_select).
auto_select = _loom.ops.SentinelValueForAutoSelectRandomSeed

globals().update(_op_functions('random'))
