"""Variables, Functions, operators, @Function, layers and default_options."""
import numpy as np
import pytest

import loom as C

X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)


def test_operators_with_variables_numbers_and_arrays():
    x = C.input_variable(3)
    cases = [(x + 1, X + 1), (1 - x, 1 - X), (x * x, X * X), (x / 2, X / 2), (2 / (x + 1), 2 / (X + 1)),
             (-x, -X), (x - np.array([1, 1, 1], np.float32), X - 1),
             (np.float32(2) * x, 2 * X)]
    for f, expected in cases:
        np.testing.assert_allclose(f.eval({x: X}), expected, rtol=1e-6)


def test_matmul_and_indexing():
    x = C.input_variable(3)
    W = C.parameter(init=np.arange(6, dtype=np.float32).reshape(3, 2))
    np.testing.assert_allclose((x @ W).eval({x: X}), X @ W.value)
    np.testing.assert_allclose(x[1:].eval({x: X}), X[:, 1:])
    np.testing.assert_allclose(x[0].eval({x: X}), X[:, :1])
    np.testing.assert_allclose(x[-1].eval({x: X}), X[:, 2:])
    m = C.input_variable((2, 3))
    M = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    np.testing.assert_allclose(m[:, 1:2].eval({m: M}), M[:, :, 1:2])


def test_function_decorator_binds_arguments_in_signature_order():
    @C.Function
    def f(a, b):
        return b * 10, a - b  # b used first: binding follows the signature, not first use

    x, y = C.input_variable(1), C.input_variable(1)
    g = f(x, y)
    assert len(g.outputs) == 2
    out = g.eval({x: np.array([[1]], np.float32), y: np.array([[2]], np.float32)})
    assert sorted(v.item() for v in out.values()) == [-1, 20]
    assert str(g) == "Composite(Tensor[1], Tensor[1]) -> Tuple[Tensor[1], Tensor[1]]"


def test_callables_take_their_required_parameters_and_ops_one():
    @C.Function
    def f(a, b, scale=2.0, name=''):  # parameters with defaults are not arguments
        return (a + b) * scale

    assert len(f.arguments) == 2
    # An op has no signature to read (a built-in): in Sequential it takes the one input.
    x = C.sequence.input_variable(3)
    C.cntk_py.set_fixed_random_seed(1)
    m = C.layers.Sequential([C.layers.Recurrence(C.layers.LSTM(4)), C.sequence.last,
                             C.layers.Dense(2)])
    z = m(x)
    assert str(z) == "Composite(Sequence[Tensor[3]]) -> Tensor[2]"
    data = [np.ones((4, 3), np.float32), np.ones((1, 3), np.float32)]
    assert z.eval({x: data}).shape == (2, 2)


def test_dense_layer_parameters_printing_and_attribute_lookup():
    C.cntk_py.set_fixed_random_seed(1)
    d = C.layers.Dense(2, activation=None)
    x = C.input_variable(3)
    z = d(x)
    assert str(z) == "Dense(Tensor[3]) -> Tensor[2]"
    assert z.W.shape == (3, 2) and z.b.shape == (2,)
    assert z.shape == (2,)
    with pytest.raises(AttributeError):
        z.no_such_parameter
    np.testing.assert_allclose(z.eval({x: X}), X @ z.W.value + z.b.value, rtol=1e-5)
    # Calling with numpy evaluates: one argument, one output.
    np.testing.assert_allclose(z(X), X @ z.W.value + z.b.value, rtol=1e-5)


def test_default_options_and_explicit_none():
    with C.layers.default_options(activation=C.relu):
        relu_dense = C.layers.Dense(2, init=C.initializer.constant_initializer(-1.0))
        plain_dense = C.layers.Dense(2, activation=None, init=C.initializer.constant_initializer(-1.0))
    x = C.input_variable(1)
    assert relu_dense(x).eval({x: np.ones((1, 1), np.float32)}).tolist() == [[0, 0]]
    assert plain_dense(x).eval({x: np.ones((1, 1), np.float32)}).tolist() == [[-1, -1]]


def test_python_lambda_as_activation_and_sequential_of_layers_and_callables():
    x = C.input_variable(2)
    model = C.layers.Sequential([
        C.layers.Dense(2, activation=lambda v: C.element_max(v, 0),
                       init=C.initializer.constant_initializer(-1.0)),
        lambda v: v + 5])
    assert model(x).eval({x: np.ones((1, 2), np.float32)}).tolist() == [[5, 5]]


def test_save_and_load(tmp_path):
    x = C.input_variable(3, name='features')
    z = C.layers.Dense(2)(x)
    path = str(tmp_path / 'm.cmf')
    z.save(path)
    loaded = C.Function.load(path)
    np.testing.assert_allclose(loaded(X), z(X))
    assert loaded.arguments[0].name == 'features'


