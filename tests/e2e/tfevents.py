"""A reader of TensorBoard event files written independently of Loom's code: TFRecord framing
with masked CRC32C, and a protocol buffer decoder for the fields of TensorFlow's Event,
Summary and GraphDef messages (field numbers from tensorflow/core/util/event.proto and
framework/{summary,graph,node_def}.proto)."""
import glob
import os
import struct


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The payloads of a TFRecord file; raises ValueError on a bad length or checksum."""
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            raise ValueError(f"{path}: truncated header at {at}")
        length, length_crc = struct.unpack_from("<QI", data, at)
        if length_crc != masked_crc32c(data[at:at + 8]):
            raise ValueError(f"{path}: bad length CRC at {at}")
        payload = data[at + 12:at + 12 + length]
        if len(payload) != length or at + 16 + length > len(data):
            raise ValueError(f"{path}: truncated record at {at}")
        (data_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        if data_crc != masked_crc32c(payload):
            raise ValueError(f"{path}: bad data CRC at {at}")
        yield payload
        at += 16 + length


def _varint(buf, at):
    value, shift = 0, 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def fields(buf):
    """(field number, wire type, value) of a message: ints for varints, bytes otherwise."""
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(buf, at)
        elif wire == 1:
            value, at = buf[at:at + 8], at + 8
        elif wire == 2:
            length, at = _varint(buf, at)
            value, at = buf[at:at + length], at + length
        elif wire == 5:
            value, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def event(payload):
    """An Event as a dict: wall_time, step, and file_version, graph_def or scalars."""
    e = {"step": 0, "scalars": []}
    for number, _, value in fields(payload):
        if number == 1:
            (e["wall_time"],) = struct.unpack("<d", value)
        elif number == 2:
            e["step"] = _signed(value)
        elif number == 3:
            e["file_version"] = value.decode()
        elif number == 4:
            e["graph_def"] = graph(value)
        elif number == 5:  # Summary: repeated Value value = 1
            for n, _, v in fields(value):
                if n == 1:
                    tag, simple = None, None
                    for vn, _, vv in fields(v):
                        if vn == 1:
                            tag = vv.decode()
                        elif vn == 2:
                            (simple,) = struct.unpack("<f", vv)
                    e["scalars"].append((tag, simple))
    return e


def graph(payload):
    """A GraphDef's nodes: dicts of name, op and inputs."""
    nodes = []
    for number, _, value in fields(payload):
        if number == 1:
            node = {"name": "", "op": "", "inputs": []}
            for n, _, v in fields(value):
                if n == 1:
                    node["name"] = v.decode()
                elif n == 2:
                    node["op"] = v.decode()
                elif n == 3:
                    node["inputs"].append(v.decode())
            nodes.append(node)
    return nodes


def read_log_dir(log_dir):
    """The single event file in log_dir (its name checked) and its events."""
    files = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    if len(files) != 1:
        raise ValueError(f"expected one event file in {log_dir}, found {files}")
    name = os.path.basename(files[0]).split(".")
    if not (len(name[3]) == 10 and name[3].isdigit() and len(name) >= 5):
        raise ValueError(f"event file name {files[0]} is not events.out.tfevents.<time>.<host>")
    return files[0], [event(p) for p in records(files[0])]
