"""CNTK 2.7's cntk.io names: constants, MinibatchData's CNTK properties, MinibatchSource's
signature and current_position, StreamConfiguration, StreamDef's fields, the transforms'
defaults, sequence_to_cntk_text_format and UserDeserializer."""
import numpy as np
import pytest
import scipy.sparse as sp

import loom as C
from loom.io import (DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS, CTFDeserializer, MinibatchSource,
                     MinibatchSourceFromData, StreamConfiguration, StreamDef, StreamDefs,
                     StreamInformation, UserDeserializer, sequence_to_cntk_text_format, transforms)


def test_default_randomization_window():
    assert DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS == 128


def test_minibatch_data_cntk_properties():
    X = [np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((1, 2), np.float32)]
    Y = [sp.csr_matrix(np.eye(3, dtype=np.float32)), sp.csr_matrix(np.eye(3, dtype=np.float32)[2:])]
    s = MinibatchSourceFromData(dict(x=X, y=Y), max_samples=4)
    mb = s.next_minibatch(10)
    x, y = mb[s.streams.x], mb[s.streams.y]
    assert (x.num_sequences, x.num_samples) == (2, 4)
    assert (x.number_of_sequences, x.number_of_samples) == (2, 4)  # CNTK keeps both names
    assert x.mask.dtype == np.int8
    assert x.mask.tolist() == [[2, 1, 1], [2, 0, 0]]
    seqs = x.as_sequences()
    assert [a.tolist() for a in seqs] == [[[0, 1], [2, 3], [4, 5]], [[1, 1]]]
    ys = y.as_sequences(None)
    assert all(sp.isspmatrix_csr(m) for m in ys)
    assert ys[0].toarray().tolist() == np.eye(3).tolist() and ys[1].toarray().tolist() == [[0, 0, 1]]
    # a batch without sequence axis: one sample per sequence
    s = MinibatchSourceFromData(dict(a=np.arange(4, dtype=np.float32).reshape(4, 1)))
    a = s.next_minibatch(3)[s.streams.a]
    assert a.mask.tolist() == [[2], [2], [2]]
    assert [v.tolist() for v in a.as_sequences()] == [[[0]], [[1]], [[2]]]


CTF = """0 |x 1 2 |y 0:1
0 |x 3 4
1 |x 5 6 |y 1:1
2 |x 7 8 |y 2:1
2 |x 9 10
2 |x 11 12
"""


def test_stream_configuration_and_ctf(tmp_path):
    path = tmp_path / 'a.ctf'
    path.write_text(CTF)
    c = StreamConfiguration('features', 2, stream_alias='x')
    assert (c.name, c.dim, c.is_sparse, c.stream_alias, c.defines_mb_size) == \
        ('features', 2, False, 'x', False)
    labels = StreamConfiguration('labels', 3, True, 'y', True)
    src = MinibatchSource(CTFDeserializer(str(path), [c, labels]), randomize=False,
                          max_sweeps=1)
    assert src.streams.labels.is_sparse and src.streams.labels.defines_mb_size
    mb = src.next_minibatch(2)
    # labels define the minibatch size: two sequences of one label each
    assert mb[src.streams.features].num_sequences == 2
    assert mb[src.streams.features].num_samples == 3
    # the same through StreamDefs
    src2 = MinibatchSource(CTFDeserializer(str(path), StreamDefs(
        features=StreamDef(field='x', shape=2), labels=StreamDef('y', 3, True))),
        randomize=False, max_sweeps=1)
    assert np.array_equal(src2.next_minibatch(3)[src2.streams.features].as_sequences()[0],
                          [[1, 2], [3, 4]])


