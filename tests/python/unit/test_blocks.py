"""Blocks as CNTK's Python API makes them: as_block, @BlockFunction, is_block, block_root,
block_arguments_mapping, walks with depth, and blocks kept through clone, save and load."""
import numpy as np
import pytest

import loom as C
from loom.logging.graph import depth_first_search, find_all_with_name, find_by_name
from loom.ops.functions import BlockFunction


def dense_composite():
    p = C.placeholder(shape=(3,), name='p')
    W = C.parameter(shape=(3, 2), init=np.arange(6, dtype=np.float32).reshape(3, 2) / 10,
                    name='W')
    return p, W, C.combine([C.tanh(C.times(p, W, name='inner'))])


def test_as_block_is_one_function_with_its_composite_inside():
    p, W, composite = dense_composite()
    x = C.input_variable(3, name='x')
    block = C.as_block(composite, [(p, x)], 'MyDense', 'd1')
    assert block.is_block and block.is_primitive and not block.is_composite
    assert block.op_name == 'MyDense' and block.name == 'd1'
    assert block.inputs == [W, x]
    assert block.output.owner == block
    assert block.root_function == block
    assert block.block_root == composite.root_function
    assert block.block_arguments_mapping == [(p, x)]
    assert C.ops.as_block is C.as_block
    data = np.array([[1, 2, 3]], dtype=np.float32)
    np.testing.assert_allclose(block.eval({x: data}), np.tanh(data @ W.value), rtol=1e-6)
    # A dict maps too.
    assert C.as_block(composite, {p: x}, 'MyDense').block_arguments_mapping == [(p, x)]


def test_walks_enter_blocks_only_as_deep_as_asked():
    p, W, composite = dense_composite()
    x = C.input_variable(3, name='x')
    model = C.sigmoid(C.as_block(composite, [(p, x)], 'MyDense', 'd1'), name='top')
    assert find_by_name(model, 'd1').is_block
    assert find_by_name(model, 'inner') is None
    assert find_by_name(model, 'inner', depth=1).op_name == 'Times'
    assert model.find_by_name('inner', depth=-1).op_name == 'Times'
    assert len(model.find_all_with_name('inner')) == 0
    ops = [n.op_name for n in depth_first_search(model, lambda n: isinstance(n, C.Function))]
    assert ops == ['Sigmoid', 'MyDense']
    ops = [n.op_name for n in depth_first_search(model, lambda n: isinstance(n, C.Function), 1)]
    assert ops == ['Sigmoid', 'MyDense', 'Tanh', 'Times']


def test_block_function_decorator_makes_a_callable_block():
    W = C.parameter(shape=(2, 2), init=np.eye(2, dtype=np.float32) * 2)

    @BlockFunction('Scale', 'scaler')
    def scale(a, b):
        return C.times(a, W) - b

    assert scale.is_block and scale.op_name == 'Scale' and scale.name == 'scaler'
    assert [a.name for a in scale.arguments] == ['a', 'b']
    x, y = C.input_variable(2, name='x'), C.input_variable(2, name='y')
    applied = scale(x, y)
    assert applied.is_block and applied.op_name == 'Scale'
    assert [outer for _, outer in applied.block_arguments_mapping] == [x, y]
    out = applied.eval({x: np.array([[1, 2]], np.float32), y: np.array([[1, 1]], np.float32)})
    np.testing.assert_array_equal(out, [[1, 3]])
    # Function(f, make_block=True) is the same.
    triple = C.Function(lambda a: a * 3, make_block=True, op_name='Triple', name='t')
    assert triple.is_block and triple.op_name == 'Triple' and triple.name == 't'
    np.testing.assert_array_equal(triple(x).eval({x: np.array([[1, 2]], np.float32)}), [[3, 6]])


def test_blocks_clone_save_and_load(tmp_path):
    p, W, composite = dense_composite()
    x = C.input_variable(3, name='x')
    model = C.sigmoid(C.as_block(composite, [(p, x)], 'MyDense', 'd1'))
    data = np.array([[1, 2, 3], [0, -1, 2]], dtype=np.float32)
    copy = model.clone(C.CloneMethod.clone)
    block = copy.find_by_name('d1')
    assert block.is_block and block.op_name == 'MyDense'
    assert block.uid != model.find_by_name('d1').uid
    np.testing.assert_array_equal(copy.eval({copy.arguments[0]: data}), model.eval({x: data}))
    path = str(tmp_path / 'block.model')
    model.save(path)
    loaded = C.load_model(path)
    block = loaded.find_by_name('d1')
    assert block.is_block and block.op_name == 'MyDense'
    (inner, outer), = block.block_arguments_mapping
    assert inner.is_placeholder and inner.shape == (3,) and outer.name == 'x'
    assert block.block_root.op_name == 'Tanh'
    np.testing.assert_array_equal(loaded.eval({loaded.arguments[0]: data}), model.eval({x: data}))


