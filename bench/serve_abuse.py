"""`loom serve` under hostile clients, on loopback only: starts the server on a small Dense model
(written by the build's save_dense_model, 3 features -> 2 scores), plays each abuse case against
it and prints the status codes it got, the server's peak memory (VmHWM of its pid, reset before
each case) and /healthz's latency while 200 clients send their headers a line a second.

    /usr/bin/python3 bench/serve_abuse.py [--build build/release] [--loom PATH]

Bounded: every socket has a timeout, the slow clients stop after --attack-s seconds, and the
whole run takes about a minute. --loom runs another build of the command (say, an older one, to
compare); the deadlines are shortened with --header-timeout/--body-timeout where it has them."""
import argparse
import http.client
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--build", default="build/release")
parser.add_argument("--loom", help="the loom command (default: BUILD/tools/loom)")
parser.add_argument("--attack-s", type=float, default=12, help="how long the slow clients last")
parser.add_argument("--slow-clients", type=int, default=200)
parser.add_argument("--attack-only", action="store_true",
                    help="only the slow clients and idle connections (an old build that holds a"
                         " 1 GiB chunked body whole may not survive the other cases)")
args = parser.parse_args()
loom = os.path.abspath(args.loom or os.path.join(args.build, "tools", "loom"))
work = tempfile.mkdtemp(prefix="serve_abuse_")
model = os.path.join(work, "m.cmf")
subprocess.run([os.path.join(args.build, "save_dense_model"), model], check=True,
               capture_output=True, timeout=120)

help_text = subprocess.run([loom, "serve", "--help"], capture_output=True, text=True,
                           timeout=60).stdout
hardened = "--header-timeout" in help_text
flags = ["--header-timeout", "5", "--body-timeout", "5"] if hardened else []
server = subprocess.Popen([loom, "serve", model, "--port", "0", *flags], cwd=work,
                          stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "w"),
                          text=True)
ready, _, _ = select.select([server.stdout], [], [], 60)
if not ready:
    server.kill()
    sys.exit("the server printed nothing in 60 s")
port = int(server.stdout.readline().rsplit(":", 1)[1])
PREDICT = "/v1/models/model:predict"


