"""UserMinibatchSource subclassed in Python: the loops call it (training_session, Function.train,
next_minibatch with an input map), its checkpoint state travels as a dict, what it returns is
checked, and what it raises surfaces with its traceback."""
import gc
import os
import sys
import traceback

import numpy as np
import pytest

import loom as C
from loom.io import MinibatchData, StreamInformation, UserMinibatchSource

rng = np.random.default_rng(1)
X = rng.normal(size=(64, 3)).astype(np.float32)
LABELS = (X[:, 0] > 0).astype(int)


class ArraySource(UserMinibatchSource):
    """X and one-hot labels in order, num_samples at a time, for `sweeps` sweeps."""

    def __init__(self, sweeps=None):
        super().__init__()
        self.fsi = StreamInformation("x", 0, 'dense', np.float32, (3,))
        self.lsi = StreamInformation("y", 1, 'dense', np.float32, (2,))
        self.pos, self.sweeps, self.calls, self.restored = 0, sweeps, [], []

    def stream_infos(self):
        return [self.fsi, self.lsi]

    def next_minibatch(self, num_samples, number_of_workers, worker_rank, device=None):
        self.calls.append((num_samples, number_of_workers, worker_rank))
        if self.sweeps is not None and self.pos >= self.sweeps * len(X):
            return {}
        start = self.pos % len(X)
        end = min(start + num_samples, len(X))
        self.pos += end - start
        n = end - start
        sweep_end = end == len(X)
        return {self.fsi: MinibatchData(C.Value(X[start:end]), n, n, sweep_end),
                self.lsi: MinibatchData(C.Value.one_hot(LABELS[start:end].tolist(), 2), n, n,
                                        sweep_end)}

    def get_checkpoint_state(self):
        return {'pos': self.pos, 'note': 'array source'}

    def restore_from_checkpoint(self, state):
        self.restored.append(state)
        self.pos = state['pos']


def model_and_criterion():
    x, y = C.input_variable(3, name='x'), C.input_variable(2, name='y')
    z = C.layers.Dense(2)(x)
    return z, x, y, C.cross_entropy_with_softmax(z, y), C.classification_error(z, y)


def session(source, z, x, y, loss, metric, **kwargs):
    trainer = C.Trainer(z, (loss, metric), C.sgd(z.parameters, 0.1))
    return trainer, C.training_session(trainer=trainer, mb_source=source, mb_size=16,
                                       model_inputs_to_streams={x: source.fsi, y: source.lsi},
                                       **kwargs)


def test_training_session_reads_a_python_source_and_learns():
    z, x, y, loss, metric = model_and_criterion()
    source = ArraySource()
    trainer, s = session(source, z, x, y, loss, metric, max_samples=64 * 20)
    s.train()
    assert trainer.total_number_of_samples_seen == 64 * 20
    assert source.calls[0] == (16, 1, 0) and len(source.calls) == 80
    errors = metric.eval({x: X, y: np.eye(2, dtype=np.float32)[LABELS]})
    assert np.mean(errors) < 0.1


def test_the_source_ends_training_and_function_train_reads_it_by_stream_name():
    z, x, y, loss, metric = model_and_criterion()
    crit = C.combine([loss, metric])
    source = ArraySource(sweeps=2)
    progress = crit.train(source, minibatch_size=32, streams=['x', 'y'], max_epochs=5,
                          parameter_learners=[C.sgd(z.parameters, 0.1)])
    assert sum(s.samples for s in progress.epoch_summaries) == 128
    assert source.calls[-1] == (32, 1, 0)  # the call that returned {}


def test_next_minibatch_with_an_input_map_from_the_base_class():
    z, x, y, loss, metric = model_and_criterion()
    source = ArraySource()
    mb = C.io.MinibatchSourceInterface.next_minibatch(source, 10, {x: source.fsi, y: source.lsi})
    assert mb[x].number_of_samples == 10 and mb[y].number_of_sequences == 10
    np.testing.assert_array_equal(mb[x].asarray(), X[:10])
    assert source['y'] == source.lsi and source.streams.x == source.fsi


def test_a_source_only_the_session_holds_stays_alive():
    z, x, y, loss, metric = model_and_criterion()
    source = ArraySource()
    fsi, lsi = source.fsi, source.lsi
    trainer = C.Trainer(z, (loss, metric), C.sgd(z.parameters, 0.1))
    s = C.training_session(trainer=trainer, mb_source=source, mb_size=8,
                           model_inputs_to_streams={x: fsi, y: lsi}, max_samples=64)
    del source
    gc.collect()
    s.train()
    assert trainer.total_number_of_samples_seen == 64


def test_checkpoint_state_is_a_python_dict_saved_and_restored(tmp_path):
    z, x, y, loss, metric = model_and_criterion()
    ckpt = str(tmp_path / "ckpt")
    config = dict(max_samples=96, checkpoint_config=C.CheckpointConfig(ckpt, frequency=32))
    source = ArraySource()
    session(source, z, x, y, loss, metric, **config)[1].train()
    assert source.restored == []
    again = ArraySource()
    trainer, s = session(again, z, x, y, loss, metric, **config)
    s.train()
    assert again.restored == [{'pos': 96, 'note': 'array source'}]
    assert trainer.total_number_of_samples_seen == 96 and again.calls == []


def test_a_source_without_state_refuses_a_state_to_restore():
    class Stateless(UserMinibatchSource):
        def stream_infos(self):
            return []

    s = Stateless()
    assert len(s.get_checkpoint_state()) == 0
    s.restore_from_checkpoint({})
    with pytest.raises(C.ArgumentError):
        s.restore_from_checkpoint({'pos': 3})


