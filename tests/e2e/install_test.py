"""Loom used from another project (tests/consumer) in the three ways the README gives:
installed with `cmake --install` (reusing the build tree's libraries) and found with
find_package(Loom) or pkg-config, and built from source with add_subdirectory. Each consumer
program must build, run and print the Dense layer's outputs. A C program (tests/consumer_c)
builds against the installed C API, libloom_c and loom_c.h, and evaluates a model."""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import time

import tfevents
from example import expect, fail

build_dir, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
source_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
consumer_dir = os.path.join(source_dir, "tests", "consumer")
prefix = os.path.join(work, "prefix")


def cache_value(name):
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return ""


def sh(*args, env=None, cwd=None):
    print("+ " + " ".join(shlex.quote(a) for a in args), flush=True)
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.stdout.write(proc.stderr)
        fail(f"{args[0]} exited with {proc.returncode}")
    print(f"  ({time.monotonic() - start:.1f}s)", flush=True)
    return proc.stdout


def check_output(program, with_train_layer):
    run_dir = program + "_run"
    os.makedirs(run_dir)
    lines = sh(program, cwd=run_dir).splitlines()
    expected = ["dense: 2.5 2.5 2.5 4.5 4.5 4.5"]
    if with_train_layer:
        expected.append(" Minibatch[   1-   1]: loss = 0.750000 * 2;")
        _, events = tfevents.read_log_dir(os.path.join(run_dir, "consumer_logdir"))
        scalars = [(tag, e["step"], value) for e in events for tag, value in e["scalars"]]
        expect(scalars == [("minibatch/avg_loss", 1, 0.75)], f"TensorBoard scalars {scalars}")
    expect(lines == expected, f"{program} printed {lines}, expected {expected}")


if cache_value("LOOM_INSTALL") != "ON":
    print("SKIPPED: the build tree was configured with LOOM_INSTALL=OFF")
    raise SystemExit(0)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
# The consumers use the build tree's compiler (the C++ ABI must match the installed libraries)
# and its optimization flags; CMAKE_CXX_COMPILER_LAUNCHER (ccache) is taken from the
# environment by CMake itself.
cxx = cache_value("CMAKE_CXX_COMPILER")
cxx_flags = cache_value("CMAKE_CXX_FLAGS")
if cache_value("LOOM_SANITIZE") == "ON":
    cxx_flags += " -fsanitize=address,undefined"  # the libraries call the sanitizers' runtime
configure = ["cmake", "-G", "Ninja", f"-DCMAKE_CXX_COMPILER={cxx}",
             f"-DCMAKE_BUILD_TYPE={cache_value('CMAKE_BUILD_TYPE')}",
             f"-DCMAKE_CXX_FLAGS={cxx_flags}"]

# Install, reusing the libraries already built.
sh("cmake", "--install", build_dir, "--prefix", prefix)
headers = glob.glob(os.path.join(prefix, "include", "loom", "**", "*.h"), recursive=True)
expect(os.path.join(prefix, "include", "loom", "loom.h") in headers, "loom/loom.h not installed")
expect(not [h for h in headers if h.endswith("_test_util.h")], "test utilities were installed")
libdir = os.path.dirname(glob.glob(os.path.join(prefix, "*", "**", "libloom_core.a"),
                                   recursive=True)[0])
for name in ["LoomConfig.cmake", "LoomConfigVersion.cmake", "LoomTargets.cmake"]:
    expect(os.path.exists(os.path.join(libdir, "cmake", "Loom", name)), f"{name} not installed")

# The Python package, when the build tree has it: installed in the prefix's site-packages and
# importable from there (this test runs with the interpreter it was built for).
if cache_value("LOOM_BUILD_PYTHON") == "ON":
    packages = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", "loom"))
    expect(len(packages) == 1 and glob.glob(os.path.join(packages[0], "_loom*.so")),
           f"the Python package was not installed: {packages}")
    python_env = dict(os.environ, PYTHONPATH=os.path.dirname(packages[0]))
    printed = sh(sys.executable, "-c", "import loom; print(loom.__file__); "
                 "print(loom.layers.Dense(2)(loom.input_variable(3)))", env=python_env, cwd=work)
    expect(printed.splitlines() == [os.path.join(packages[0], "__init__.py"),
                                    "Dense(Tensor[3]) -> Tensor[2]"], f"import loom: {printed}")

