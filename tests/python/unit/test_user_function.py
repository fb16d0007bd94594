"""CNTK's UserFunction: ops written in Python, in evaluation, gradients, training, clones, and
saved models (CNTK's own userfunction tests' cases, with the values they assert)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import loom as C
from loom.ops.functions import Function, UserFunction


class MyPlus(UserFunction):
    """CNTK's example: a + b, counting its calls; its state is saved with the model."""

    def __init__(self, arg1, arg2, name='f1'):
        super().__init__([arg1, arg2], name=name)
        self.forward_calls = 0
        self.backward_calls = 0

    def infer_outputs(self):
        x = self.inputs[0]
        return [C.output_variable(x.shape, x.dtype, x.dynamic_axes)]

    def forward(self, arguments, device=None, outputs_to_retain=None):
        assert len(self.inputs) == 2
        self.forward_calls += 1
        return None, arguments[0] + arguments[1]

    def backward(self, state, root_gradients, input_gradients):
        self.backward_calls += 1
        for variable in input_gradients:
            input_gradients[variable] = root_gradients

    def serialize(self):
        return {'forward_calls': self.forward_calls, 'backward_calls': self.backward_calls}

    @staticmethod
    def deserialize(inputs, name, state):
        f = MyPlus(inputs[0], inputs[1], name)
        f.forward_calls = state['forward_calls']
        f.backward_calls = state['backward_calls']
        return f


class MySigmoid(UserFunction):
    """The sigmoid of CNTK's manual, with its state (the output) kept for backward."""

    def __init__(self, arg, name='MySigmoid'):
        super().__init__([arg], name=name)

    def forward(self, argument, device=None, outputs_to_retain=None):
        sigmoid_x = 1 / (1 + np.exp(-argument))
        return sigmoid_x, sigmoid_x

    def backward(self, state, root_gradients):
        return root_gradients * state * (1 - state)


def test_a_user_function_evaluates_inside_a_graph():
    dim = 4
    p = C.parameter(shape=(dim,), init=10, name='p')
    i = C.sequence.input_variable(dim, needs_gradient=True, name='i_var')
    m = C.user_function(MyPlus(i, C.constant(3)))
    z = m + p
    data = np.random.rand(dim).astype(np.float32)
    result = z.eval([data])
    assert np.allclose(result[0][0], data + 3 + 10)
    assert m.op_name == f'{__name__}.MyPlus'
    assert 'MyPlus' in str(m)


def test_parameters_alone_give_a_value_without_batch_axis():
    p = C.parameter(shape=(4,), init=10, name='p')
    m = C.user_function(MyPlus(p, C.constant(3)))
    assert np.allclose((m + 0).eval(), np.zeros(4) + 13)
    assert np.allclose((p * m).eval(), (10 + 3) * 10 * np.ones(4))


def test_gradients_and_free_dimensions():
    i = C.sequence.input_variable(C.FreeDimension, needs_gradient=True, name='i_var')
    m = C.user_function(MyPlus(i, C.constant(3)))
    for n in (3, 6):
        data = np.random.rand(n).astype(np.float32)
        gradient, result = m.grad({i: data}, wrt=[i], outputs=[m.output])
        assert np.allclose(result[0][0], data + 3)
        assert np.allclose(gradient[0][0], np.ones_like(data))


def test_a_user_function_made_on_a_placeholder_reads_its_inputs_once_bound():
    # CNTK's test_ext_eval_7_placeholder: infer_outputs reads self.inputs, the placeholder when
    # the function is made and the input bound to it afterwards.
    dim = 4
    p = C.parameter(shape=(dim,), init=10, name='p')
    i = C.sequence.input_variable(dim, needs_gradient=True, name='i_var')
    pl = C.placeholder()
    udf = MyPlus(pl, C.constant(3))
    m = C.user_function(udf)
    z = m + p
    z.replace_placeholder(i)
    assert udf.inputs[0] == i and m.output.shape == (dim,)
    input_data = np.random.rand(dim).astype(np.float32)
    result = z.eval([input_data])
    assert np.allclose(result[0][0], input_data + 3 + 10)
    gradient = z.grad({i: [input_data]}, wrt=[i])
    assert np.allclose(gradient[0], np.ones((1, dim)))
    assert udf.backward_calls == 1


