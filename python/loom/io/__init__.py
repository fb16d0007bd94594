"""Readers (CNTK's cntk.io): deserializers for CTF text, CNTK binary format (CBF; ctf_to_cbf
writes it from CTF), IDX files, images (with the transforms of loom.io.transforms; also
base64-encoded in a map file), HTK speech features and MLF labels, in-memory arrays and
Python code (UserDeserializer), and MinibatchSource, which cuts their data into minibatches;
UserMinibatchSource, the base of a source written in Python (MinibatchSourceInterface is the
base of both)."""
import numpy as np

from loom._loom.io import (DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS, FULL_DATA_SWEEP,  # noqa: F401
                           INFINITELY_REPEAT, Base64ImageDeserializer, CBFDeserializer,
                           CTFDeserializer, HTKFeatureDeserializer, HTKMLFDeserializer,
                           IDXDeserializer, IDXStreamDef, ImageDeserializer, MinibatchData,
                           MinibatchSource, MinibatchSourceFromData, MinibatchSourceInterface,
                           StreamConfiguration, StreamDef, StreamInformation, UserDeserializer,
                           UserMinibatchSource)
from loom.io import transforms  # noqa: F401
from loom.variables import Record

# CNTK's MinibatchSource.streams: a Record (a dict whose entries are also attributes) of the
# source's StreamInformation by stream name: reader.streams.features, reader.streams.keys().
MinibatchSourceInterface.streams = property(
    lambda self: Record(**{info.name: info for info in self.stream_infos()}),
    doc="The source's streams by name, as a Record (a dict with attribute access).")


class StreamDefs(dict):
    """Stream name -> definition, in the order given: StreamDefs(xy=StreamDef(...), ...)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _is_tensor(data):
    # CNTK's rule: a numpy array, or nested lists whose innermost items are numbers.
    if isinstance(data, np.ndarray):
        return True
    if not isinstance(data, list):
        return False
    while len(data) > 0:
        try:
            data[0][0]
        except Exception:
            try:
                data[0] + 0
                return True
            except Exception:
                return False
        if isinstance(data, np.ndarray):
            return True
        if not isinstance(data[0], list):
            return False
        data = data[0]
    return True


def sequence_to_cntk_text_format(seq_idx, alias_tensor_map):
    """CNTK's CTF lines of sequence seq_idx: alias_tensor_map maps a stream alias to its sequence,
    a tensor [T, ...] (dense: each sample's values, flattened in C order, as numpy prints them)
    or a list of T dicts {index: value} (sparse); one line per step, 'seq_idx\\t|alias v v |...',
    aliases sorted, a stream shorter than the longest left out of the later lines. (The text is
    numpy's str of each value, so this stays in Python.)"""
    max_seq_length = max(len(t) for t in alias_tensor_map.values())
    if max_seq_length == 0:
        return ''
    lines = []
    for elem_idx in range(max_seq_length):
        line = []
        for alias, tensor in sorted(alias_tensor_map.items()):
            if elem_idx >= len(tensor):
                continue
            if _is_tensor(tensor):
                sample = np.asarray(tensor)[elem_idx]
                text = ' '.join(np.asarray(sample).ravel(order='C').astype(str))
            elif isinstance(tensor, list) and isinstance(tensor[0], dict):
                text = ' '.join('%s:%s' % (k, v) for k, v in sorted(tensor[elem_idx].items()))
            else:
                raise ValueError('expected a tensor (dense) or list of dicts (sparse), but got '
                                 '"%s"' % type(tensor))
            line.append('%s %s' % (alias, text))
        lines.append('%i\t|' % seq_idx + ' |'.join(line))
    return '\n'.join(lines)
