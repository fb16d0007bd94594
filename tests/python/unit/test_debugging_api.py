"""CNTK's cntk.debugging (and cntk.logging's trace levels) in Loom: the names and signatures,
node timing printed by Function/Trainer/Evaluator, checked mode, the profiler's files,
debug_model's command language fed from a stream, dump_function, trace levels."""
import glob
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import loom as C
import loom.debugging as D
from loom.debugging.debug import _DebugNode


def _signature(f):
    return str(inspect.signature(f))


def test_names_and_signatures_are_cntks():
    assert _signature(D.force_deterministic) == '(seed)'
    assert _signature(D.dump_signature) == '(root, tag=None)'
    assert _signature(D.dump_function) == '(root, tag=None)'
    assert _signature(D.save_as_legacy_model) == '(root_op, filename)'
    assert _signature(D.set_checked_mode) == '(enable)'
    assert _signature(D.set_computation_network_trace_level) == '(level)'
    assert _signature(D.set_node_timing) == '(enable)'
    p = inspect.signature(D.debug_model).parameters
    assert list(p) == ['model', 'in_stream', 'out_stream', 'exit_func']
    assert p['in_stream'].default is sys.stdin and p['out_stream'].default is sys.stdout
    assert p['exit_func'].default is sys.exit
    assert _signature(D.start_profiler) == "(dir='profiler', sync_gpu=True, reserve_mem=33554432)"
    for f in (D.stop_profiler, D.enable_profiler, D.disable_profiler):
        assert _signature(f) == '()'
    assert D.DEBUG_USAGE.startswith('    Commands:\n        n - execute the next node\n')
    assert D.DEBUG_USAGE.endswith('        q - quit')
    for cls in (C.Function, C.Trainer, C.Evaluator):
        assert callable(cls.print_node_timing)
    assert [(t.name, t.value) for t in C.logging.TraceLevel] == \
        [('Error', 0), ('Warning', 1), ('Info', 2)]


def _model():
    x = C.input_variable(2, name='features')
    w = C.parameter(shape=(2, 2), init=0.5, name='w')
    z = C.plus(C.times(x, w), C.constant(np.float32([1, -1])), name='z')
    return x, w, z


def _timing_lines(text):
    return [l for l in text.splitlines() if ' forward avg ' in l]


def test_function_print_node_timing_counts_calls_and_resets(capsys):
    x, w, z = _model()
    data = np.ones((3, 2), np.float32)
    D.set_node_timing(True)
    try:
        for _ in range(3):
            z.eval({x: data})
        capsys.readouterr()
        z.print_node_timing()
        lines = _timing_lines(capsys.readouterr().err)
        uids = sorted([z.uid, z.inputs[0].owner.uid])
        assert [l.split()[0] for l in lines] == uids  # one line per node, by uid
        for l in lines:
            assert l.endswith('(fwd# 3|bwd# 0)'), l
            assert float(l.split('forward avg ')[1].split('s,')[0]) >= 0
        z.print_node_timing()  # printing reset the counts, as CNTK's
        assert all(l.endswith('(fwd# 0|bwd# 0)') for l in _timing_lines(capsys.readouterr().err))
    finally:
        D.set_node_timing(False)


def test_trainer_and_evaluator_print_node_timing(capsys):
    x, w, z = _model()
    y = C.input_variable(2, name='labels')
    loss = C.cross_entropy_with_softmax(z, y)
    metric = C.classification_error(z, y)
    trainer = C.Trainer(z, (loss, metric), [C.sgd(z.parameters, C.learning_parameter_schedule(0.1))])
    evaluator = C.Evaluator(metric)
    data = {x: np.ones((4, 2), np.float32), y: np.eye(2, dtype=np.float32)[[0, 1, 0, 1]]}
    D.set_node_timing(True)
    try:
        evaluator.print_node_timing()  # clears what earlier tests timed
        for _ in range(2):
            trainer.train_minibatch(data)
        capsys.readouterr()
        trainer.print_node_timing()
        lines = {l.split()[0]: l for l in _timing_lines(capsys.readouterr().err)}
        assert lines[loss.uid].endswith('(fwd# 2|bwd# 2)')
        assert lines[z.uid].endswith('(fwd# 2|bwd# 2)')
        assert metric.uid in lines
        evaluator.test_minibatch(data)
        evaluator.print_node_timing()
        lines = {l.split()[0]: l for l in _timing_lines(capsys.readouterr().err)}
        assert lines[metric.uid].endswith('(fwd# 1|bwd# 0)')
    finally:
        D.set_node_timing(False)