class MyPlusWithNoGradientToRightOperand(UserFunction):
    """CNTK's: backward gives the left operand's gradient only."""

    def __init__(self, arg1, arg2, name='f1'):
        super().__init__([arg1, arg2], name=name)

    def forward(self, arguments, device=None, outputs_to_retain=None):
        return None, [a0 + a1 for a0, a1 in zip(*arguments)]

    def backward(self, state, root_gradients, input_gradients):
        input_gradients[self.inputs[0]] = root_gradients


def test_udf_no_gradient_for_some_inputs():
    # CNTK's test: an input backward gives no gradient for gets zeros.
    x = C.sequence.input_variable(2, needs_gradient=True, name='x')
    y = C.sequence.input_variable(2, needs_gradient=True, name='y')
    op = C.user_function(MyPlusWithNoGradientToRightOperand(x, y))
    x_data = [np.array([[1., 2.], [3., 4.]], np.float32)]
    y_data = [np.array([[5., 6.], [7., 8.]], np.float32)]
    gradients, result = op.grad({x: x_data, y: y_data}, op.arguments, [op.output])
    assert np.allclose(gradients[op.arguments[0]], [[[1., 1.], [1., 1.]]])
    assert np.allclose(gradients[op.arguments[1]], [[[0., 0.], [0., 0.]]])
    assert np.allclose(result, [[[6., 8.], [10., 12.]]])


def test_the_sigmoid_matches_the_built_in_one_with_its_gradient():
    x = C.input_variable(3, needs_gradient=True)
    data = np.array([[-1.0, 0.5, 2.0], [0.0, -3.0, 1.0]], np.float32)
    mine = C.user_function(MySigmoid(x))
    built_in = C.sigmoid(x)
    assert np.allclose(mine.eval({x: data}), built_in.eval({x: data}), atol=1e-6)
    assert np.allclose(mine.grad({x: data}, wrt=[x]), built_in.grad({x: data}, wrt=[x]),
                       atol=1e-6)


class CountingSigmoid(MySigmoid):
    def __init__(self, arg, name='CountingSigmoid'):
        super().__init__(arg, name=name)
        self.calls = [0, 0]

    def forward(self, argument, device=None, outputs_to_retain=None):
        self.calls[0] += 1
        return super().forward(argument, device, outputs_to_retain)

    def backward(self, state, root_gradients):
        self.calls[1] += 1
        return super().backward(state, root_gradients)

    @staticmethod
    def deserialize(inputs, name, state):
        return CountingSigmoid(inputs[0], name)


def test_a_trainer_trains_through_it_and_the_model_saves_and_loads(tmp_path):
    dim = 4
    p = C.parameter(shape=(dim,), init=10)
    W = C.parameter(shape=(dim, dim), init=C.glorot_uniform(seed=1))
    i = C.input_variable(dim, needs_gradient=True, name='i_var')
    m = MyPlus(i, C.constant(3), 'my_plus')
    s = CountingSigmoid(C.times(C.user_function(m), W))
    z = C.user_function(s) + p
    learner = C.momentum_sgd(z.parameters, C.learning_parameter_schedule(0.007, minibatch_size=1),
                             C.momentum_as_time_constant_schedule(1100), True, minibatch_size=0)
    trainer = C.Trainer(z, (z + 0, z + 0), [learner])
    W0 = W.value
    for _ in range(100):
        trainer.train_minibatch([np.random.rand(dim).astype(np.float32)])
    # Backward runs where a gradient flows to what the trainer updates: W, through the
    # sigmoid; nothing the trainer updates is behind MyPlus (CNTK ran it for i_var too).
    assert s.calls == [100, 100]
    assert m.forward_calls == 100 and m.backward_calls == 0
    assert not np.allclose(W.value, W0)

    path = str(tmp_path / 'udf.model')
    z.save(path)
    z1 = Function.load(open(path, 'rb').read())
    data = np.random.rand(dim).astype(np.float32)
    assert np.allclose(z1.eval([data]), z.eval([data]))
    assert z1.find_by_name('my_plus').op_name == f'{__name__}.MyPlus'


