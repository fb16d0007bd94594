"""Learners, Trainer, training_session and the Python pieces the core calls back: UserLearner,
universal, ProgressWriter subclasses, cross-validation callbacks; errors raised in them surface
in Python; a long training loop does not grow memory."""
import gc
import os
import sys
import traceback

import numpy as np
import pytest
import scipy.sparse

import loom as C

rng = np.random.default_rng(0)
X = rng.normal(size=(256, 4)).astype(np.float32)
Y = scipy.sparse.csr_matrix((np.ones(256, np.float32), (range(256), (X[:, 0] > 0).astype(int))),
                            shape=(256, 2))


def criterion():
    x = C.input_variable(4)
    y = C.input_variable(2, is_sparse=True)
    model = C.layers.Dense(2)
    z = model(x)
    return model, C.combine([C.cross_entropy_with_softmax(z, y), C.classification_error(z, y)])


def test_function_train_and_test_on_numpy_tuples():
    model, crit = criterion()
    learner = C.sgd(model.parameters, C.learning_parameter_schedule(0.5))
    progress = crit.train((X, Y), minibatch_size=32, max_epochs=3, parameter_learners=[learner])
    assert len(progress.epoch_summaries) == 3
    assert [s.samples for s in progress.epoch_summaries] == [256] * 3
    assert progress.epoch_summaries[-1].loss < progress.epoch_summaries[0].loss
    assert crit.test((X, Y)).metric < 0.1


class Recorder(C.logging.ProgressWriter):
    def __init__(self):
        super().__init__(freq=1)
        self.updates, self.summaries, self.keys = [], [], []

    def on_write_training_update(self, samples, updates, aggregate_loss, aggregate_metric):
        self.updates.append((samples, updates, aggregate_loss))

    def on_write_training_summary(self, samples, updates, summaries, aggregate_loss,
                                  aggregate_metric, elapsed_milliseconds):
        self.summaries.append((samples, updates, summaries))

    def write(self, key, value):
        self.keys.append((key, value))


def test_progress_writer_written_in_python():
    model, crit = criterion()
    recorder = Recorder()
    trainer = C.Trainer(None, crit, C.sgd(model.parameters, 0.1), recorder)
    for i in range(0, 64, 32):
        trainer.train_minibatch({crit.arguments[0]: X[i:i + 32], crit.arguments[1]: Y[i:i + 32]})
    trainer.summarize_training_progress()
    assert [u[0] for u in recorder.updates] == [(0, 32), (32, 64)]
    assert recorder.summaries == [(64, 2, 1)]
    assert recorder.keys == [("Learning rate per minibatch", 0.1)]


def test_user_learner_called_by_the_trainer():
    class HalfStep(C.UserLearner):
        def __init__(self, parameters):
            super().__init__(parameters, C.learning_rate_schedule(1, C.UnitType.minibatch))
            self.calls = []

        def update(self, gradient_values, training_sample_count, sweep_end):
            self.calls.append(training_sample_count)
            for p, g in gradient_values.items():
                assert isinstance(g, np.ndarray) and g.shape == p.shape
                p.value = p.value - 0.5 * g / training_sample_count
            return True

    model, crit = criterion()
    learner = HalfStep(model.parameters)
    assert len(learner.parameters()) == 2
    before = model.W.value
    trainer = C.Trainer(None, crit, [learner])
    trainer.train_minibatch({crit.arguments[0]: X[:16], crit.arguments[1]: Y[:16]})
    assert learner.calls == [16]
    assert not np.array_equal(before, model.W.value)


def raise_in(kind):
    raise KeyError(f"raised in the {kind}")


