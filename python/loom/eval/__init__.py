"""Evaluation (CNTK's cntk.eval): Evaluator."""
from loom.eval import evaluator  # noqa: F401
from loom.eval.evaluator import Evaluator  # noqa: F401
