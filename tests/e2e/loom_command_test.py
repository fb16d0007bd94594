"""The loom command: `loom info`, `loom eval`, `loom export`, `loom plot` and `loom serve` on
a small Dense model that save_dense_model writes with parameters set by a formula, so that this
test computes the model's outputs itself. The server is driven over loopback with http.client; every wait is
bounded and the server is stopped at the end even when a check fails."""
import http.client
import json
import os
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

from example import expect, fail

build_dir, work_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
shutil.rmtree(work_dir, ignore_errors=True)
os.makedirs(work_dir)
LOOM = os.path.join(build_dir, "tools", "loom")
checks = 0


def loom(*args, code=0):
    """Runs loom with args in the work folder; checks its exit code; returns (stdout, stderr)."""
    global checks
    proc = subprocess.run([LOOM, *args], cwd=work_dir, capture_output=True, text=True, timeout=300)
    if proc.returncode != code:
        sys.stdout.write(proc.stdout + proc.stderr)
        fail(f"loom {' '.join(args)} exited with {proc.returncode}, expected {code}")
    checks += 1
    return proc.stdout, proc.stderr


def path(name):
    return os.path.join(work_dir, name)


# The model: features [3] -> Dense(4, relu) -> Dense(2); value k of a parameter of n values is
# ((k * 7 + n) % 11 - 5) / 8 (save_dense_model.cpp).
def param(n):
    return [((k * 7 + n) % 11 - 5) / 8 for k in range(n)]


W1, B1, W2, B2 = param(12), param(4), param(8), param(2)


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def model(x):
    h = [max(0.0, sum(x[i] * W1[i * 4 + j] for i in range(3)) + B1[j]) for j in range(4)]
    return [sum(h[i] * W2[i * 2 + j] for i in range(4)) + B2[j] for j in range(2)]


subprocess.run([os.path.join(build_dir, "save_dense_model"), path("m.cmf")], check=True,
               capture_output=True, timeout=120)

# loom info: the signature as Function::to_string prints it, parameters by path, the format.
out, _ = loom("info", "m.cmf")
lines = out.splitlines()
expect("Signature: Composite(features: Tensor[3]) -> Tensor[2]" in lines, "no signature line")
expect(any(l.startswith("Format: Loom container version 1, a model") for l in lines),
       "no format line")
expect(any(l.startswith("Checksums: valid") for l in lines), "no checksum line")
expect("Parameters: 4 tensors, 26 values" in lines, "no parameter count")
for p, shape, n in [("Dense1.W", "[3,4]", 12), ("Dense1.b", "[4]", 4), ("Dense2.W", "[4,2]", 8),
                    ("Dense2.b", "[2]", 2)]:
    expect(any(l.split() == [p, shape, str(n)] for l in lines), f"no line for {p}")
expect("  features: Tensor[3]" in lines, "the argument is not listed")

# A damaged file (one payload byte changed), a file that is not a model, a missing one: exit 1.
data = bytearray(open(path("m.cmf"), "rb").read())
data[len(data) - 20] ^= 0xFF
open(path("damaged.cmf"), "wb").write(bytes(data))
_, err = loom("info", "damaged.cmf", code=1)
expect("damaged" in err and "CRC32C" in err, f"the damage is not reported: {err}")
open(path("notes.txt"), "w").write("not a model\n")
_, err = loom("info", "notes.txt", code=1)
expect("not a Loom file" in err, f"a text file is not recognized: {err}")
loom("info", "missing.cmf", code=1)
loom("info", code=2)
loom("info", "m.cmf", "--bogus", code=2)
loom("frobnicate", code=2)
loom(code=2)
for sub in ["info", "eval", "serve"]:
    out, _ = loom(sub, "--help")
    expect("Usage" in out or "usage" in out.lower(), f"loom {sub} --help printed no usage")

# loom info of a model deeper than the stack: a chain of 300,000 negations (a call of a
# 1,000-op chain on a placeholder, 300 times, through the Python package); nothing recurses
# over its depth in loading and printing it.
sys.path.insert(0, os.path.join(build_dir, "python"))
import loom as loom_py  # noqa: E402 (the package of this build)

