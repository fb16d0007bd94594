"""CNTK 2.7's Python API outside the ops (issue 29), as CNTK's documentation describes it:
devices, variables, axes, core values, Function's methods, graph walks, signatures and types,
the distributed names, the sanitize helpers and the top-level constants."""
import io
import contextlib

import numpy as np
import pytest
import scipy.sparse

import loom as C
from loom.layers.typing import (ParameterTensor, Sequence, SequenceOver, Signature,
                                SparseTensor, Tensor)


# ---- cntk.device ----

def test_the_cpu_is_every_device_and_a_gpu_is_cntks_error():
    assert C.device.all_devices() == [C.device.cpu()]
    assert C.device.cpu().type() == C.device.DeviceKind.CPU
    assert not C.device.cpu().is_locked()
    with pytest.raises(ValueError, match=r'Specified GPU device id \(0\) is invalid'):
        C.device.gpu(0)
    C.device.set_excluded_devices([])
    with pytest.raises(ValueError, match='cannot be excluded'):
        C.device.set_excluded_devices([C.device.cpu()])
    x = C.input_variable(2)
    np.testing.assert_array_equal((x * 2).eval({x: [[1, 2]]}, device=C.device.cpu()), [[2, 4]])
    with pytest.raises(TypeError, match='device must be a DeviceDescriptor'):
        (x * 2).eval({x: [[1, 2]]}, device='gpu')


# ---- cntk.variables ----

def test_parameters_start_at_zero_and_take_cntks_init_forms():
    p = C.parameter((2, 3))
    np.testing.assert_array_equal(p.value, np.zeros((2, 3), np.float32))
    assert C.parameter(init=2.5).shape == ()
    assert C.Parameter((2,), init=C.glorot_uniform()).shape == (2,)
    assert C.Parameter(init=np.ones((2, 2))).dtype == np.float32  # the class: float32 default
    assert C.parameter(init=np.ones((2, 2))).dtype == np.float64  # the function: the array's
    assert C.Parameter(init=np.ones(2), dtype=np.float64).dtype == np.float64
    p = C.Parameter((3,), init=1.0, name='p')
    assert p.name == 'p' and isinstance(p, C.Parameter) and p.is_parameter
    p.value = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(p.value, [1, 2, 3])
    assert C.parameter((C.InferredDimension, 4), init=C.glorot_uniform()).shape == (-1, 4)
    with pytest.raises(ValueError, match='an initializer needs a shape'):
        C.parameter(init=C.glorot_uniform())


def test_constants_and_variables_have_cntks_constructors():
    c = C.Constant(1, (2, 3))
    np.testing.assert_array_equal(c.value, np.ones((2, 3), np.float32))
    assert C.Constant(np.arange(3.0)).dtype == np.float32
    assert C.constant(np.arange(3.0)).dtype == np.float64
    assert c.as_constant().is_constant
    with pytest.raises(TypeError, match='cannot be converted into a Parameter'):
        c.as_parameter()
    v = C.Variable((3,), name='v')
    assert v.is_input and v.shape == (3,)
    assert [a.name for a in v.dynamic_axes] == ['defaultBatchAxis', 'defaultDynamicAxis']
    assert C.variables.VariableMixin is C.Variable
    np.testing.assert_array_equal(abs(C.constant(np.array([-1.0, 2.0]))).eval(), [1, 2])


def test_record_is_immutable_and_updated_by_copy():
    r = C.variables.Record(x=13, y=42)
    assert (r.x, r.y) == (13, 42)
    with pytest.raises(AttributeError):
        r.x = 1
    with pytest.raises(AttributeError):
        r.z
    r2 = r.updated_with(x=1, z=2)
    assert (r2.x, r2.y, r2.z, r.x) == (1, 42, 2, 13)


# ---- cntk.axis ----

