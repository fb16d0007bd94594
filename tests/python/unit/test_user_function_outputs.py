"""CNTK's UserFunction with several outputs: infer_outputs gives several output_variable(...)s,
forward fills the dict outputs, backward gets the dict root_gradients (CNTK's call forms, which
switch on the number of outputs and inputs), in evaluation, gradients, training, clones, saved
models and native user functions, and the errors a wrong implementation gets."""
import os

import numpy as np
import pytest

import loom as C
from loom.ops.functions import Function, UserFunction


class MultiOutputUserFunction(UserFunction):
    """CNTK's own test: a + 2b and 2a + b, over sequences."""

    def __init__(self, arg1, arg2, name='f1'):
        super().__init__([arg1, arg2], name=name)

    def infer_outputs(self):
        x = self.inputs[0]
        return [C.output_variable(x.shape, x.dtype, x.dynamic_axes),
                C.output_variable(x.shape, x.dtype, x.dynamic_axes)]

    def forward(self, arguments, outputs, device=None, outputs_to_retain=None):
        outputs[self.outputs[0]] = [a0 + 2 * a1 for a0, a1 in zip(*arguments)]
        outputs[self.outputs[1]] = [2 * a0 + a1 for a0, a1 in zip(*arguments)]
        return None

    def backward(self, state, root_gradients, variables):
        r0, r1 = root_gradients[self.outputs[0]], root_gradients[self.outputs[1]]
        if self.inputs[0] in variables:
            variables[self.inputs[0]] = [g0 + 2 * g1 for g0, g1 in zip(r0, r1)]
        if self.inputs[1] in variables:
            variables[self.inputs[1]] = [2 * g0 + g1 for g0, g1 in zip(r0, r1)]


def test_cntks_multi_output_user_function():
    x = C.sequence.input_variable(2, needs_gradient=True, name='x')
    y = C.sequence.input_variable(2, needs_gradient=True, name='y')
    op = C.user_function(MultiOutputUserFunction(x, y))
    x_data = [np.array([[1., 2.], [3., 4.]], np.float32)]
    y_data = [np.array([[5., 6.], [7., 8.]], np.float32)]
    result = op.eval({x: x_data, y: y_data})
    assert np.allclose(result[op.outputs[0]], x_data[0] + 2 * y_data[0])
    assert np.allclose(result[op.outputs[1]], 2 * x_data[0] + y_data[0])
    op = op.outputs[0] + op.outputs[1]
    gradients = op.grad({x: x_data, y: y_data}, op.arguments)
    assert np.allclose(gradients[op.arguments[0]], [[[3., 3.], [3., 3.]]])
    assert np.allclose(gradients[op.arguments[1]], [[[3., 3.], [3., 3.]]])


class ProductAndSquares(UserFunction):
    """a * b and the sum of a's squares per sample (shape (1,)); records how it is called."""

    def __init__(self, a, b, name='ps'):
        super().__init__([a, b], name=name)
        self.forwards = []   # (is outputs a dict of every output set to None, outputs_to_retain)
        self.backwards = []  # root_gradients as given

    def infer_outputs(self):
        a = self.inputs[0]
        return [C.output_variable(a.shape, a.dtype, a.dynamic_axes),
                C.output_variable((1,), a.dtype, a.dynamic_axes)]

    def forward(self, arguments, outputs, device=None, outputs_to_retain=None):
        a, b = arguments
        fresh = list(outputs) == self.outputs and all(v is None for v in outputs.values())
        self.forwards.append((fresh, list(outputs_to_retain)))
        outputs[self.outputs[0]] = a * b
        outputs[self.outputs[1]] = (a * a).sum(axis=-1, keepdims=True)
        return a, b

    def backward(self, state, root_gradients, variables):
        a, b = state
        self.backwards.append({k: v.copy() for k, v in root_gradients.items()})
        g0, g1 = root_gradients[self.outputs[0]], root_gradients[self.outputs[1]]
        if self.inputs[0] in variables:
            variables[self.inputs[0]] = g0 * b + 2 * a * g1
        if self.inputs[1] in variables:
            variables[self.inputs[1]] = g0 * a

    def serialize(self):
        return {'calls': len(self.forwards)}

    @staticmethod
    def deserialize(inputs, name, state):
        assert state == {'calls': 1}
        return ProductAndSquares(inputs[0], inputs[1], name)