def test_checked_mode_raises_naming_the_node():
    x = C.input_variable(2, name='x')
    q = C.element_divide(x, x, name='q')
    data = np.float32([[1, 0]])
    assert np.isnan(q.eval({x: data})).any()  # off: NaN passes
    D.set_checked_mode(True)
    try:
        with pytest.raises(C.DataError, match=r"checked mode: q \(%s\) ElementDivide operation "
                           r"unexpectedly produced NaN values" % q.uid):
            q.eval({x: data})
        # log(-1) is CNTK's clamp (-85.1), a number: checked mode lets it pass.
        assert np.allclose(C.log(x).eval({x: np.float32([[-1, 1]])}), [[-85.1, 0]], atol=0.1)
    finally:
        D.set_checked_mode(False)


def test_profiler_writes_the_summary_listing_the_nodes(tmp_path):
    x, w, z = _model()
    folder = str(tmp_path / 'prof')
    D.start_profiler(folder)
    try:
        with pytest.raises(C.StateError):
            D.start_profiler(folder)
        D.enable_profiler()
        for _ in range(2):
            z.eval({x: np.ones((3, 2), np.float32)})
        D.disable_profiler()
    finally:
        D.stop_profiler()
    summaries = glob.glob(os.path.join(folder, '*_summary_.txt'))
    assert len(summaries) == 1
    assert len(glob.glob(os.path.join(folder, '*_detail_.json'))) == 1
    text = open(summaries[0]).read()
    assert text.startswith('CNTK Performance Profiler Summary Report\n')
    for uid in (z.uid, z.inputs[0].owner.uid):
        line = next(l for l in text.splitlines() if l.startswith(uid + ' Forward'))
        assert line.split()[-3] == '2', line  # the count
    with pytest.raises(C.StateError):
        D.stop_profiler()


class InStream(object):
    def __init__(self, to_be_read):
        self.to_be_read = to_be_read

    def readline(self):
        if not self.to_be_read:
            return 'c'
        return self.to_be_read.pop(0)


class OutStream(object):
    def __init__(self):
        self.written = []

    def write(self, text):
        text = text.strip()
        if text not in ['', _DebugNode.PROMPT_FORWARD.strip(),
                        _DebugNode.PROMPT_BACKWARD.strip()]:
            self.written.append(text)

    def flush(self):
        pass


def _debugged(commands, exit_func=sys.exit):
    f_input = C.input_variable(2, np.float32, needs_gradient=True, name='features')
    p = C.parameter(shape=(2, 2), init=10, name='p')
    z = C.times(f_input, p, name='z')
    ins, outs = InStream(commands), OutStream()
    zd = D.debug_model(z, ins, outs, exit_func)
    return f_input, p, z, zd, ins, outs


def _train_once(f_input, zd):
    labels = C.input_variable(2, name='labels')
    trainer = C.Trainer(zd, (C.cross_entropy_with_softmax(zd, labels),
                             C.classification_error(zd, labels)),
                        [C.sgd(zd.parameters, C.learning_parameter_schedule(0.5))])
    trainer.train_minibatch({f_input: np.float32([[1, 2], [3, 4]]),
                             labels: np.float32([[1, 0], [0, 1]])})


def test_debug_model_steps_through_forward_and_backward():
    f_input, p, z, zd, ins, outs = _debugged(['n', 'n', 'n'])
    _train_once(f_input, zd)
    w = list(outs.written)
    # The trainer asks for the parameters' gradients only, so backward passes z and p.
    assert len(w) == 7, w
    assert w[0].startswith('=') and 'forward' in w[0]
    assert sorted(w[1:3]) == sorted(["features: Tensor[2] with uid '%s'" % f_input.uid,
                                     "p: ParameterTensor[2,2] with uid '%s'" % p.uid])
    assert w[3] == "%s with uid '%s'" % (z, z.uid) and w[3].startswith('z: Times(')
    assert w[4].startswith('=') and 'backward' in w[4]
    assert w[5] == w[3]
    assert w[6].startswith('p: ParameterTensor')
    # The debugged copy computes what the model does (and shares its parameter, trained above).
    data = np.float32([[1, 2]])
    assert np.allclose(zd.eval({f_input: data}), z.eval({f_input: data}))


