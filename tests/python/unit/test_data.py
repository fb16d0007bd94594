"""Conversions between numpy/scipy data and Loom's values: without copies where the layout
allows, sequences as lists, sparse matrices, one-hot values, errors naming the argument."""
import numpy as np
import pytest
import scipy.sparse

import loom as C


def test_float32_c_contiguous_input_is_not_copied():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    v = C.Value(batch=a)
    assert np.shares_memory(np.asarray(v.data), a)
    # Another layout or dtype is converted.
    strided = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    assert not np.shares_memory(np.asarray(C.Value(batch=strided).data), strided)
    ints = C.Value(batch=np.arange(4).reshape(2, 2))
    assert ints.dtype == np.float32 and np.asarray(ints.data).tolist() == [[0, 1], [2, 3]]


def test_eval_returns_numpy_without_a_copy_of_the_output():
    x = C.input_variable(3)
    out = (x * 2).eval({x: np.ones((4, 3), np.float32)})
    assert isinstance(out, np.ndarray) and out.shape == (4, 3) and out.dtype == np.float32
    assert not out.flags.owndata
    np.testing.assert_array_equal(out, 2 * np.ones((4, 3)))


def test_one_sample_or_a_batch_and_float64():
    x = C.input_variable(2, dtype=np.float64)
    f = x + 1
    assert f.eval({x: np.array([1.0, 2.0])}).tolist() == [[2.0, 3.0]]
    assert f.eval(np.array([[1, 2], [3, 4]])).tolist() == [[2, 3], [4, 5]]
    assert f.eval([1.0, 2.0]).dtype == np.float64


def test_sequences_of_different_lengths_in_and_out():
    x = C.sequence.input_variable(2)
    seqs = [np.ones((3, 2), np.float32), 2 * np.ones((1, 2), np.float32)]
    out = (x * 3).eval({x: seqs})
    assert isinstance(out, list) and [o.shape for o in out] == [(3, 2), (1, 2)]
    np.testing.assert_array_equal(out[1], [[6, 6]])
    last = C.sequence.last(x).eval({x: seqs})
    np.testing.assert_array_equal(last, [[1, 1], [2, 2]])


def test_packed_sequence_outputs_are_gathered_per_sequence():
    # An evaluation's sequence outputs are packed (time-major, longest first): each sequence is
    # gathered from the rows into an array of its own, as a padded Value's are from its padded
    # array; both give the padded array's sequences.
    x = C.sequence.input_variable((2, 2))
    seqs = [np.arange(k * 4, dtype=np.float32).reshape(k, 2, 2) + 10 * k for k in (2, 3, 0, 1)]
    f = x * 3
    out = f.eval({x: seqs})
    assert [o.shape for o in out] == [(2, 2, 2), (3, 2, 2), (0, 2, 2), (1, 2, 2)]
    for o, s in zip(out, seqs):
        np.testing.assert_array_equal(o, 3 * s)
    assert out[0].base is not out[1].base
    value = f.eval({x: seqs}, as_numpy=False)
    with pytest.warns(UserWarning, match='ignore the mask'):
        padded = value.asarray()
    assert padded.shape == (4, 3, 2, 2)
    for o, s, n in zip(value.as_sequences(), padded, (2, 3, 0, 1)):
        np.testing.assert_array_equal(o, s[:n])
        assert not s[n:].any()  # zero padding


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_a_packed_values_shape_is_the_padded_one(dtype):
    # Value.shape and MinibatchData.shape give [sequences, longest, sample...] from the lengths
    # (a packed Value is not padded to report them).
    x = C.sequence.input_variable((2, 3), dtype=dtype)
    seqs = [np.ones((k, 2, 3), dtype) for k in (2, 0, 5, 1)]
    value = (x * 2).eval({x: seqs}, as_numpy=False)
    given = C.Value(batch=seqs)
    for v in (value, given):
        assert v.shape == (4, 5, 2, 3)
        assert v.device == C.device.cpu()
        assert C.io.MinibatchData(v, 4, 8, False).shape == (4, 5, 2, 3)
        with pytest.warns(UserWarning, match='ignore the mask'):
            assert v.asarray().shape == v.shape
    assert C.Value(batch=[np.ones((0, 2), dtype)] * 3).shape == (3, 0, 2)
    assert C.Value(batch=np.ones((4, 2), dtype)).shape == (4, 2)