def test_stream_def_fields():
    d = StreamDef()
    assert (d.stream_alias, d.dim, d.is_sparse, d.context, d.scp, d.mlf, d.broadcast,
            d.defines_mb_size, d.max_sequence_length) == \
        (None, 0, False, (0, 0), [], [], False, False, 65535)
    d = StreamDef(shape=33, context=(2, 3), scp='a.scp', broadcast=True, max_sequence_length=9)
    assert (d.dim, d.context, d.scp, d.broadcast, d.max_sequence_length) == \
        (33, (2, 3), ['a.scp'], True, 9)
    d = StreamDef(shape=132, mlf=['a.mlf', 'b.mlf'])
    assert d.is_sparse and d.mlf == ['a.mlf', 'b.mlf']  # CNTK: an mlf makes it sparse
    assert StreamDef('image', transforms=[transforms.scale(2, 2, 3)]).stream_alias == 'image'


def test_transforms_names_and_defaults():
    # CNTK's signatures: every argument by its CNTK name, the defaults as CNTK's
    transforms.crop()
    transforms.crop(crop_type='randomside', crop_size=0, side_ratio=(0.4, 0.8), area_ratio=0.0,
                    aspect_ratio=1.0, jitter_type='uniratio')
    transforms.scale(width=4, height=4, channels=3, interpolations='linear', scale_mode='fill',
                     pad_value=-1)
    transforms.color(brightness_radius=0.2, contrast_radius=0.1, saturation_radius=0.3)
    transforms.color()
    with pytest.raises(ValueError, match="crop_type is one of 'center'"):
        transforms.crop(crop_type='middle')


def test_minibatch_source_cntk_signature_and_current_position():
    data = np.arange(20, dtype=np.float32).reshape(20, 1)
    src = MinibatchSourceFromData(dict(x=data), max_samples=20)
    src.next_minibatch(3)
    pos = src.current_position
    assert pos['minibatchSourcePosition'] == 3
    first = src.next_minibatch(4)[src.streams.x].asarray()
    src.next_minibatch(5)
    src.current_position = pos
    assert np.array_equal(src.next_minibatch(4)[src.streams.x].asarray(), first)


def test_sequence_to_cntk_text_format():
    # CNTK's own example (io tests): dense and sparse streams of different lengths
    assert sequence_to_cntk_text_format(2, {
        'F': np.array([[1., 2.], [3., 4.], [5., 6.]], np.float32),
        'L': [{3: 1}, {0: 1, 2: 7}]}) == \
        '2\t|F 1.0 2.0 |L 3:1\n2\t|F 3.0 4.0 |L 0:1 2:7\n2\t|F 5.0 6.0'
    assert sequence_to_cntk_text_format(0, {'a': [[1, 2]], 'b': np.array([[[1, 2], [3, 4]]])}) == \
        '0\t|a 1 2 |b 1 2 3 4'
    assert sequence_to_cntk_text_format(5, {'a': []}) == ''
    with pytest.raises(ValueError, match='expected a tensor'):
        sequence_to_cntk_text_format(0, {'a': ['x']})


def test_sequence_to_cntk_text_format_reads_back(tmp_path):
    seqs = [np.arange(6, dtype=np.float32).reshape(3, 2) / 4, np.array([[7.5, -1]], np.float32)]
    text = '\n'.join(sequence_to_cntk_text_format(i, {'x': s}) for i, s in enumerate(seqs))
    path = tmp_path / 'b.ctf'
    path.write_text(text + '\n')
    src = MinibatchSource(CTFDeserializer(str(path), {'x': StreamDef('x', 2)}), randomize=False,
                          max_sweeps=1)
    got = src.next_minibatch(100)[src.streams.x].as_sequences()
    assert [g.tolist() for g in got] == [s.tolist() for s in seqs]


class SimpleDeserializer(UserDeserializer):
    def __init__(self, stream_infos, chunk_data):
        super().__init__()
        self._streams = stream_infos
        self._chunk_data = chunk_data

    def stream_infos(self):
        return self._streams

    def num_chunks(self):
        return len(self._chunk_data)

    def get_chunk(self, chunk_id):
        return self._chunk_data[chunk_id % self.num_chunks()]


def _simple_chunks(N=5, N_seq=3):
    return [{'x': [d for d in np.arange(N * N_seq * 3).reshape((N, N_seq, 3)).astype(np.float32)],
             'y': [d for d in np.arange(N * 1).reshape((N, 1)).astype(np.float32)]}
            for _ in range(2)]


