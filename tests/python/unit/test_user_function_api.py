"""The names CNTK's user function programs reach (CNTK's userfunction tests): BlockFunction at
the top level and in cntk.layers.blocks, the native user function registry's functions in
cntk.ops and cntk_py, and a UserFunction used as an operand without user_function(...)."""
import numpy as np
import pytest

import loom as C
from loom.ops.functions import UserFunction


class Plus(UserFunction):
    def __init__(self, a, b, name='plus'):
        super().__init__([a, b], name=name)

    def forward(self, arguments, device=None, outputs_to_retain=None):
        return None, arguments[0] + arguments[1]


def test_block_function_is_at_the_top_level_and_in_layers_blocks():
    assert C.BlockFunction is C.ops.BlockFunction is C.layers.blocks.BlockFunction
    # cntk.layers.blocks holds the building blocks cntk.layers re-exports.
    for name in ['LSTM', 'GRU', 'RNNStep', 'Stabilizer', 'ForwardDeclaration', 'identity',
                 'UntestedBranchError']:
        assert getattr(C.layers.blocks, name) is getattr(C.layers, name)
    x = C.input_variable(2, name='x')
    y = C.input_variable(2, name='y')

    @C.layers.blocks.BlockFunction('PlusBlock', 'pb')
    def plus_block(a, b):
        return C.user_function(Plus(a, b))

    assert plus_block.is_block and plus_block.op_name == 'PlusBlock' and plus_block.name == 'pb'
    out = plus_block(x, y).eval({x: np.array([[1, 2]], np.float32),
                                 y: np.array([[10, 20]], np.float32)})
    np.testing.assert_array_equal(out, [[11, 22]])


def test_the_native_user_function_registry_is_where_cntk_has_it():
    assert C.ops.register_native_user_function is C.register_native_user_function
    assert C.ops.native_user_function is C.native_user_function
    assert C.cntk_py.is_native_user_function_registered('never.registered') is False


def test_a_user_function_used_as_an_operand_says_to_wrap_it():
    p = C.parameter(shape=(2,), init=10, name='p')
    message = (r"a Plus object \(named 'inner'\) is a UserFunction, not a Function: wrap it "
               r"with user_function\(Plus\(\.\.\.\)\) to use it as an operand")
    with pytest.raises(TypeError, match=message):
        p * Plus(p, C.constant(3), name='inner')
    with pytest.raises(TypeError, match=message):
        C.plus(Plus(p, C.constant(3), name='inner'), p)
    with pytest.raises(TypeError, match=message):
        C.user_function(Plus(Plus(p, C.constant(3), name='inner'), p))
    # Wrapped, it is a Function like any other.
    z = p * C.user_function(Plus(p, C.constant(3), name='inner'))
    np.testing.assert_array_equal(z.eval(), [130, 130])
