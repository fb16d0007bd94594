"""Function objects (CNTK's cntk.ops.functions): ``@Function`` turns a Python function over
Variables into a graph; ``Function.load`` reads a model file (Loom's or ONNX)."""
from loom._loom import CloneMethod, Function, ModelFormat  # noqa: F401


def load_model(model, device=None, format=ModelFormat.CNTKv2):
    """The Function saved in a model (or checkpoint) file, or in its bytes."""
    return Function.load(model, device, format)
