"""Shared by the end-to-end tests: run an example in a fresh folder, check its output."""
import os
import re
import shutil
import subprocess
import sys


def run(name, *args):
    """Runs build_dir/name in a fresh work folder; returns its stdout lines."""
    build_dir, work_dir = sys.argv[1], sys.argv[2]
    shutil.rmtree(work_dir, ignore_errors=True)
    os.makedirs(work_dir)
    proc = subprocess.run([os.path.join(build_dir, name), *args], cwd=work_dir,
                          capture_output=True, text=True, timeout=600)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        fail(f"{name} exited with {proc.returncode}")
    return proc.stdout.splitlines()


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def matching(lines, pattern):
    """The lines fully matching pattern, as match objects."""
    return [m for m in (re.fullmatch(pattern, l) for l in lines) if m]