def test_user_deserializer_defines_mb_size():
    # CNTK's test_user_deserializer
    x = C.sequence.input_variable(3, name='x')
    y = C.input_variable(1, name='y')
    d = SimpleDeserializer([StreamInformation('x', 0, 'dense', np.float32, (3,)),
                            StreamInformation('y', 1, 'dense', np.float32, (1,), True)],
                           _simple_chunks())
    mbs = MinibatchSource([d], randomize=False)
    batch = mbs.next_minibatch(5, {x: mbs['x'], y: mbs['y']})
    assert (batch[x].number_of_sequences, batch[x].number_of_samples) == (5, 15)
    assert (batch[y].number_of_sequences, batch[y].number_of_samples) == (5, 5)
    d = SimpleDeserializer([StreamInformation('x', 0, 'dense', np.float32, (3,)),
                            StreamInformation('y', 1, 'dense', np.float32, (1,))],
                           _simple_chunks())
    mbs = MinibatchSource([d], randomize=False)
    batch = mbs.next_minibatch(5, {x: mbs['x'], y: mbs['y']})
    assert (batch[x].number_of_sequences, batch[x].number_of_samples) == (1, 3)
    assert (batch[y].number_of_sequences, batch[y].number_of_samples) == (1, 1)
    with pytest.raises(Exception, match='2 streams set defines_mb_size'):
        d = SimpleDeserializer([StreamInformation('x', 0, 'dense', np.float32, (3,), True),
                                StreamInformation('y', 1, 'dense', np.float32, (1,), True)],
                               _simple_chunks())
        MinibatchSource([d], randomize=False)


class GenDeserializer(UserDeserializer):
    """CNTK's helper: chunk c holds num_sequences sequences whose every value is c."""

    def __init__(self, stream_infos, num_chunks, num_sequences, max_sequence_len=1):
        super().__init__()
        self._streams = stream_infos
        self._num_chunks = num_chunks
        self._num_sequences = num_sequences
        self._max_sequence_len = max_sequence_len

    def stream_infos(self):
        return self._streams

    def num_chunks(self):
        return self._num_chunks

    def get_chunk(self, chunk_id):
        rng = np.random.RandomState(chunk_id)
        result = {}
        lengths = rng.randint(1, self._max_sequence_len + 1, self._num_sequences)
        for stream in self._streams:
            total = int(np.prod(stream.sample_shape))
            chunk = []
            for i in range(self._num_sequences):
                if self._max_sequence_len == 1:
                    shape = stream.sample_shape
                else:
                    shape = (lengths[i],) + tuple(stream.sample_shape)
                    if stream.storage_format == 'sparse':
                        shape = (lengths[i], total)
                data = np.full(shape, chunk_id, np.float32)
                chunk.append(sp.csr_matrix(data) if stream.storage_format == 'sparse' else data)
            if stream.storage_format == 'dense':
                result[stream.name] = chunk if self._max_sequence_len != 1 else np.stack(chunk)
            else:
                result[stream.name] = chunk if self._max_sequence_len != 1 else \
                    sp.csr_matrix(sp.vstack(chunk))
        return result


def _count_values(src, num_chunks, sequence_mode):
    xs, ys = np.zeros(num_chunks, np.int32), np.zeros(num_chunks, np.int32)
    mb_count = 0
    while True:
        if mb_count % 10 == 1:  # a checkpoint, three minibatches, and back
            state = src.get_checkpoint_state()
            for _ in range(3):
                src.next_minibatch(20)
            src.restore_from_checkpoint(state)
            mb_count += 1
            continue
        mb = src.next_minibatch(20)
        mb_count += 1
        if not mb:
            return xs, ys
        for seq in mb[src.streams.x].as_sequences():
            if sequence_mode:
                xs[int(seq[0][0][0])] += 1
            else:
                for sample in seq:
                    xs[int(sample[0][0])] += 1
        for seq in mb[src.streams.y].as_sequences():
            if sequence_mode:
                ys[int(seq.toarray()[0][0])] += 1
            else:
                for sample in seq.toarray():
                    ys[int(sample[0])] += 1