def test_axes_know_their_kind():
    batch, seq = C.Axis.default_batch_axis(), C.Axis.default_dynamic_axis()
    assert batch.is_batch_axis and not batch.is_sequence_axis and not batch.is_ordered
    assert seq.is_sequence_axis and seq.is_ordered and not seq.is_batch_axis
    assert C.Axis(1).is_ordered and C.Axis(1).static_axis_index() == 1
    with pytest.raises(ValueError, match='non-static axis'):
        seq.static_axis_index()
    assert seq.static_axis_index(checked=False) == 0
    assert C.Axis.default_input_variable_dynamic_axes() == [batch, seq]
    assert C.Axis.new_unique_dynamic_axis(name='q').is_sequence_axis
    p = C.placeholder((2,), dynamic_axes=C.Axis.unknown_dynamic_axes())
    assert p.shape == (2,)


# ---- cntk.core ----

def test_ndarrayviews_and_values_as_cntk_makes_them():
    v = C.NDArrayView((2, 3), np.float64)
    assert v.shape == (2, 3) and v.dtype == np.float64 and v.device == C.device.cpu()
    np.testing.assert_array_equal(v.asarray(), np.zeros((2, 3)))
    d = C.NDArrayView.from_dense(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(d.slice_view([1, 0], [2]).asarray(), [3, 4])
    m = scipy.sparse.csr_matrix(np.eye(3, dtype=np.float32))
    assert C.NDArrayView.from_csr(m).is_sparse and C.NDArrayView.from_data(m).is_sparse
    with pytest.raises(ValueError, match='read-only'):
        C.NDArrayView.from_dense(np.ones(2, np.float32), read_only=True)

    x = C.sequence.input_variable(2)
    value = C.Value.create(x, [np.ones((3, 2), np.float32), np.ones((1, 2), np.float32)])
    assert len(value) == 2 and value.is_valid and value.device == C.device.cpu()
    np.testing.assert_array_equal(value.mask, [[2, 1, 1], [2, 0, 0]])
    assert [s.shape for s in value.as_sequences()] == [(3, 2), (1, 2)]
    continued = C.Value.create(x, [np.ones((2, 2), np.float32)], seq_starts=[False])
    np.testing.assert_array_equal(continued.mask, [[1, 1]])
    np.testing.assert_array_equal(C.asarray(C.Value(np.ones((2, 2), np.float32))),
                                  np.ones((2, 2)))
    assert C.asvalue(C.input_variable(2), np.ones((4, 2), np.float32)).shape == (4, 2)


# ---- cntk.ops.functions ----

def _model():
    x = C.input_variable(2, name='x')
    W = C.parameter((2, 3), init=1.0, name='W')
    z = C.relu(C.times(x, W, name='xW'), name='r')
    return x, W, z


def test_eval_takes_names_and_grad_cntks_defaults():
    x, W, z = _model()
    np.testing.assert_array_equal(z.eval({'x': [[1, 2]]}), [[3, 3, 3]])
    with pytest.raises(ValueError, match="no arguments named 'y'"):
        z.eval({'y': [[1, 2]]})
    with pytest.raises(ValueError, match='needs_gradient'):
        z.grad({x: [[1, 2]]})
    g, out = z.grad({x: [[1, 2]]}, wrt=[W], outputs=[z.output])
    np.testing.assert_array_equal(g, [[1, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(out, [[3, 3, 3]])
    xg = C.input_variable(2, needs_gradient=True)
    np.testing.assert_array_equal(C.reduce_sum(xg * xg).grad({xg: [[1, 2]]}), [[2, 4]])


def test_find_by_name_walks_the_graph_as_cntks_logging_graph():
    x, W, z = _model()
    assert z.find_by_name('W').is_parameter
    assert z.find_by_name('xW').op_name == 'Times'
    assert z.find_by_name('nothing') is None
    assert [n.name for n in z.find_all_with_name('x')] == ['x']
    assert z.root_function.op_name == 'ReLU' and z.root_function.is_primitive
    names = [n.name for n in C.logging.graph.depth_first_search(z, lambda n: True)]
    assert names == ['r', 'xW', 'x', 'W']
    assert C.logging.graph.find_by_uid(z, W.uid).name == 'W'
    assert [o.owner.name for o in C.logging.graph.get_node_outputs(z)] == ['r', 'xW']
    dot = C.logging.graph.plot(z)
    assert dot.startswith('digraph') and '"ReLU\\nr"' in dot.replace('label=', '')
    twice = C.plus(z, z, name='twice')
    with pytest.raises(ValueError, match='found multiple'):
        C.logging.graph.find_by_name(C.combine([twice, C.relu(z, name='twice')]), 'twice')


def test_log_number_of_parameters_prints_cntks_line():
    x, W, z = _model()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        C.logging.log_number_of_parameters(z)
    assert out.getvalue() == 'Training 6 parameters in 1 parameter tensors.\n'


def test_save_load_restore_in_both_formats(tmp_path):
    x, W, z = _model()
    path = str(tmp_path / 'm.model')
    z.save(path)
    loaded = C.Function.load(path, device=C.device.cpu())
    np.testing.assert_array_equal(loaded.eval({'x': [[1, 2]]}), [[3, 3, 3]])
    with open(path, 'rb') as f:
        from_bytes = C.load_model(f.read())
    np.testing.assert_array_equal(from_bytes.eval({'x': [[1, 2]]}), [[3, 3, 3]])
    onnx = str(tmp_path / 'm.onnx')
    z.save(onnx, format=C.ModelFormat.ONNX)
    np.testing.assert_array_equal(
        C.Function.load(onnx, format=C.ModelFormat.ONNX).eval(np.array([[1, 2]], np.float32)),
        [[3, 3, 3]])
    W.value = np.full((2, 3), 2, np.float32)
    z.restore(path)
    np.testing.assert_array_equal(W.value, np.ones((2, 3)))
    with pytest.raises(ValueError, match='external'):
        z.save(path, use_external_files_to_store_parameters=True)
    other = C.relu(C.input_variable(2))
    with pytest.raises(RuntimeError, match='primitive functions'):
        other.restore(path)


def test_signatures_and_types_give_arguments_their_types():
    @C.Function
    def f(a, b):
        return a + b
    f.update_signature(Tensor[3], b=3)
    assert [(a.name, a.shape) for a in f.signature] == [('a', (3,)), ('b', (3,))]
    np.testing.assert_array_equal(f(np.ones((1, 3), np.float32), np.ones((1, 3), np.float32)),
                                  [[2, 2, 2]])
    with pytest.raises(TypeError, match='already has a type'):
        f.update_signature(3)

    @C.Function
    @Signature(Sequence[Tensor[2]])
    def g(s):
        return C.sequence.last(s)
    assert g.arguments[0].shape == (2,) and len(g.arguments[0].dynamic_axes) == 2

    @C.Function.with_signature(x=SparseTensor[5])
    def h(x):
        return C.times(x, np.ones((5, 1), np.float32))
    assert h.arguments[0].is_sparse

    assert str(Sequence[Tensor[2]]) == 'Sequence[Tensor[2]]'
    assert str(ParameterTensor[2, 3]) == 'ParameterTensor[2,3]'
    q = C.Axis.new_unique_dynamic_axis('q')
    assert SequenceOver[q][Tensor[4]].dynamic_axes[1] == q
    with pytest.raises(TypeError, match='sequences over sequences'):
        Sequence[Sequence[Tensor[2]]]

    x = C.input_variable(2)
    relu = C.Function(lambda v: C.relu(v))
    assert (relu >> C.negate)(x).root_function.op_name == 'Negate'
    np.testing.assert_array_equal((relu << x).eval({x: [[1, -1]]}), [[1, 0]])
    assert f.argument_map(1, b=2) == {f.arguments[0]: 1, f.arguments[1]: 2}


# ---- cntk.train, cntk.train.distributed, cntk.eval ----

def test_distributed_names_are_at_cntks_paths():
    comm = C.train.distributed.mpi_communicator()
    assert comm.is_main() and C.Communicator.rank() == 0
    me = comm.current_worker()
    assert me.global_rank == 0 and me.host_id
    assert [w.global_rank for w in comm.workers()] == [0]
    learner = C.data_parallel_distributed_learner(C.sgd([C.parameter(1)], 0.1))
    assert learner.communicator().num_workers() == 1
    with pytest.raises(ValueError, match='synchronously'):
        C.data_parallel_distributed_learner(C.sgd([C.parameter(1)], 0.1),
                                            use_async_buffered_parameter_update=True)
    assert C.train.Communicator is C.distributed.Communicator is C.Communicator
    assert C.eval.Evaluator is C.Evaluator is C.eval.evaluator.Evaluator


def test_a_trainer_takes_a_loss_without_a_metric():
    x, y = C.input_variable(2), C.input_variable(1)
    z = C.times(x, C.parameter((2, 1)))
    loss = C.squared_error(z, y)
    trainer = C.Trainer(z, (loss, None), C.sgd(z.parameters, 0.1))
    trainer.train_minibatch({x: np.ones((2, 2), np.float32), y: np.ones((2, 1), np.float32)},
                            device=C.device.cpu())
    assert trainer.previous_minibatch_loss_average == pytest.approx(1.0)  # W starts at 0
    assert trainer.evaluation_function is None


def test_training_summary_callback_gets_cntks_arguments():
    calls = []
    cb = C.logging.TrainingSummaryProgressCallback(4, lambda *a: calls.append(a))
    x, y = C.input_variable(1), C.input_variable(1)
    z = C.times(x, C.parameter((1, 1)))
    trainer = C.Trainer(z, C.squared_error(z, y), C.sgd(z.parameters, 0.0), [cb])
    trainer.train_minibatch({x: np.ones((4, 1), np.float32), y: np.ones((4, 1), np.float32)})
    trainer.summarize_training_progress()
    assert calls == [(0, 4.0, None, 4)]  # W starts at 0: each sample's loss is 1


# ---- cntk.internal, cntk_py and the top level ----

def test_sanitize_helpers_convert_as_cntks():
    from loom import internal as I
    assert I.sanitize_precision('double') is np.float64
    with pytest.raises(ValueError):
        I.sanitize_precision('float16')
    assert I.sanitize_shape(3) == (3,) and I.sanitize_2d_number(2) == (2, 2)
    with pytest.raises(ValueError):
        I.sanitize_range((3, 1))
    assert I.sanitize_permutation([-1, 0]) == [1, 0]
    with pytest.raises(ValueError, match='duplicate'):
        I.sanitize_permutation([0, 0])
    assert I.sanitize_axis(None) == C.Axis.all_static_axes()
    assert I.sanitize_axis(1) == C.Axis(1)
    with pytest.raises(ValueError, match='sequence axis'):
        I.sanitize_multi_axis_reduction_list([C.Axis.default_dynamic_axis()])
    c = I.sanitize_input([1, 2])
    assert c.is_constant and c.dtype == np.float32
    x = C.input_variable(2, name='x')
    m = I.sanitize_var_map([x], {'x': np.ones((1, 2), np.float32)})
    assert list(m) == [x] and isinstance(m[x], C.Value)
    with pytest.raises(ValueError, match='does not exist'):
        I.sanitize_var_map([x], {'y': 1})
    assert I.sanitize_variable_value_dict({x: 1}) == 1
    assert I.sanitize_function(x).outputs[0].shape == (2,)
    with pytest.raises(TypeError):
        I.sanitize_variable_or_function(3)


def test_top_level_constants_and_cntk_py():
    assert C.__version__ == '2.7' and C.DATATYPE is np.float32
    assert (C.InferredDimension, C.FreeDimension) == (-1, -3)
    C.cntk_py.force_deterministic_algorithms()
    C.cntk_py.reset_random_seed(3)
    a = C.parameter((4,), init=C.glorot_uniform()).value
    C.cntk_py.reset_random_seed(3)
    np.testing.assert_array_equal(a, C.parameter((4,), init=C.glorot_uniform()).value)


def test_misc_convert_replaces_the_functions_a_filter_picks():
    x = C.input_variable(2)
    z = C.plus(C.relu(x, name='a'), C.relu(x, name='b'), name='sum')
    converted = C.misc.convert(z, lambda f: isinstance(f, C.Function) and f.op_name == 'ReLU',
                               lambda f: C.tanh(f.inputs[0]))
    data = np.array([[-1, 2]], np.float32)
    np.testing.assert_allclose(converted.eval({converted.arguments[0]: data}), 2 * np.tanh(data),
                               rtol=1e-6)
    assert not [f for f in C.logging.graph.depth_first_search(converted, lambda n: True)
                if isinstance(f, C.Function) and f.op_name == 'ReLU']


def test_replace_placeholder_attributes_and_evaluators():
    p = C.placeholder(name='p')
    f = C.relu(p)
    x = C.input_variable(2)
    assert f.replace_placeholder(x) == f and f.arguments == [x]
    with pytest.raises(ValueError, match='placeholders, not one'):
        C.plus(C.placeholder(), C.placeholder()).replace_placeholder(x)
    assert C.reduce_sum(x, axis=0).attributes == {'axis': 0, 'keepdims': True}
    metric = C.classification_error(x, C.input_variable(2))
    assert C.Evaluator(metric).evaluation_function == metric.output
    s = C.training_parameter_schedule(0.5)
    assert s[0] == pytest.approx(0.5)


def test_integer_data_makes_float32_constants_as_in_cntk():
    assert C.constant(np.arange(4)).dtype == np.float32
    assert C.parameter(init=np.arange(4)).dtype == np.float32


def test_tensorboard_writer_writes_images(tmp_path):
    writer = C.logging.TensorBoardProgressWriter(log_dir=str(tmp_path))
    writer.write_image('digits', np.full((2, 1, 3, 4), 255, np.float32), 7)
    writer.flush()
    data = open(writer.file_name, 'rb').read()
    assert b'digits/image/0' in data and b'digits/image/1' in data
    assert data.count(b'\x89PNG') == 2
    writer.close()
    assert not C.NDArrayView((2,), np.float32).is_read_only


def test_a_named_node_is_an_attribute_of_the_model():
    x = C.input_variable(2)
    model = C.layers.Sequential([C.layers.Dense(3, name='hidden'), C.layers.Label('out')])(x)
    assert model.out.name == 'out'
    with pytest.raises(AttributeError):
        model.nothing


def test_cntks_other_initializers():
    w = C.parameter((4, 4, 3, 3), init=C.bilinear(3, 3)).value
    np.testing.assert_array_equal(w[1, 1], [[0.25, 0.5, 0.25], [0.5, 1, 0.5], [0.25, 0.5, 0.25]])
    assert not w[0, 1].any()
    x = C.parameter((300, 10), init=C.xavier(seed=1)).value
    assert np.abs(x).max() <= np.sqrt(3 / 300) and np.abs(x).max() > 0.09
    t = C.parameter((1000,), init=C.truncated_normal(0.1, seed=2)).value
    assert np.abs(t).max() <= 0.2
    with pytest.raises(ValueError, match='square'):
        C.bilinear(3, 2)
    # [2, 3, 4]: output_rank 1 gives fans 6 and 4, output_rank 2 fans 2 and 12; one seed, so the
    # values differ by the ratio of the ranges, sqrt(6 / 14) / sqrt(6 / 10).
    base = C.parameter((2, 3, 4), init=C.glorot_uniform(seed=5)).value
    ranked = C.parameter((2, 3, 4), init=C.initializer_with_rank(C.glorot_uniform(seed=5),
                                                                 output_rank=2)).value
    np.testing.assert_allclose(ranked, base * np.sqrt(10 / 14), rtol=1e-5)