class Scaled(UserFunction):
    """x * factor, its factor kept by serialize and given back to a registered callback."""

    def __init__(self, arg, factor=2.0, name=''):
        super().__init__([arg], name=name)
        self.factor = factor

    @property
    def op_name(self):
        return 'test.Scaled'

    def forward(self, argument, device=None, outputs_to_retain=None):
        return None, argument * self.factor

    def backward(self, state, root_gradients):
        return root_gradients * self.factor

    def serialize(self):
        return {'factor': self.factor}

    def clone(self, cloned_inputs):
        Scaled.clones += 1
        return Scaled(cloned_inputs[0], self.factor, self.name)

    clones = 0


def test_a_registered_callback_loads_a_user_function_and_clones_copy_it(tmp_path):
    x = C.input_variable(2, name='x')
    f = C.user_function(Scaled(x, 3.0, name='s'))
    path = str(tmp_path / 'scaled.model')
    f.save(path)
    with pytest.raises(ValueError, match="no static deserialize.*op name 'test.Scaled'"):
        C.load_model(path)  # Scaled has no deserialize, and no callback is registered yet
    seen = {}

    def make(inputs, name, state):
        seen.update(name=name, state=state)
        return Scaled(inputs[0], state['factor'], name)

    Function.register_udf_deserialize_callback('test.Scaled', make)
    with pytest.raises(ValueError, match='already been registered'):
        Function.register_udf_deserialize_callback('test.Scaled', make)
    g = C.load_model(path)
    assert seen == {'name': 's', 'state': {'factor': 3.0}}
    data = np.array([[1.0, -2.0]], np.float32)
    assert np.allclose(g.eval({g.arguments[0]: data}), data * 3)
    clones = Scaled.clones
    clone = f.clone(C.CloneMethod.share)
    assert Scaled.clones == clones + 1
    assert np.allclose(clone.eval({clone.arguments[0]: data}), data * 3)


class ValuesNotNumpy(UserFunction):
    def __init__(self, arg, name=''):
        super().__init__([arg], as_numpy=False, name=name)

    def forward(self, argument, device=None, outputs_to_retain=None):
        assert isinstance(argument, C.Value)
        return None, argument


def test_as_numpy_false_passes_values():
    x = C.sequence.input_variable(2)
    f = C.user_function(ValuesNotNumpy(x))
    data = [np.ones((3, 2), np.float32), np.zeros((1, 2), np.float32)]
    out = f.eval({x: data})
    assert [o.shape for o in out] == [(3, 2), (1, 2)]


class Wrong(UserFunction):
    def __init__(self, arg, result):
        super().__init__([arg])
        self.result = result

    def forward(self, argument, device=None, outputs_to_retain=None):
        return self.result


def test_wrong_results_are_errors_naming_the_method():
    x = C.input_variable(2)
    data = np.ones((1, 2), np.float32)
    with pytest.raises(TypeError, match=r'Wrong.forward returned ndarray; it must return '
                                        r'\(state, output\)'):
        C.user_function(Wrong(x, np.ones((1, 2)))).eval({x: data})
    with pytest.raises(ValueError, match="Wrong.forward's output: data of shape"):
        C.user_function(Wrong(x, (None, np.ones((1, 5), np.float32)))).eval({x: data})
    y = C.input_variable(2, needs_gradient=True)
    with pytest.raises(NotImplementedError, match='must implement backward'):
        C.user_function(Wrong(y, (None, data))).grad({y: data}, wrt=[y])


