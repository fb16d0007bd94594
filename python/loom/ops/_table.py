"""The functions of Loom's op table (loom/ops/op_schema.h): one per op that has a Python name,
made at import with CNTK's signature, so that an op added to the table in C++ needs no Python
code of its own."""
import inspect

from loom import _loom

_Parameter = inspect.Parameter


def _signature(params):
    """CNTK's parameters in their order, then name=''. A parameter the caller must give has the
    default inspect.Parameter.empty (_loom._op_table gives it so)."""
    kind = _Parameter.POSITIONAL_OR_KEYWORD
    parameters = [_Parameter(name, kind, default=default) for name, _, default in params]
    parameters.append(_Parameter('name', kind, default=''))
    return inspect.Signature(parameters)


def _function(entry):
    op, params, associative = entry['op'], entry['params'], entry['associative']
    signature = _signature(params)
    tensors = [name for name, kind, _ in params if kind == 'tensor']
    attributes = [name for name, kind, _ in params if kind != 'tensor']

    def function(*args, **kwargs):
        if associative and len(args) > 2:
            # CNTK's associative_multi_arg: f(a, b, c) is f(f(a, b), c), the name on the last.
            return function(function(*args[:-1]), args[-1], **kwargs)
        bound = signature.bind(*args, **kwargs)  # a TypeError for a bad call, as Python's
        bound.apply_defaults()
        given = bound.arguments
        if not isinstance(given['name'], str):  # an operand too many, as in minus(a, b, c)
            raise TypeError(f"{entry['python']}(): name must be a str, not "
                            f"{type(given['name']).__name__}")
        inputs = [given[name] for name in tensors]
        return _loom._apply_op(op, inputs, {name: given[name] for name in attributes},
                               given['name'])

    function.__name__ = function.__qualname__ = entry['python']
    function.__doc__ = entry['doc']
    function.__module__ = 'loom.' + entry['module']
    function.__signature__ = signature
    return function


def op_functions(module):
    """{name: function} for the table's functions of loom.<module> ('ops', ...)."""
    return {entry['python']: _function(entry)
            for entry in _loom._op_table() if entry['module'] == module}