def test_csr_matrix_and_one_hot_values():
    y = C.input_variable(4, is_sparse=True)
    W = C.parameter(init=np.arange(8, dtype=np.float32).reshape(4, 2))
    f = C.times(y, W)
    labels = scipy.sparse.csr_matrix((np.ones(3, np.float32), ([0, 1, 2], [3, 0, 1])),
                                     shape=(3, 4))
    np.testing.assert_array_equal(f.eval({y: labels}), [[6, 7], [0, 1], [2, 3]])
    np.testing.assert_array_equal(f.eval({y: labels[1:]}), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(f.eval({y: C.Value.one_hot([3, 0, 1], 4)}),
                                  [[6, 7], [0, 1], [2, 3]])
    s = C.sequence.input_variable(4, is_sparse=True)
    g = C.sequence.reduce_sum(C.times(s, W))
    np.testing.assert_array_equal(g.eval({s: C.Value.one_hot([[3, 0], [1]], 4)}),
                                  [[6, 8], [2, 3]])


def test_several_outputs_give_a_dict():
    x = C.input_variable(2)
    f = C.combine([x + 1, x * 2])
    out = f.eval({x: np.array([[1, 2]], np.float32)})
    assert sorted(v.tolist() for v in out.values()) == [[[2, 3]], [[2, 4]]]


def test_minibatch_source_from_data_reads_numpy_in_order():
    X = np.arange(10, dtype=np.float32).reshape(5, 2)
    Y = scipy.sparse.csr_matrix(np.eye(5, 3, dtype=np.float32))
    source = C.io.MinibatchSourceFromData(dict(x=X, y=Y), max_sweeps=1)
    x = C.input_variable(2)
    mb = source.next_minibatch(3, {x: source['x']})
    assert mb[x].number_of_samples == 3
    np.testing.assert_array_equal(mb[x].asarray(), X[:3])
    rest = source.next_minibatch(3)
    assert rest[source.streams.y].number_of_samples == 2
    assert source.next_minibatch(3) == {}


def test_wrong_shape_names_the_argument_and_both_shapes():
    x = C.input_variable(3, name='features')
    with pytest.raises(C.ShapeError) as e:
        (x + 1).eval({x: np.ones((2, 4), np.float32)})
    message = str(e.value)
    assert 'features' in message and '[2,4]' in message and '[3]' in message
    assert isinstance(e.value, ValueError)


def test_data_that_are_not_numbers_are_a_type_error_naming_the_argument():
    x = C.input_variable(2, name='features')
    with pytest.raises(TypeError, match='features'):
        (x + 1).eval({x: np.array(['a', 'b'])})
    with pytest.raises(TypeError):
        C.input_variable(2, dtype=np.int32)


def test_dense_data_for_a_sparse_input_is_an_error():
    y = C.input_variable(4, is_sparse=True, name='labels')
    W = C.parameter(init=np.ones((4, 2), np.float32))
    with pytest.raises(C.Error, match='labels'):
        C.times(y, W).eval({y: np.eye(4, dtype=np.float32)})


def test_parameter_values_are_copies_and_assignable():
    p = C.parameter(shape=(2, 2), init=1.0)
    v = p.value
    v[0, 0] = 5
    assert p.value[0, 0] == 1
    p.value = np.full((2, 2), 3, np.float32)
    assert p.value.tolist() == [[3, 3], [3, 3]]
    with pytest.raises(C.ShapeError):
        p.value = np.ones((3, 2), np.float32)


def test_idx_deserializer_reads_fashion_mnist():
    folder = '/usr/share/datasets/fashion-mnist/'
    source = C.io.MinibatchSource(C.io.IDXDeserializer(C.io.StreamDefs(
        features=C.io.IDXStreamDef(folder + 't10k-images-idx3-ubyte.gz', scale=1 / 255),
        labels=C.io.IDXStreamDef(folder + 't10k-labels-idx1-ubyte.gz', num_classes=10,
                                 is_sparse=True))), randomize=False, max_sweeps=1)
    assert source['features'].shape == (28, 28) and source['labels'].is_sparse
    x, y = C.input_variable((28, 28)), C.input_variable(10, is_sparse=True)
    mb = source.next_minibatch(100, {x: source['features'], y: source['labels']})
    images = mb[x].asarray()  # a file's samples come as sequences of one step, as CNTK's do
    assert images.shape == (100, 1, 28, 28) and 0 <= images.min() and images.max() <= 1
    assert mb[y].asarray().sum(axis=2).tolist() == [[1]] * 100