deep = loom_py.placeholder()
for _ in range(1000):
    deep = loom_py.negate(deep)
chain = loom_py.input_variable(2, name="x")
for _ in range(300):
    chain = deep(chain)
chain.save(path("deep.cmf"))
expect(os.path.getsize(path("deep.cmf")) > 300_000 * 100, "deep.cmf is too small for its ops")
del deep, chain
out, _ = loom("info", "deep.cmf")
lines = out.splitlines()
expect("Signature: Composite(x: Tensor[2]) -> Tensor[2]" in lines, f"loom info of deep.cmf: {out}")
expect("  x: Tensor[2]" in lines and "Parameters: 0 tensors, 0 values" in lines,
       f"loom info of deep.cmf: {out}")

# loom eval on a CTF file with one-hot labels: outputs equal the formula's (float32), and the
# classification error is the one computed here.
rng = random.Random(14)
samples = []
while len(samples) < 50:
    x = [round(rng.uniform(-2, 2), 3) for _ in range(3)]
    z = model(x)
    if abs(z[0] - z[1]) < 1e-3:
        continue  # no near-ties: float32 and Python doubles must agree on the class
    predicted = 0 if z[0] > z[1] else 1
    label = predicted if rng.random() < 0.7 else 1 - predicted
    samples.append((x, label))
with open(path("data.ctf"), "w") as f:
    for x, label in samples:
        onehot = " ".join("1" if k == label else "0" for k in range(2))
        f.write(f"|features {' '.join(map(str, x))} |labels {onehot}\n")
wrong = sum((0 if model(x)[0] > model(x)[1] else 1) != label for x, label in samples)
expected_error = f"Classification error: {100.0 * wrong / len(samples):.2f}% ({wrong} of 50 samples)"

out, _ = loom("eval", "m.cmf", "--data", "data.ctf", "--labels", "labels", "--output", "out.ctf",
              "--minibatch-size", "16")
expect(expected_error in out.splitlines(), f"expected '{expected_error}' in:\n{out}")
ctf_rows = []
for line in open(path("out.ctf")):
    field, *values = line.split()
    expect(field.startswith("|"), f"not a CTF line: {line}")
    ctf_rows.append([float(v) for v in values])
expect(len(ctf_rows) == 50, f"{len(ctf_rows)} output lines, expected 50")
for (x, _), row in zip(samples, ctf_rows):
    expect(all(abs(a - b) < 1e-5 for a, b in zip(row, model(x))), f"output {row} != {model(x)}")

out, _ = loom("eval", "--data", "data.ctf", "m.cmf", "--labels", "labels", "--output", "out.csv")
csv_lines = open(path("out.csv")).read().splitlines()
expect(len(csv_lines) == 51, "the CSV file needs a header and 50 rows")
csv_rows = [[float(v) for v in l.split(",")] for l in csv_lines[1:]]
expect(csv_rows == ctf_rows, "CSV and CTF outputs differ")

# Another stream name (--map) and sparse labels (--sparse).
with open(path("renamed.ctf"), "w") as f:
    for x, label in samples:
        f.write(f"|x {' '.join(map(str, x))} |y {label}:1\n")
out, _ = loom("eval", "m.cmf", "--data", "renamed.ctf", "--map", "features=x", "--labels", "y",
              "--sparse", "y", "--output", "renamed.ctf.out")
expect(expected_error in out.splitlines(), "--map/--sparse give another error figure")

# The same data as IDX files, one stream each (float32 features, uint8 class indices).
with open(path("features.idx"), "wb") as f:
    f.write(struct.pack(">BBBBII", 0, 0, 0x0D, 2, 50, 3))
    f.write(b"".join(struct.pack(">3f", *x) for x, _ in samples))
with open(path("labels.idx"), "wb") as f:
    f.write(struct.pack(">BBBBI", 0, 0, 0x08, 1, 50) + bytes(label for _, label in samples))
out, _ = loom("eval", "m.cmf", "--data", "features=features.idx", "--data", "labels=labels.idx",
              "--labels", "labels", "--output", "idx.ctf")
