"""CBFDeserializer (CNTK binary format) and Base64ImageDeserializer: CBF files written here from
CTF files by loom.io.ctf_to_cbf deliver the CTF reader's minibatches; base64 map files of images
encoded here deliver the ImageDeserializer's minibatches of the same image files."""
import base64
import random
import struct

import cv2
import numpy as np
import pytest

import loom as C
from loom.io import (Base64ImageDeserializer, CBFDeserializer, CTFDeserializer,
                     ImageDeserializer, MinibatchSource, StreamConfiguration, StreamDef,
                     StreamDefs, transforms)
from loom.io.ctf_to_cbf import ctf_to_cbf, main as ctf_to_cbf_main

SEQUENCES = 150


def write_ctf(path, seed=1):
    """x dense (dim 3) and y sparse (dim 50, 0 to 4 entries, ascending) on every line of a
    sequence, z dense (dim 1) on its first line only; comments now and then."""
    rng = random.Random(seed)
    lines = []
    for i in range(SEQUENCES):
        for t in range(rng.randint(1, 5)):
            line = f"{i} |x " + " ".join(f"{rng.uniform(-5, 5):.6g}" for _ in range(3))
            entries = sorted(rng.sample(range(50), rng.randint(0 if t else 1, 4)))
            if entries:
                line += " |y " + " ".join(f"{j}:{rng.uniform(0, 2):.5g}" for j in entries)
            if t == 0:
                line += f" |z {i}"
            if rng.random() < 0.1:
                line += " |# a comment"
            lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def ctf_streams():
    return StreamDefs(x=StreamDef(shape=3), y=StreamDef(shape=50, is_sparse=True),
                      z=StreamDef(shape=1))


def number_of_chunks(path):
    with open(path, 'rb') as f:
        data = f.read()
    (header,) = struct.unpack_from('<q', data, len(data) - 8)
    magic, chunks, streams = struct.unpack_from('<QII', data, header)
    assert magic == 0x636e746b5f62696e
    return chunks


def dense(data):
    """The minibatch's sequences, each a dense array without padding."""
    return [np.asarray(s.todense() if hasattr(s, 'todense') else s) for s in data.as_sequences()]


def expect_same(a, source_a, b, source_b, names=('x', 'y', 'z')):
    assert len(a) == len(b)
    if not a:
        return
    for name in names:
        da, db = a[source_a.stream_info(name)], b[source_b.stream_info(name)]
        assert (da.num_sequences, da.num_samples, da.end_of_sweep) == \
            (db.num_sequences, db.num_samples, db.end_of_sweep), name
        assert da.is_sparse == db.is_sparse, name
        np.testing.assert_array_equal(np.asarray(da.mask), np.asarray(db.mask), err_msg=name)
        sa, sb = dense(da), dense(db)
        assert len(sa) == len(sb) == da.num_sequences, name
        for x, y in zip(sa, sb):
            assert x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)


SIZES = [7, 19, 4, 30]


def test_cbf_from_ctf_gives_the_ctf_minibatches_in_order(tmp_path):
    ctf = write_ctf(tmp_path / 'a.ctf')
    cbf = str(tmp_path / 'a.cbf')
    assert ctf_to_cbf(ctf, cbf, ctf_streams(), chunk_size=600) == number_of_chunks(cbf)
    assert number_of_chunks(cbf) >= 8
    text = MinibatchSource(CTFDeserializer(ctf, ctf_streams()), randomize=False, max_sweeps=2)
    binary = MinibatchSource(CBFDeserializer(cbf), randomize=False, max_sweeps=2)
    assert binary.streams.y.is_sparse and binary.streams.x.shape == (3,)
    steps = 0
    while True:
        a, b = text.next_minibatch(SIZES[steps % 4]), binary.next_minibatch(SIZES[steps % 4])
        expect_same(a, text, b, binary)
        steps += 1
        if not a:
            break
    assert steps > 40  # two sweeps of about 450 samples


@pytest.mark.parametrize('seed', [0, 5])
def test_cbf_randomized_and_restored_as_ctf(tmp_path, seed):
    # One chunk each (ctf_to_cbf's and CTFDeserializer's default 32 MB), so the randomized
    # order is the same.
    ctf = write_ctf(tmp_path / 'a.ctf', seed=seed + 2)
    cbf = str(tmp_path / 'a.cbf')
    assert ctf_to_cbf(ctf, cbf, ctf_streams()) == 1
    make_text = lambda: MinibatchSource(CTFDeserializer(ctf, ctf_streams()),
                                        randomization_seed=seed)
    make_binary = lambda: MinibatchSource(CBFDeserializer(cbf), randomization_seed=seed)
    text, binary = make_text(), make_binary()
    for step in range(6):
        expect_same(text.next_minibatch(SIZES[step % 4]), text,
                    binary.next_minibatch(SIZES[step % 4]), binary)
    state = binary.get_checkpoint_state()
    restored = make_binary()
    restored.restore_from_checkpoint(state)
    for step in range(6, 60):  # into the third sweep
        expect_same(text.next_minibatch(SIZES[step % 4]), text,
                    restored.next_minibatch(SIZES[step % 4]), restored)


