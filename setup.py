"""Builds loom._loom for `pip install --no-build-isolation .`: CMake configures the repository in
build/pip with the release preset's flags, builds only the libraries and the extension module,
and the module is copied into the wheel beside python/loom."""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.join(ROOT, "build", "pip")
        subprocess.run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja",
                        "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS=-march=x86-64-v3",
                        "-DLOOM_WERROR=ON", "-DLOOM_BUILD_TESTS=OFF", "-DLOOM_BUILD_EXAMPLES=OFF",
                        "-DLOOM_BUILD_BENCHES=OFF", "-DLOOM_BUILD_TOOLS=OFF", "-DLOOM_INSTALL=OFF",
                        "-DLOOM_BUILD_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"],
                       check=True)
        subprocess.run(["cmake", "--build", build, "--target", "_loom"], check=True)
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(os.path.join(build, "python", "loom", os.path.basename(target)), target)


setup(ext_modules=[Extension("loom._loom", sources=[])], cmdclass={"build_ext": CMakeBuild})
