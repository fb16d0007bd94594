"""Function objects (CNTK's cntk.ops.functions): ``@Function`` turns a Python function over
Variables into a graph; ``Function.load`` reads a model file."""
from loom._loom import CloneMethod, Function  # noqa: F401


def load_model(model):
    """The Function saved in a model (or checkpoint) file."""
    return Function.load(model)