def test_cbf_chunks_randomized_sweep_every_sequence_once_and_restore(tmp_path):
    ctf = write_ctf(tmp_path / 'a.ctf')
    cbf = str(tmp_path / 'a.cbf')
    ctf_to_cbf(ctf, cbf, ctf_streams(), chunk_size=600)
    make = lambda: MinibatchSource(CBFDeserializer(cbf), randomization_seed=3,
                                   randomization_window_in_chunks=3, max_sweeps=1)
    source = make()
    ids, minibatches = [], []
    while True:
        mb = source.next_minibatch(25)
        if not mb:
            break
        ids += [int(s[0, 0]) for s in dense(mb[source.streams.z])]
        minibatches.append(mb)
    assert sorted(ids) == list(range(SEQUENCES)) and ids != sorted(ids)
    again = make()
    for _ in range(3):
        again.next_minibatch(25)
    restored = make()
    restored.restore_from_checkpoint(again.get_checkpoint_state())
    for mb in minibatches[3:]:
        expect_same(mb, source, restored.next_minibatch(25), restored)


def test_cbf_streams_rename_as_cntk_and_double_precision(tmp_path):
    ctf = write_ctf(tmp_path / 'a.ctf')
    cbf = str(tmp_path / 'a.cbf')
    # The file names its streams; CTF fields are the aliases (ctf2bin's header).
    ctf_to_cbf(ctf, cbf, ['features x dense 3', 'labels y sparse 50', 'id z dense 1'],
               precision='double')
    d = CBFDeserializer(cbf)
    assert [s.name for s in d.stream_infos] == ['features', 'labels', 'id']
    assert [s.dtype for s in d.stream_infos] == [np.float64] * 3
    renamed = CBFDeserializer(cbf, StreamDefs(a=StreamDef(field='features', shape=3),
                                              b=StreamDef(field='labels', is_sparse=True)))
    assert [s.name for s in renamed.stream_infos] == ['a', 'b', 'id']
    assert renamed.stream_infos[0].dtype == np.float32
    configured = CBFDeserializer(cbf, [StreamConfiguration('a', 3, stream_alias='features')])
    assert [s.name for s in configured.stream_infos] == ['a', 'labels', 'id']
    # Float64 values are the CTF file's numbers as doubles.
    text = MinibatchSource(CTFDeserializer(ctf, StreamDefs(
        features=StreamDef(field='x', shape=3, dtype=np.float64),
        labels=StreamDef(field='y', shape=50, is_sparse=True, dtype=np.float64),
        id=StreamDef(field='z', shape=1, dtype=np.float64))), randomize=False)
    binary = MinibatchSource(d, randomize=False)
    for _ in range(5):
        expect_same(text.next_minibatch(40), text, binary.next_minibatch(40), binary,
                    names=('features', 'labels', 'id'))
    with pytest.raises(ValueError, match="reads the field 'nope', which the file does not hold"):
        CBFDeserializer(cbf, StreamDefs(a=StreamDef(field='nope')))
    with pytest.raises(ValueError, match="has shape 4, but the file's stream 'features' has dim 3"):
        CBFDeserializer(cbf, StreamDefs(a=StreamDef(field='features', shape=4)))


def test_ctf_to_cbf_command_line_and_errors(tmp_path):
    ctf = write_ctf(tmp_path / 'a.ctf')
    header = tmp_path / 'header.txt'
    header.write_text('x x dense 3\ny y sparse 50\nz z dense 1\n')
    ctf_to_cbf_main(['--input', ctf, '--header', str(header), '--chunk_size', '600',
                     '--output', str(tmp_path / 'cli.cbf')])
    ctf_to_cbf(ctf, str(tmp_path / 'api.cbf'), ctf_streams(), chunk_size=600)
    assert (tmp_path / 'cli.cbf').read_bytes() == (tmp_path / 'api.cbf').read_bytes()
    bad = tmp_path / 'bad.ctf'
    bad.write_text('0 |x 1 2 3\n1 |x 1 2\n')
    with pytest.raises(ValueError, match=r"bad.ctf line 2: stream 'x' has dim 3"):
        ctf_to_cbf(str(bad), str(tmp_path / 'bad.cbf'), ctf_streams())
    bad.write_text('0 |x 1 2 3\n1 |w 1\n')
    with pytest.raises(ValueError, match=r"line 2: the field 'w' is not a stream"):
        ctf_to_cbf(str(bad), str(tmp_path / 'bad.cbf'), ctf_streams())
    bad.write_text('0 |y 50:1\n')
    with pytest.raises(ValueError, match=r"line 1: sparse stream 'y' has dim 50, index 50"):
        ctf_to_cbf(str(bad), str(tmp_path / 'bad.cbf'), ctf_streams())


