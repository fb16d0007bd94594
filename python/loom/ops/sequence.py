"""CNTK's cntk.ops.sequence: the same module as loom.sequence (CNTK's cntk.sequence)."""
from loom.sequence import *  # noqa: F401,F403
