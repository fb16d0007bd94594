"""CNTK's own v2 model files (../shared/cntk-models) load through loom.Function.load as Loom
functions that evaluate as CNTK did (loom/serialize/cntk_v2_model.cpp, docs/cntk-formats.md)."""
import pathlib

import numpy as np
import pytest
import scipy.sparse

import loom

MODELS = pathlib.Path(__file__).resolve().parents[4] / 'shared' / 'cntk-models'
pytestmark = pytest.mark.skipif(not MODELS.exists(), reason='../shared/cntk-models is not here')

QUERY = ('BOS i would like to find a flight from charlotte to las vegas that makes a stop in st. '
         'louis EOS').split()


def test_atis_tagger_tags_the_query_as_cntk_did():
    model = loom.Function.load(str(MODELS / 'v2_atis_slot_tagger.cmf'))
    vocabulary = (MODELS / 'atis_query.wl').read_text().splitlines()
    slots = (MODELS / 'atis_slots.wl').read_text().splitlines()
    assert len(model.arguments) == 1
    x = model.arguments[0]
    assert x.name == 'keep' and x.shape == (943,)
    words = np.zeros((len(QUERY), len(vocabulary)), np.float32)
    words[np.arange(len(QUERY)), [vocabulary.index(w) for w in QUERY]] = 1
    scores = model.eval({x: [scipy.sparse.csr_matrix(words)]})  # the input is sparse
    tags = dict(zip(QUERY, (slots[i] for i in np.asarray(scores[0]).argmax(axis=-1))))
    assert tags['charlotte'] == 'B-fromloc.city_name'
    assert tags['las'] == 'B-toloc.city_name'
    assert tags['vegas'] == 'I-toloc.city_name'
    assert tags['st.'] == 'B-stoploc.city_name'
    assert tags['flight'] == 'O'


def test_load_and_eval_gives_cntks_result():
    # CNTK's eval_test.py: abs of an input (1, 2) on [[[-10, 20]]] is [[[[10, 20]]]].
    model = loom.load_model(str(MODELS / 'v2_load_and_eval.dnn'))
    result = model.eval({model.arguments[0]: [np.array([[[-10, 20]]], np.float32)]})
    assert np.allclose(np.asarray(result).reshape(-1), [10, 20])


def test_damaged_file_is_a_clear_error(tmp_path):
    damaged = tmp_path / 'damaged.dnn'
    damaged.write_bytes((MODELS / 'v2_initial_policy_network.dnn').read_bytes()[:1000])
    with pytest.raises(Exception, match='damaged.dnn'):
        loom.Function.load(str(damaged))


def test_atis_lstm_loop_loads_as_the_fused_recurrence():
    # The LSTM's PastValue loop is recognised at load and runs as one FusedRecurrence op reading
    # the file's parameters (loom/serialize/cntk_recurrence.h).
    model = loom.load_model(str(MODELS / 'v2_atis_slot_tagger.cmf'))
    ops, seen, stack = [], set(), list(model.outputs)
    while stack:
        v = stack.pop()
        if not v.is_output or v.owner.uid in seen:
            continue
        seen.add(v.owner.uid)
        ops.append(v.owner.op_name)
        stack.extend(v.owner.inputs)
    assert ops.count('FusedRecurrence') == 1
    assert 'PastValue' not in ops and 'LSTM' not in ops
    assert len(model.parameters) == 9
