"""Tensors and minibatch values (CNTK's cntk.core)."""
import numpy as np

from loom._loom.core import NDArrayView, Value
from loom.ops.functions import user_function  # noqa: F401 (CNTK's cntk.core has it)


def asarray(value, dtype=None):
    """A Value, NDArrayView, Parameter, Constant or array-like as a numpy array (a list of
    arrays for a Value of sequences), converted to dtype when given. (CNTK 2.7 returns None
    when dtype is None; Loom returns the array.)"""
    if hasattr(value, 'asarray'):
        value = value.asarray()
    else:
        original = type(value)
        value = np.asarray(value)
        if value.dtype == object:
            raise ValueError(f'could not convert instance of type {original} to an array')
    if dtype is None:
        return value
    if isinstance(value, list):
        return [np.asarray(v, dtype=dtype) for v in value]
    return value.astype(dtype)


def asvalue(variable, data_array):
    """The Value for variable from numpy arrays or CSR matrices (a list for sequences)."""
    return Value.create(variable, data_array)


__all__ = ['NDArrayView', 'Value', 'asarray', 'asvalue', 'user_function']