def test_variables_are_dict_keys_by_identity():
    x = C.input_variable(2)
    f = x + 1
    assert f.arguments[0] == x and hash(f.arguments[0]) == hash(x)
    assert {x: 1}[f.arguments[0]] == 1
    assert C.input_variable(2) != x


def test_forward_and_backward_give_the_outputs_and_their_gradients():
    x = C.input_variable(3, needs_gradient=True)
    W = C.parameter(init=np.arange(6, dtype=np.float32).reshape(3, 2) / 50)
    z = C.tanh(x @ W)
    state, out = z.forward({x: X}, keep_for_backward=set(z.outputs))
    expected = np.tanh(X @ W.value)
    np.testing.assert_allclose(out[z.output], expected, rtol=1e-6)
    root = np.array([[1, 0], [0, 2]], np.float32)
    grads = z.backward(state, {z.output: root}, [W, x])
    delta = root * (1 - expected ** 2)
    np.testing.assert_allclose(grads[W], X.T @ delta, rtol=1e-5)
    np.testing.assert_allclose(grads[x], delta @ W.value.T, rtol=1e-5)
    # With a root gradient of ones, backward is grad.
    state, _ = z.forward({x: X})
    ones = z.backward(state, {z.output: np.ones((2, 2), np.float32)}, [W])[W]
    np.testing.assert_allclose(ones, z.grad({x: X}, wrt=[W]), rtol=1e-6)


def test_forward_results_are_copies_that_a_later_pass_leaves_alone():
    x = C.input_variable(3)
    z = x * 2
    _, first = z.forward({x: X})
    state, second = z.forward({x: X + 1})
    np.testing.assert_array_equal(first[z.output], 2 * X)
    np.testing.assert_array_equal(second[z.output], 2 * (X + 1))


def test_forward_and_backward_on_sequences():
    x = C.sequence.input_variable(2, needs_gradient=True)
    z = C.sequence.reduce_sum(x * x)
    seqs = [np.array([[1, 2], [3, 4]], np.float32), np.array([[5, 6]], np.float32)]
    state, out = z.forward({x: seqs})
    np.testing.assert_array_equal(np.asarray(out[z.output]).reshape(2, 2), [[10, 20], [25, 36]])
    grads = z.backward(state, {z.output: np.ones((2, 2), np.float32)}, [x])
    assert [g.tolist() for g in grads[x]] == [[[2, 4], [6, 8]], [[10, 12]]]


def test_sequence_unpack_pads_to_the_longest_sequence():
    x = C.sequence.input_variable(2)
    u = C.sequence.unpack(x, padding_value=-1)
    data, mask = u.outputs
    assert data.shape[1:] == (2,)  # [T, 2], T free
    seqs = [np.array([[1, 2], [3, 4], [5, 6]], np.float32), np.array([[7, 8]], np.float32)]
    out = u.eval({x: seqs})
    np.testing.assert_array_equal(np.asarray(out[data]).reshape(2, 3, 2),
                                  [[[1, 2], [3, 4], [5, 6]], [[7, 8], [-1, -1], [-1, -1]]])
    np.testing.assert_array_equal(np.asarray(out[mask]).reshape(2, 3), [[1, 1, 1], [1, 0, 0]])
    # A longer minibatch gives a longer T through the same function.
    longer = C.sequence.unpack(x, 0, no_mask_output=True).eval({x: [np.ones((5, 2), np.float32)]})
    assert np.asarray(longer).reshape(-1, 2).shape == (5, 2)


def test_recurrent_layers_on_a_named_sequence_axis():
    question = C.Axis('question')
    q = C.sequence.input_variable(3, sequence_axis=question)
    x = C.sequence.input_variable(3)
    fold = C.layers.Fold(C.layers.LSTM(4))
    seqs = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((5, 3), np.float32)]
    np.testing.assert_array_equal(fold(q).eval({q: seqs}), fold(x).eval({x: seqs}))
    r = C.layers.Recurrence(C.layers.GRU(2), go_backwards=True)(q)
    assert r.output.dynamic_axes[1] == question
    assert [np.asarray(s).shape for s in r.eval({q: seqs})] == [(2, 2), (5, 2)]


def test_backward_errors_name_what_is_wrong():
    x = C.input_variable(3)
    W = C.parameter(init=np.ones((3, 2), np.float32))
    z = x @ W
    state, _ = z.forward({x: X})
    with pytest.raises(ValueError, match=r"\[2\]|\[3\]|shape"):
        z.backward(state, {z.output: np.ones((2, 3), np.float32)}, [W])
