"""A Python UserFunction in a model file CNTK 2 wrote: the function of type UserDefinedFunction
loads through Loom's user-function deserializers (the class the file names, imported, or the
callback registered for its op name), and a class that cannot be imported is an error naming
the module, the class and the function."""
import struct

import numpy as np
import pytest

import loom as C
from loom.ops.functions import UserFunction


class Scaled(UserFunction):
    """x times the factor its state holds."""

    def __init__(self, arg, factor, name=''):
        super().__init__([arg], name=name)
        self.factor = factor

    def forward(self, argument, device=None, outputs_to_retain=None):
        return None, argument * self.factor

    def backward(self, state, root_gradients):
        return root_gradients * self.factor

    def serialize(self):
        return {'factor': self.factor}

    @staticmethod
    def deserialize(inputs, name, state):
        return Scaled(inputs[0], state['factor'], name)


# ---- CNTK.proto's Dictionary, written as protobuf encodes it ----

def varint(n):
    n &= (1 << 64) - 1
    out = b''
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 1:
        return key + payload
    return key + varint(len(payload)) + payload


def value(v):
    """A DictionaryValue: bool, int (CNTK's SizeT), float (Double), str, list, dict."""
    if isinstance(v, bool):
        kind, body = 1, field(3, 0, int(v))
    elif isinstance(v, int):
        kind, body = 3, field(5, 0, v)
    elif isinstance(v, float):
        kind, body = 5, field(7, 1, struct.pack('<d', v))
    elif isinstance(v, str):
        kind, body = 6, field(8, 2, v.encode())
    elif isinstance(v, list):
        kind, body = 9, field(11, 2, b''.join(field(1, 2, value(x)) for x in v))
    elif isinstance(v, tuple):  # an NDShape
        kind, body = 7, field(9, 2, field(1, 2, b''.join(varint(d) for d in v)))
    elif isinstance(v, Axis):
        kind, body = 8, field(10, 2, field(1, 0, v.index) + field(2, 2, v.name.encode()) +
                              field(3, 0, int(v.ordered)))
    else:
        kind, body = 10, field(12, 2, dictionary(v))
    return field(1, 0, 1) + field(2, 0, kind) + body


def dictionary(d):
    return field(1, 0, 1) + b''.join(
        field(2, 2, field(1, 2, k.encode()) + field(2, 2, value(v))) for k, v in d.items())


class Axis:
    def __init__(self, name, ordered):
        self.index, self.name, self.ordered = 2147483647, name, ordered


def cntk_file(module, cls):
    """A model CNTK 2 saved: Scaled (module.cls, factor 3) applied to an input of shape (2,)."""
    x = {'version': 1, 'type': 'Variable', 'uid': 'Input3', 'name': 'x', 'kind': 0,
         'data_type': 1, 'shape': (2,), 'is_sparse': False, 'needs_gradient': False,
         'dynamic_axis': [Axis('defaultBatchAxis', False)]}
    udf = {'version': 1, 'type': 'UserDefinedFunction', 'uid': 'UserDefinedFunction5',
           'name': 'tripled', 'inputs': ['Input3'], 'native': False,
           'user_defined_state': {'class': cls, 'module': module, 'op_name': f'{module}.{cls}',
                                  'state': {'factor': 3.0}, 'version': 1}}
    return dictionary({'version': 1, 'type': 'CompositeFunction', 'uid': 'CompositeFunction6',
                       'root': 'UserDefinedFunction5', 'inputs': [x],
                       'primitive_functions': [udf]})


def test_a_cntk_user_function_loads_by_importing_its_class(tmp_path):
    path = tmp_path / 'udf.model'
    path.write_bytes(cntk_file(Scaled.__module__, 'Scaled'))
    model = C.load_model(str(path))
    data = np.array([[1, -2]], np.float32)
    np.testing.assert_array_equal(model.eval({model.arguments[0]: data}), 3 * data)


def test_a_cntk_user_function_of_a_missing_module_names_it(tmp_path):
    path = tmp_path / 'udf.model'
    path.write_bytes(cntk_file('no_such_module', 'Gone'))
    with pytest.raises(Exception, match="UserDefinedFunction5.*class 'Gone' of module "
                                        "'no_such_module'"):
        C.load_model(str(path))