def fail_in_source():
    raise KeyError("raised in next_minibatch")


def test_what_the_source_raises_surfaces_with_its_traceback():
    class Failing(ArraySource):
        def next_minibatch(self, *args):
            fail_in_source()

    z, x, y, loss, metric = model_and_criterion()
    with pytest.raises(KeyError, match="next_minibatch") as e:
        session(Failing(), z, x, y, loss, metric, max_samples=64)[1].train()
    assert "fail_in_source" in "".join(traceback.format_tb(e.tb))


def test_what_the_source_returns_is_checked(tmp_path):
    class WrongCount(ArraySource):
        def next_minibatch(self, *args):
            mb = super().next_minibatch(*args)
            mb[self.lsi] = MinibatchData(mb[self.lsi].data, 16, 15, False)
            return mb

    class NotADict(ArraySource):
        def next_minibatch(self, *args):
            return [1, 2]

    class NoStreams(UserMinibatchSource):
        pass

    z, x, y, loss, metric = model_and_criterion()
    with pytest.raises(C.DataError, match=r"stream 'y'.*number_of_samples = 15.*16 samples"):
        session(WrongCount(), z, x, y, loss, metric, max_samples=64)[1].train()
    with pytest.raises(TypeError, match="returned list"):
        session(NotADict(), z, x, y, loss, metric, max_samples=64)[1].train()
    with pytest.raises(TypeError, match=r"must define stream_infos\(\)"):
        NoStreams().stream_infos()

    # The wrong type where the core reads a value: a TypeError naming the method, the type and
    # what to return (not pybind11's "Unable to cast Python instance").
    class KeysAreNames(ArraySource):
        def next_minibatch(self, *args):
            return {si.name: d for si, d in super().next_minibatch(*args).items()}

    class ValuesAreArrays(ArraySource):
        def next_minibatch(self, *args):
            return {si: np.zeros((2, 2), np.float32) for si in super().next_minibatch(*args)}

    class StateIsAList(ArraySource):
        def get_checkpoint_state(self):
            return [1, 2]

    with pytest.raises(TypeError, match=r"UserMinibatchSource.next_minibatch \(a key\) returned "
                                        r"str; it must return a dict \{StreamInformation: "):
        session(KeysAreNames(), z, x, y, loss, metric, max_samples=64)[1].train()
    with pytest.raises(TypeError, match=r"next_minibatch \(a value\) returned ndarray"):
        session(ValuesAreArrays(), z, x, y, loss, metric, max_samples=64)[1].train()
    with pytest.raises(TypeError, match=r"get_checkpoint_state returned list; it must return "
                                        r"a dict"):
        session(StateIsAList(), z, x, y, loss, metric, max_samples=64,
                checkpoint_config=C.CheckpointConfig(str(tmp_path / "ckpt"), frequency=32))[1].train()


def test_sequences_and_labels_as_the_seed_builds_them():
    """Seed 001's values: one-hot word sequences, and labels as an array [N, 1, classes]."""
    class Words(UserMinibatchSource):
        def __init__(self):
            super().__init__()
            self.fsi = StreamInformation("features", 0, 'sparse', np.float32, (10,))
            self.lsi = StreamInformation("labels", 1, 'dense', np.float32, (2,))

        def stream_infos(self):
            return [self.fsi, self.lsi]

        def next_minibatch(self, num_samples, number_of_workers, worker_rank, device=None):
            words = [[1, 2, 3], [4, 5]]
            labels = np.array([[[1, 0]], [[0, 1]]], np.float32)
            return {self.fsi: MinibatchData(C.Value.one_hot(words, 10), 2, 5, False),
                    self.lsi: MinibatchData(C.Value(batch=labels), 2, 2, False)}

    source = Words()
    f, l = C.sequence.input_variable(10), C.input_variable(2)
    mb = C.io.MinibatchSourceInterface.next_minibatch(source, 5, {f: source.fsi, l: source.lsi})
    assert mb[f].data.sequence_lengths == [3, 2] and mb[f].is_sparse
    np.testing.assert_array_equal(mb[l].asarray(), [[[1, 0]], [[0, 1]]])  # as the source gave it


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_long_loop_over_a_python_source_does_not_grow_memory():
    """10,000 minibatches from a Python source through next_minibatch, train_minibatch and
    forward/backward: the process's memory after 10,000 is that after 1,000 (within 2 MB), and
    the source's arrays have the references they had."""
    z, x, y, loss, metric = model_and_criterion()
    source = ArraySource()
    trainer = C.Trainer(z, (loss, metric), C.sgd(z.parameters, 0.01))
    input_map = {x: source.fsi, y: source.lsi}
    read = C.io.MinibatchSourceInterface.next_minibatch
    W = z.parameters[0]

    def loop(n):
        for _ in range(n):
            mb = read(source, 8, input_map)
            trainer.train_minibatch(mb)
            state, out = loss.forward({x: mb[x], y: mb[y]})
            loss.backward(state, {loss.output: np.ones_like(out[loss.output])}, [W])
        source.calls.clear()  # what the test's source records

    loop(1000)
    gc.collect()
    refs, before = sys.getrefcount(X), rss_bytes()
    loop(9000)
    gc.collect()
    assert sys.getrefcount(X) == refs
    assert rss_bytes() - before < 2 << 20
    assert trainer.total_number_of_samples_seen == 10000 * 8
