"""`pip install --no-build-isolation .` as the README gives it, without building the core: the
checkout's setup.py, pyproject.toml and python/ are copied into a read-only tree, a fake `cmake`
first on PATH records its arguments and, for the build step, writes a stub extension where the
real build puts it, and the README's pip installs the tree into a virtual environment made by
the README's command (one that sees the interpreter's numpy, setuptools and wheel), offline.
The build folder must be a temporary one, outside the tree and gone afterwards, nothing may be
written into the tree (compared file by file: root may write into a read-only tree), CMake gets
no -march and no warnings as errors, the user's CMAKE_ARGS (last, so they override) and
CMAKE_BUILD_PARALLEL_LEVEL reach it, and the environment gets the package with the extension.
Every README command that starts Python must name its interpreter in full (`python3` on PATH
may be another Python, without numpy), and those that run the build tree's package must run
(an import and a Dense layer's eval, then the command itself) where they name the interpreter
this build is for."""
import glob
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys

from example import expect, fail

build_dir, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
source_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def set_writable(top, writable):
    """Gives top's files and folders write permission, or takes it away from everyone."""
    for path in [top] + [os.path.join(d, n) for d, dirs, files in os.walk(top)
                         for n in dirs + files]:
        mode = os.lstat(path).st_mode
        if not stat.S_ISLNK(mode):
            os.chmod(path, mode | stat.S_IWUSR if writable else mode & ~0o222)


def snapshot(top):
    """Every path under top with its type, size and modification time."""
    entries = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            s = os.lstat(os.path.join(d, n))
            entries[os.path.relpath(os.path.join(d, n), top)] = (s.st_mode, s.st_size,
                                                                 s.st_mtime_ns)
    return entries


def run(*command, env=None, cwd=None):
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    if proc.returncode != 0:
        fail(f"{' '.join(command)} exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


# The README's shell commands that start Python; every interpreter among them named in full.
with open(os.path.join(source_dir, "README.md")) as f:
    readme = f.read()
commands = [line.split("#")[0].strip() for block in re.findall(r"```sh\n(.*?)```", readme, re.S)
            for line in block.splitlines()]
commands = [c for c in commands if re.search(r"\bpython3?\b", c)]
interpreters = [w for c in commands for w in shlex.split(c)
                if re.fullmatch(r"(\S*/)?python3(\.\d+)?", w)]
bare = [i for i in interpreters if not os.path.isabs(i)]
expect(interpreters and not bare, f"the README runs {bare} from PATH: {commands}")
# The install: `<python> -m venv <options> <dir> && <dir>/bin/pip install <options> .`
installs = [c.split("&&") for c in commands if " -m venv " in c]
expect(len(installs) == 1 and len(installs[0]) == 2, f"no venv and pip install in {commands}")
make_venv, pip_install = shlex.split(installs[0][0]), shlex.split(installs[0][1])
venv_name = make_venv[-1]
expect(make_venv[1:3] == ["-m", "venv"] and pip_install[:2] == [f"{venv_name}/bin/pip", "install"]
       and pip_install[-1] == ".", f"the README installs with {installs[0]}")

if os.path.isdir(work):
    set_writable(work, True)  # a previous run's read-only tree
    shutil.rmtree(work)
os.makedirs(work)

# The virtual environment as the README makes it; without venv (Debian's python3-venv), pip,
# setuptools or wheel there is nothing to test.
venv = os.path.join(work, "venv")
made = subprocess.run(make_venv[:-1] + [venv], capture_output=True, text=True)
python = os.path.join(venv, "bin", "python")
if made.returncode != 0 or subprocess.run(
        [python, "-c", "import setuptools, wheel, pip"], capture_output=True).returncode != 0:
    print(f"SKIPPED: no virtual environment with pip, setuptools and wheel from {make_venv}: "
          f"{made.stderr.strip()}")
    sys.exit(0)

# The read-only tree: what setup.py and pyproject.toml build from.
tree = os.path.join(work, "checkout")
os.makedirs(tree)
for name in ["setup.py", "pyproject.toml"]:
    shutil.copy(os.path.join(source_dir, name), tree)
shutil.copytree(os.path.join(source_dir, "python"), os.path.join(tree, "python"),
                ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
set_writable(tree, False)
before = snapshot(tree)

# The fake cmake.
bin_dir, log = os.path.join(work, "bin"), os.path.join(work, "cmake_calls.jsonl")
os.makedirs(bin_dir)
ext_suffix = run(python, "-c",
                 "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))").strip()
with open(os.path.join(bin_dir, "cmake"), "w") as f:
    f.write(f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps({{"cwd": os.getcwd(), "args": args}}) + "\\n")
if args[0] == "--build":  # python/CMakeLists.txt's LIBRARY_OUTPUT_DIRECTORY of _loom
    package = os.path.join(args[1], "python", "loom")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "_loom" + {ext_suffix!r}), "w") as f:
        f.write("stub extension\\n")
    with open(os.path.join(package, "Cntk.ExtensibilityExamples-2.7.so"), "w") as f:
        f.write("stub example library\\n")