def test_as_block_bad_input_is_a_clear_error():
    p, W, composite = dense_composite()
    x = C.input_variable(3, name='x')
    with pytest.raises(ValueError, match='no variable is given for p'):
        C.as_block(composite, [], 'MyDense')
    with pytest.raises(TypeError, match='pairs'):
        C.as_block(composite, [(p, x, x)], 'MyDense')
    with pytest.raises(RuntimeError, match='is not a block'):
        C.sigmoid(x).block_root
    with pytest.raises(TypeError, match='op_name'):
        C.Function(lambda a: a, make_block=True)


def test_a_layers_call_is_a_block_of_its_op_name_and_name():
    # CNTK's layers are @BlockFunctions: Dense(10, name='classify')(x)'s root is a block.
    x = C.input_variable(2, name='x')
    z = C.layers.Dense(10, name='classify')(x)
    assert str(z) == 'classify: Dense(x: Tensor[2]) -> Tensor[10]'
    root = z.root_function
    assert root.is_block and root.op_name == 'Dense' and root.name == 'classify'
    assert root.inputs[-1] == x and z.output.name == 'classify'
    assert [f.op_name for f in depth_first_search(z, lambda n: isinstance(n, C.Function))] == \
        ['Dense']
    assert 'Times' in [f.op_name for f in depth_first_search(
        z, lambda n: isinstance(n, C.Function), depth=-1)]
    for layer, op_name in [(C.layers.Embedding(4), 'Embedding'),
                           (C.layers.BatchNormalization(), 'BatchNormalization'),
                           (C.layers.LayerNormalization(), 'LayerNormalization'),
                           (C.layers.Dropout(0.5), 'Dropout'),
                           (C.layers.Activation(C.relu), 'Activation'),
                           (C.layers.Stabilizer(), 'Stabilizer')]:
        assert layer(x).root_function.is_block, op_name
        assert layer(x).root_function.op_name == op_name
    img = C.input_variable((1, 6, 6))
    for layer, op_name in [(C.layers.Convolution((3, 3), 2), 'Convolution'),
                           (C.layers.Convolution2D((3, 3), 2), 'Convolution2D'),
                           (C.layers.MaxPooling((2, 2)), 'MaxPooling'),
                           (C.layers.AveragePooling((2, 2)), 'AveragePooling'),
                           (C.layers.GlobalAveragePooling(), 'GlobalAveragePooling')]:
        assert layer(img).root_function.op_name == op_name
    # Recurrence is a composite, as CNTK's; an identity passes its argument through.
    s = C.sequence.input_variable(3)
    assert not C.layers.Recurrence(C.layers.GRU(4))(s).root_function.is_block
    assert C.layers.Activation(None)(x).output == x


def test_layers_are_found_by_name_and_their_parameters_inside_them(tmp_path):
    # CNTK 202's model: z.embed.E and z.classify.b; the LSTM's b does not hide classify's.
    x = C.sequence.input_variable(943)
    z = C.layers.Sequential([C.layers.Embedding(150, name='embed'),
                             C.layers.Recurrence(C.layers.LSTM(300)),
                             C.layers.Dense(129, name='classify')])
    assert z.classify.is_block and z.classify.op_name == 'Dense'
    assert z.classify.b.shape == (129,) and z(x).embed.E.shape == (943, 150)
    assert z(x).classify.b == z.classify.b
    assert find_by_name(z(x), 'classify').op_name == 'Dense'
    # Parameter paths are the layers'.
    assert z.parameter_paths == ['embed.E', 'LSTM.b', 'LSTM.W', 'LSTM.H', 'classify.W',
                                 'classify.b']
    # The blocks survive save and load, and compute the same.
    data = [np.eye(943, dtype=np.float32)[[1, 5, 7]]]
    path = str(tmp_path / 'z.model')
    z(x).save(path)
    loaded = C.load_model(path)
    assert loaded.classify.op_name == 'Dense' and loaded.classify.b.shape == (129,)
    np.testing.assert_array_equal(loaded.eval({loaded.arguments[0]: data}),
                                  z(x).eval({x: data}))


def test_named_recurrences_and_folds_are_found_by_name():
    # CNTK's _inject_name: a named Recurrence, RecurrenceFrom, Fold or UnfoldFrom of one output
    # ends in an alias (a Pass) of its name.
    x = C.sequence.input_variable(3, name='x')
    model = C.layers.Sequential([C.layers.Recurrence(C.layers.GRU(4), name='encoder'),
                                 C.layers.Fold(C.layers.RNNStep(2), name='summary')])(x)
    for name in ('encoder', 'summary'):
        found = model.find_by_name(name)
        assert found is not None and found.op_name == 'Pass' and found.output.name == name
    assert model.output.name == 'summary'