def test_set_attribute_and_custom_attributes_saved_with_the_model(tmp_path):
    x = C.input_variable(1000)
    d = C.dropout(x, 0.5, seed=3)
    ones = np.ones((1, 1000), np.float32)
    d.set_attribute('dropoutRate', 0.0)
    assert d.attributes['dropout_rate'] == 0.0
    d.set_attribute('rngSeed', 7)
    assert d.attributes['seed'] == 7
    with pytest.raises(C.ArgumentError, match="'learningRate' cannot be set"):
        d.set_attribute('learningRate', 1)
    with pytest.raises(C.ArgumentError, match='is Plus, not Dropout'):
        (x + 1).set_attribute('dropoutRate', 0.1)
    with pytest.raises(C.ArgumentError, match=r'in \[0, 1\)'):
        d.set_attribute('dropoutRate', 1.5)
    assert np.allclose(d.eval({x: ones}), ones)

    z = C.combine([d, x * 2])
    z.custom_attributes = {'author': 'me', 'epochs': 3}
    d.custom_attributes = {'note': 'no dropout'}
    path = str(tmp_path / 'attrs.model')
    z.save(path)
    loaded = C.load_model(path)
    assert loaded.custom_attributes == {'author': 'me', 'epochs': 3}
    dropout = [f for f in C.logging.graph.depth_first_search(
        loaded, lambda n: isinstance(n, Function) and n.op_name == 'Dropout')][0]
    assert dropout.custom_attributes == {'note': 'no dropout'}
    assert z.clone(C.CloneMethod.share).custom_attributes == {'author': 'me', 'epochs': 3}
    with pytest.raises(TypeError, match='takes a dict'):
        z.custom_attributes = 3


PLUGIN = os.environ.get('LOOM_NATIVE_SCALE_PLUGIN')


@pytest.mark.skipif(not PLUGIN, reason='LOOM_NATIVE_SCALE_PLUGIN (set by ctest) is not set')
def test_a_native_user_function_from_a_library_evaluates_and_loads(tmp_path):
    # tests/support/native_scale_plugin.cpp: input * attributes['scale'].
    from loom.ops.functions import native_user_function, register_native_user_function
    assert not C.cntk_py.is_native_user_function_registered('py.Scale')
    register_native_user_function('py.Scale', PLUGIN, 'create_scale_function')
    assert C.cntk_py.is_native_user_function_registered('py.Scale')
    with pytest.raises(ValueError):  # op ids are unique
        Function.register_native_user_function('py.Scale', PLUGIN, 'create_scale_function')
    x = C.input_variable(2, needs_gradient=True)
    attributes = {'scale': 3.0, 'none': None, 'nested': [[1, 2], [3, 4]], 'string': 's',
                  'data': np.arange(4, dtype=np.float32).reshape(2, 2)}
    f = native_user_function('py.Scale', [x], attributes, 'tripled')
    assert f.name == 'tripled'
    data = np.array([[1, -2], [0.5, 4]], dtype=np.float32)
    np.testing.assert_array_equal(f.eval({x: data}), 3 * data)
    np.testing.assert_array_equal(f.grad({x: data}, wrt=[x]), np.full((2, 2), 3, np.float32))
    path = str(tmp_path / 'native.model')
    f.save(path)
    loaded = C.load_model(path)
    np.testing.assert_array_equal(loaded.eval(data), 3 * data)
    # Its attributes are those it was made with (CNTK's), the saved ones too.
    for g in [f, loaded.find_by_name('tripled')]:
        for k, v in attributes.items():
            np.testing.assert_array_equal(g.attributes[k], v)
    # A process that never registered it: the file names the library and factory, and loading
    # registers the op id.
    out = subprocess.run([sys.executable, '-c', 'import sys, numpy as np, loom; print(loom.'
                          'load_model(sys.argv[1]).eval(np.ones((1, 2), np.float32)), loom.'
                          "cntk_py.is_native_user_function_registered('py.Scale'))", path],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ['[[3.', '3.]]', 'True'], \
        out.stdout + out.stderr
    with pytest.raises(ValueError, match='no native user function'):
        native_user_function('py.Unknown', [x])
    with pytest.raises(OSError, match='cannot be loaded'):
        register_native_user_function('py.Missing', '/nonexistent/libnothing', 'f')
