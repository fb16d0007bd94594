"""Builds loom._loom for `pip install --no-build-isolation .`: CMake configures the repository in
a temporary folder and builds only the libraries and the extension module, which is copied into
the wheel beside python/loom. Nothing is written into the checkout (it may be read-only): the
build folder, setuptools' build/ and its egg-info all lie in the temporary folder, removed at
the end (a repeated install builds anew; CMAKE_CXX_COMPILER_LAUNCHER=ccache makes that quick).

The user's settings are CMake's own (CXXFLAGS, CXX, CMAKE_GENERATOR, CMAKE_CXX_COMPILER_LAUNCHER
in the environment) and CMAKE_ARGS, extra arguments to the configure step split as a shell
would (scikit-build's convention): -DCMAKE_BUILD_TYPE=RelWithDebInfo there replaces Release.
CMAKE_BUILD_PARALLEL_LEVEL jobs build it, one a CPU by default. There is no -march and no
-DLOOM_WERROR=ON: those are the presets' (the project's own builds); without -march the kernels
compile for the compiler's default instruction set and pick their AVX-512 copies at run time."""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = self.build_temp  # inside the temporary build_base below
        configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                     "-DLOOM_BUILD_TESTS=OFF", "-DLOOM_BUILD_EXAMPLES=OFF",
                     "-DLOOM_BUILD_BENCHES=OFF", "-DLOOM_BUILD_TOOLS=OFF",
                     "-DLOOM_BUILD_BINDINGS=OFF", "-DLOOM_INSTALL=OFF", "-DLOOM_BUILD_PYTHON=ON",
                     f"-DPython3_EXECUTABLE={sys.executable}"]
        if "CMAKE_GENERATOR" not in os.environ and shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        subprocess.run(configure + shlex.split(os.environ.get("CMAKE_ARGS", "")), check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(len(os.sched_getaffinity(0)))
        subprocess.run(["cmake", "--build", build, "--target", "_loom", "--parallel", jobs],
                       check=True)
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        built = os.path.join(build, "python", "loom")
        shutil.copy(os.path.join(built, os.path.basename(target)), target)
        # CNTK's example native user function library (python/CMakeLists.txt) lies beside it.
        for library in glob.glob(os.path.join(built, "Cntk.ExtensibilityExamples-*.so")):
            shutil.copy(library, os.path.dirname(target))


# setuptools' defaults would write build/ into the checkout and the egg-info into python/.
with tempfile.TemporaryDirectory(prefix="loom-pip-") as build_base:
    setup(ext_modules=[Extension("loom._loom", sources=[])], cmdclass={"build_ext": CMakeBuild},
          options={"build": {"build_base": build_base}, "egg_info": {"egg_base": build_base}})
