"""ImageDeserializer and loom.io.transforms: seed 002's create_image_reader on PNG files written
here, the transforms' effect on the pixels, and errors for bad transform arguments."""
import cv2
import numpy as np
import pytest

import loom as cntk

W, H = 48, 40
COLORS = [(10, 20, 30), (200, 100, 0), (0, 255, 128)]  # BGR


def write_images(folder):
    """Three images of one color each (labels 0-2) and a horizontal ramp 0..255 (label 3)."""
    images = [np.full((H, W, 3), c, np.uint8) for c in COLORS]
    ramp = np.tile(np.linspace(0, 255, W).round().astype(np.uint8)[None, :, None], (H, 1, 3))
    images.append(ramp)
    lines = []
    for i, image in enumerate(images):
        assert cv2.imwrite(str(folder / f"{i}.png"), image)
        lines.append(f"{i}.png\t{i}\n")
    map_file = folder / "map.txt"
    map_file.write_text("".join(lines))
    return str(map_file)


# Seed 002's reader, as the seed writes it.
image_width, image_height, num_channels = (32, 32, 3)
num_classes = 1000
def create_image_reader(map_file, is_training):
    transforms = []
    if is_training:  # train uses data augmentation (translation only)
        transforms += [
            cntk.io.transforms.crop(crop_type='randomside', side_ratio=0.8)  # random translation+crop
        ]
    transforms += [  # to fixed size
        cntk.io.transforms.scale(width=image_width, height=image_height, channels=num_channels, interpolations='linear'),
    ]
    # deserializer
    return cntk.io.MinibatchSource(cntk.io.ImageDeserializer(map_file, cntk.io.StreamDefs(
        features = cntk.io.StreamDef(field='image', transforms=transforms),
        labels   = cntk.io.StreamDef(field='label', shape=num_classes)
    )), randomize=is_training, max_sweeps = cntk.io.INFINITELY_REPEAT if is_training else 1)


def test_seed_002_image_reader_for_testing(tmp_path):
    reader = create_image_reader(write_images(tmp_path), is_training=False)
    assert not reader.is_infinite()
    assert reader.streams.features.shape == (3, 32, 32) and reader.streams.labels.is_sparse
    mb = reader.next_minibatch(4)
    features, labels = mb[reader.streams.features], mb[reader.streams.labels]
    assert features.number_of_samples == 4
    images = np.asarray(features.asarray()).reshape(4, 3, 32, 32)
    for image, color in zip(images, COLORS):  # channels in OpenCV's BGR order, as CNTK
        np.testing.assert_array_equal(image, np.asarray(color, np.float32)[:, None, None]
                                      * np.ones((1, 32, 32), np.float32))
    ramp = images[3][0, 0]
    assert ramp[0] < 5 and ramp[-1] > 250 and np.all(np.diff(ramp) >= 0)
    assert np.asarray(labels.asarray()).reshape(4, num_classes).argmax(axis=1).tolist() == [0, 1, 2, 3]
    assert reader.next_minibatch(4) == {}  # max_sweeps=1


def test_seed_002_image_reader_for_training_crops_randomly(tmp_path):
    reader = create_image_reader(write_images(tmp_path), is_training=True)
    assert reader.is_infinite()
    spans = []
    for _ in range(5):
        mb = reader.next_minibatch(4)
        images = np.asarray(mb[reader.streams.features].asarray()).reshape(4, 3, 32, 32)
        labels = np.asarray(mb[reader.streams.labels].asarray()).reshape(4, -1).argmax(axis=1)
        for image, label in zip(images, labels):
            if label < 3:  # a crop of a plain image is the same plain image
                assert np.all(image == np.asarray(COLORS[label], np.float32)[:, None, None])
            else:  # a crop of 80 % of the shorter side: about 32 of the ramp's 48 columns,
                row = image[0, 0]  # flipped left to right at random (CNTK's random crops do)
                spans.append(row[-1] - row[0])
    assert len(spans) == 5
    assert all(120 < abs(s) < 200 for s in spans), spans


