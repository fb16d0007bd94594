"""Converts a CNTK text format (CTF) file to CNTK binary format (CBF), the files
CBFDeserializer reads, as CNTK's Scripts/ctf2bin.py does.

    from loom.io.ctf_to_cbf import ctf_to_cbf
    ctf_to_cbf('train.ctf', 'train.cbf',
               {'features': StreamDef(field='x', shape=3),
                'labels': StreamDef(field='y', shape=10, is_sparse=True)})

or from a shell, with ctf2bin's arguments and header file (a line per stream:
"name alias dense|sparse dim"):

    python3 -m loom.io.ctf_to_cbf --input train.ctf --header streams.txt \\
        --chunk_size 33554432 --output train.cbf [--precision float|double]

The file holds the streams under their names (a CBFDeserializer without streams delivers them
so); the CTF file's fields are the aliases. As ctf2bin: a line's prefix before the first '|' is
its sequence id, and a line without one continues the sequence (or, when no line before had
one, is a sequence of its own); a sequence's length is its longest stream; the samples of a
sparse stream are written with their indices ascending; fields that are not streams are an
error, comments ('|#...') and empty fields are skipped. A chunk is closed after the sequence
that brings the chunk's estimated size (ctf2bin's estimate: the values, plus for a sparse
sample its indices and a count) to chunk_size bytes. Unlike ctf2bin, the estimate starts again
at 0 for every chunk (ctf2bin keeps adding, so every chunk after its first holds one sequence)
and blank lines are skipped. See cbf_deserializer.h for the layout.
"""
import argparse
import struct

MAGIC = 0x636e746b5f62696e
VERSION = 1
_DENSE, _SPARSE = 0, 1
_FLOAT, _DOUBLE = 0, 1


class _Stream:
    def __init__(self, name, alias, sparse, dim, doubles):
        if dim <= 0:
            raise ValueError("ctf_to_cbf: stream '{}' needs a positive dim, not {}".format(
                name, dim))
        self.name, self.alias, self.sparse, self.dim = name, alias, sparse, dim
        self.value_format = 'd' if doubles else 'f'
        self.value_bytes = 8 if doubles else 4
        self.sequences = []  # per sequence of the chunk: its samples

    def add(self, tokens, where):
        """Adds a sample from its CTF tokens; returns ctf2bin's estimate of its bytes."""
        if not self.sparse:
            if len(tokens) != self.dim:
                raise ValueError("ctf_to_cbf: {}: stream '{}' has dim {}, the sample holds {} "
                                 "values".format(where, self.alias, self.dim, len(tokens)))
            self.sequences[-1].append([float(t) for t in tokens])
            return self.dim * self.value_bytes
        entries = []
        for token in tokens:
            index, sep, value = token.partition(':')
            if not sep:
                raise ValueError("ctf_to_cbf: {}: sparse stream '{}': '{}' is not "
                                 "index:value".format(where, self.alias, token))
            index = int(index)
            if not 0 <= index < self.dim:
                raise ValueError("ctf_to_cbf: {}: sparse stream '{}' has dim {}, index {} is "
                                 "outside it".format(where, self.alias, self.dim, index))
            entries.append((index, float(value)))
        entries.sort(key=lambda e: e[0])  # stable: repeated indices keep their order
        self.sequences[-1].append(entries)
        return len(entries) * (self.value_bytes + 4) + 4

    def header(self):
        name = self.name.encode('utf-8')
        return (struct.pack('<BI', _SPARSE if self.sparse else _DENSE, len(name)) + name +
                struct.pack('<BI', _DOUBLE if self.value_format == 'd' else _FLOAT, self.dim))

    def data(self):
        """The chunk's sequences of this stream, as CBF lays them out."""
        out = []
        values = '<{}' + self.value_format
        for samples in self.sequences:
            out.append(struct.pack('<I', len(samples)))
            if not self.sparse:
                for sample in samples:
                    out.append(struct.pack(values.format(len(sample)), *sample))
                continue
            flat = [e for sample in samples for e in sample]
            out.append(struct.pack('<i', len(flat)))
            out.append(struct.pack(values.format(len(flat)), *(v for _, v in flat)))
            out.append(struct.pack('<{}i'.format(len(flat)), *(i for i, _ in flat)))
            out.append(struct.pack('<{}i'.format(len(samples)), *(len(s) for s in samples)))
        self.sequences = []
        return b''.join(out)


