"""CNTK's CTC criterion: labels_to_graph and forward_backward (loom/ops/ctc.cpp; loom/ops/
ctc_test.cpp tests the alignments, gradients and errors further). The labels are CNTK's
frame-aligned one-hot rows: 2 where a label starts, 1 on its later frames."""
import inspect

import numpy as np
import pytest

import loom as C


def frame_aligned(tokens, starts, frames, classes):
    """CNTK's label rows for tokens starting at the given frames, each held (value 1) until the
    next one starts; frames before the first label are zero."""
    rows = np.zeros((frames, classes), np.float32)
    for k, (token, start) in enumerate(zip(tokens, starts)):
        end = starts[k + 1] if k + 1 < len(starts) else frames
        rows[start:end, token] = 1
        rows[start, token] = 2
    return rows


def ctc(classes, blank, delay=-1, dtype=np.float32):
    labels = C.sequence.input_variable(classes, dtype=dtype, name='labels')
    z = C.sequence.input_variable(classes, dtype=dtype, needs_gradient=True, name='z')
    return labels, z, C.forward_backward(C.labels_to_graph(labels), z, blank, delay)


def test_signatures_are_cntks():
    assert str(inspect.signature(C.labels_to_graph)) == "(labels, name='')"
    assert str(inspect.signature(C.forward_backward)) == \
        "(graph, features, blankTokenId, delayConstraint=-1, name='')"
    assert C.ops.labels_to_graph is C.labels_to_graph
    assert C.ops.forward_backward is C.forward_backward


def test_keyword_arguments_and_the_scalar_output_of_the_minibatch():
    labels = C.sequence.input_variable(4)
    z = C.sequence.input_variable(4)
    fb = C.forward_backward(C.labels_to_graph(labels), z, blankTokenId=3, delayConstraint=2,
                            name='ctc')
    assert fb.name == 'ctc'
    assert fb.shape == ()
    assert not fb.output.dynamic_axes
    # CNTK's docstring example: the labels of a shorter transcription padded to the features'
    # length by repeating the last label with the value 1. The value is CNTK's: one number for
    # the minibatch, the sum of its sequences' losses.
    L = frame_aligned([0, 2, 1], [0, 1, 2], 6, 4)
    Z = np.zeros((6, 4), np.float32)
    one = fb.eval({labels: [L], z: [Z]})
    assert np.shape(one) == ()
    np.testing.assert_allclose(fb.eval({labels: [L, L], z: [Z, Z]}), 2 * one, rtol=1e-6)


def test_values_and_gradients_match_torchs_ctc_loss():
    torch = pytest.importorskip('torch')
    classes, blank = 5, 4
    rng = np.random.default_rng(7)
    seqs = [([0, 1, 1], [0, 2, 5], 7), ([3], [1], 3), ([2, 0, 3, 1], [0, 1, 2, 3], 4),
            ([], [], 2)]
    labels, z, fb = ctc(classes, blank, dtype=np.float64)
    Z = [rng.normal(size=(frames, classes)) for _, _, frames in seqs]
    L = [frame_aligned(t, s, f, classes).astype(np.float64) for t, s, f in seqs]
    out = fb.eval({labels: L, z: Z})
    grads = fb.grad({labels: L, z: Z}, wrt=[z])
    total = 0.0
    for b, (tokens, _, frames) in enumerate(seqs):
        zt = torch.tensor(Z[b], requires_grad=True)
        loss = torch.nn.functional.ctc_loss(
            zt.log_softmax(1)[:, None, :], torch.tensor([tokens], dtype=torch.long),
            [frames], [len(tokens)], blank=blank, reduction='sum')
        loss.backward()
        total += loss.item()
        np.testing.assert_allclose(np.asarray(grads[b]).reshape(frames, classes),
                                   zt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(out, total, rtol=1e-10)


def test_delay_constraint_keeps_the_alignments_near_the_label_positions():
    # With the constraint, fewer alignments count: the loss is larger; a generous one is none.
    classes, blank = 3, 2
    L = frame_aligned([0, 1], [0, 1], 6, classes)
    Z = np.random.default_rng(3).normal(size=(6, classes)).astype(np.float32)
    losses = {}
    for delay in [-1, 0, 1, 10]:
        labels, z, fb = ctc(classes, blank, delay)
        losses[delay] = float(fb.eval({labels: [L], z: [Z]}))
    assert losses[0] > losses[1] > losses[-1]
    assert losses[10] == pytest.approx(losses[-1], rel=1e-6)


def test_a_ctc_model_learns_with_a_trainer_and_edit_distance():
    # Frames of noisy features of three different tokens, each held 2 or 3 frames and followed by
    # a blank frame; the model is one dense layer. CNTK's tutorial pairs the criterion with
    # edit_distance_error of the squashed labels, blanks ignored.
    classes, blank, dim = 4, 3, 6
    rng = np.random.default_rng(0)
    embedding = rng.normal(size=(classes, dim)).astype(np.float32)

    def minibatch():
        features, labels = [], []
        for _ in range(8):
            tokens = list(rng.permutation(blank))
            frames_per = rng.integers(2, 4, size=3)
            path = np.concatenate([[t] * n + [blank] for t, n in zip(tokens, frames_per)])
            starts = np.cumsum(np.concatenate([[0], frames_per[:-1] + 1]))
            noise = 0.1 * rng.normal(size=(len(path), dim))
            features.append((embedding[path] + noise).astype(np.float32))
            labels.append(frame_aligned(tokens, list(starts), len(path), classes))
        return {x: features, labels_var: labels}

    x = C.sequence.input_variable(dim)
    labels_var = C.sequence.input_variable(classes)
    z = C.layers.Dense(classes)(x)
    criterion = C.forward_backward(C.labels_to_graph(labels_var), z, blankTokenId=blank)
    error = C.edit_distance_error(z, labels_var, squashInputs=True, tokensToIgnore=[blank])
    trainer = C.Trainer(z, (criterion, error), [C.sgd(z.parameters, 1.0)])
    error_before = trainer.test_minibatch(minibatch())
    losses = []
    for _ in range(60):
        trainer.train_minibatch(minibatch())
        losses.append(trainer.previous_minibatch_loss_average)
    assert np.mean(losses[-5:]) < 0.25 * np.mean(losses[:5])
    assert trainer.test_minibatch(minibatch()) < min(0.1, error_before)


def test_bad_inputs_raise_errors_naming_the_op():
    labels = C.sequence.input_variable(4)
    z = C.sequence.input_variable(4)
    with pytest.raises(C.ArgumentError, match='forward_backward: graph .* labels_to_graph'):
        C.forward_backward(labels, z, 3)
    with pytest.raises(C.ArgumentError, match='blankTokenId 4'):
        C.forward_backward(C.labels_to_graph(labels), z, 4)
    with pytest.raises(C.ShapeError, match='same dynamic axes'):
        C.forward_backward(C.labels_to_graph(labels), C.input_variable(4), 3)
    with pytest.raises(TypeError):
        C.forward_backward(C.labels_to_graph(labels), z)  # blankTokenId is required
    fb = C.forward_backward(C.labels_to_graph(labels), z, 3)
    Z = np.zeros((2, 4), np.float32)
    with pytest.raises(C.DataError, match='no alignment'):
        fb.eval({labels: [frame_aligned([1, 1], [0, 1], 2, 4)], z: [Z]})
    with pytest.raises(C.DataError, match='blank'):
        fb.eval({labels: [frame_aligned([3], [0], 2, 4)], z: [Z]})