@pytest.mark.parametrize('randomize', [False, True])
def test_user_deserializer_sample_mode(randomize):
    streams = [StreamInformation('x', 0, 'dense', np.float32, (2, 3)),
               StreamInformation('y', 1, 'sparse', np.float32, (3,))]
    for num_chunks, num_sequences, sweeps in [(20, 30, 2), (20, 1, 3)]:
        d = GenDeserializer(streams, num_chunks, num_sequences)
        src = MinibatchSource([d], randomize=randomize, max_sweeps=sweeps,
                              randomization_window_in_chunks=5)
        xs, ys = _count_values(src, num_chunks, sequence_mode=False)
        assert (xs == num_sequences * sweeps).all() and (ys == num_sequences * sweeps).all()


@pytest.mark.parametrize('randomize', [False, True])
def test_user_deserializer_sequence_mode(randomize):
    streams = [StreamInformation('x', 0, 'dense', np.float32, (2, 3)),
               StreamInformation('y', 1, 'sparse', np.float32, (3,))]
    for num_chunks, num_sequences, sweeps in [(15, 20, 2), (15, 1, 3)]:
        d = GenDeserializer(streams, num_chunks, num_sequences, max_sequence_len=10)
        src = MinibatchSource([d], randomize=randomize, max_sweeps=sweeps,
                              randomization_window_in_chunks=5)
        src.restore_from_checkpoint(src.get_checkpoint_state())
        xs, ys = _count_values(src, num_chunks, sequence_mode=True)
        assert (xs == num_sequences * sweeps).all() and (ys == num_sequences * sweeps).all()


def test_user_deserializer_frame_mode_and_truncation():
    streams = [StreamInformation('x', 0, 'dense', np.float32, (1,))]
    chunks = [{'x': [np.full((4, 1), 1, np.float32), np.full((2, 1), 2, np.float32)]},
              {'x': [np.full((3, 1), 3, np.float32)]}]
    src = MinibatchSource(SimpleDeserializer(streams, chunks), randomize=False,
                          frame_mode=True, max_sweeps=1)
    mb = src.next_minibatch(5)[src.streams.x]
    assert (mb.num_sequences, mb.num_samples) == (5, 5)
    assert mb.asarray().ravel().tolist() == [1, 1, 1, 1, 2]  # five one-frame sequences
    src = MinibatchSource(SimpleDeserializer(streams, chunks), randomize=False,
                          truncation_length=2, max_sweeps=1)
    mb = src.next_minibatch(2)[src.streams.x]
    assert mb.mask.tolist() == [[2, 1]]