def test_damaged_cbf_files_raise_data_errors_with_offsets(tmp_path):
    ctf = write_ctf(tmp_path / 'a.ctf')
    good = tmp_path / 'a.cbf'
    ctf_to_cbf(ctf, str(good), ctf_streams(), chunk_size=600)
    data = good.read_bytes()
    cut = tmp_path / 'cut.cbf'
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(C.DataError, match=r"cut.cbf\) is damaged or cut short: .*byte offset"):
        CBFDeserializer(str(cut))
    wrong = tmp_path / 'wrong.cbf'
    wrong.write_bytes(b'x' + data[1:])
    with pytest.raises(C.DataError, match="not a CNTK binary format file"):
        CBFDeserializer(str(wrong))
    # The header's stream count says 2^32 - 1: refused by the bytes left, before allocating.
    (header,) = struct.unpack_from('<q', data, len(data) - 8)
    huge = bytearray(data)
    struct.pack_into('<I', huge, header + 12, 0xFFFFFFFF)
    (tmp_path / 'huge.cbf').write_bytes(bytes(huge))
    with pytest.raises(C.DataError, match=rf"expected the headers of 4294967295 streams "
                       rf"\(number at byte offset {header + 12}\)"):
        CBFDeserializer(str(tmp_path / 'huge.cbf'))
    with pytest.raises(C.IOError, match='none.cbf'):
        CBFDeserializer(str(tmp_path / 'none.cbf'))


# Images: 8 of 37 x 29 pixels, color, each with its own pattern; PNG and JPEG alike.
def write_images(folder, extension):
    rng = np.random.default_rng(4)
    lines = []
    for i in range(8):
        image = rng.integers(0, 256, (29, 37, 3), dtype=np.uint8)
        image[:, : 3 * i + 2] //= 2
        assert cv2.imwrite(str(folder / f"{i}{extension}"), image)
        lines.append(f"{i}{extension}\t{i % 5}\n")
    map_file = folder / f"map{extension}.txt"
    map_file.write_text("".join(lines))
    return str(map_file)


def write_base64_map(map_file, path, keys):
    folder = path.parent
    lines = []
    for i, line in enumerate(open(map_file).read().splitlines()):
        name, label = line.split('\t')
        encoded = base64.b64encode((folder / name).read_bytes()).decode('ascii')
        lines.append((f"key{i}\t" if keys else "") + f"{label}\t{encoded}\n")
    path.write_text("".join(lines))
    return str(path)


def image_streams():
    return StreamDefs(
        features=StreamDef(field='image', transforms=[
            transforms.crop(crop_type='randomside', side_ratio=(0.6, 0.9), jitter_type='uniratio'),
            transforms.scale(width=24, height=20, channels=3),
            transforms.color(brightness_radius=0.2, contrast_radius=0.2, saturation_radius=0.2)]),
        labels=StreamDef(field='label', shape=5))


@pytest.mark.parametrize('extension,keys', [('.png', False), ('.jpg', True)])
def test_base64_images_give_the_image_files_minibatches(tmp_path, extension, keys):
    map_file = write_images(tmp_path, extension)
    b64 = write_base64_map(map_file, tmp_path / 'map.b64', keys)
    make = lambda d: MinibatchSource(d, randomization_seed=4)
    files = make(ImageDeserializer(map_file, image_streams()))
    encoded = make(C.io.Base64ImageDeserializer(b64, image_streams()))
    assert encoded.streams.features.shape == (3, 20, 24)
    for step in range(6):  # 6 x 5 images: almost 4 sweeps, random crops and colors in each
        a, b = files.next_minibatch(5), encoded.next_minibatch(5)
        expect_same(a, files, b, encoded, names=('features', 'labels'))
    state = encoded.get_checkpoint_state()
    restored = make(Base64ImageDeserializer(b64, image_streams()))
    restored.restore_from_checkpoint(state)
    for step in range(4):
        expect_same(files.next_minibatch(5), files, restored.next_minibatch(5), restored,
                    names=('features', 'labels'))


def test_bad_base64_line_names_file_and_line(tmp_path):
    map_file = write_images(tmp_path, '.png')
    b64 = tmp_path / 'map.b64'
    write_base64_map(map_file, b64, keys=False)
    lines = b64.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:10] + '!' + lines[1][11:]
    b64.write_text("".join(lines))
    with pytest.raises(C.DataError, match=r"Base64ImageDeserializer: the base64 image has '!' "
                       r"\(character 9 of the image\), which is not base64 in line 2 of the map "
                       r"file \(.*map.b64\)"):
        Base64ImageDeserializer(str(b64), image_streams())
    skipping = Base64ImageDeserializer(str(b64), image_streams(), max_errors=1)
    assert skipping.number_of_skipped == 1
