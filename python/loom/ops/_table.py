"""The functions of Loom's op table (loom/ops/op_schema.h): one per op that has a Python name,
made at import with CNTK's signature, so that an op added to the table in C++ needs no Python
code of its own."""
import collections
import functools
import inspect
import warnings

from loom import _loom

_Parameter = inspect.Parameter
# A parameter as _loom.ops._op_table gives it (loom/ops/op_schema.h's OpParam).
_Param = collections.namedtuple('_Param', 'name kind default after_name none_warning')


def _signature(params):
    """CNTK's parameters in their order, then name='', then those CNTK added after name
    (after_name: batch_normalization's running_count=None). A parameter the caller must give has
    the default inspect.Parameter.empty (_loom.ops._op_table gives it so). Varargs (kind
    'tensors', CNTK's *inputs) make the parameters after them keyword-only, as in
    splice(*inputs, axis=-1, name='')."""
    kind = _Parameter.POSITIONAL_OR_KEYWORD
    parameters, after_name = [], []
    for p in params:
        if p.kind == 'tensors':
            parameters.append(_Parameter(p.name, _Parameter.VAR_POSITIONAL))
            kind = _Parameter.KEYWORD_ONLY
        else:
            (after_name if p.after_name else parameters).append(
                _Parameter(p.name, kind, default=p.default))
    return inspect.Signature(parameters + [_Parameter('name', kind, default='')] + after_name)


def _function(entry):
    op, variant = entry['op'], entry['variant']
    params = [_Param(*p) for p in entry['params']]
    signature = _signature(params)
    kinds = ('tensor', 'optional_tensor', 'tensors')
    tensors = [p.name for p in params if p.kind in kinds]
    varargs = [p.name for p in params if p.kind == 'tensors']
    attributes = [p.name for p in params if p.kind not in kinds]
    none_warnings = {p.name: p.none_warning for p in params if p.none_warning}

    def function(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)  # a TypeError for a bad call, as Python's
        bound.apply_defaults()
        given = bound.arguments
        if not isinstance(given['name'], str):  # an operand too many, as in minus(a, b, c)
            raise TypeError(f"{entry['python']}(): name must be a str, not "
                            f"{type(given['name']).__name__}")
        for name, message in none_warnings.items():
            if given[name] is None:
                warnings.warn(message, Warning, stacklevel=2)
        if varargs:  # the operands, or one list or tuple of them (CNTK's sum([a, b]))
            inputs = list(given.get(varargs[0], ()))
            if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
                inputs = list(inputs[0])
        else:
            inputs = [given[name] for name in tensors]
            while inputs and inputs[-1] is None:  # optional inputs left out (they come last)
                inputs.pop()
        return _loom.ops._apply_op(op, inputs, {name: given[name] for name in attributes},
                                   given['name'], variant)

    function.__name__ = function.__qualname__ = entry['python']
    function.__doc__ = entry['doc']
    function.__module__ = 'loom.' + entry['module']
    function.__signature__ = signature
    return associative_multi_arg(function) if entry['associative'] else function


def associative_multi_arg(f):
    """CNTK's decorator of a binary associative op f(left, right, name=''): the result takes two
    or more operands, f(a, b, c, ...), reduced as a balanced tree of f (the outermost application
    gets the name); a str after the operands is the name, as in plus(a, b, c, 'sum')."""
    @functools.wraps(f)
    def multi_arg(arg1, arg2, *more_args, **name_kwarg):
        name = name_kwarg.pop('name', '')
        if name_kwarg:
            raise TypeError(f'{f.__name__}() got an unexpected keyword argument '
                            f'{next(iter(name_kwarg))!r}')
        if not name and more_args and isinstance(more_args[-1], str):
            name, more_args = more_args[-1], more_args[:-1]

        def tree(args, name):
            if len(args) == 1:
                return args[0]
            half = len(args) // 2
            if len(args) == 2:
                return f(args[0], args[1], name=name)
            return f(tree(args[:half], ''), tree(args[half:], ''), name=name)

        return tree((arg1, arg2) + more_args, name)

    return multi_arg


def op_functions(module):
    """{name: function} for the table's functions of loom.<module> ('ops', ...)."""
    return {entry['python']: _function(entry)
            for entry in _loom.ops._op_table() if entry['module'] == module}