def test_user_deserializer_errors():
    streams = [StreamInformation('x', 0, 'dense', np.float32, (2,))]

    class Raising(SimpleDeserializer):
        def get_chunk(self, chunk_id):
            if chunk_id == 1:
                raise KeyError('no such chunk')
            return super().get_chunk(chunk_id)

    good = {'x': np.zeros((3, 2), np.float32)}
    with pytest.raises(C.DataError, match=r"UserDeserializer.get_chunk\(1\) raised KeyError: "
                                          r"'no such chunk'"):
        MinibatchSource(Raising(streams, [good, good]))
    with pytest.raises(C.DataError, match=r"get_chunk\(0\): stream 'x' has samples of shape "
                                          r"\[3\], stream_infos\(\) declares \[2\]"):
        MinibatchSource(SimpleDeserializer(streams, [{'x': np.zeros((3, 3), np.float32)}]))
    with pytest.raises(C.DataError, match=r"get_chunk\(0\) returned no data for stream 'x'"):
        MinibatchSource(SimpleDeserializer(streams, [{'z': np.zeros((3, 2), np.float32)}]))
    with pytest.raises(C.DataError, match=r"returned stream 'z', which stream_infos\(\) does not"):
        MinibatchSource(SimpleDeserializer(streams, [dict(good, z=np.zeros(3))]))
    with pytest.raises(TypeError, match=r"get_chunk\(0\) returned list; it must return a dict"):
        MinibatchSource(SimpleDeserializer(streams, [[1, 2]]))
    with pytest.raises(TypeError, match=r"get_chunk\(0\): stream 'x'"):
        MinibatchSource(SimpleDeserializer(streams, [{'x': 'text'}]))
    with pytest.raises(C.DataError, match=r"stream 'x' is declared dense, the data is sparse"):
        MinibatchSource(SimpleDeserializer(streams, [{'x': sp.csr_matrix(np.eye(2))}]))
    with pytest.raises(C.ArgumentError, match=r"num_chunks\(\) returned 0"):
        MinibatchSource(SimpleDeserializer(streams, []))

    class NoChunks(UserDeserializer):
        def stream_infos(self):
            return streams

        def num_chunks(self):
            return 1

    with pytest.raises(TypeError, match=r"must define get_chunk\(chunk_id\)"):
        MinibatchSource(NoChunks())

    class NoStreams(UserDeserializer):
        pass

    with pytest.raises(TypeError, match=r"must define stream_infos\(\)"):
        MinibatchSource(NoStreams())

    # an error on a reader thread (a chunk read again later) reaches next_minibatch
    class Flaky(SimpleDeserializer):
        calls = 0

        def get_chunk(self, chunk_id):
            Flaky.calls += 1
            if Flaky.calls > 2:
                raise RuntimeError('disk gone')
            return super().get_chunk(chunk_id)

    src = MinibatchSource(Flaky(streams, [good, good]), randomize=False)
    with pytest.raises(C.DataError, match=r"get_chunk\(0\) raised RuntimeError: disk gone"):
        src.next_minibatch(2)
        src.next_minibatch(2)


def test_user_deserializer_keeps_its_python_state():
    streams = [StreamInformation('x', 0, 'dense', np.float32, (1,))]
    src = MinibatchSource(SimpleDeserializer(streams, [{'x': np.ones((2, 1), np.float32)}]),
                          randomize=False, max_sweeps=3)
    import gc
    gc.collect()
    total = 0
    while True:
        mb = src.next_minibatch(1)
        if not mb:
            break
        total += mb[src.streams.x].num_samples
    assert total == 6
    del src
    gc.collect()


def _htk(path, frames, base):
    """An HTK file of frames x 2 big-endian float32 values: frame t = (100 base + 10 t, + 1)."""
    import struct
    values = [100 * base + 10 * t + i for t in range(frames) for i in range(2)]
    path.write_bytes(struct.pack('>iihh', frames, 100000, 8, 9) +
                     struct.pack('>%df' % len(values), *values))
    return str(path)


def test_htk_features_and_mlf_labels_frame_aligned(tmp_path):
    from loom.io import HTKFeatureDeserializer, HTKMLFDeserializer
    a, b = _htk(tmp_path / 'a.htk', 3, 1), _htk(tmp_path / 'b.htk', 5, 2)
    scp = tmp_path / 'f.scp'
    scp.write_text('ua=%s\nub=%s[1,2]\n' % (a, b))
    (tmp_path / 'states').write_text('sil\nx\ny\n')
    (tmp_path / 'l.mlf').write_text('#!MLF!#\n"*/ub.lab"\n0 200000 y\n.\n'
                                    '"*/ua.lab"\n0 1 sil\n1 3 x\n.\n')
    features = HTKFeatureDeserializer(StreamDefs(
        features=StreamDef(shape=2, scp=str(scp), context=(1, 1))))
    labels = HTKMLFDeserializer(str(tmp_path / 'states'), StreamDefs(
        labels=StreamDef(shape=3, mlf=str(tmp_path / 'l.mlf'))))
    src = MinibatchSource([features, labels], randomize=False, frame_mode=True, max_sweeps=1)
    assert src.streams.features.shape == (6,) and src.streams.labels.is_sparse
    mb = src.next_minibatch(5)
    f = np.concatenate(mb[src.streams.features].asarray())
    lab = np.concatenate(mb[src.streams.labels].asarray())
    # ua: frames 0..2; ub: file frames 1..2 (the frame before and after, clamped)
    assert f[:, 2].tolist() == [100, 110, 120, 210, 220]
    assert f[0].tolist() == [100, 101, 100, 101, 110, 111]
    assert f[4].tolist() == [210, 211, 220, 221, 220, 221]
    assert lab.argmax(axis=1).tolist() == [0, 1, 1, 2, 2]


