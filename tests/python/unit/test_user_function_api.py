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


class PlusAndLast(UserFunction):
    """CNTK's test_udf_plus_and_last: a sequence and a batch in, the last step of their sum
    out, computed by a graph of its own; its output is on the batch axis alone."""

    def __init__(self, seq, batch, name='plus_and_last'):
        self.i1 = C.input_variable(seq.shape, seq.dtype, dynamic_axes=seq.dynamic_axes)
        self.i2 = C.input_variable(batch.shape, batch.dtype, dynamic_axes=batch.dynamic_axes)
        self.impl = C.sequence.last(self.i1 + C.sequence.broadcast_as(self.i2, self.i1))
        super().__init__([seq, batch], name=name)

    def infer_outputs(self):
        out = self.impl.output
        return [C.output_variable(out.shape, out.dtype, out.dynamic_axes)]

    def forward(self, arguments, device=None, outputs_to_retain=None):
        return None, self.impl.eval({self.i1: arguments[0], self.i2: arguments[1]})


def test_inputs_on_different_dynamic_axes_give_the_axes_the_outputs_declare():
    s = C.sequence.input_variable(2, name='s')
    b = C.input_variable(2, name='b')
    f = C.user_function(PlusAndLast(s, b))
    assert f.output.dynamic_axes == b.dynamic_axes
    seqs = [np.array([[1, 2], [3, 4]], np.float32), np.array([[5, 6]], np.float32)]
    batch = np.array([[10, 20], [30, 40]], np.float32)
    np.testing.assert_array_equal(f.eval({s: seqs, b: batch}), [[13, 24], [35, 46]])
    # A sequence and a constant: the output has a row per sequence.
    g = C.user_function(PlusAndLast(s, C.constant(np.ones(2, np.float32))))
    assert g.output.dynamic_axes == b.dynamic_axes
    np.testing.assert_array_equal(g.eval({s: seqs}), [[4, 5], [6, 7]])
    # Outputs on axes no input has are an error naming them.
    with pytest.raises(ValueError, match=r"the outputs' dynamic axes are \[\]; they must be an "
                                         r"input's"):
        C.user_function(NoAxes(s, b))


class NoAxes(Plus):
    def infer_outputs(self):
        return [C.output_variable(self.inputs[1].shape, self.inputs[1].dtype, [])]


def test_cntks_example_native_user_function_ships_with_the_package(tmp_path):
    # CNTK's NativeUserTimesOp (examples/extensibility/user_times_function.cpp), registered by
    # the library name CNTK's programs use: y = x W, W's gradient only.
    if not C.cntk_py.is_native_user_function_registered('NativeUserTimesOp'):
        C.ops.register_native_user_function(
            'NativeUserTimesOp', 'Cntk.ExtensibilityExamples-' + C.__version__.rstrip('+'),
            'CreateUserTimesFunction')
    assert C.cntk_py.is_native_user_function_registered('NativeUserTimesOp')
    x = C.input_variable(2)
    w_value = np.array([[0.5, 2], [-0.5, 1.5]], np.float32)
    w = C.parameter((2, 2), init=w_value)
    op = C.ops.native_user_function('NativeUserTimesOp', [w, x], {'note': None}, 'times')
    data = np.array([[0.1, 0.2], [-0.1, 0.3]], np.float32)
    np.testing.assert_allclose(op.eval({x: data}), data @ w_value, rtol=1e-6)
    np.testing.assert_allclose(op.grad({x: data}, wrt=[w]), data.T @ np.ones((2, 2)), rtol=1e-6)
    path = str(tmp_path / 'times.model')
    op.save(path)
    loaded = C.Function.load(path)
    np.testing.assert_allclose(loaded.eval({loaded.arguments[0]: data}), data @ w_value,
                               rtol=1e-6)
    assert loaded.find_by_name('times').attributes['note'] is None
    xg = C.input_variable(2, needs_gradient=True)
    with pytest.raises(ValueError, match='no gradient for its right operand'):
        C.ops.native_user_function('NativeUserTimesOp', [w, xg]).grad({xg: data}, wrt=[xg])


def test_arguments_are_in_cntks_order_as_user_functions_index_them():
    # CNTK's PlusAndLast evaluates its graph with impl.arguments[0] for its first input:
    # arguments come depth first, each function's inputs left to right.
    i1 = C.sequence.input_variable(2, name='i1')
    i2 = C.input_variable(2, name='i2')
    impl = C.sequence.last(i1 + C.sequence.broadcast_as(i2, i1))
    assert [a.name for a in impl.arguments] == ['i1', 'i2']
    assert [a.name for a in (i2 + C.sigmoid(C.input_variable(2, name='i3'))).arguments] == \
        ['i2', 'i3']
