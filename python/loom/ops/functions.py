"""Function objects (CNTK's cntk.ops.functions): ``@Function`` turns a Python function over
Variables into a graph; ``Function.load`` reads a model file (Loom's, ONNX or CNTK's);
``UserFunction`` is an op written in Python."""
import importlib
import os

from loom._loom.ops import functions as _functions
from loom._loom.ops.functions import CloneMethod, Function, ModelFormat  # noqa: F401
from loom._loom.variables import Variable as _Variable


def BlockFunction(op_name, name):
    """CNTK's decorator: ``@BlockFunction('MyOp', 'name')`` makes a Python function over
    Variables a block of op ``op_name`` (``Function(f, make_block=True, ...)``)."""
    return lambda f: Function(f, make_block=True, op_name=op_name, name=name)


def load_model(model, device=None, format=_functions.kDefaultModelFormat):
    """The Function saved in a model (or checkpoint) file, or in its bytes."""
    return Function.load(model, device, format)


class UserFunction:
    """CNTK's UserFunction: an op whose ``forward``, ``backward`` and ``infer_outputs`` a
    subclass writes in Python. ``user_function(MyOp(x))`` makes the Function that uses it.

    ``forward(arguments, device=None, outputs_to_retain=None)`` returns ``(state, output)``;
    ``arguments`` is one input's data, or a tuple of them. With ``as_numpy`` (the default) data
    are numpy arrays ([batch, ...]; a list of arrays [length, ...] for sequences; the array
    itself for a parameter), else ``Value`` objects. ``backward(state, root_gradients)`` returns
    the gradient of a single input; with several inputs, ``backward(state, root_gradients,
    variables)`` sets ``variables[input]`` for each input in ``variables``.

    With several outputs (``infer_outputs`` returns several), ``forward(arguments, outputs,
    device=None, outputs_to_retain=None)`` sets ``outputs[self.outputs[k]]`` for each output
    and returns the state, and ``root_gradients`` is a dict {output: gradient} holding every
    output (zeros for one no gradient reached, None for one that needs no gradient).
    ``self.outputs`` are the function's outputs, named and needing gradients as
    ``output_variable`` says; ``outputs_to_retain`` lists them all in training, none otherwise.
    ``self.inputs`` are the function's inputs as they are now (placeholders until bound; CNTK
    calls ``infer_outputs`` on them too). Loom's UserFunction is not itself a Function (see
    docs/decisions.md): wrap it with ``user_function``."""

    def __init__(self, inputs, as_numpy=True, attributes=None, name=''):
        self.inputs = [_Variable(i) if isinstance(i, Function) else i for i in inputs]
        self.as_numpy = as_numpy
        self.attributes = dict(attributes or {})
        self.name = name
        self.outputs = []  # the Function's outputs, once user_function has made it

    @property
    def op_name(self):
        """The op's unique name: '<module>.<class>' unless a subclass says otherwise."""
        return type(self)._op_name()

    @classmethod
    def _op_name(cls):
        return cls.__module__ + '.' + cls.__name__

    def infer_outputs(self):
        """The outputs' types, as a list of ``output_variable(...)``: by default the first
        input's."""
        x = self.inputs[0]
        return [_functions.output_variable(x.shape, x.dtype, x.dynamic_axes)]

    def forward(self, arguments, device=None, outputs_to_retain=None):
        raise NotImplementedError(f'{self.op_name} must implement forward')

    def backward(self, state, root_gradients, variables=None):
        raise NotImplementedError(f'{self.op_name} must implement backward to be differentiated')

    def clone(self, cloned_inputs):
        """This function for a clone of its graph (the constructor with the inputs and name)."""
        return self.__class__(*cloned_inputs, name=self.name)

    def serialize(self):
        """The state a saved model keeps (a dict); deserialize gets it back."""
        return {}

    @staticmethod
    def deserialize(inputs, name, state):
        raise NotImplementedError(
            'a UserFunction loaded from a model file needs a static deserialize(inputs, name, '
            'state) or Function.register_udf_deserialize_callback')


def user_function(user_func):
    """The Function applying a UserFunction instance to its inputs."""
    return _functions.user_function(user_func)


def output_variable(shape, dtype, dynamic_axes, needs_gradient=True, name=''):
    """The type of a UserFunction's output, for infer_outputs."""
    return _functions.output_variable(shape, dtype, list(dynamic_axes), needs_gradient, name)


_udf_callback_map = {}


def register_udf_deserialize_callback(op_name, callback):
    """The factory (inputs, name, state) -> UserFunction that loads user functions of op_name,
    in place of their class's static deserialize."""
    if op_name in _udf_callback_map:
        raise ValueError(f'A callback for the UserFunction with op name {op_name} has already '
                         'been registered.')
    _udf_callback_map[op_name] = callback


Function.register_udf_deserialize_callback = staticmethod(register_udf_deserialize_callback)


def register_native_user_function(op_id, module_name, factory_method_name):
    """Registers op_id as the C++ user function that factory_method_name (an extern "C" factory,
    loom/graph/native_user_function.h) of the shared library module_name makes; '.so' is
    appended where module_name does not end so."""
    _functions.register_native_user_function(op_id, module_name, factory_method_name)


def native_user_function(op_id, operands, attributes=None, user_function_instance_name=''):
    """The Function the factory registered for op_id makes of operands and attributes (a dict
    of numbers, strings, lists and dicts)."""
    return _functions.native_user_function(op_id, list(operands), attributes or {},
                                      user_function_instance_name)


# A library named without a folder is also looked for in the package's folder, where CNTK's
# example library (Cntk.ExtensibilityExamples-<version>.so) lies, as CNTK's package kept it.
_functions.add_native_user_function_search_path(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Function.register_native_user_function = staticmethod(register_native_user_function)
Function.native_user_function = staticmethod(native_user_function)

_clone = Function.clone


def _clone_with_method_name(self, method, substitutions=None):
    """CNTK's Function.clone: method is a CloneMethod or its name ('share', 'clone' or
    'freeze', as in CNTK 206's ``D_real.clone(method='share', substitutions=...)``)."""
    if isinstance(method, str):
        if method not in CloneMethod.__members__:
            raise ValueError(f"'{method}' is not a valid CloneMethod (one of 'share', 'clone', "
                             "'freeze')")
        method = CloneMethod.__members__[method]
    return _clone(self, method, substitutions)


_clone_with_method_name.__doc__ += '\n\n' + (_clone.__doc__ or '')
Function.clone = _clone_with_method_name


def _deserialize_user_function(inputs, name, saved):
    """Called by the model loader for a Python user function: its registered callback, else the
    static deserialize of the class the file names."""
    op_name = saved.get('op_name')
    factory = _udf_callback_map.get(op_name)
    if factory is None:
        cls = importlib.import_module(saved['module'])
        for part in saved['class'].split('.'):
            cls = getattr(cls, part)
        factory = cls.deserialize
        if factory is UserFunction.deserialize:
            raise ValueError(f"Cannot deserialize user function '{saved['module']}."
                             f"{saved['class']}': it has no static deserialize method, and no "
                             f"callback is registered for its op name '{op_name}' "
                             '(Function.register_udf_deserialize_callback)')
    return factory(list(inputs), name, saved['state'])
