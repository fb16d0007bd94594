"""Variables (CNTK's cntk.variables): Variable, Parameter and Constant, with CNTK's
constructors, and Record."""
import numpy as np

from loom._loom.variables import Constant, Parameter, Variable
from loom._loom.axis import Axis

# CNTK's mixin of the properties the three share; in Loom they live on the base class.
VariableMixin = Variable


class Record(dict):
    """An immutable record from keyword arguments: Record(x=13, y=42).x is 13."""

    def __init__(self, **args_dict):
        super().__init__(args_dict)
        self.__dict__.update(args_dict)

    def __getattr__(self, key):
        if key not in self:
            raise AttributeError(f"record has no attribute '{key}'")
        return self[key]

    def __setattr__(self, key, value):
        raise AttributeError('record is immutable')

    def updated_with(self, **kwargs):
        """A new Record with members changed or added."""
        return Record(**dict(self, **kwargs))


class _Type(Record):
    """The type of a Variable (CNTK's Variable._Type): the members given of shape, dtype,
    needs_gradient, is_sparse and dynamic_axes. Made by loom.layers.typing (Tensor[3],
    Sequence[Tensor[3]], ...) and read by Function.update_signature."""

    def __init__(self, shape=None, dtype=None, needs_gradient=None, is_sparse=None,
                 dynamic_axes=None):
        given = dict(shape=shape, dtype=dtype, needs_gradient=needs_gradient,
                     is_sparse=is_sparse, dynamic_axes=dynamic_axes)
        super().__init__(**{k: v for k, v in given.items() if v is not None})

    def __call__(self):
        raise TypeError(f"abstract type {self} cannot be instantiated; use "
                        f"'input_variable(**{self})' instead")

    def updated_with(self, **kwargs):
        return _Type(**dict(self, **kwargs))

    def __str__(self):
        shape, axes = self.get('shape'), list(self.get('dynamic_axes', ()))
        if shape is None:
            s = 'tensor'
        else:
            s = 'Tensor[' + ('np.float64,' if self.get('dtype') == np.float64 else '')
            s += ','.join(str(d) for d in shape) + ']'
            if self.get('is_sparse'):
                s = 'Sparse' + s
            elif not axes:
                s = 'Parameter' + s
        for axis in axes:
            if axis.is_sequence_axis:
                s = ('Sequence' if axis.name in ('defaultDynamicAxis', 'UnknownAxes')
                     else f'SequenceOver[{axis.name}]') + f'[{s}]'
        return s

    @staticmethod
    def _sanitize(the_type):
        """float and numpy float types as the type of a scalar sample."""
        if the_type is float or the_type in (np.float32, np.float64):
            return _Type(shape=(), dtype=None if the_type is float else the_type,
                         is_sparse=False, dynamic_axes=[Axis.default_batch_axis()])
        return the_type


Variable._Type = _Type


def _input_for(the_type, name):
    """The input variable a signature's type stands for: an int or tuple is a shape (a batch
    of samples), a _Type gives its members."""
    from loom import input_variable
    the_type = _Type._sanitize(the_type)
    if isinstance(the_type, (int, tuple, list)):
        return input_variable(the_type, name=name)
    if not isinstance(the_type, _Type):
        raise TypeError(f"update_signature: the type of '{name}' must be a shape or a "
                        f"loom.layers.typing type (Tensor[...], Sequence[...]), not {the_type!r}")
    if 'shape' not in the_type:
        raise TypeError(f"update_signature: the type of '{name}' ({the_type}) has no shape")
    return input_variable(name=name, **the_type)


__all__ = ['Constant', 'Parameter', 'Record', 'Variable', 'VariableMixin']