# The clients (bindings/): libloom_c.so, loom_c.h and CNTKLibrary.h installed, the imported
# targets Loom::loom_c and Loom::loom_cntk exported, the C# assembly and the Java jar, and a C
# program built against the C API with one cc command and by a C-only CMake project.
if cache_value("LOOM_BUILD_BINDINGS") == "ON":
    installed = sorted(os.path.basename(p) for p in glob.glob(os.path.join(libdir, "libloom_c.so*")))
    expect(installed == ["libloom_c.so", "libloom_c.so.1", "libloom_c.so.1.0.0"],
           f"libloom_c installed as {installed}")
    with open(os.path.join(libdir, "cmake", "Loom", "LoomTargets.cmake")) as f:
        targets = f.read()
    for target in ["Loom::loom_c", "Loom::loom_cntk"]:
        expect(target in targets, f"find_package(Loom) gives no {target}")
    expect(os.path.isfile(os.path.join(prefix, "include", "CNTKLibrary.h")),
           "CNTKLibrary.h is not installed")
    # The C# assembly and the Java jar with its JNI library, where their tools were found.
    if os.path.isfile(os.path.join(build_dir, "bindings", "csharp", "Cntk.Core.Managed.dll")):
        expect(os.path.isfile(os.path.join(libdir, "cli", "loom", "Cntk.Core.Managed.dll")),
               "Cntk.Core.Managed.dll is not installed")
    if glob.glob(os.path.join(build_dir, "bindings", "java", "cntk*.jar")):
        expect(glob.glob(os.path.join(prefix, "share", "java", "cntk*.jar")),
               "cntk.jar is not installed")
        expect(os.path.isfile(os.path.join(libdir, "libloom_java.so")),
               "libloom_java.so is not installed")
    cc = os.environ.get("CC", "cc")  # a C ABI: any C compiler will do
    c_flags = ["-fsanitize=address,undefined"] if cache_value("LOOM_SANITIZE") == "ON" else []
    program = os.path.join(work, "c_consumer")
    sh(cc, "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", *c_flags,
       "-I", os.path.join(prefix, "include"), os.path.join(source_dir, "tests", "consumer_c",
                                                           "consumer.c"),
       "-o", program, f"-L{libdir}", "-lloom_c", f"-Wl,-rpath,{libdir}")
    model = os.path.join(os.path.dirname(source_dir), "shared", "cntk-models",
                         "v2_load_and_eval.dnn")
    printed = sh(program, model).splitlines()
    expect(printed == ["i1: 1.5 2 3 4.25"], f"the C consumer printed {printed}")
    # The same program from a C-only CMake project through find_package(Loom).
    c_tree = os.path.join(work, "find_package_c")
    c_configure = ["cmake", "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}"]
    if c_flags:
        c_configure += [f"-DCMAKE_C_FLAGS={' '.join(c_flags)}"]
    sh(*c_configure, "-S", os.path.join(source_dir, "tests", "consumer_c"), "-B", c_tree)
    sh("cmake", "--build", c_tree)
    printed = sh(os.path.join(c_tree, "c_consumer"), model).splitlines()
    expect(printed == ["i1: 1.5 2 3 4.25"], f"the C consumer built by CMake printed {printed}")

# 1. find_package(Loom) with the prefix on CMAKE_PREFIX_PATH.
tree = os.path.join(work, "find_package")
sh(*configure, "-S", consumer_dir, "-B", tree, f"-DCMAKE_PREFIX_PATH={prefix}")
sh("cmake", "--build", tree)
check_output(os.path.join(tree, "consumer"), with_train_layer=True)

# 2. pkg-config: one compiler command.
env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
flags = shlex.split(sh("pkg-config", "--cflags", "--libs", "loom", env=env))
libs = [f for f in flags if f.startswith("-lloom_")]
expect(libs[0] == "-lloom_train" and libs[-1] == "-lloom_core", f"layer order: {libs}")
for needed in ["-ldnnl", "-fopenmp", "-lz"]:
    expect(needed in flags, f"pkg-config loom does not give {needed}: {flags}")
expect(flags.index("-lloom_core") < flags.index("-ldnnl"), "-ldnnl comes before the layers")
launcher = shlex.split(os.environ.get("CMAKE_CXX_COMPILER_LAUNCHER", ""))
program = os.path.join(work, "pkg_config_consumer")
sh(*launcher, cxx, "-std=c++20", *shlex.split(cxx_flags), "-O2",
   "-DLOOM_CONSUMER_ALL_LAYERS", os.path.join(consumer_dir, "consumer.cpp"), "-o", program,
   *flags)
check_output(program, with_train_layer=True)

# 3. add_subdirectory: Loom's sources built as part of the consumer, without Loom's tests,
# examples and benchmarks, and only the layers the consumer links. Unoptimized (no build type):
# what is checked is the build's shape and the program's output, and -O0 compiles the layers
# several times faster than the build tree's optimization would.
tree = os.path.join(work, "add_subdirectory")
unoptimized = [a for a in configure if not a.startswith("-DCMAKE_BUILD_TYPE=")]
sh(*unoptimized, "-DCMAKE_BUILD_TYPE=", "-S", consumer_dir, "-B", tree,
   f"-DLOOM_SOURCE_DIR={source_dir}")
with open(os.path.join(tree, "build.ninja")) as f:
    ninja = f.read()
for target in ["core_test", "mnist_convnet", "bench_", "fuzz_model_loader"]:
    expect(target not in ninja, f"the subproject build has Loom's {target}")
sh("cmake", "--build", tree, "--target", "consumer")
check_output(os.path.join(tree, "consumer"), with_train_layer=False)
built = sorted(os.path.basename(p) for p in glob.glob(os.path.join(tree, "loom", "libloom_*.a")))
expect(built == ["libloom_core.a", "libloom_graph.a", "libloom_kernels.a", "libloom_layers.a",
                 "libloom_ops.a"], f"built {built}")
print("install test passed")