def test_htk_errors_name_file_and_line(tmp_path):
    from loom.io import HTKFeatureDeserializer, HTKMLFDeserializer
    a = _htk(tmp_path / 'a.htk', 3, 1)
    scp = tmp_path / 'f.scp'
    scp.write_text('%s\n%s\n' % (a, tmp_path / 'missing.htk'))
    with pytest.raises(C.IOError, match=r"f.scp:2: cannot open feature file .*missing.htk"):
        HTKFeatureDeserializer({'f': StreamDef(shape=2, scp=str(scp))})
    with open(a, 'r+b') as h:
        h.write(b'\0\0\0\x09')  # the header now says 9 frames
    scp.write_text(a + '\n')
    with pytest.raises(C.DataError, match=r"a.htk' \(.*f.scp:1\): damaged: the header says 9 "
                                          r"frames of 8 bytes, the file holds 24 bytes"):
        HTKFeatureDeserializer({'f': StreamDef(shape=2, scp=str(scp))})
    (tmp_path / 'states').write_text('sil\n')
    (tmp_path / 'l.mlf').write_text('#!MLF!#\n"u.lab"\n0 1 sil\n1 two sil\n.\n')
    with pytest.raises(C.DataError, match=r"l.mlf:4: the end 'two' is not a number"):
        HTKMLFDeserializer(str(tmp_path / 'states'),
                           {'l': StreamDef(shape=1, mlf=str(tmp_path / 'l.mlf'))})
    with pytest.raises(C.ArgumentError, match="only accepts a single stream"):
        HTKMLFDeserializer(str(tmp_path / 'states'), {'l': StreamDef(shape=1, mlf='x'),
                                                      'm': StreamDef(shape=1, mlf='x')})


def _htk_compressed(path, x):
    """x [frames, dim] as a compressed HTK file (USER_C): per dimension A = 2 I / (max - min),
    B = (max + min) I / (max - min), I = 32767, values round(A x - B) as int16; nSamples counts
    A and B as 4 frames. Returns the largest quantisation error, 1 / (2 A)."""
    import struct
    lo, hi = x.min(axis=0), x.max(axis=0)
    a = (2 * 32767 / (hi - lo)).astype('>f4')
    b = ((hi + lo) * 32767 / (hi - lo)).astype('>f4')
    q = np.rint(a.astype(np.float64) * x - b).astype('>i2')
    path.write_bytes(struct.pack('>iihh', len(x) + 4, 100000, 2 * x.shape[1], 9 | 0o2000) +
                     a.tobytes() + b.tobytes() + q.tobytes())
    return 1 / (2 * a.astype(np.float64))


def test_htk_compressed_features_read_within_the_quantisation(tmp_path):
    from loom.io import HTKFeatureDeserializer
    x = np.sin(np.arange(15, dtype=np.float64).reshape(5, 3)) * [1, 10, 0.1]
    step = _htk_compressed(tmp_path / 'c.htk', x)
    (tmp_path / 'f.scp').write_text('u=%s\n' % (tmp_path / 'c.htk'))
    src = MinibatchSource(HTKFeatureDeserializer(StreamDefs(f=StreamDef(
        shape=3, scp=str(tmp_path / 'f.scp')))), randomize=False, max_sweeps=1)
    got = src.next_minibatch(5)[src.streams.f].asarray()[0]
    assert got.shape == (5, 3)
    assert np.all(np.abs(got - x) <= step * 1.001 + 1e-6)
    # the scale and bias cut short
    with open(tmp_path / 'c.htk', 'r+b') as f:
        f.truncate(12 + 16)
    with pytest.raises(C.DataError, match=r"c.htk' \(.*f.scp:1\): the compressed file's scale "
                                          r"and bias \(A and B, 3 float32 each"):
        HTKFeatureDeserializer({'f': StreamDef(shape=3, scp=str(tmp_path / 'f.scp'))})


