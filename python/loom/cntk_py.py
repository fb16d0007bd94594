"""The names CNTK scripts reach through cntk.cntk_py."""
from loom._loom import set_fixed_random_seed  # noqa: F401