expect(expected_error in out.splitlines(), "IDX data give another error figure")
expect(open(path("idx.ctf")).read() == open(path("out.ctf")).read(), "IDX and CTF outputs differ")

# Misuse: exit 2 with a message; data that do not match the model: exit 1.
_, err = loom("eval", "m.cmf", "--data", "data.ctf", "--map", "nope=x", "--output", "o", code=2)
expect("no argument 'nope'" in err, f"--map of an unknown argument: {err}")
loom("eval", "m.cmf", "--data", "data.ctf", code=2)  # no --output
loom("eval", "m.cmf", "--data", "data.ctf", "--output", "o", "--format", "xml", code=2)
loom("eval", "m.cmf", "--data", "data.ctf", "--output", "o", "--minibatch-size", "x", code=2)
_, err = loom("eval", "m.cmf", "--data", "renamed.ctf", "--output", "o", code=1)
expect("features (3 values)" in err, f"streams that do not match are not explained: {err}")
loom("eval", "notes.txt", "--data", "data.ctf", "--output", "o", code=1)
loom("eval", "m.cmf", "--data", "missing.ctf", "--output", "o", code=1)
_, err = loom("eval", "m.cmf", "--data", "pixels=features.idx", "--output", "o", code=2)
expect("no argument reads stream 'pixels'" in err, f"an IDX stream no argument reads: {err}")


# A sequence model (the same layers per step): eval writes "sequence |output ..." lines, one
# per step, and counts errors per step.
subprocess.run([os.path.join(build_dir, "save_dense_model"), path("seq.cmf"), "--sequence"],
               check=True, capture_output=True, timeout=120)
sequences = [[samples[(s * 5 + t) % 50] for t in range(1 + s % 4)] for s in range(10)]
with open(path("seq.ctf"), "w") as f:
    for s, steps in enumerate(sequences):
        for x, label in steps:
            f.write(f"{s} |features {' '.join(map(str, x))} |labels {label}:1\n")
steps = [step for sequence in sequences for step in sequence]
seq_wrong = sum((0 if model(x)[0] > model(x)[1] else 1) != label for x, label in steps)
out, _ = loom("eval", "seq.cmf", "--data", "seq.ctf", "--labels", "labels", "--sparse", "labels",
              "--output", "seq.out.ctf", "--minibatch-size", "5")
expect(f"Classification error: {100.0 * seq_wrong / len(steps):.2f}% ({seq_wrong} of "
       f"{len(steps)} samples)" in out.splitlines(), f"sequence error figure: {out}")
seq_lines = open(path("seq.out.ctf")).read().splitlines()
expected_ids = [str(s) for s, sequence in enumerate(sequences) for _ in sequence]
expect([l.split()[0] for l in seq_lines] == expected_ids, "sequence ids of the output lines")
for line, (x, _) in zip(seq_lines, steps):
    values = [float(v) for v in line.split()[2:]]
    expect(all(abs(a - b) < 1e-5 for a, b in zip(values, model(x))), f"step output {line}")


# loom export: an ONNX file of the model (tests/e2e/onnx_test.py checks such files with ONNX
# runtimes); a sequence model exports with its batch and sequence axes free (ONNX's dims 0 and
# 1); a file that is not a model has no export.
out, _ = loom("export", "m.cmf", "--onnx", "m.onnx")
expect(out.strip() == "Wrote m.onnx", f"export said {out}")
onnx_bytes = open(path("m.onnx"), "rb").read()
for part in [b"Dense1.W", b"MatMul", b"Relu", b"features"]:
    expect(part in onnx_bytes, f"no {part} in m.onnx")
out, _ = loom("export", "seq.cmf", "--onnx", "seq.onnx")
expect(out.strip() == "Wrote seq.onnx", f"sequence export said {out}")
expect(b"features" in open(path("seq.onnx"), "rb").read(), "no input in seq.onnx")
_, err = loom("export", "data.ctf", "--onnx", "x.onnx", code=1)
expect("data.ctf" in err, f"export of a data file: {err}")
loom("export", "m.cmf", code=2)  # no --onnx

