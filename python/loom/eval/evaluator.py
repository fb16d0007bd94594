"""CNTK's cntk.eval.evaluator: Evaluator."""
from loom.train import Evaluator  # noqa: F401