def test_mean_and_color_transforms(tmp_path):
    map_file = write_images(tmp_path)
    mean_file = str(tmp_path / "mean.xml")
    fs = cv2.FileStorage(mean_file, cv2.FILE_STORAGE_WRITE)
    fs.write("Channel", 3)
    fs.write("Row", 8)
    fs.write("Col", 8)
    fs.write("MeanImg", np.full((1, 3 * 8 * 8), 10, np.float32))
    fs.release()

    def first_image(*transforms):
        d = cntk.io.ImageDeserializer(map_file, cntk.io.StreamDefs(
            features=cntk.io.StreamDef(field='image', transforms=list(transforms)),
            labels=cntk.io.StreamDef(field='label', shape=4)))
        reader = cntk.io.MinibatchSource(d, randomize=False, max_sweeps=1)
        mb = reader.next_minibatch(1)
        return np.asarray(mb[reader.streams.features].asarray()).reshape(3, 8, 8)

    scale = cntk.io.transforms.scale(8, 8, 3, interpolations='nearest')
    plain = first_image(scale)
    np.testing.assert_array_equal(first_image(scale, cntk.io.transforms.mean(mean_file)),
                                  plain - 10)
    # Contrast only: pixels * (1 + c) with c in [-0.5, 0.5], one c per image.
    colored = first_image(scale, cntk.io.transforms.color(contrast_radius=0.5))
    factor = colored / plain
    assert np.allclose(factor, factor.flat[0], atol=1e-3) and 0.5 <= factor.flat[0] <= 1.5


def test_bad_transform_arguments_are_errors_naming_them(tmp_path):
    with pytest.raises(ValueError, match="crop_type is one of 'center', 'randomside', "
                                         "'randomarea', 'multiview10', not 'multiview'"):
        cntk.io.transforms.crop(crop_type='multiview')
    with pytest.raises(ValueError, match="jitter_type is one of 'none', 'uniratio', "
                                         "'unilength', 'uniarea', not 'unisize'"):
        cntk.io.transforms.crop(jitter_type='unisize')
    with pytest.raises(ValueError, match="scale_mode"):
        cntk.io.transforms.scale(8, 8, 3, scale_mode='stretch')
    map_file = write_images(tmp_path)
    no_scale = cntk.io.StreamDefs(
        features=cntk.io.StreamDef(field='image', transforms=[cntk.io.transforms.crop()]),
        labels=cntk.io.StreamDef(field='label', shape=4))
    with pytest.raises(cntk.ArgumentError, match="scale"):
        cntk.io.ImageDeserializer(map_file, no_scale)
    (tmp_path / "bad_map.txt").write_text("0.png\t7\n")
    with pytest.raises(cntk.DataError, match="bad_map.txt"):
        cntk.io.ImageDeserializer(str(tmp_path / "bad_map.txt"), cntk.io.StreamDefs(
            features=cntk.io.StreamDef(field='image',
                                       transforms=[cntk.io.transforms.scale(8, 8, 3)]),
            labels=cntk.io.StreamDef(field='label', shape=4)))


def position_reader(tmp_path, *transforms, count=1):
    """A source over `count` lines of one 40 x 30 image whose blue is the column and green the
    row (red 128), read in order once."""
    image = np.full((30, 40, 3), 128, np.uint8)
    image[:, :, 0] = np.arange(40)[None, :]
    image[:, :, 1] = np.arange(30)[:, None]
    assert cv2.imwrite(str(tmp_path / "position.png"), image)
    map_file = tmp_path / "position_map.txt"
    map_file.write_text("position.png\t0\n" * count)
    return cntk.io.MinibatchSource(cntk.io.ImageDeserializer(str(map_file), cntk.io.StreamDefs(
        features=cntk.io.StreamDef(field='image', transforms=list(transforms)),
        labels=cntk.io.StreamDef(field='label', shape=2))), randomize=False, max_sweeps=1)


def images_of(reader, n, width, height):
    mb = reader.next_minibatch(n)
    return np.asarray(mb[reader.streams.features].asarray()).reshape(n, 3, height, width)


