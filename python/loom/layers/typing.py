"""Argument types for @Function (CNTK's cntk.layers.typing): Tensor[3], SparseTensor[1000],
ParameterTensor[3, 4], Sequence[Tensor[3]], SequenceOver[axis][Tensor[3]], and Signature, which
gives a Python function's arguments their types."""
import inspect

import numpy as np

from loom._loom.axis import Axis
from loom.variables import _Type

__all__ = ['Tensor', 'SparseTensor', 'ParameterTensor', 'tensor', 'Sequence',
           'SequenceOverMeta', 'SequenceOver', 'Signature']


def _tensor_meta(name, **members):
    class TensorMeta(type):
        def __getitem__(cls, shape):
            shape = shape if isinstance(shape, tuple) else (shape,)
            kwargs = dict(members)
            if shape and shape[0] in (np.float32, np.float64):
                kwargs['dtype'], shape = shape[0], shape[1:]
            return _Type(shape, **kwargs)
    return TensorMeta(name, (), {})


Tensor = _tensor_meta('Tensor', is_sparse=False, dynamic_axes=[Axis.default_batch_axis()])
SparseTensor = _tensor_meta('SparseTensor', is_sparse=True,
                            dynamic_axes=[Axis.default_batch_axis()])
ParameterTensor = _tensor_meta('ParameterTensor', is_sparse=False, dynamic_axes=[])
# A tensor of a shape still to be inferred (CNTK's Tensor[-2]).
tensor = _Type(is_sparse=False, dynamic_axes=[Axis.default_batch_axis()])


def _sequence_meta(name, axes):
    class SequenceMeta(type):
        def __getitem__(cls, item_type):
            item_type = _Type._sanitize(item_type)
            item_axes = item_type.get('dynamic_axes')
            if item_axes and list(item_axes) != [Axis.default_batch_axis()]:
                raise TypeError('sequences over sequences are currently not supported')
            return item_type.updated_with(dynamic_axes=list(axes))
    return SequenceMeta(name, (), {})


Sequence = _sequence_meta('Sequence', Axis.default_input_variable_dynamic_axes())


class SequenceOverMeta(type):
    """SequenceOver[axis]: Sequence over a named dynamic axis."""

    def __getitem__(cls, axis):
        return _sequence_meta('Sequence', [Axis.default_batch_axis(), axis])


SequenceOver = SequenceOverMeta('SequenceOver', (), {})


def Signature(*args, **kwargs):
    """Decorator giving a function's parameters types, as Python 3 annotations would:
    @Signature(Tensor[3], Sequence[Tensor[5]])."""
    def add_annotations(f):
        names = list(inspect.signature(f).parameters)
        if getattr(f, '__annotations__', None):
            raise ValueError('@Signature cannot be applied to functions that already have '
                             'annotations')
        if len(args) + len(kwargs) != len(names):
            raise TypeError(f'{len(args) + len(kwargs)} annotations provided for function to '
                            f'be decorated, but function has {len(names)} parameters')
        annotations = dict(zip(names, args))
        for name, t in kwargs.items():
            if name not in names or name in annotations:
                raise TypeError(f"Signature: '{name}' is not a parameter of {f.__name__} "
                                'or is given twice')
            annotations[name] = t
        f.__annotations__ = annotations
        return f
    return add_annotations