def test_python_exceptions_in_callbacks_surface_with_their_traceback():
    class Failing(C.UserLearner):
        def update(self, gradient_values, training_sample_count, sweep_end):
            raise_in("learner")

    model, crit = criterion()
    trainer = C.Trainer(None, crit, [Failing(model.parameters, 0.1)])
    with pytest.raises(KeyError, match="learner") as e:
        trainer.train_minibatch({crit.arguments[0]: X[:8], crit.arguments[1]: Y[:8]})
    assert "raise_in" in "".join(traceback.format_tb(e.tb))

    class FailingWriter(C.logging.ProgressWriter):
        def on_write_training_summary(self, *args):
            raise_in("writer")

    model, crit = criterion()
    with pytest.raises(KeyError, match="writer"):
        crit.train((X, Y), parameter_learners=[C.sgd(model.parameters, 0.1)],
                   callbacks=[FailingWriter()])

    def failing_callback(index, average_error, samples, minibatches):
        raise_in("cross-validation callback")

    model, crit = criterion()
    cv = C.CrossValidationConfig((X, Y), 128, callback=failing_callback)
    with pytest.raises(KeyError, match="cross-validation"):
        crit.train((X, Y), parameter_learners=[C.sgd(model.parameters, 0.1)], callbacks=[cv])


def test_wrong_return_types_name_the_method_and_what_to_return():
    class SaysYes(C.UserLearner):
        def update(self, gradient_values, training_sample_count, sweep_end):
            return "yes"

    model, crit = criterion()
    trainer = C.Trainer(None, crit, [SaysYes(model.parameters, 0.1)])
    with pytest.raises(TypeError, match=r"UserLearner.update returned str; it must return a bool"):
        trainer.train_minibatch({crit.arguments[0]: X[:8], crit.arguments[1]: Y[:8]})
    model, crit = criterion()
    cv = C.CrossValidationConfig((X, Y), 128, callback=lambda *args: "go on")
    with pytest.raises(TypeError, match=r"cross-validation callback returned str; it must return "
                                        r"True to go on or False to stop"):
        crit.train((X, Y), parameter_learners=[C.sgd(model.parameters, 0.1)], callbacks=[cv])


def test_cross_validation_callback_stops_training():
    calls = []

    def stop_at_second(index, average_error, samples, minibatches):
        calls.append((index, samples))
        return index < 1

    model, crit = criterion()
    cv = C.CrossValidationConfig((X[:64], Y[:64]), 256, minibatch_size=32,
                                 callback=stop_at_second)
    progress = crit.train((X, Y), max_epochs=10, parameter_learners=[C.sgd(model.parameters, 0.1)],
                          callbacks=[cv])
    assert calls == [(0, 64), (1, 64)]
    assert len(progress.epoch_summaries) == 2


def test_universal_learner_with_a_python_update_function():
    def plain_sgd(parameters, gradients):
        return C.combine([C.assign(p, p - 0.25 * g) for p, g in zip(parameters, gradients)])

    p = C.parameter(init=np.zeros(3, np.float32))
    learner = C.universal(plain_sgd, [p])
    learner.update({p: np.ones(3, np.float32)}, 1)
    assert p.value.tolist() == [-0.25] * 3


def test_training_session_with_checkpoints_and_restore(tmp_path):
    model, crit = criterion()
    x, y = crit.arguments
    source = C.io.MinibatchSourceFromData(dict(x=X, y=Y))
    ckpt = str(tmp_path / "session")

    def session():
        trainer = C.Trainer(None, crit, [C.sgd(model.parameters, 0.1)])
        return trainer, C.training_session(
            trainer=trainer, mb_source=source, mb_size=32,
            model_inputs_to_streams={x: source['x'], y: source['y']}, max_samples=512,
            checkpoint_config=C.CheckpointConfig(ckpt, frequency=256))

    trainer, s = session()
    s.train()
    assert trainer.total_number_of_samples_seen == 512 and os.path.exists(ckpt)
    trainer, s = session()
    s.train()  # restores at 512 samples: nothing left to train
    assert trainer.total_number_of_samples_seen == 512


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_long_training_loop_does_not_grow_memory():
    model, crit = criterion()
    x, y = crit.arguments
    trainer = C.Trainer(None, crit, [C.sgd(model.parameters, 0.01)])
    batches = [(X[j:j + 32], Y[j:j + 32]) for j in range(0, 256, 32)]

    def loop(n):
        for i in range(n):
            features, labels = batches[i % len(batches)]
            trainer.train_minibatch({x: features, y: labels})

    loop(1000)
    gc.collect()
    refs, before = [sys.getrefcount(f) for f, _ in batches], rss_bytes()
    loop(10000)
    gc.collect()
    assert [sys.getrefcount(f) for f, _ in batches] == refs
    assert rss_bytes() - before < 8 << 20


