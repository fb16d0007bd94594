"""CNTK's crop ops: crop_manual's window, crop_automatic's offsets from the graph, and their
signatures and errors (loom/ops/crop.cpp; loom/ops/crop_test.cpp tests more cases)."""
import inspect

import numpy as np
import pytest

import loom as C


def test_signatures_are_cntks():
    assert str(inspect.signature(C.crop_manual)) == \
        "(node_input, node_referent, offset_x, offset_y, name='')"
    assert str(inspect.signature(C.crop_automatic)) == "(node_input, node_referent, name='')"
    assert str(inspect.signature(C.ops.crop_automatic_with_ancestors)) == \
        "(node_input, node_referent, ancestor_input, ancestor_referent, name='')"


def test_crop_manual_cuts_the_referents_extents_at_the_offsets():
    x = C.input_variable((2, 4, 5))
    ref = C.input_variable((1, 2, 3))
    X = np.arange(40, dtype=np.float32).reshape(1, 2, 4, 5)
    out = C.crop_manual(x, ref, 1, 2).eval({x: X, ref: np.zeros((1, 1, 2, 3), np.float32)})
    np.testing.assert_array_equal(out, X[:, :, 2:4, 1:4])


def test_crop_automatic_aligns_a_segmentation_networks_output_with_its_labels():
    # FCN's pattern: the score map of valid convolutions is smaller than the image; the labels
    # are cropped to it (with_ancestors: labels and image are separate inputs, aligned).
    image = C.input_variable((1, 10, 10))
    labels = C.input_variable((1, 10, 10))
    w = C.constant(np.ones((1, 1, 3, 3), np.float32))
    score = C.convolution(w, C.relu(C.convolution(w, image, auto_padding=[False])),
                          auto_padding=[False])
    assert score.shape == (1, 6, 6)
    cropped = C.ops.crop_automatic_with_ancestors(labels, score, labels, image)
    L = np.arange(100, dtype=np.float32).reshape(1, 1, 10, 10)
    I = L + 1  # the referent is an input of the crop, computed as CNTK computes it
    np.testing.assert_array_equal(cropped.eval({labels: L, image: I}), L[:, :, 2:8, 2:8])
    # The image itself crops without ancestors: its common ancestor with the score is itself.
    np.testing.assert_array_equal(C.crop_automatic(image, score).eval({image: I}),
                                  I[:, :, 2:8, 2:8])


def test_gradient_flows_to_the_window():
    x = C.input_variable((3, 3), needs_gradient=True)
    g = C.crop_manual(x, np.zeros((2, 2), np.float32), 0, 1).grad(
        {x: np.ones((1, 3, 3), np.float32)}, wrt=[x])
    np.testing.assert_array_equal(g[0], [[0, 0, 0], [1, 1, 0], [1, 1, 0]])


def test_bad_crops_are_refused():
    x = C.input_variable((1, 8, 8))
    with pytest.raises(C.ShapeError, match='does not fit'):
        C.crop_manual(x, np.zeros((3, 3), np.float32), 6, 0)
    other = C.input_variable((1, 4, 4))
    with pytest.raises(C.ArgumentError, match='no common ancestor'):
        C.crop_automatic(x, other)
    with pytest.raises(C.ArgumentError, match='Reshape'):
        C.crop_automatic(x, C.reshape(C.relu(x), (1, 8, 8)))