def data(n=4, seed=1):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, 3))


def inputs():
    return (C.input_variable(3, np.float64, needs_gradient=True, name='a'),
            C.input_variable(3, np.float64, needs_gradient=True, name='b'))


def test_each_output_alone_and_both_come_from_one_forward_call():
    a, b = inputs()
    udf = ProductAndSquares(a, b)
    f = C.user_function(udf)
    assert len(f.outputs) == 2 and udf.outputs == f.outputs
    assert f.outputs[1].shape == (1,)
    va, vb = data()
    both = f.eval({a: va, b: vb})
    assert np.allclose(both[f.outputs[0]], va * vb)
    assert np.allclose(both[f.outputs[1]], (va * va).sum(axis=1, keepdims=True))
    assert udf.forwards == [(True, [])]  # evaluation retains no output
    squares = C.combine([f.outputs[1]]).eval({a: va, b: vb})
    assert np.allclose(squares, both[f.outputs[1]])
    product = f.eval({a: va, b: vb}, outputs=[f.outputs[0]])
    assert np.allclose(product, va * vb)
    assert len(udf.forwards) == 3


def numeric_gradient(loss, arguments, wrt, eps=1e-6):
    """Central differences of the sum of loss over every element of arguments[wrt]."""
    x = arguments[wrt]
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + eps
        up = loss.eval(arguments).sum()
        x[i] = saved - eps
        down = loss.eval(arguments).sum()
        x[i] = saved
        g[i] = (up - down) / (2 * eps)
    return g


def test_gradients_of_a_loss_of_both_outputs_match_finite_differences():
    a, b = inputs()
    udf = ProductAndSquares(a, b)
    f = C.user_function(udf)
    va, vb = data()
    w = np.array([[0.5, -1.5]])
    loss = C.reduce_sum(f.outputs[0] * f.outputs[0]) + C.times(f.outputs[1], C.constant(w))
    args = {a: va.copy(), b: vb.copy()}
    grads = loss.grad(args, wrt=[a, b])
    assert len(udf.backwards) == 1  # one backward call for both outputs' gradients
    given = udf.backwards[0]
    assert list(given) == f.outputs
    assert np.allclose(given[f.outputs[1]], np.full((4, 1), w.sum()))
    for v in (a, b):
        assert np.allclose(grads[v], numeric_gradient(loss, args, v), atol=1e-6)
    # The second output itself as the root: d(sum of a's squares)/da = 2a.
    assert np.allclose(C.combine([f.outputs[1]]).grad(args, wrt=[a]), 2 * va)

    # A loss of the second output alone: backward still gets both, the first as zeros.
    only = C.times(f.outputs[1], C.constant(w))
    grads = only.grad(args, wrt=[a])
    assert np.array_equal(udf.backwards[-1][f.outputs[0]], np.zeros((4, 3)))
    assert np.allclose(grads, numeric_gradient(only, args, a), atol=1e-6)


def test_a_trainer_trains_through_two_outputs():
    x = C.input_variable(2, name='x')
    t = C.input_variable(2, name='t')
    W = C.parameter((2, 2), init=0.1)
    udf = ProductAndSquares(C.times(x, W), x)
    f = C.user_function(udf)
    loss = C.squared_error(f.outputs[0], t) + 0.001 * f.outputs[1]
    trainer = C.Trainer(f, loss, [C.sgd(loss.parameters, C.learning_parameter_schedule(0.05))])
    xs = np.array([[1, 2], [-1, 0.5], [0.5, -2]], np.float32)
    ts = 2 * xs * xs  # W = 2 I
    losses = []
    for _ in range(300):
        trainer.train_minibatch({x: xs, t: ts})
        losses.append(trainer.previous_minibatch_loss_average)
    assert losses[-1] < losses[0] / 50
    assert len(udf.forwards) == 300 and len(udf.backwards) == 300
    # Training retains every output (CNTK's outputs_to_retain).
    assert udf.forwards[-1] == (True, f.outputs)