# loom plot: DOT written by Loom, SVG and PNG rendered by graphviz's dot.
out, _ = loom("plot", "m.cmf", "--out", "m.dot")
dot = open(path("m.dot")).read()
for part in ["digraph loom", "Times", "ReLU", "Dense1.W\\n[3,4]", "features\\nTensor[3]", "[4]"]:
    expect(part in dot, f"no {part} in m.dot")
loom("plot", "m.cmf", "--out", "m.svg")
expect("<svg" in open(path("m.svg")).read(), "m.svg is not SVG")
loom("plot", "m.cmf", "--out", "m.png")
expect(open(path("m.png"), "rb").read(8) == b"\x89PNG\r\n\x1a\n", "m.png is not PNG")
_, err = loom("plot", "m.cmf", "--out", "m.txt", code=2)
expect(".svg, .png" in err, f"plot to .txt: {err}")
loom("plot", "m.cmf", code=2)  # no --out
loom("plot", "damaged.cmf", "--out", "d.svg", code=1)

# CNTK's own model files (docs/cntk-formats.md), recognised by content, not by name: info,
# convert to Loom's format, export to ONNX, eval; where the shared folder is beside the checkout.
cntk_models = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "..", "..", "..", "shared", "cntk-models"))
if os.path.isdir(cntk_models):
    shutil.copy(os.path.join(cntk_models, "v2_load_and_eval.dnn"), path("cntk_v2.bin"))
    shutil.copy(os.path.join(cntk_models, "v1_MC.dnn"), path("cntk_v1.model"))
    out, _ = loom("info", "cntk_v2.bin")
    for part in ["Format: CNTK v2", "Signature:", "Parameters:"]:
        expect(part in out, f"no {part} in loom info of a CNTK v2 file: {out}")
    out, _ = loom("info", "cntk_v1.model")
    for part in ["Format: CNTK v1", "CNTK ops:", "Times x1", "  w ", "[2,3]"]:
        expect(part in out, f"no {part} in loom info of a CNTK v1 file: {out}")
    for name in ["cntk_v2.bin", "cntk_v1.model"]:
        out, _ = loom("convert", name, name + ".cmf")
        expect(out.strip() == f"Wrote {name}.cmf", f"convert said {out}")
        expect(open(path(name + ".cmf"), "rb").read(4) != open(path(name), "rb").read(4),
               f"{name}.cmf is not in Loom's format")
        a, _ = loom("info", name)
        b, _ = loom("info", name + ".cmf")
        expect(a.split("Signature:")[1] == b.split("Signature:")[1],
               f"{name}: the converted model differs:\n{a}\n{b}")
    # Its argument's samples are [1,2]: a CTF line's two values take that shape.
    with open(path("abs.ctf"), "w") as f:
        f.write("0 |i1 1 -2\n0 |i1 -3 4\n1 |i1 0.5 -0.25\n")
    loom("eval", "cntk_v2.bin", "--data", "abs.ctf", "--output", "abs_out.ctf")
    lines = open(path("abs_out.ctf")).read().splitlines()
    expect(lines == ["0 |Abs4_Output_0 1 2", "0 |Abs4_Output_0 3 4", "1 |Abs4_Output_0 0.5 0.25"],
           f"loom eval of a [1,2] argument wrote {lines}")
    out, _ = loom("export", "cntk_v2.bin", "--onnx", "cntk_v2.onnx")
    expect(out.strip() == "Wrote cntk_v2.onnx", f"export said {out}")
    # The v1 network: its outputs z = W x + b on a CTF file of its two inputs.
    with open(path("mc.ctf"), "w") as f:
        f.write("0 |features 1 2 |labels 0 1 0\n1 |features -1 0.5 |labels 1 0 0\n")
    out, _ = loom("eval", "cntk_v1.model", "--data", "mc.ctf", "--output", "mc_out.ctf")
    expect(os.path.getsize(path("mc_out.ctf")) > 0, "loom eval of a CNTK v1 file wrote nothing")
    _, err = loom("convert", "data.ctf", "x.cmf", code=1)
    expect("data.ctf" in err, f"convert of a data file: {err}")