def test_debug_model_commands():
    # 'n 2' steps over two nodes; p prints the input; an unknown command prints the usage;
    # 'u b' runs to the backward pass, where p prints the root gradients; 'q' calls exit_func.
    exits = []
    f_input, p, z, zd, ins, outs = _debugged(['n 2', 'p', 'xyz', 'u b', 'p', 'n', 'q'],
                                             exits.append)
    _train_once(f_input, zd)
    w = outs.written
    at_z = w.index("%s with uid '%s'" % (z, z.uid))
    assert at_z == 3  # features and p passed without a prompt
    assert w[at_z + 1] == 'Input with shape (2, 2):'
    assert w[at_z + 2] == str(np.float32([[1, 2], [3, 4]]) @ np.full((2, 2), 10, np.float32))
    assert w[at_z + 3] == D.DEBUG_USAGE.strip()  # for 'xyz'
    assert w[at_z + 4].startswith('=') and 'backward' in w[at_z + 4]
    assert w[at_z + 5] == w[at_z]
    assert w[at_z + 6] == 'Root gradients with shape (2, 2):'
    assert w[at_z + 8].startswith('p: ParameterTensor')
    assert exits == [0]


def test_debug_model_until_name_and_lambda():
    f_input, p, z, zd, ins, outs = _debugged(['u z', 'p', 'c'])
    _train_once(f_input, zd)
    w = outs.written
    # 'u z' runs until the node named z, and stops there.
    assert w.index('Input with shape (2, 2):') == w.index("%s with uid '%s'" % (z, z.uid)) + 1
    # A lambda over the value (np is numpy) and the node: the input's variance is 1.25.
    f_input, p, z, zd, ins, outs = _debugged(['u lambda arg, node: np.var(arg) > 1', 'p', 'c'])
    _train_once(f_input, zd)
    w = outs.written
    assert w[1] == "features: Tensor[2] with uid '%s'" % f_input.uid
    assert w[2] == 'Input with shape (2, 2):'
    assert w[3] == str(np.float32([[1, 2], [3, 4]]))


def test_a_debug_model_saves_and_loads_as_the_model_without_stops(tmp_path):
    # CNTK's debug nodes (Python user functions without a deserialize) did not load; Loom's load
    # as identities that stop nowhere, here and in a process without a console.
    f_input, p, z, zd, ins, outs = _debugged(['q'], exit_func=lambda code: pytest.fail('read'))
    path = str(tmp_path / 'debugged.model')
    zd.save(path)
    loaded = C.load_model(path)
    data = np.float32([[1, 2]])
    assert np.allclose(loaded.eval({loaded.arguments[0]: data}), [[30, 30]])
    _train_once(loaded.arguments[0], loaded)
    assert outs.written == [] and ins.to_be_read == ['q']
    script = ('import sys, numpy as np, loom; m = loom.load_model(sys.argv[1]); '
              'print(m.eval(np.float32([[1, 2]])).tolist())')
    out = subprocess.run([sys.executable, '-c', script, path],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout == '[[30.0, 30.0]]\n', out.stdout + out.stderr


def test_dump_function_and_signature(capsys):
    x, w, z = _model()
    D.dump_signature(z)
    assert capsys.readouterr().out == str(z) + '\n'
    D.dump_function(z)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str(z)
    assert lines[1].split()[:2] == ['Plus', 'z']
    kinds = [l.split()[0] for l in lines[1:]]
    assert sorted(kinds) == ['Constant', 'Input', 'Parameter', 'Plus', 'Times']
    assert any(l.split()[:3] == ['Input', 'features', x.uid] for l in lines)
    assert '[b*](2,)' in lines[1]
    # As CNTK's (depth=-1): a layer's call is a block, listed with what is inside it.
    dense = C.layers.Dense(3, activation=C.relu, name='hidden')(x)
    D.dump_function(dense)
    kinds = [l.split()[0] for l in capsys.readouterr().out.splitlines()[1:]]
    assert sorted(kinds) == ['Dense', 'Input', 'Parameter', 'Parameter', 'Plus', 'ReLU', 'Times']


def test_trace_levels(capfd):
    L = C.logging
    assert L.get_trace_level() == L.TraceLevel.Warning == 1
    L.set_trace_level(L.TraceLevel.Error)
    assert L.get_trace_level() == L.TraceLevel.Error
    L.set_trace_level(L.TraceLevel.Warning)
    with pytest.raises(ValueError):
        L.set_trace_level(7)
    x, w, z = _model()
    D.set_computation_network_trace_level(1000)
    try:
        z.eval({x: np.ones((1, 2), np.float32)})
    finally:
        D.set_computation_network_trace_level(0)
    assert 'Dump --> z (%s) Plus: [2] x 1 abs sum = ' % z.uid in capfd.readouterr().err


def test_force_deterministic_and_legacy_model(tmp_path):
    with pytest.warns(Warning, match="RNN based nodes don't run deterministically yet."):
        D.force_deterministic(3)
    x, w, z = _model()
    with pytest.raises(NotImplementedError, match=r"Loom does not write CNTK's v1 \(legacy\) "
                       r"model format; save the model with root_op.save"):
        D.save_as_legacy_model(z, str(tmp_path / 'm.dnn'))
