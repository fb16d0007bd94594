"""Default options of the layers (CNTK's cntk.default_options).

``with default_options(activation=relu, pad=True):`` changes the defaults that the layers created
inside it take for every option whose CNTK default is ``default_override_or(...)`` (``~X`` in
CNTK-API.md: activation, init, pad, bias, init_bias, output_shape, map_rank,
normalization_time_constant, epsilon, use_cntk_engine, disable_regularization,
enable_self_stabilization, go_backwards, initial_state, use_peepholes, dtype, ...); any keyword
is accepted, as CNTK accepts any. ``default_options_for(Convolution, pad=True)`` limits the
override to the layer functions listed. Scopes nest; the innermost setting wins; an option given
explicitly wins over every scope. These work on Python callables, so they live in Python; the
layers resolve their options here and hand the C++ layers explicit values.
"""
import inspect

__all__ = ['default_options', 'default_options_for', 'default_override_or', 'is_default_override',
           'get_default_override', 'set_global_option', 'get_global_option']


class _Scope(object):
    """One open ``with`` scope: its options, the functions it applies to (None: all), and the
    scope around it."""

    def __init__(self, functions, options, outer):
        self.functions = functions
        self.options = options
        self.outer = outer


class _OptionsContextManager(object):
    """The ``with`` protocol of default_options and default_options_for."""
    _current_default_overrides = None  # the innermost open scope

    def __init__(self, functions, **kwargs):
        if '_scope' in kwargs or '_outer' in kwargs:
            raise ValueError("default_options: _scope or _outer are invalid (reserved) names.")
        self.scope = functions
        self.kwargs = kwargs

    def __enter__(self):
        cls = _OptionsContextManager
        cls._current_default_overrides = _Scope(self.scope, dict(self.kwargs),
                                                cls._current_default_overrides)
        return self

    def __exit__(self, type, value, traceback):
        cls = _OptionsContextManager
        cls._current_default_overrides = cls._current_default_overrides.outer


def default_options(**kwargs):
    """``with default_options(activation=relu, init=he_normal(), pad=True):`` overrides those
    defaults of every layer created inside the block."""
    return _OptionsContextManager(None, **kwargs)


def default_options_for(functions, **kwargs):
    """The same, for the layer function(s) listed only: ``with default_options_for(Convolution,
    pad=True):``."""
    if not isinstance(functions, list):
        functions = [functions]
    return _OptionsContextManager(set(functions), **kwargs)


class default_override_or(object):
    """The default of an overridable option, as written in a signature:
    ``init=default_override_or(glorot_uniform())``."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return 'default_override_or(%r)' % (self.value,)


def is_default_override(value):
    """Whether value is still the signature's default_override_or (the option was not given)."""
    return isinstance(value, default_override_or)


def _parameter_names(function_or_class):
    target = function_or_class.__init__ if inspect.isclass(function_or_class) else function_or_class
    return list(inspect.signature(target).parameters)


def get_default_override(function_or_class, **kwargs):
    """The value of one option inside a layer function: ``init = get_default_override(Dense,
    init=init)``. A given value is returned as is; a default_override_or resolves to the innermost
    open scope's setting that applies to function_or_class (None: any scope), else its value."""
    if len(kwargs) != 1:
        raise TypeError("get_default_override() takes 1 keyword argument but %s were given"
                        % len(kwargs))
    key, value = next(iter(kwargs.items()))
    if function_or_class is not None:
        if not (inspect.isfunction(function_or_class) or inspect.isclass(function_or_class)):
            raise ValueError('get_default_override() expects the first argument to be a Python '
                             'function or class')
        if key not in _parameter_names(function_or_class):
            raise TypeError("{0}() has no argument named '{1}'".format(
                function_or_class.__name__, key))
    if not is_default_override(value):
        return value
    scope = _OptionsContextManager._current_default_overrides
    while scope is not None:
        if scope.functions is None or function_or_class is None or \
                function_or_class in scope.functions:
            if key in scope.options:
                return scope.options[key]
        scope = scope.outer
    return value.value


_GlobalOptions = {}


def set_global_option(key, value):
    """Set a process-wide option (where a ``with`` scope cannot be used), e.g. 'align_axis'."""
    _GlobalOptions[key] = value


def get_global_option(key, default_value):
    """A global option's value, or default_value if it was never set."""
    return _GlobalOptions.get(key, default_value)