def test_clone_save_and_load_keep_both_outputs(tmp_path):
    a, b = inputs()
    f = C.user_function(ProductAndSquares(a, b, name='ps'))
    va, vb = data()
    expected = f.eval({a: va, b: vb})
    clone = f.clone(C.CloneMethod.clone)
    assert len(clone.outputs) == 2
    got = clone.eval({clone.arguments[0]: va, clone.arguments[1]: vb})
    for k in range(2):
        assert np.allclose(got[clone.outputs[k]], expected[f.outputs[k]])
    path = str(tmp_path / 'two_outputs.model')
    f.save(path)
    loaded = C.load_model(path)
    assert [o.shape for o in loaded.outputs] == [(3,), (1,)]
    assert loaded.root_function.op_name == f'{__name__}.ProductAndSquares'
    got = loaded.eval({loaded.arguments[0]: va, loaded.arguments[1]: vb})
    for k in range(2):
        assert np.allclose(got[loaded.outputs[k]], expected[f.outputs[k]])

    # Through a registered deserialize callback (a class without deserialize of its own).
    g = C.user_function(ByCallback(a, b))
    g.save(path)
    seen = []
    Function.register_udf_deserialize_callback(
        'test.ByCallback', lambda inputs, name, state: seen.append(state) or ByCallback(*inputs))
    loaded = C.load_model(path)
    assert seen == [{'calls': 0}] and len(loaded.outputs) == 2
    got = loaded.eval({loaded.arguments[0]: va, loaded.arguments[1]: vb})
    for k in range(2):
        assert np.allclose(got[loaded.outputs[k]], expected[f.outputs[k]])


class ByCallback(ProductAndSquares):
    op_name = 'test.ByCallback'
    deserialize = UserFunction.deserialize


class OneOutput(UserFunction):
    """One output, one input: CNTK's (state, output) and single-gradient forms."""

    def __init__(self, arg, name=''):
        super().__init__([arg], name=name)
        self.retained = []

    def forward(self, argument, device=None, outputs_to_retain=None):
        self.retained.append(list(outputs_to_retain))
        return None, 2 * argument

    def backward(self, state, root_gradients):
        assert isinstance(root_gradients, np.ndarray)
        return 2 * root_gradients


def test_one_output_keeps_cntks_forms_and_retains_in_training():
    x = C.input_variable(2, needs_gradient=True)
    p = C.parameter((2,), init=1.0)
    udf = OneOutput(x * p)
    f = C.user_function(udf)
    ones = np.ones((1, 2), np.float32)
    assert np.allclose(f.eval({x: ones}), 2 * ones)
    assert np.allclose(f.grad({x: ones}, wrt=[x]), 2 * ones)
    # Evaluation retains no output; grad and training retain it (CNTK's training mode).
    assert udf.outputs == f.outputs and udf.retained == [[], f.outputs]
    trainer = C.Trainer(f, C.reduce_sum(f), [C.sgd([p], C.learning_parameter_schedule(0.1))])
    trainer.train_minibatch({x: ones})
    assert udf.retained[-1] == f.outputs
    assert np.allclose(p.value, [0.8, 0.8])  # 1 - 0.1 * d(sum 2 x p)/dp


class Faulty(ProductAndSquares):
    def __init__(self, a, b, fault):
        super().__init__(a, b)
        self.fault = fault

    def infer_outputs(self):
        if self.fault == 'none':
            return []
        if self.fault == 'not a list':
            return 3
        if self.fault == 'not variables':
            return [(3,), (1,)]
        return super().infer_outputs()

    def forward(self, arguments, outputs, device=None, outputs_to_retain=None):
        state = super().forward(arguments, outputs, device, outputs_to_retain)
        if self.fault == 'unset':
            outputs[self.outputs[1]] = None
        if self.fault == 'shape':
            outputs[self.outputs[1]] = arguments[0]
        return state

    def backward(self, state, root_gradients, variables):
        super().backward(state, root_gradients, variables)
        if self.fault == 'gradient':
            variables[self.inputs[0]] = root_gradients[self.outputs[1]]


