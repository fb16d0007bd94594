"""Axes (CNTK's cntk.axis)."""
from loom._loom.axis import Axis  # noqa: F401