def test_htk_broadcast_stream_and_utterances_matched_by_key(tmp_path, capfd):
    from loom.io import HTKFeatureDeserializer, HTKMLFDeserializer
    a, b = _htk(tmp_path / 'a.htk', 3, 1), _htk(tmp_path / 'b.htk', 2, 2)
    ia, ib = _htk(tmp_path / 'ia.htk', 1, 7), _htk(tmp_path / 'ib.htk', 1, 8)
    (tmp_path / 'f.scp').write_text('ua=%s\nub=%s\nuc=%s\n' % (a, b, b))
    # the i-vectors in another order; uc has none
    (tmp_path / 'iv.scp').write_text('ub=%s\nua=%s\n' % (ib, ia))
    (tmp_path / 'states').write_text('sil\nx\n')
    # labels in another order; ua has none
    (tmp_path / 'l.mlf').write_text('#!MLF!#\n"*/uc.lab"\n0 2 x\n.\n"*/ub.lab"\n0 2 sil\n.\n')
    features = HTKFeatureDeserializer(StreamDefs(
        f=StreamDef(shape=2, scp=str(tmp_path / 'f.scp')),
        iv=StreamDef(shape=2, scp=str(tmp_path / 'iv.scp'), broadcast=True)))
    assert "stream 'iv' lacks 1 of the utterances of stream 'f'" in capfd.readouterr().err
    src = MinibatchSource([features, HTKMLFDeserializer(str(tmp_path / 'states'), StreamDefs(
        l=StreamDef(shape=2, mlf=str(tmp_path / 'l.mlf'))))], randomize=False, max_sweeps=1)
    assert ("WARNING: MinibatchSource: stream 'l' lacks 1 of the 2 utterances of stream 'f'; "
            "they are dropped") in capfd.readouterr().err
    mb = src.next_minibatch(10)
    assert mb[src.streams.f].num_sequences == 1  # only ub has features, an i-vector and labels
    assert mb[src.streams.iv].asarray()[0].tolist() == [[800, 801], [800, 801]]
    assert mb[src.streams.f].asarray()[0].tolist() == [[200, 201], [210, 211]]
    assert mb[src.streams.l].asarray()[0].argmax(axis=1).tolist() == [0, 0]
    # a broadcast stream cannot lead
    with pytest.raises(C.ArgumentError, match="'iv' is broadcast and cannot be the first stream"):
        MinibatchSource(HTKFeatureDeserializer(StreamDefs(
            iv=StreamDef(shape=2, scp=str(tmp_path / 'iv.scp'), broadcast=True))))


def test_user_deserializer_base_methods_raise_not_implemented():
    d = UserDeserializer()
    for call in (d.stream_infos, d.num_chunks, lambda: d.get_chunk(0)):
        with pytest.raises(NotImplementedError):
            call()


def test_asarray_gives_the_padded_data_and_next_minibatch_maps_any_key(tmp_path):
    # CNTK's MinibatchData.asarray() and Value.asarray(): the reader's value as it is,
    # [sequences, steps, sample...], with a warning where padding (the mask) is ignored; CNTK's
    # input map takes any keys.
    path = tmp_path / 'seq.ctf'
    path.write_text('0 |x 1 |y 1\n0 |x 2\n1 |x 3 |y 2\n')
    src = MinibatchSource(CTFDeserializer(str(path), StreamDefs(
        x=StreamDef(field='x', shape=1), y=StreamDef(field='y', shape=1))),
        randomize=False, max_sweeps=1)
    mb = src.next_minibatch(10, input_map={'xs': src.streams.x, 'ys': src.streams.y})
    assert set(mb) == {'xs', 'ys'}
    with pytest.warns(UserWarning, match='ignore the mask'):
        padded = mb['xs'].asarray()
    assert padded.shape == (2, 2, 1) and padded[:, :, 0].tolist() == [[1, 2], [3, 0]]
    assert [s.ravel().tolist() for s in mb['xs'].as_sequences()] == [[1, 2], [3]]
    assert mb['ys'].asarray().shape == (2, 1, 1)  # one step each: no padding, no warning