def test_wrong_outputs_are_errors_naming_the_function_the_output_and_the_shapes():
    a, b = inputs()
    va, vb = data()
    name = f'{__name__}.Faulty'
    with pytest.raises(ValueError, match=f'{name}.infer_outputs returned no outputs'):
        C.user_function(Faulty(a, b, 'none'))
    with pytest.raises(TypeError, match=f'{name}.infer_outputs returned int; it must return a '
                                        r'list of output_variable\(...\)'):
        C.user_function(Faulty(a, b, 'not a list'))
    with pytest.raises(TypeError, match=f'{name}.infer_outputs returned list'):
        C.user_function(Faulty(a, b, 'not variables'))
    # The output has output_variable's name, none: it is shown by its uid.
    with pytest.raises(ValueError, match=rf"{name}.forward's output 1 \(UserFunction\d+_Output_1: "
                                         r"Tensor\[1\]\) was not "
                                         r'set: set outputs\[self.outputs\[1\]\]'):
        C.user_function(Faulty(a, b, 'unset')).eval({a: va, b: vb})
    with pytest.raises(ValueError, match=rf"{name}.forward's output 1 \(UserFunction\d+_Output_1: "
                                         r"Tensor\[1\]\): "
                                         r'data of shape \[4,3\] .*expected \[1\]'):
        C.user_function(Faulty(a, b, 'shape')).eval({a: va, b: vb})
    f = C.user_function(Faulty(a, b, 'gradient'))
    with pytest.raises(ValueError, match=rf"{name}.backward's gradient of input 0 \(a: Tensor\[3\]\): "
                                         r'data of shape \[4,1\] .*expected \[3\]'):
        (C.reduce_sum(f.outputs[0]) + f.outputs[1]).grad({a: va, b: vb}, wrt=[a])


PLUGIN = os.environ.get('LOOM_NATIVE_SCALE_PLUGIN')


@pytest.mark.skipif(not PLUGIN, reason='LOOM_NATIVE_SCALE_PLUGIN (set by ctest) is not set')
def test_a_native_user_function_with_two_outputs(tmp_path):
    # tests/support/native_scale_plugin.cpp: input * attributes['scale'] and input squared.
    Function.register_native_user_function('py.ScaleAndSquare', PLUGIN,
                                           'create_scale_and_square_function')
    x = C.input_variable(2, needs_gradient=True, name='x')
    f = Function.native_user_function('py.ScaleAndSquare', [x], {'scale': 3.0}, 'both')
    v = np.array([[1, -2], [0.5, 4]], np.float32)
    out = f.eval({x: v})
    np.testing.assert_array_equal(out[f.outputs[0]], 3 * v)
    np.testing.assert_array_equal(out[f.outputs[1]], v * v)
    np.testing.assert_array_equal((f.outputs[0] + f.outputs[1]).grad({x: v}, wrt=[x]), 3 + 2 * v)
    path = str(tmp_path / 'native_two.model')
    f.save(path)
    loaded = C.load_model(path)
    got = loaded.eval({loaded.arguments[0]: v})
    for k in range(2):
        np.testing.assert_array_equal(got[loaded.outputs[k]], out[f.outputs[k]])


class MyPlusWithNoGradientNeededForOutput(UserFunction):
    """CNTK's: an output that needs no gradient; backward must not be called."""

    def __init__(self, arg1, arg2, name='f1'):
        super().__init__([arg1, arg2], name=name)

    def infer_outputs(self):
        x = self.inputs[0]
        return [C.output_variable(x.shape, x.dtype, x.dynamic_axes, needs_gradient=False)]

    def forward(self, arguments, device=None, outputs_to_retain=None):
        return None, [a0 + a1 for a0, a1 in zip(*arguments)]

    def backward(self, state, root_gradients, input_gradients):
        raise ValueError('MyPlusWithNoGradientNeededForOutput does not need gradient for output '
                         'and backward must not be called')


