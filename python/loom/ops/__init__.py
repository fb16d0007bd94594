"""Ops: functions that build graphs (CNTK's cntk.ops). Numbers and numpy arrays may stand for
any operand; they become constants of the other operand's dtype."""
from loom import _loom
from loom._loom.io import INFINITELY_REPEAT  # noqa: F401 (CNTK's cntk.ops has it too)
from loom._loom.ops import constant, input_variable, parameter, placeholder
from loom._loom.ops import SentinelValueForAutoSelectRandomSeed  # noqa: F401 (CNTK's)
from loom.ops import functions, sequence  # noqa: F401
from loom.ops._table import associative_multi_arg  # noqa: F401
from loom.ops._table import op_functions as _op_functions
from loom.ops.functions import (BlockFunction, CloneMethod, Function, ModelFormat,  # noqa: F401
                                load_model, native_user_function, output_variable,
                                register_native_user_function)

# The op table's functions (plus, elu, pow, ...), made from the C++ table at import. Some have
# the names of Python built-ins (abs, pow, round), as in CNTK's cntk.ops; they replace the
# built-ins only in loom.ops and loom (`from loom.ops import *`), which call none of them.
globals().update(_op_functions('ops'))

# pooling()'s and unpooling()'s types (CNTK's values).
MAX_POOLING = 0
AVG_POOLING = 1
MAX_UNPOOLING = 0

# times()'s infer_input_rank_to_map (CNTK's values).
TIMES_NO_INFERRED_INPUT_RANK = -1
TIMES_REDUCE_SEQUENCE_AXIS_WITHOUT_INFERRED_INPUT_RANK = -2

# pad's modes (CNTK's values).
CONSTANT_PAD = 0
REFLECT_PAD = 1
SYMMETRIC_PAD = 2


def _operands(operands):
    """CNTK's (*operands): the operands as arguments, or one list or tuple of them."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        return list(operands[0])
    return list(operands)


def combine(*operands, name=''):
    """A Function with all outputs of the operands (CNTK's cntk.combine: varargs or a list)."""
    return _loom.ops.combine(_operands(operands), name)


def as_composite(root_function, name=''):
    """A composite Function of root_function's outputs and the graph below them, named name
    (CNTK's: a primitive Function made a composite)."""
    return _loom.ops.combine(root_function.outputs, name)


def as_block(composite, block_arguments_map, block_op_name, block_instance_name=''):
    """CNTK's as_block: composite (a Function of placeholders) applied to the variables that
    block_arguments_map ([(placeholder, variable), ...]) gives for its placeholders, seen as one
    function of op block_op_name (is_block; block_root and block_arguments_mapping give the
    composite back; graph walks enter it only at depth > 0)."""
    return _loom.ops.as_block(composite, block_arguments_map, block_op_name, block_instance_name)


def custom_proxy_op(custom_op, output_shape, output_data_type, *operands, **kw_name):
    """A stand-in for the op custom_op, which only an ONNX consumer computes: a Function of the
    declared output_shape and output_data_type over the operands (varargs or a list; a Function
    with several outputs gives them all). Evaluating it is an error, as in CNTK; the ONNX
    exporter writes it as a custom_op node."""
    name = kw_name.pop('name', '')
    if kw_name:
        raise TypeError(f'custom_proxy_op() got an unexpected keyword argument '
                        f'{next(iter(kw_name))!r}')
    unfolded = []
    for o in _operands(operands):
        outputs = getattr(o, 'outputs', None)
        unfolded += list(outputs) if outputs is not None and len(outputs) > 1 else [o]
    return _loom.ops._apply_op('CustomProxyOp', unfolded,
                               {'custom_op': custom_op, 'output_shape': output_shape,
                            'output_data_type': output_data_type}, name)