def test_non_sequence_data_comes_as_each_cntk_source_gives_it(tmp_path):
    # CNTK's deserializers give every sample as a sequence of one step, [N, 1, dim], whether the
    # minibatch is keyed by stream or mapped to an input without a sequence axis;
    # MinibatchSourceFromData gives arrays as a batch [N, dim] (it makes Value(batch)).
    path = tmp_path / 'rows.ctf'
    path.write_text(''.join('|x %d %d |y %d:1\n' % (i, i + 1, i % 3) for i in range(4)))
    ctf = MinibatchSource(CTFDeserializer(str(path), StreamDefs(
        x=StreamDef(field='x', shape=2), y=StreamDef(field='y', shape=3, is_sparse=True))),
        randomize=False)
    x, y = C.input_variable(2), C.input_variable(3, is_sparse=True)
    from_data = MinibatchSourceFromData(dict(
        x=np.arange(8, dtype=np.float32).reshape(4, 2),
        y=sp.csr_matrix(np.eye(3, dtype=np.float32)[[0, 1, 2, 0]])))
    for source, step in ((ctf, (1,)), (from_data, ())):
        by_stream = source.next_minibatch(2)
        mapped = source.next_minibatch(2, input_map={x: source.streams.x, y: source.streams.y})
        for mb, xk, yk in ((by_stream, source.streams.x, source.streams.y), (mapped, x, y)):
            assert mb[xk].asarray().shape == mb[xk].shape == (2,) + step + (2,)
            assert mb[xk].data.asarray().shape == (2,) + step + (2,)
            assert mb[yk].asarray().shape == (2,) + step + (3,)
        np.testing.assert_array_equal(mapped[x].asarray().reshape(2, 2), [[4, 5], [6, 7]]
                                      if source is from_data else [[2, 3], [3, 4]])

    # Both train a model of inputs without a sequence axis through the Trainer and
    # Function.train alike, to the same parameters.
    def train(source, through_function):
        z = C.layers.Dense(3, init=C.glorot_uniform(seed=1))(x)
        loss = C.cross_entropy_with_softmax(z, y)
        learner = C.sgd(z.parameters, C.learning_parameter_schedule(0.1))
        if through_function:
            loss.train(source, minibatch_size=2, max_epochs=2, epoch_size=4,
                       parameter_learners=[learner],
                       model_inputs_to_streams={x: source.streams.x, y: source.streams.y})
        else:
            trainer = C.Trainer(z, (loss, None), [learner])
            for _ in range(4):
                trainer.train_minibatch(source.next_minibatch(
                    2, input_map={x: source.streams.x, y: source.streams.y}))
        return z.parameters[0].value

    def fresh_ctf():
        return MinibatchSource(CTFDeserializer(str(path), StreamDefs(
            x=StreamDef(field='x', shape=2), y=StreamDef(field='y', shape=3, is_sparse=True))),
            randomize=False)

    def fresh_data():
        return MinibatchSourceFromData(dict(
            x=np.array([[i, i + 1] for i in range(4)], np.float32),
            y=sp.csr_matrix(np.eye(3, dtype=np.float32)[[i % 3 for i in range(4)]])))

    trained = [train(make(), through_function) for make in (fresh_ctf, fresh_data)
               for through_function in (False, True)]
    for w in trained[1:]:
        np.testing.assert_allclose(w, trained[0], rtol=1e-6)