# loom serve.
class Server:
    count = 0

    def __init__(self, *args, model_file="m.cmf",
                 signature="Composite(features: Tensor[3]) -> Tensor[2]"):
        # The server's log (a line per bad request) goes to a file: a pipe nobody reads fills.
        Server.count += 1
        self.log = path(f"serve{Server.count}.log")
        self.proc = subprocess.Popen([LOOM, "serve", model_file, "--port", "0", *args],
                                     cwd=work_dir, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "w"), text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        expect(ready, "the server printed nothing in 60 s")
        line = self.proc.stdout.readline()
        expect(line.startswith(f"Serving 'model' {signature} on http://127.0.0.1:"),
               f"unexpected first line: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def request(self, method, url, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, url, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, json.loads(r.read())
        finally:
            conn.close()

    def predict(self, inputs, name="model"):
        return self.request("POST", f"/v1/models/{name}:predict", json.dumps({"inputs": inputs}))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("the server did not stop within 60 s of SIGTERM")


server = Server("--max-body", "65536", "--max-batch", "8")
try:
    status, body = server.request("GET", "/healthz")
    expect(status == 200 and body["status"] == "ok", f"healthz: {status} {body}")
    status, body = server.request("GET", "/v1/models/model")
    expect(status == 200 and body["signature"] == "Composite(features: Tensor[3]) -> Tensor[2]",
           f"signature: {body}")
    expect(body["inputs"][0]["name"] == "features" and body["inputs"][0]["shape"] == [3],
           f"inputs: {body['inputs']}")

    # The whole data set in one request: loom eval's numbers, float32 for float32.
    status, body = server.predict([x for x, _ in samples])
    expect(status == 200 and len(body["outputs"]) == 50, f"predict: {status}")
    for row, out in zip(ctf_rows, body["outputs"]):
        expect([f32(v) for v in row] == [f32(v) for v in out], f"serve {out} != eval {row}")
    status, body = server.predict({"features": [samples[0][0]]})
    expect(status == 200 and len(body["outputs"]) == 1, "inputs by argument name")

    # Concurrent requests of 1 to 5 samples each, batched by the server: all answered right.
    failures = []

    def client(seed):
        r = random.Random(seed)
        for _ in range(15):
            picks = [r.randrange(50) for _ in range(r.randint(1, 5))]
            status, body = server.predict([samples[i][0] for i in picks])
            if status != 200 or len(body["outputs"]) != len(picks):
                failures.append(f"{status} {body}")
                continue
            for i, out in zip(picks, body["outputs"]):
                if any(abs(a - b) > 1e-5 for a, b in zip(out, ctf_rows[i])):
                    failures.append(f"sample {i}: {out} != {ctf_rows[i]}")

    threads = [threading.Thread(target=client, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    expect(not any(t.is_alive() for t in threads), "concurrent clients did not finish")
    expect(not failures, f"{len(failures)} concurrent answers wrong, first: {failures[:3]}")

    # Bad requests: 4xx with a JSON message, and the server keeps serving.
    bad = [
        ("POST", "/v1/models/model:predict", "{not json"),
        ("POST", "/v1/models/model:predict", '{"inputs": [[1, 2, NaN]]}'),
        ("POST", "/v1/models/model:predict", '{"inputs": [[1, 2, 1e39]]}'),
        ("POST", "/v1/models/model:predict", '{"inputs": [[1, 2]]}'),
        ("POST", "/v1/models/model:predict", '{"inputs": [[1, 2, "3"]]}'),
        ("POST", "/v1/models/model:predict", '{"inputs": []}'),
        ("POST", "/v1/models/model:predict", '{"outputs": [[1, 2, 3]]}'),
        ("POST", "/v1/models/model:predict", '{"inputs": {"pixels": [[1, 2, 3]]}}'),
        ("POST", "/v1/models/model:predict", '[1, 2, 3]'),
        ("POST", "/v1/models/model:predict", '{"inputs": [' + ",".join(["[1,2,3]"] * 10000) + "]}"),
        ("POST", "/v1/models/other:predict", '{"inputs": [[1, 2, 3]]}'),
        ("GET", "/v1/models/other", None),
        ("GET", "/nothing", None),
    ]
    for method, url, request_body in bad:
        status, body = server.request(method, url, request_body)
        expect(400 <= status < 500 and isinstance(body.get("error"), str),
               f"{method} {url} {str(request_body)[:40]}: {status} {str(body)[:200]}")
        status, _ = server.predict([samples[0][0]])
        expect(status == 200, f"the server stopped serving after {url} {str(request_body)[:40]}")
    checks += len(bad)

    # A second server on the same port: a clear error, exit 1.
    proc = subprocess.run([LOOM, "serve", "m.cmf", "--port", str(server.port)], cwd=work_dir,
                          capture_output=True, text=True, timeout=60)
    expect(proc.returncode == 1 and "in use" in proc.stderr, f"port in use: {proc.stderr}")
    code = server.stop()
    expect(code == 0, f"SIGTERM: exit code {code}")
finally:
    server.stop()

# A sequence model's requests: sequences of different lengths in one request.
server = Server("--workers", "1", model_file="seq.cmf",
                signature="Composite(features: Sequence[Tensor[3]]) -> Sequence[Tensor[2]]")
try:
    status, body = server.predict([[x for x, _ in sequence] for sequence in sequences])
    expect(status == 200 and [len(o) for o in body["outputs"]] == [len(q) for q in sequences],
           f"sequence predict: {status} {str(body)[:200]}")
    for sequence, outputs in zip(sequences, body["outputs"]):
        for (x, _), out in zip(sequence, outputs):
            expect(all(abs(a - b) < 1e-5 for a, b in zip(out, model(x))), f"step {out}")
    status, body = server.predict([[]])
    expect(status == 400, f"an empty sequence: {status} {body}")
    expect(server.stop() == 0, "the sequence server did not exit 0")
finally:
    server.stop()

# SIGTERM with requests in flight (held by a long batch delay): all answered, then exit 0.
server = Server("--batch-delay-ms", "1500", "--max-batch", "64")
try:
    answers = []
    threads = [threading.Thread(target=lambda i=i: answers.append(server.predict([samples[i][0]])))
               for i in range(4)]
    for t in threads:
        t.start()
    for _ in range(600):  # up to 60 s for the four requests to reach the server
        if server.request("GET", "/healthz")[1]["in_flight"] == 4:
            break
        time.sleep(0.1)
    else:
        fail("the four requests never reached the server")
    server.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(timeout=60)
    expect(len(answers) == 4 and all(s == 200 for s, _ in answers), f"drained: {answers}")
    expect(server.stop() == 0, "the server did not exit 0 after draining")
    expect("Stopped" in server.proc.stdout.read(), "no stop message")
finally:
    server.stop()


# Hostile clients (bench/serve_abuse.py plays the same cases at full size and prints figures).
import socket  # noqa: E402

PREDICT = "/v1/models/model:predict"


def kib(pid, field):
    """VmRSS or VmHWM of a process, in KiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    fail(f"no {field} for {pid}")


def response(sock, timeout=30):
    """(status, JSON body) of the response on sock; fails on a hang."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        fail(f"no complete response within {timeout} s: {data[:200]!r}")
    except ConnectionResetError:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    expect(head.startswith(b"HTTP/1.1 "), f"not an HTTP response: {data[:200]!r}")
    return int(head.split()[1]), json.loads(body) if body else None


def length(data):
    for line in data.split(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def exchange(port, request, timeout=30):
    """Sends request (bytes, or a list of parts sent one after another), stopping early when
    the server answers or closes; its (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            for part in request if isinstance(request, list) else [request]:
                if select.select([s], [], [], 0)[0]:
                    break
                s.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return response(s, timeout)


def post_head(content_type="application/json", **headers):
    head = f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n"
    for k, v in headers.items():
        head += f"{k.replace('_', '-')}: {v}\r\n"
    return (head + "\r\n").encode()


def post_raw(port, body, content_type="application/json"):
    return exchange(port, post_head(content_type, Content_Length=len(body)) + body)


server = Server("--max-body", "1048576", "--header-timeout", "1", "--body-timeout", "1")
try:
    pid, port = server.proc.pid, server.port
    refused = 0  # 4xx answers: each is one line of the log

    # A chunked body over --max-body: 413 naming --max-body, refused as it arrives (the server
    # holds about --max-body, not the 64 MiB sent; before, it buffered them all, then said 400).
    hwm = kib(pid, "VmHWM")
    chunk = b"100000\r\n" + b"[" * (1 << 20) + b"\r\n"
    status, body = exchange(port, [post_head(Transfer_Encoding="chunked")] + [chunk] * 64)
    expect(status == 413 and "--max-body" in body["error"], f"chunked: {status} {body}")
    expect(kib(pid, "VmHWM") - hwm < 16 * 1024, f"a chunked body raised the peak from {hwm} KiB"
           f" to {kib(pid, 'VmHWM')} KiB")
    status, body = exchange(port, post_head(Content_Length=1 << 40))
    expect(status == 413 and "--max-body" in body["error"], f"Content-Length 1 TiB: {status}")
    refused += 2

    # Form-encoded JSON over 8 KB (what `curl -d @file` sends) is read as JSON; another type is
    # a 415 that names the type to send.
    request = json.dumps({"inputs": [x for x, _ in samples] * 8}).encode()
    expect(len(request) > 8192, "the form-encoded request is too small")
    status, body = post_raw(port, request, "application/x-www-form-urlencoded")
    expect(status == 200 and len(body["outputs"]) == 400, f"form-encoded: {status} {body}")
    status, body = post_raw(port, request, None)
    expect(status == 200 and len(body["outputs"]) == 400, f"no Content-Type: {status}")
    for content_type in ["text/plain", "multipart/form-data; boundary=x"]:
        status, body = post_raw(port, request, content_type)
        expect(status == 415 and "Content-Type: application/json" in body["error"],
               f"{content_type}: {status} {body}")
        refused += 1

    # Numbers out of float range, invalid UTF-8, deep nesting, bad HTTP: 4xx with a JSON error.
    for bad_body in [b'{"inputs": [[1, 2, 1e999]]}', b'{"inputs": [[1, 2, ' + b"9" * 100000 + b"]]}",
                     b'{"inputs": [[1, 2, "\xff\xfe"]]}', b'{"inputs": [[1, 2, 3]], "\xc3": 1}',
                     b"[" * 500000, b'{"inputs": [[1, 2, 3]]} trailing', b""]:
        status, body = post_raw(port, bad_body)
        expect(status == 400 and isinstance(body["error"], str), f"{bad_body[:30]}: {status} {body}")
        refused += 1
    for request in [b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
                    b"DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"NONSENSE\r\n\r\n",
                    b"POST /nothing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"]:
        status, body = exchange(port, request)
        expect(400 <= status < 500 and isinstance(body["error"], str), f"{request[:30]}: {status}")
        refused += 1

    # Headers over 64 KiB: 431. Headers or a body that come too slowly: 408 naming the flag.
    status, body = exchange(port, b"GET /healthz HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 4000 + b"\r\n"
                            + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 4000) for i in range(20)))
    expect(status == 431 and isinstance(body["error"], str), f"large headers: {status} {body}")

    def trickle(first, more):
        # up to 15 s of one part every 0.3 s: the server must answer before they run out
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(first)
            for _ in range(50):
                if select.select([s], [], [], 0.3)[0]:
                    break
                s.sendall(more)
            else:
                fail(f"no answer to a slow request {first[:30]!r}")
            return response(s)

    status, body = trickle(b"GET /healthz HTTP/1.1\r\n", b"X-Slow: 1\r\n")
    expect(status == 408 and "--header-timeout" in body["error"], f"slow headers: {status} {body}")
    status, body = trickle(b"GET /heal", b"t")
    expect(status == 408 and "--header-timeout" in body["error"], f"slow request line: {status}")
    status, body = trickle(post_head(Content_Length=100), b"[")
    expect(status == 408 and "--body-timeout" in body["error"], f"slow body: {status} {body}")
    refused += 3

    # A 15.7 MB request: the server's peak grows by under 5 times the body (its numbers are read
    # straight into the batch, about 3.3 times, then evaluated by an executor whose buffers fit
    # the batch: before, 260 MB), and the memory goes back after it, the executor's too (the
    # model runner frees one that served a call over 8 MiB). Two in turn: the second's the same.
    big = b'{"inputs": [' + b",".join([b"[0.25,-1.5,0.75]"] * 980000) + b"]}"
    server_big = Server("--max-body", str(len(big)))
    try:
        big_pid = server_big.proc.pid
        for _ in range(2):
            rss = kib(big_pid, "VmRSS")
            with open(f"/proc/{big_pid}/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            status, body = post_raw(server_big.port, big)
            expect(status == 200 and len(body["outputs"]) == 980000, f"15.7 MB: {status}")
        peak, after = kib(big_pid, "VmHWM") - rss, kib(big_pid, "VmRSS") - rss
        expect(peak < 5 * len(big) / 1024, f"a {len(big)} B request took {peak} KiB at its peak")
        expect(after < len(big) / 8 / 1024, f"{after} KiB stayed after a {len(big)} B request")
    finally:
        server_big.stop()

    # /metrics: counters by status and kind, and the predict latency histogram, in Prometheus'
    # text format; the log has one line per refused request.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    metrics = r.read().decode()
    expect(r.status == 200 and r.getheader("Content-Type").startswith("text/plain"),
           f"/metrics: {r.status}")
    for line in ['loom_serve_errors_total{kind="body_too_large"} 2',
                 'loom_serve_errors_total{kind="unsupported_media_type"} 2',
                 'loom_serve_errors_total{kind="headers_too_large"} 1',
                 'loom_serve_errors_total{kind="header_timeout"} 2',
                 'loom_serve_errors_total{kind="body_timeout"} 1',
                 'loom_serve_requests_total{code="200"} 2',
                 'loom_serve_predict_seconds_count 2',
                 "# TYPE loom_serve_predict_seconds histogram"]:
        expect(line in metrics.splitlines(), f"no '{line}' in /metrics:\n{metrics}")
    refused += 1  # the 431
    log = [l for l in open(server.log).read().splitlines() if l.startswith("loom serve: 4")]
    expect(len(log) == refused, f"{len(log)} log lines for {refused} refused requests:\n"
           + "\n".join(log))
    checks += 1

finally:
    server.stop()

# 200 slow clients, each sending a header line every 0.5 s (within the default deadline):
# /healthz still answers (before, they held all 64 threads). The timeout only detects a hang.
server = Server()
try:
    port = server.port
    stop = threading.Event()
    clients = []
    for _ in range(200):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        clients.append(s)

    def keep_sending():
        while not stop.wait(0.5):
            for s in clients:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    sender = threading.Thread(target=keep_sending)
    sender.start()
    try:
        for _ in range(5):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            expect(r.status == 200 and json.loads(r.read())["status"] == "ok", "healthz")
            conn.close()
    except socket.timeout:
        fail("/healthz did not answer under 200 slow clients")
    finally:
        stop.set()
        sender.join()
        for s in clients:
            s.close()
    checks += 1
finally:
    server.stop()

# Connections over --max-connections: 503 with a JSON error, at once; served again after.
server = Server("--max-connections", "3")
try:
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(2)]
    for s in held:
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
    # The third: a kept-alive connection that asks /metrics until the server counts all three.
    watcher = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    for _ in range(100):  # up to 10 s
        watcher.request("GET", "/metrics")
        if "loom_serve_connections 3" in watcher.getresponse().read().decode().splitlines():
            break
        time.sleep(0.1)
    else:
        fail("the server never counted three connections")
    status, body = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    expect(status == 503 and "--max-connections" in body["error"], f"4th: {status} {body}")
    for s in held:
        s.close()
    watcher.close()
    for _ in range(100):  # up to 10 s for the server to see them closed
        try:
            if server.request("GET", "/healthz")[0] == 200:
                break
        except (OSError, json.JSONDecodeError):
            pass
        time.sleep(0.1)
    else:
        fail("the server did not serve again after the held connections closed")
    checks += 1
finally:
    server.stop()

print(f"loom_command: {checks} passed, 0 failed")
