"""Axes (CNTK's cntk.axis)."""
from loom._loom import Axis  # noqa: F401