def test_crop_size_multiview10_jitters_and_intensity_take_cntks_keywords(tmp_path):
    def scale(width, height):
        return cntk.io.transforms.scale(width=width, height=height, channels=3,
                                        interpolations='nearest')

    # A 20 x 10 centre crop: columns 10..29, rows 10..19.
    crop = cntk.io.transforms.crop(crop_type='center', crop_size=(20, 10), side_ratio=0.0,
                                   area_ratio=0.0, aspect_ratio=1.0, jitter_type='none')
    image = images_of(position_reader(tmp_path, crop, scale(20, 10)), 1, 20, 10)[0]
    np.testing.assert_array_equal(image[0], np.tile(np.arange(10, 30), (10, 1)))
    np.testing.assert_array_equal(image[1], np.tile(np.arange(10, 20)[:, None], (1, 20)))
    # multiview10 with a square crop_size: each line gives 10 views, corners then centre,
    # then the same flipped.
    views = images_of(position_reader(tmp_path, cntk.io.transforms.crop(
        crop_type='multiview10', crop_size=16), scale(16, 16)), 10, 16, 16)
    first_columns = [int(v[0, 0, 0]) for v in views]
    first_rows = [int(v[1, 0, 0]) for v in views]
    assert first_columns == [0, 24, 0, 24, 12, 15, 39, 15, 39, 27]
    assert first_rows == [0, 0, 14, 14, 7] * 2
    # A random crop of crop_size lies inside the image.
    for v in images_of(position_reader(tmp_path, cntk.io.transforms.crop(
            crop_type='randomside', crop_size=16), scale(16, 16), count=8), 8, 16, 16):
        columns = sorted((int(v[0, 0, 0]), int(v[0, 0, -1])))
        assert columns[1] - columns[0] == 15 and 0 <= columns[0] and columns[1] <= 39
    # unilength and uniarea jitter the side and the area.
    for jitter_type in ('unilength', 'uniarea'):
        for v in images_of(position_reader(tmp_path, cntk.io.transforms.crop(
                crop_type='randomarea', area_ratio=(0.25, 1.0), jitter_type=jitter_type),
                scale(40, 30), count=4), 4, 40, 30):
            side = abs(int(v[0, 0, -1]) - int(v[0, 0, 0])) + 1
            assert 17 <= side <= 30
    # intensity: stdev 0 changes nothing; otherwise one shift per color.
    intensity_file = str(tmp_path / "eigen.xml")
    fs = cv2.FileStorage(intensity_file, cv2.FILE_STORAGE_WRITE)
    fs.write("EigVal", np.array([[1, 0, 0]], np.float32))
    fs.write("EigVec", np.array([[1, 0, 0], [2, 0, 0], [3, 0, 0]], np.float32))
    fs.release()
    plain = images_of(position_reader(tmp_path, scale(40, 30)), 1, 40, 30)[0]
    still = images_of(position_reader(tmp_path, scale(40, 30), cntk.io.transforms.intensity(
        intensity_stdev=0.0, intensity_file=intensity_file)), 1, 40, 30)[0]
    np.testing.assert_array_equal(still, plain)
    lit = images_of(position_reader(tmp_path, scale(40, 30), cntk.io.transforms.intensity(
        intensity_stdev=2.0, intensity_file=intensity_file)), 1, 40, 30)[0]
    a = lit[2, 0, 0] - plain[2, 0, 0]  # red gets a, green 2a, blue 3a, kept in [0, 255]
    assert a != 0
    for channel, factor in ((0, 3), (1, 2), (2, 1)):
        np.testing.assert_allclose(lit[channel], np.clip(plain[channel] + factor * a, 0, 255),
                                   atol=1e-3)
    # Options that contradict each other, and a missing intensity file, fail when the
    # deserializer is made.
    with pytest.raises(cntk.ArgumentError, match="crop_size"):
        position_reader(tmp_path, cntk.io.transforms.crop(crop_size=10, side_ratio=0.5),
                        scale(8, 8))
    with pytest.raises(cntk.ArgumentError, match="multiview10"):
        position_reader(tmp_path, cntk.io.transforms.crop(
            crop_type='multiview10', side_ratio=(0.5, 0.8), jitter_type='uniratio'), scale(8, 8))
    with pytest.raises(cntk.IOError, match="missing.xml"):
        position_reader(tmp_path, scale(8, 8), cntk.io.transforms.intensity(
            1.0, str(tmp_path / "missing.xml")))