def test_the_gil_is_released_while_the_core_trains():
    import threading
    model, crit = criterion()
    data = (np.tile(X, (40, 1)), scipy.sparse.vstack([Y] * 40, 'csr'))
    learner = C.sgd(model.parameters, 0.1)
    training = threading.Event()

    def train():
        training.set()
        crit.train(data, minibatch_size=16, parameter_learners=[learner])
        training.clear()

    worker = threading.Thread(target=train)
    worker.start()
    iterations = 0
    while worker.is_alive():
        if training.is_set():
            iterations += 1  # only while the training thread is inside the core
    worker.join()
    assert iterations > 1000


def test_checkpoint_config_callables_keep_python_state_as_a_dict(tmp_path):
    """save_state's dict is stored with each checkpoint and given back to restore_state when a
    session resumes; monitor ranks the checkpoints that keep_best keeps."""
    model, crit = criterion()
    x, y = crit.arguments
    source = C.io.MinibatchSourceFromData(dict(x=X, y=Y))
    ckpt = str(tmp_path / "session")
    saves, monitored, restored = [], [], []

    def save_state():
        saves.append(len(saves) + 1)
        return {'calls': saves[-1], 'history': [0.5, -1], 'name': 'mine', 'nested': {'a': 1}}

    def monitor():
        monitored.append(len(monitored))
        return [3.0, 1.0, 2.0, 5.0][monitored[-1]] if len(monitored) <= 4 else 9.0

    def session():
        trainer = C.Trainer(None, crit, [C.sgd(model.parameters, 0.1)])
        config = C.CheckpointConfig(ckpt, frequency=128, keep_best=1, keep_latest=False,
                                    monitor=monitor, save_state=save_state,
                                    restore_state=restored.append)
        return trainer, C.training_session(
            trainer=trainer, mb_source=source, mb_size=32,
            model_inputs_to_streams={x: source['x'], y: source['y']}, max_samples=512,
            checkpoint_config=config)

    trainer, s = session()
    s.train()
    # Four periodic saves (monitored 3, 1, 2, 5) and the final one, to the plain file name;
    # keep_best=1 without keep_latest keeps the second periodic save (monitor 1.0).
    assert len(saves) == 5 and len(monitored) == 4 and restored == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session", "session1"]
    # Without the final checkpoint, a new session resumes from the best one, at 256 samples.
    os.remove(ckpt)
    trainer, s = session()
    s.train()
    assert restored == [{'calls': 2, 'history': [0.5, -1], 'name': 'mine', 'nested': {'a': 1}}]
    assert trainer.total_number_of_samples_seen == 512 and len(saves) == 5 + 3


def test_errors_in_checkpoint_callables_surface():
    model, crit = criterion()
    x, y = crit.arguments
    source = C.io.MinibatchSourceFromData(dict(x=X, y=Y))
    trainer = C.Trainer(None, crit, [C.sgd(model.parameters, 0.1)])

    def failing():
        raise_in("save_state")

    config = C.CheckpointConfig(os.devnull + "-not-written", frequency=64, save_state=failing)
    with pytest.raises(KeyError, match="save_state"):
        C.training_session(trainer=trainer, mb_source=source, mb_size=32,
                           model_inputs_to_streams={x: source['x'], y: source['y']},
                           max_samples=128, checkpoint_config=config).train()


def test_compute_precision_for_the_process_and_per_trainer():
    assert C.get_compute_precision() == 'float32'
    assert isinstance(C.bf16_supported(), bool)
    model, crit = criterion()
    trainer = C.Trainer(None, crit, C.sgd(model.parameters, 0.1))
    assert trainer.compute_precision == 'float32'
    trainer.compute_precision = 'bf16'  # where the CPU lacks bf16: float32, with a message
    assert trainer.compute_precision == 'bf16'
    assert C.get_compute_precision() == 'float32'  # the trainer's own
    trainer.train_minibatch({crit.arguments[0]: X[:16], crit.arguments[1]: Y[:16]})
    assert np.isfinite(trainer.previous_minibatch_loss_average)
    C.set_compute_precision('bf16')
    try:
        assert C.get_compute_precision() == 'bf16'
    finally:
        C.set_compute_precision('float32')
    with pytest.raises(C.ArgumentError, match="use 'float32' or 'bf16'"):
        C.set_compute_precision('fp16')
    with pytest.raises(C.ArgumentError, match="'half'"):
        trainer.compute_precision = 'half'