def status_kib(field):
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak():
    with open(f"/proc/{server.pid}/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS


def read_status(sock, timeout):
    """The status code of the response on sock, 'closed' or 'timeout'."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return "closed" if not data else data[:40].decode("latin-1")
            data += chunk
    except socket.timeout:
        return "timeout"
    except OSError:
        return "closed"
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else data[:40].decode("latin-1")


def connect():
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def raw(request, timeout=30):
    """Sends request bytes (stopping early if the server answers or closes); the status."""
    with connect() as s:
        try:
            for i in range(0, len(request), 1 << 20):
                s.sendall(request[i:i + (1 << 20)])
        except OSError:
            pass
        return read_status(s, timeout)


def post(body, content_type="application/json"):
    head = f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n"
    return raw(head.encode() + b"\r\n" + body)


def chunked_gib():
    """1 GiB in 1 MiB chunks, stopped when the server answers or closes."""
    with connect() as s:
        s.sendall(f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Type: application/json\r\n\r\n".encode())
        chunk = b"100000\r\n" + b"[" * (1 << 20) + b"\r\n"
        sent = 0
        try:
            while sent < 1024 and not select.select([s], [], [], 0)[0]:
                s.sendall(chunk)
                sent += 1
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        return f"{read_status(s, 60)} after {sent} MiB sent"


def slow(lines, delay=1.0, limit=15):
    """Sends one line every delay seconds; the status and when it came."""
    start = time.time()
    with connect() as s:
        for line in lines:
            if select.select([s], [], [], delay)[0] or time.time() - start > limit:
                break
            try:
                s.sendall(line)
            except OSError:
                break
        status = read_status(s, max(0.1, limit - (time.time() - start)))
    return f"{status} after {time.time() - start:.1f} s"


sample = b"[0.25,-1.5,0.75]"
big = b'{"inputs": [' + b",".join([sample] * 980000) + b"]}"  # 15.7 MB
form = b'{"inputs": [' + b",".join([sample] * 6000) + b"]}"  # 100 KB, as `curl -d @file` sends it
cases = [
    ("chunked 1 GiB body", chunked_gib),
    ("Content-Length: 1 TiB", lambda: raw(
        f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: {1 << 40}\r\n\r\n".encode()
        + b"{" * 4096)),
    ("form-encoded 100 KB JSON (curl -d)", lambda: post(form, "application/x-www-form-urlencoded")),
    ("Content-Type: text/plain", lambda: post(b'{"inputs": [[1,2,3]]}', "text/plain")),
    ("1e999", lambda: post(b'{"inputs": [[1, 2, 1e999]]}')),
    ("100,000-digit number", lambda: post(b'{"inputs": [[1, 2, ' + b"9" * 100000 + b"]]}")),
    ("invalid UTF-8", lambda: post(b'{"inputs": [[1, 2, "\xff\xfe"]]}')),
    ("200 KB of headers", lambda: raw(f"GET /healthz HTTP/1.1\r\nHost: x\r\n".encode()
                                      + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 4000)
                                                 for i in range(50)) + b"\r\n")),
    ("headers a line a second", lambda: slow([b"GET /healthz HTTP/1.1\r\n"]
                                             + [b"X-Slow: 1\r\n"] * 30)),
    ("body a byte a second", lambda: slow(
        [f"POST {PREDICT} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n".encode()]
        + [b"["] * 30)),
]

print(f"loom serve abuse on 127.0.0.1:{port} ({loom}; {'hardened' if hardened else 'no deadlines'})")
print(f"idle RSS {status_kib('VmRSS') / 1024:.0f} MiB")
for name, case in [] if args.attack_only else cases:
    reset_peak()
    result = case()
    print(f"{name:40s} {result!s:28s} peak RSS {status_kib('VmHWM') / 1024:6.0f} MiB")

# Eight valid 15.7 MB requests at once.
reset_peak()
codes = []
threads = [threading.Thread(target=lambda: codes.append(post(big)))
           for _ in range(0 if args.attack_only else 8)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=120)
time.sleep(0.5)
print(f"{'8 x 15.7 MB valid bodies at once':40s} {sorted(codes, key=str)!s:28s} peak RSS "
      f"{status_kib('VmHWM') / 1024:6.0f} MiB, after {status_kib('VmRSS') / 1024:.0f} MiB")


def healthz_latencies(seconds):
    """/healthz's latency every 0.25 s for that long ('timeout' after 3 s)."""
    out = []
    end = time.time() + seconds
    while time.time() < end:
        start = time.time()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
            conn.request("GET", "/healthz")
            ok = conn.getresponse().status == 200
            conn.close()
            out.append(time.time() - start if ok else None)
        except (OSError, http.client.HTTPException):
            out.append(None)
        time.sleep(max(0.0, 0.25 - (time.time() - start)))
    return out


def summary(latencies):
    good = [l * 1000 for l in latencies if l is not None]
    failed = len(latencies) - len(good)
    if not good:
        return f"all {failed} failed"
    return (f"median {statistics.median(good):.1f} ms, max {max(good):.1f} ms, "
            f"{failed} of {len(latencies)} failed or timed out")


# Slow clients: each sends its request line, then a header line a second.
stop = threading.Event()
slow_codes = []


def slow_client():
    while not stop.is_set():
        try:
            with connect() as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\n")
                while not stop.is_set() and not select.select([s], [], [], 1.0)[0]:
                    s.sendall(b"X-Slow: 1\r\n")
                slow_codes.append(read_status(s, 1) if not stop.is_set() else "stopped")
        except OSError:
            slow_codes.append("refused")
            time.sleep(0.5)


attackers = [threading.Thread(target=slow_client, daemon=True) for _ in range(args.slow_clients)]
for t in attackers:
    t.start()
time.sleep(1)
latencies = healthz_latencies(args.attack_s)
stop.set()
for t in attackers:
    t.join(timeout=10)
slow_codes = [str(c) for c in slow_codes]
counts = {c: slow_codes.count(c) for c in sorted(set(slow_codes))}
print(f"/healthz under {args.slow_clients} slow clients: {summary(latencies)}; "
      f"the slow clients got {counts}")

# More idle connections than the server takes.
sockets = []
for _ in range(300):
    try:
        sockets.append(connect())
    except OSError:
        break
time.sleep(1)
answered = select.select(sockets, [], [], 0.5)[0]
idle = [str(read_status(s, 0.2)) if s in answered else "open" for s in sockets]
print(f"300 idle connections: {len(sockets)} opened, answered at once: "
      f"{ {c: idle.count(c) for c in sorted(set(idle))} }; /healthz: "
      f"{summary(healthz_latencies(1))}")
for s in sockets:
    s.close()

try:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    r = conn.getresponse()
    text = r.read().decode()
    print(f"/metrics: {r.status}")
    for line in text.splitlines():
        if line.startswith("loom_serve_errors_total") or line.startswith("loom_serve_requests"):
            print("  " + line)
except (OSError, http.client.HTTPException) as e:
    print(f"/metrics: {e}")
server.terminate()
try:
    server.wait(timeout=30)
except subprocess.TimeoutExpired:
    server.kill()
log = open(os.path.join(work, "server.log")).read().splitlines()
print(f"server log: {len(log)} lines; first: {log[0][:150] if log else '(none)'}")