def test_udf_output_needs_no_gradient():
    # CNTK's test: the inputs' gradients through it are zeros, and backward is not called.
    x = C.sequence.input_variable(2, needs_gradient=True, name='x')
    y = C.sequence.input_variable(2, needs_gradient=True, name='y')
    op = C.user_function(MyPlusWithNoGradientNeededForOutput(x, y))
    assert not op.output.needs_gradient
    x_data = [np.array([[1., 2.], [3., 4.]], np.float32)]
    y_data = [np.array([[5., 6.], [7., 8.]], np.float32)]
    gradients, result = op.grad({x: x_data, y: y_data}, op.arguments, [op.output])
    assert np.allclose(gradients[op.arguments[0]], [[[0., 0.], [0., 0.]]])
    assert np.allclose(gradients[op.arguments[1]], [[[0., 0.], [0., 0.]]])
    assert np.allclose(result, [[[6., 8.], [10., 12.]]])


class NamedProductAndSquares(ProductAndSquares):
    """ProductAndSquares whose outputs are named, the squares needing no gradient."""

    def infer_outputs(self):
        a = self.inputs[0]
        return [C.output_variable(a.shape, a.dtype, a.dynamic_axes, name='product'),
                C.output_variable((1,), a.dtype, a.dynamic_axes, needs_gradient=False,
                                  name='squares')]

    @staticmethod
    def deserialize(inputs, name, state):
        return NamedProductAndSquares(inputs[0], inputs[1], name)

    def backward(self, state, root_gradients, variables):
        a, b = state
        self.squares_gradient = root_gradients[self.outputs[1]]
        g0 = root_gradients[self.outputs[0]]
        if self.inputs[0] in variables:
            variables[self.inputs[0]] = g0 * b
        if self.inputs[1] in variables:
            variables[self.inputs[1]] = g0 * a


def test_outputs_take_output_variables_names_and_needs_gradient(tmp_path):
    a, b = inputs()
    udf = NamedProductAndSquares(a, b)
    f = C.user_function(udf)
    assert [o.name for o in f.outputs] == ['product', 'squares']
    assert [o.needs_gradient for o in f.outputs] == [True, False]
    # CNTK's outputs are output_variable's: without a name they have none.
    assert [o.name for o in C.user_function(ProductAndSquares(a, b)).outputs] == ['', '']
    # The squares pass no gradient: root_gradients holds None for them, as CNTK's.
    va, vb = data()
    loss = C.reduce_sum(f.outputs[0], axis=0) + f.outputs[1]
    g = loss.grad({a: va, b: vb}, wrt=[a])
    assert np.allclose(g, vb)
    assert udf.squares_gradient is None
    # Saved and loaded, the outputs keep their names and needs_gradient.
    path = str(tmp_path / 'named.model')
    f.save(path)
    loaded = Function.load(path)
    assert [o.name for o in loaded.outputs] == ['product', 'squares']
    assert [o.needs_gradient for o in loaded.outputs] == [True, False]


class SquaresAndProduct(ProductAndSquares):
    """ProductAndSquares with its outputs the other way round: the product, of free dimensions
    where the inputs have them, is the second."""

    def infer_outputs(self):
        a = self.inputs[0]
        return [C.output_variable((1,), a.dtype, a.dynamic_axes),
                C.output_variable(a.shape, a.dtype, a.dynamic_axes)]

    def forward(self, arguments, outputs, device=None, outputs_to_retain=None):
        a, b = arguments
        outputs[self.outputs[0]] = (a * a).sum(axis=-1, keepdims=True)
        outputs[self.outputs[1]] = a * b
        return a, b


def test_a_second_output_may_have_free_dimensions():
    a = C.input_variable(C.FreeDimension, np.float64, name='a')
    b = C.input_variable(C.FreeDimension, np.float64, name='b')
    f = C.user_function(SquaresAndProduct(a, b))
    for n in (3, 5):
        va, vb = np.random.rand(2, n), np.random.rand(2, n)
        result = f.eval({a: va, b: vb})
        assert result[f.outputs[1]].shape == (2, n)
        assert np.allclose(result[f.outputs[1]], va * vb)
        assert np.allclose(result[f.outputs[0]], (va * va).sum(axis=1, keepdims=True))