def test_a_training_session_subclass_overrides_on_cross_validation_end():
    model, crit = criterion()
    x, y = crit.arguments
    source = C.io.MinibatchSourceFromData(dict(x=X, y=Y))
    cv_source = C.io.MinibatchSourceFromData(dict(x=X[:64], y=Y[:64]), max_samples=64)
    seen = []

    class StopsAtTheSecond(C.train.TrainingSession):
        def on_cross_validation_end(self, index, average_error, num_samples, num_minibatches):
            seen.append((index, num_samples, num_minibatches))
            # The base class calls the config's callback.
            return super().on_cross_validation_end(index, average_error, num_samples,
                                                   num_minibatches) and index < 1

    callback_calls = []
    trainer = C.Trainer(None, crit, [C.sgd(model.parameters, 0.1)])
    session = StopsAtTheSecond(
        trainer, source, 32, {x: source['x'], y: source['y']}, None, 2048, None,
        C.CrossValidationConfig(cv_source, 256, minibatch_size=32,
                                model_inputs_to_streams={x: cv_source['x'], y: cv_source['y']},
                                callback=lambda *a: callback_calls.append(a) or True))
    session.train()
    assert seen == [(0, 64, 2), (1, 64, 2)]
    assert [c[0] for c in callback_calls] == [0, 1]
    assert trainer.total_number_of_samples_seen == 512  # stopped after the second


def test_a_progress_printer_takes_cntks_writer_calls(capsys):
    printer = C.logging.ProgressPrinter(freq=1)
    printer.on_write_training_update((0, 32), (0, 1), (0.0, 16.0), (0.0, 8.0))
    printer.on_write_training_summary(32, 1, 1, 16.0, 8.0, 1000)
    printer.on_write_test_summary(32, 1, 1, 4.0, 10)
    printer.write('Learning rate per minibatch', 0.5)
    printer.on_training_update_end()
    out = capsys.readouterr().out
    assert out == (' Minibatch[   1-   1]: loss = 0.500000 * 32, metric = 25.00% * 32;\n'
                   'Finished Epoch[1]: loss = 0.500000 * 32, metric = 25.00% * 32 1.000s '
                   '( 32.0 samples/s);\n'
                   'Finished Evaluation [1]: Minibatch[1-1]: metric = 12.50% * 32;\n'
                   'Learning rate per minibatch: 0.5\n'), out

    ends = []

    class Counts(C.logging.ProgressWriter):
        def on_training_update_end(self):
            ends.append(1)

    model, crit = criterion()
    x, y = crit.arguments
    trainer = C.Trainer(None, crit, [C.sgd(model.parameters, 0.1)], [Counts()])
    for j in range(3):
        trainer.train_minibatch({x: X[j * 8:(j + 1) * 8], y: Y[j * 8:(j + 1) * 8]})
    assert len(ends) == 3


def test_train_minibatch_returns_the_outputs_asked_for():
    x = C.input_variable(4)
    y = C.input_variable(2, is_sparse=True)
    z = C.layers.Dense(2)(x)
    loss = C.cross_entropy_with_softmax(z, y)
    trainer = C.Trainer(z, (loss, C.classification_error(z, y)), [C.sgd(z.parameters, 0.1)])
    for j in range(2):
        data = {x: X[j * 8:(j + 1) * 8], y: Y[j * 8:(j + 1) * 8]}
        before = z.eval({x: data[x]})  # the step computes z with the parameters before it
        before_loss = loss.eval(data)
        updated, values = trainer.train_minibatch(data, outputs=[z.output, loss.output])
        assert updated is True
        assert np.allclose(values[z.output], before, atol=1e-6)
        assert np.allclose(values[loss.output], before_loss, atol=1e-5)
        assert not np.allclose(z.eval({x: data[x]}), before)  # and then updated them
    assert trainer.train_minibatch({x: X[:8], y: Y[:8]}) is True