""")
os.chmod(os.path.join(bin_dir, "cmake"), 0o755)

tmp = os.path.join(work, "tmp")
os.makedirs(tmp)
user_args = ["-DCMAKE_CXX_FLAGS=-O2 -g", "-DLOOM_USER_OPTION=1"]
env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "CMAKE_GENERATOR"}
env.update(PATH=bin_dir + os.pathsep + os.environ["PATH"], TMPDIR=tmp,
           CMAKE_ARGS=shlex.join(user_args), CMAKE_BUILD_PARALLEL_LEVEL="3")
# Offline (--no-index): everything the build needs is the environment's already.
run(os.path.join(venv, "bin", "pip"), *pip_install[1:-1], "--no-deps", "--no-index",
    "--no-cache-dir", tree, env=env, cwd=work)

with open(log) as f:
    calls = [json.loads(line) for line in f]
configures = [c for c in calls if "-S" in c["args"]]
builds = [c for c in calls if c["args"][0] == "--build"]
expect(len(configures) == 1 and len(builds) == 1, f"cmake was called as {calls}")
configure, build = configures[0]["args"], builds[0]["args"]
expect(configure[configure.index("-S") + 1] == tree, f"configured {configure}")
folder = os.path.join(configures[0]["cwd"], configure[configure.index("-B") + 1])
expect(os.path.commonpath([folder, tmp]) == tmp,
       f"the build folder {folder} is not in the temporary directory {tmp}")
expect(not os.path.exists(folder), f"the build folder {folder} was left behind")
expect(os.path.join(builds[0]["cwd"], build[1]) == folder
       and build[2:] == ["--target", "_loom", "--parallel", "3"], f"built with {build}")
expect(snapshot(tree) == before, "the install wrote into the checkout: "
       f"{sorted(set(snapshot(tree).items()) ^ set(before.items()))}")
forced = [a for call in calls for a in call["args"]
          if "-march" in a or "-Werror" in a or "LOOM_WERROR" in a]
expect(not forced, f"cmake was given {forced}")
expect(configure[-len(user_args):] == user_args, f"CMAKE_ARGS are not last in {configure}")
interpreter = [a.split("=", 1)[1] for a in configure if a.startswith("-DPython3_EXECUTABLE=")]
expect(len(interpreter) == 1 and os.path.dirname(interpreter[0]) == os.path.dirname(python),
       f"not built for the environment's interpreter: {configure}")

site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
package = os.path.join(site, "loom")
with open(os.path.join(package, "_loom" + ext_suffix)) as f:
    expect(f.read() == "stub extension\n", "the extension is not the one built")
with open(os.path.join(package, "Cntk.ExtensibilityExamples-2.7.so")) as f:
    expect(f.read() == "stub example library\n", "CNTK's example library is not the one built")
expected = sorted(os.path.relpath(p, os.path.join(source_dir, "python"))
                  for p in glob.glob(os.path.join(source_dir, "python", "loom", "**", "*.py"),
                                     recursive=True))
installed = sorted(os.path.relpath(p, site)
                   for p in glob.glob(os.path.join(package, "**", "*.py"), recursive=True))
expect(installed == expected, f"installed {set(installed) ^ set(expected)} differently")
expect(glob.glob(os.path.join(site, "loom-*.dist-info", "RECORD")), "no loom dist-info")
print(f"pip install: built in {folder}, installed into {package}")

# The README's commands that run Python against the build tree, run from the checkout with
# this build's package where they name the interpreter this build is for.
in_build = [shlex.split(c) for c in commands if c.startswith("PYTHONPATH=build/release/python ")]
expect(in_build, f"the README runs nothing from the build tree: {commands}")
env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"), OMP_NUM_THREADS="1",
           PYTHONDONTWRITEBYTECODE="1")
for words in in_build:
    interpreter = words[1]
    if os.path.realpath(interpreter) != os.path.realpath(sys.executable):
        print(f"skipped (this build is for {sys.executable}): {shlex.join(words)}")
        continue
    printed = run(interpreter, "-c", "import loom, numpy as np; z = loom.layers.Dense(2, "
                  "init=1)(loom.input_variable(3)); print(z.eval(np.ones((1, 3), np.float32)))",
                  env=env, cwd=source_dir)
    expect(printed.split() == ["[[3.", "3.]]"], f"{interpreter}: a Dense layer gave {printed}")
    run(interpreter, *words[2:], env=env, cwd=source_dir)
    print(f"ran: {shlex.join(words)}")
print("pip install test passed")
