"""CNTK's published tutorials (CNTK 2.7's Tutorials/) run under Loom with only the import changed
(each script's header says where it comes from and what else changed: plotting left out, the
shortened loops, the data): 101, 102, NumpyInterop/FeedForwardNet.py and 106A on numpy's
synthetic data; 105 and 206A on Debian's Fashion-MNIST in place of MNIST; 202 on CNTK's ATIS
files (data/atis.tar.xz: Tutorials/SLUHandsOn/atis.{train,test}.ctf and
Examples/LanguageUnderstanding/ATIS/BrainScript/{query,slots,intent}.wl of CNTK 2.7). Each test
asserts what the notebook prints:

- A number that does not depend on random initialisation (the data, drawn from numpy with the
  notebook's seed; a zero-initialised model's first minibatch; a learning rate; a parameter
  count; a progress table's sample counts) exactly.
- A number that does, within a band of the notebook's printed value, justified at each
  assertion: Loom's initialisers and randomizer draw other numbers than CNTK's.

Loom's gaps that the tutorials meet are expected failures (pytest.xfail naming the gap) that pass
once the gap is closed."""
import ast
import math
import os
import re
import subprocess
import sys
import tarfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def run(script, cwd):
    result = subprocess.run([sys.executable, os.path.join(HERE, script)], cwd=cwd,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


# The labels of the test minibatch of CNTK 101 and 102 (numpy's data with the notebooks' seed),
# and the classes the notebooks' trained models predict for it.
LABELS = "Label    : [1, 0, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1]"
PREDICTED = [1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1]

# CNTK 101's printed progress: minibatch -> (loss, error).
PROGRESS_101 = {0: (0.6931, 0.32), 50: (1.9350, 0.36), 100: (1.0764, 0.32), 150: (0.4856, 0.20),
                200: (0.1319, 0.08), 250: (0.1330, 0.08), 300: (0.1012, 0.04),
                350: (0.1091, 0.04), 400: (0.3094, 0.08), 450: (0.3230, 0.12),
                500: (0.3986, 0.20), 550: (0.6744, 0.24), 600: (0.3004, 0.12),
                650: (0.1676, 0.12), 700: (0.2777, 0.12), 750: (0.2311, 0.04)}


def predicted(line):
    assert line.startswith("Predicted: ["), line
    return [int(c) for c in line[len("Predicted: ["):-1].split(", ")]


def test_cntk_101_logistic_regression(tmp_path):
    out = run("cntk_101_logistic_regression.py", tmp_path)
    progress = [re.fullmatch(r"Minibatch: (\d+), Loss: (\d+\.\d{4}), Error: (\d\.\d\d)", l)
                for l in out[:16]]
    assert all(progress), out[:16]
    progress = {int(m[1]): (float(m[2]), float(m[3])) for m in progress}
    assert sorted(progress) == sorted(PROGRESS_101)
    # C.parameter's initial value is 0, so the first minibatch's loss is ln 2 for any data, and
    # its error the share of the data's class 0 that the tie puts in class 1: exact.
    assert progress[0] == PROGRESS_101[0]
    for mb, (loss, error) in progress.items():
        if mb in (50, 100, 150):
            # SGD with lr 0.5 on unscaled features overshoots here, and rounding decides by how
            # much: the same model in exact numpy arithmetic prints 1.7207/0.36 at minibatch 50
            # in float32 and 0.3171/0.12 in float64. Only a finite loss is asserted.
            assert math.isfinite(loss) and 0 <= error <= 1
        elif mb > 0:
            # Converged: the float64 numpy reimplementation is within 4.6 % of each printed loss
            # and one sample of 25 (0.04) of each error.
            assert loss == pytest.approx(PROGRESS_101[mb][0], rel=0.05), mb
            assert error == pytest.approx(PROGRESS_101[mb][1], abs=0.04 + 1e-9), mb
    # The notebook's test_minibatch: 0.12, as CNTK's own test of the notebook asserts.
    assert out[16] == "0.12"
    assert out[17] == LABELS
    assert predicted(out[18]) == PREDICTED
    # The bias: the notebook prints [ 8.00007153 -8.00006485] (older numpy printed float32 with
    # 8 decimals; today's prints fewer). The float64 and float32 numpy reimplementations end at
    # +-7.9864 and +-7.9924: 0.05 covers them; the two entries are opposite up to rounding.
    bias = np.array(out[19].strip("[]").split(), dtype=float)
    assert bias == pytest.approx([8.00007, -8.00006], abs=0.05)
    assert bias[0] + bias[1] == pytest.approx(0, abs=1e-3)
    assert len(out) == 20


def test_cntk_102_feed_forward(tmp_path):
    out = run("cntk_102_feed_forward.py", tmp_path)
    # The notebook trains silently (verbose=0) and prints the test error and predictions. The
    # model starts from glorot_uniform, whose draws differ from CNTK's: one sample of 25 either
    # way of CNTK's 0.12 (which CNTK's own test asserts) and one changed prediction.
    assert float(out[0]) == pytest.approx(0.12, abs=0.04 + 1e-9)
    assert out[1] == LABELS
    assert sum(a != b for a, b in zip(predicted(out[2]), PREDICTED)) <= 1
    assert len(out) == 3


def test_numpyinterop_feed_forward_net(tmp_path):
    out = run("numpyinterop_feed_forward_net.py", tmp_path)
    assert out[0] == "Learning rate per minibatch: 0.5"
    rows = [re.fullmatch(r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* 3200, "
                         r"metric = (\d+\.\d\d)% \* 3200;", l) for l in out[1:9]]
    assert all(rows), out[1:9]
    assert [(int(m[1]), int(m[2])) for m in rows] == [(128 * i + 1, 128 * i + 128)
                                                      for i in range(8)]
    losses = [float(m[3]) for m in rows]
    metrics = [float(m[4]) for m in rows]
    # No printed numbers to compare with (the tutorial is a script): each window's loss below
    # chance (ln 2) and the last windows below the first, as trained on separable data.
    assert all(l < math.log(2) for l in losses) and max(losses[4:]) < losses[0], losses
    summary = re.fullmatch(r"Finished Epoch\[1\]: loss = (\d+\.\d{6}) \* 25600, "
                           r"metric = (\d+\.\d\d)% \* 25600 \d+\.\d{3}s \( *\d+\.\d samples/s\);",
                           out[9])
    assert summary, out[9]
    # The epoch's averages are the mean of the 8 equal windows'.
    assert float(summary[1]) == pytest.approx(np.mean(losses), abs=1e-6)
    assert float(summary[2]) == pytest.approx(np.mean(metrics), abs=0.01)
    # CNTK's own test of this script: the error within 0.1 of 0.04.
    error = re.fullmatch(r" error rate on an unseen minibatch (\d\.\d{6})", out[10])
    assert error and float(error[1]) == pytest.approx(0.04, abs=0.1), out[10]
    assert len(out) == 11


def test_cntk_106a_lstm_timeseries(tmp_path):
    out = run("cntk_106a_lstm_timeseries.py", tmp_path)
    # isFast: 10 epochs, each printed (EPOCHS / 10 == 1). The notebook's published output shows
    # epochs 0, 2, ..., 18, from a run with 20 epochs; its losses run from 0.239 (epoch 0) down
    # to 0.072-0.128 (epochs 8-18).
    epochs = [re.fullmatch(r"epoch: (\d+), loss: (\d+\.\d{5})", l) for l in out[:10]]
    assert all(epochs), out[:10]
    assert [int(m[1]) for m in epochs] == list(range(10))
    losses = [float(m[2]) for m in epochs]
    assert all(l < 0.25 for l in losses) and losses[-1] < 0.13, losses
    assert re.fullmatch(r"training took \d+\.\d sec", out[10])
    mse = {}
    for line in out[11:14]:
        m = re.fullmatch(r"mse for (train|val|test): (\d\.\d{6})", line)
        assert m, line
        mse[m[1]] = float(m[2])
    # CNTK's own runs of this notebook spread by 2x: the published output prints 0.000115,
    # 0.000097, 0.000103, while CNTK's test of the notebook expects a test mse of at most
    # 0.000053. The band: up to 1.5x the published value.
    for name, published in (("train", 0.000115), ("val", 0.000097), ("test", 0.000103)):
        assert 0 < mse[name] <= 1.5 * published, (name, mse[name])
    assert len(out) == 14


TABLE_HEADER = [" average      since    average      since      examples",
                "    loss       last     metric       last              ",
                " ------------------------------------------------------"]


def test_cntk_105_autoencoder(tmp_path):
    out = run("cntk_105_autoencoder.py", tmp_path)
    assert out[:3] == ["Saving data/MNIST/Train-28x28_cntk_text.txt",
                       "Saving data/MNIST/Test-28x28_cntk_text.txt",
                       "Data directory is data/MNIST"]
    starts = [i for i, l in enumerate(out) if l == TABLE_HEADER[0]]
    assert len(starts) == 2
    test_errors = []
    for start in starts:
        assert out[start:start + 3] == TABLE_HEADER
        assert out[start + 3] == "Learning rate per 1 samples: 3e-05"
        table = out[start + 4:]  # fsadagrad reports its learning rate only, as CNTK's
        rows = [l.split() for l in table[:8]]
        # 5 sweeps of 6,000 samples in minibatches of 64: the geometric table's rows up to
        # 16,320 samples, as the notebook's first 8 rows: exact.
        assert [int(r[4]) for r in rows] == [64, 192, 448, 960, 1984, 4032, 8128, 16320]
        # The loss is the cross entropy summed over 784 pixels: the untrained sigmoid outputs
        # are near 0.5, so the first rows are near 784 ln 2 = 543.4 for any data and
        # initialisation (the notebook: 544 for both models).
        assert float(rows[0][0]) == pytest.approx(544, abs=5)
        # Then it falls: the notebook (all of MNIST) reaches 303 and 259 at 16,320 samples;
        # Loom, on 6,000 Fashion-MNIST images, 407 and 361: the band is Loom's run (at most
        # 450), not the notebook's, as the data differ.
        assert float(rows[-1][0]) < 450
        train = re.fullmatch(r"Average training error: (\d+\.\d\d)%", table[8])
        test = re.fullmatch(r"Average test error: (\d+\.\d\d)%", table[9])
        assert train and test, table[8:10]
        # CNTK's top-1 error against the image scaled to [0, 1]: 1 - the true intensity of the
        # brightest reconstructed pixel. The notebook's MNIST strokes are near 255 (about 3 %);
        # Fashion-MNIST's garments are greyer: Loom's runs give 29-31 %.
        assert float(test[1]) < 45
        test_errors.append(float(test[1]))
    # The two printed test errors, unrounded.
    assert [round(float(l), 2) for l in out[-2:]] == test_errors


# CNTK 206A's printed losses, averaged in windows of 12 discriminator minibatches (its lines)
# and of 6 generator minibatches (its lines), over the first 48 training steps.
D_WINDOWS_206A = [0.460688, 0.496159, 0.468794, 0.549526, 1.273582, 1.263255, 1.041039, 1.190252]
G_WINDOWS_206A = [2.744962, 2.408652, 2.497859, 2.715347, 1.957965, 2.055775, 1.913864, 1.834975]


def test_cntk_206a_basic_gan(tmp_path):
    out = run("cntk_206a_basic_gan.py", tmp_path)
    assert out[:2] == ["Saving data/MNIST/Train-28x28_cntk_text.txt",
                       "Data directory is data/MNIST"]
    # Each trainer reports its learning rate as CNTK 2.7 does (the notebook, from an older
    # CNTK, shows "Learning rate per sample: 5e-05"); fsadagrad reports no momentum, as CNTK's.
    lines = out[2:]
    assert lines[0] == lines[2] == "Learning rate per 1 samples: 5e-05"
    del lines[2], lines[0]
    # 50 steps, each 2 discriminator minibatches and 1 generator minibatch of 1,024 samples,
    # printed every 2 and every 1 (num_minibatches // 50): exact. The criteria have no metric,
    # so the lines have none, as CNTK 2.7's ProgressPrinter writes them (the notebook's older
    # CNTK printed "metric = 0.00% * ...").
    row = re.compile(r" Minibatch\[ *(\d+)- *(\d+)\]: loss = (\d+\.\d{6}) \* (\d+);")
    rows = [row.fullmatch(l) for l in lines[:100]]
    assert all(rows), lines[:100]
    d, g = rows[0::2], rows[1::2]
    assert [(int(m[1]), int(m[2]), int(m[4])) for m in d] == [(2 * i + 1, 2 * i + 2, 2048)
                                                              for i in range(50)]
    assert [(int(m[1]), int(m[2]), int(m[4])) for m in g] == [(i + 1, i + 1, 1024)
                                                              for i in range(50)]
    d = np.array([float(m[3]) for m in d])
    g = np.array([float(m[3]) for m in g])
    d_windows = d[:48].reshape(8, 6).mean(axis=1)
    g_windows = g[:48].reshape(8, 6).mean(axis=1)
    # The first 24 steps: the discriminator learns to tell the real images from the noise, on
    # any images; Loom's averages (Fashion-MNIST) are within 10 % of the notebook's (MNIST); the
    # band is 15 %.
    assert d_windows[:4] == pytest.approx(D_WINDOWS_206A[:4], rel=0.15)
    assert g_windows[:4] == pytest.approx(G_WINDOWS_206A[:4], rel=0.15)
    # Then the game depends on the images (the notebook's discriminator loss rises to 1.27,
    # Loom's on Fashion-MNIST falls to 0.33): the discriminator better than chance (2 ln 2, the
    # loss of D = 0.5) and the generator's loss in the notebook's range (1.6 to 2.8) widened
    # to [1, 4].
    assert all(0 < v < 2 * math.log(2) for v in d_windows), d_windows
    assert all(1 < v < 4 for v in g_windows), g_windows
    last = re.fullmatch(r"Training loss of the generator is: (\d+\.\d\d)", lines[100])
    assert last and float(last[1]) == pytest.approx(g[-1], abs=0.005)
    assert len(lines) == 101


def test_clone_method_by_name():
    # CNTK 206's D_real.clone(method='share', ...): CloneMethod's names are accepted too.
    import loom as C
    x = C.input_variable(2)
    f = C.layers.Dense(3)(x)
    shared = f.clone(method='share')
    assert shared.parameters[0].uid in {p.uid for p in f.parameters}
    with pytest.raises(ValueError, match="'shared' is not a valid CloneMethod"):
        f.clone('shared')


# CNTK 202's printed training: epoch -> (loss, metric %).
EPOCHS_202 = {1: (1.740198, 28.02), 2: (0.665177, 14.30), 3: (0.526256, 11.34),
              4: (0.395405, 8.22), 5: (0.293512, 6.20)}


def test_cntk_202_language_understanding(tmp_path):
    with tarfile.open(os.path.join(HERE, "data", "atis.tar.xz")) as archive:
        archive.extractall(tmp_path)
    out = run("cntk_202_language_understanding.py", tmp_path)
    assert out[:5] == ["Reusing locally cached: " + f for f in
                       ("atis.train.ctf", "atis.test.ctf", "query.wl", "slots.wl", "intent.wl")]
    # reader.streams.keys(): the notebook shows dict_keys(['query', 'slot_labels', 'intent'])
    # (CNTK's order is its hash map's); Loom keeps the StreamDefs' order.
    keys = re.fullmatch(r"dict_keys\((\[.*\])\)", out[5])
    assert keys and sorted(ast.literal_eval(keys[1])) == ["intent", "query", "slot_labels"]
    # The criterion with the model's input placeholder replaced: the 129-dimensional sequence
    # input and the placeholder 'labels', as the notebook's Input(..., [#, *], [129]),
    # Placeholder('labels', ...) -> two outputs.
    assert out[6] == ("Composite(Sequence[Tensor[129]], labels: Sequence[tensor]) -> "
                      "Tuple[Sequence[tensor], Sequence[tensor]]")
    # Exact: the parameter count and the learning-rate schedule (3e-4 * 70 per minibatch, halved
    # from epoch 5).
    assert out[7] == "Training 721479 parameters in 6 parameter tensors."
    assert out[8] == "Learning rate per minibatch: 0.020999999999999998"
    lines = out[9:]  # adam reports its learning rate only, as CNTK's
    assert lines[4] == "Learning rate per minibatch: 0.010499999999999999"
    epoch_line = re.compile(r"Finished Epoch\[(\d) of 5\]: \[Training\] loss = (\d+\.\d{6}) "
                            r"\* (\d+), metric = (\d+\.\d\d)% \* (\d+) \d+\.\d{3}s "
                            r"\( *\d+\.\d samples/s\);")
    epochs = [epoch_line.fullmatch(l) for l in lines[:4] + lines[5:6]]
    assert all(epochs), lines[:6]
    for m in epochs:
        epoch, loss, metric = int(m[1]), float(m[2]), float(m[4])
        # An epoch ends with the minibatch (at most 70 samples) that passes epoch * 18,000
        # samples (the notebook's epochs: 17,941 to 18,059 samples).
        assert m[3] == m[5] and abs(int(m[3]) - 18000) < 70
        # Loom's initial weights and its randomizer's order differ from CNTK's; the band (15 %
        # of the loss, 2.5 points of the error) holds Loom's run with margin (its largest
        # differences: 9 % and 1.5 points, in epoch 2), as CNTK publishes one run only.
        assert loss == pytest.approx(EPOCHS_202[epoch][0], rel=0.15), epoch
        assert metric == pytest.approx(EPOCHS_202[epoch][1], abs=2.5), epoch
    # The test: every evaluator shares one ProgressPrinter, the test set is read in order in
    # minibatches of 500 words: 23 minibatches, 10,984 words, exact. The notebook's metric
    # (0.34 %) is not the test loss: the notebook makes an Evaluator per minibatch, and CNTK's
    # summary divides the last evaluator's accumulated loss by all the printer's samples. Loom
    # summarizes what the printer was given, the mean cross entropy over the test set: below
    # the last epoch's training loss plus half.
    test = re.fullmatch(r"Finished Evaluation \[1\]: Minibatch\[1-23\]: "
                        r"metric = (\d+\.\d\d)% \* 10984;", lines[6])
    assert test and 0 < float(test[1]) / 100 < float(epochs[-1][2]) + 0.5, lines[6]
    # The query through the trained model: the word indices exact, the slots the notebook's.
    assert lines[7] == "[178, 429, 444, 619, 937, 851, 752, 179]"
    assert lines[8] == "(8, 129)"
    best = [int(c) for c in lines[9].strip("[]").split()]
    assert sum(a != b for a, b in zip(best, [128, 128, 128, 48, 110, 128, 78, 128])) <= 1
    tags = dict(ast.literal_eval(lines[10]))
    assert tags["new"] == "B-fromloc.city_name" and tags["seattle"] == "B-toloc.city_name"
    assert len(lines) == 11


def test_cntk_202_layers_by_name():
    # CNTK 202's peek cells: z.embed.E and z.classify.b, layers found by name in the model.
    import loom as C
    x = C.sequence.input_variable(943)
    z = C.layers.Sequential([C.layers.Embedding(150, name='embed'),
                             C.layers.Dense(129, name='classify')])
    shapes = z(x).embed.E.shape, z.classify.b.shape
    assert shapes == ((943, 150), (129,))


@pytest.mark.parametrize("learner", ["fsadagrad", "adam"])
def test_learners_report_the_learning_rate_only(capfd, learner):
    # The tables of CNTK 105 (fsadagrad) and 202 (adam) show the learning rate and no momentum:
    # CNTK 2.7's learners report the momentum from momentum_sgd's update only
    # (LearnerMomentumSGD::Update; fsadagrad's and adam's updates do not).
    import loom as C
    x, y = C.input_variable(2), C.input_variable(1)
    z = C.layers.Dense(1)(x)
    make = getattr(C, learner)
    trainer = C.Trainer(z, (C.squared_error(z, y), C.squared_error(z, y)),
                        make(z.parameters, lr=C.learning_parameter_schedule_per_sample(0.001),
                             momentum=C.momentum_schedule(0.9)),
                        C.logging.ProgressPrinter(0))
    trainer.train_minibatch({x: np.ones((4, 2), np.float32), y: np.zeros((4, 1), np.float32)})
    out = capfd.readouterr().out
    assert "Learning rate per 1 samples: 0.001" in out
    assert "Momentum" not in out


def test_cntk_105_error_metric_is_one_minus_target_at_argmax():
    # CNTK 105 measures its autoencoders with classification_error(model, label / 255): CNTK's
    # classification_error (topN=1) is 1 - target . hardmax(output), here 1 - 0.8.
    import loom as C
    z, t = C.input_variable(3), C.input_variable(3)
    value = C.classification_error(z, t).eval({z: np.array([[0.1, 0.9, 0.2]], np.float32),
                                               t: np.array([[0.5, 0.8, 1.0]], np.float32)})
    assert float(np.ravel(value)[0]) == pytest.approx(0.2)


def test_cntk_105_image_cells_map_any_key_and_keep_the_sequence_axis(tmp_path):
    # The cells that CNTK 105's script leaves out: the minibatch mapped to the builtin `input`
    # (CNTK's next_minibatch re-keys its stream-keyed minibatch by any key), and asarray() as
    # [sample, sequence step, pixel] (CNTK returns the reader's value as it is).
    import loom as C
    path = tmp_path / "data.txt"
    path.write_text("".join("|labels 0 1 |features %d %d %d\n" % (i, i + 1, i + 2)
                            for i in range(4)))
    source = C.io.MinibatchSource(C.io.CTFDeserializer(str(path), C.io.StreamDefs(
        labels_viz=C.io.StreamDef(field='labels', shape=2, is_sparse=False),
        features=C.io.StreamDef(field='features', shape=3, is_sparse=False))),
        randomize=False, max_sweeps=1)
    data = source.next_minibatch(2, input_map={input: source.streams.features})[input]
    np.testing.assert_array_equal(data.asarray().reshape(2, 3), [[0, 1, 2], [1, 2, 3]])
    image = C.input_variable(3)
    assert source.next_minibatch(2, input_map={image: source.streams.features})[image] \
        .asarray().shape == (2, 1, 3)