def _streams(streams, doubles):
    """_Stream objects, by alias, from a dict name -> StreamDef, a list of StreamConfiguration,
    or ctf2bin's header: lines (or tuples) "name alias dense|sparse dim"."""
    out = []
    if isinstance(streams, dict):
        for name, d in streams.items():
            alias = getattr(d, 'field', None) or name
            out.append(_Stream(name, alias, bool(d.is_sparse), int(d.shape or 0), doubles))
    else:
        for s in streams:
            if hasattr(s, 'stream_alias'):  # StreamConfiguration
                out.append(_Stream(s.name, s.stream_alias or s.name, bool(s.is_sparse),
                                   int(s.dim), doubles))
                continue
            fields = s.split() if isinstance(s, str) else list(s)
            if not fields:
                continue
            if len(fields) != 4 or fields[2].lower() not in ('dense', 'sparse'):
                raise ValueError("ctf_to_cbf: a stream is 'name alias dense|sparse dim', not "
                                 "{!r}".format(s))
            out.append(_Stream(fields[0], fields[1], fields[2].lower() == 'sparse',
                               int(fields[3]), doubles))
    by_alias = {}
    for s in out:
        if s.alias in by_alias:
            raise ValueError("ctf_to_cbf: two streams read the field '{}'".format(s.alias))
        by_alias[s.alias] = s
    if not by_alias:
        raise ValueError("ctf_to_cbf: no streams given")
    return by_alias


def ctf_to_cbf(input_path, output_path, streams, chunk_size=32 << 20, precision='float'):
    """Writes the CTF file input_path as the CBF file output_path. streams: a dict name ->
    StreamDef (field: the name in the CTF file, shape, is_sparse), a list of
    StreamConfiguration, or ctf2bin's header lines. precision: 'float' or 'double' values.
    Returns the number of chunks written."""
    if precision not in ('float', 'double'):
        raise ValueError("ctf_to_cbf: precision is 'float' or 'double', not {!r}".format(
            precision))
    if chunk_size <= 0:
        raise ValueError("ctf_to_cbf: chunk_size must be positive, not {}".format(chunk_size))
    by_alias = _streams(streams, precision == 'double')
    order = list(by_alias.values())
    table = []  # (offset, sequence lengths) per chunk
    lengths = []  # the open chunk's sequence lengths

    with open(output_path, 'wb') as out, open(input_path, 'r') as text:
        out.write(struct.pack('<QI', MAGIC, VERSION))

        def close_chunk():
            table.append((out.tell(), list(lengths)))
            out.write(struct.pack('<{}I'.format(len(lengths)), *lengths))
            for s in order:
                out.write(s.data())
            lengths.clear()

        def add_sequence(lines):
            for s in order:
                s.sequences.append([])
            estimate = 0
            for number, line in lines:
                where = "{} line {}".format(input_path, number)
                for field in line.split('|')[1:]:
                    parts = field.split(None, 1)
                    if len(parts) < 2 or parts[0].startswith('#'):
                        continue  # an empty field or a comment
                    if parts[0] not in by_alias:
                        raise ValueError("ctf_to_cbf: {}: the field '{}' is not a stream; the "
                                         "streams read {}".format(where, parts[0],
                                                                  sorted(by_alias)))
                    estimate += by_alias[parts[0]].add(parts[1].split(), where)
            lengths.append(max(len(s.sequences[-1]) for s in order))
            return estimate

        sequence, sequence_id, estimate = [], None, 0
        for number, line in enumerate(text, 1):
            line = line.rstrip()
            if not line:
                continue
            if '|' not in line:
                raise ValueError("ctf_to_cbf: {} line {}: no '|' in {!r}".format(
                    input_path, number, line[:80]))
            prefix = line.split('|', 1)[0].strip()
            if (not sequence_id and not prefix) or (prefix and prefix != sequence_id):
                if sequence:
                    estimate += add_sequence(sequence)
                    sequence = []
                    if estimate >= chunk_size:
                        close_chunk()
                        estimate = 0
                sequence_id = prefix
            sequence.append((number, line))
        if sequence:
            add_sequence(sequence)
        if lengths or not table:
            close_chunk()

        header = out.tell()
        out.write(struct.pack('<QII', MAGIC, len(table), len(order)))
        for s in order:
            out.write(s.header())
        for offset, chunk_lengths in table:
            out.write(struct.pack('<qII', offset, len(chunk_lengths), sum(chunk_lengths)))
        out.write(struct.pack('<q', header))
    return len(table)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Converts a CNTK text format file to CNTK binary format (as ctf2bin.py).")
    parser.add_argument('--input', required=True, help="the CTF file")
    parser.add_argument('--header', required=True,
                        help="a file of lines 'name alias dense|sparse dim', one per stream")
    parser.add_argument('--chunk_size', type=int, required=True, help="chunk size in bytes")
    parser.add_argument('--output', required=True, help="the CBF file to write")
    parser.add_argument('--precision', choices=['float', 'double'], default='float')
    args = parser.parse_args(argv)
    with open(args.header) as f:
        streams = f.readlines()
    ctf_to_cbf(args.input, args.output, streams, args.chunk_size, args.precision)


if __name__ == '__main__':
    main()
