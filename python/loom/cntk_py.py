"""The names CNTK scripts reach through cntk.cntk_py (CNTK's SWIG module)."""
from loom import _loom
from loom._loom.logging import ProgressWriter  # noqa: F401
from loom._loom.cntk_py import (  # noqa: F401
    force_deterministic_algorithms, is_native_user_function_registered, set_fixed_random_seed)

# A seed argument that stands for auto_select (CNTK's SentinelValueForAutoSelectRandomSeed).
sentinel_value_for_auto_select_random_seed = _loom.ops.SentinelValueForAutoSelectRandomSeed

# Shape entries (CNTK's NDShape sentinels): inferred at first use, or free (any size per
# minibatch).
InferredDimension = -1
FreeDimension = -3


def reset_random_seed(value):
    """Sets the seed the next default-seeded initializers and random ops derive theirs from.
    Loom numbers each such request after the seed, so this is set_fixed_random_seed."""
    set_fixed_random_seed(value)


def always_allow_setting_default_device():
    """Accepted for CNTK's scripts: Loom computes on the CPU, a default that never locks."""
