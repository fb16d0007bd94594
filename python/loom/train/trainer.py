from loom.train import Evaluator, Trainer  # noqa: F401
