"""Builds the _tierkv extension with the checkout's CMake project (the
python/ directory lives inside a tierkv checkout); everything else is in
pyproject.toml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not (ROOT / "CMakeLists.txt").exists():
            raise RuntimeError(f"{ROOT} is not a tierkv checkout (no CMakeLists.txt)")
        build = Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *gen,
                        "-DCMAKE_BUILD_TYPE=Release", "-DTIERKV_BUILD_TESTS=OFF",
                        "-DTIERKV_BUILD_BENCH=OFF", f"-DPython3_EXECUTABLE={sys.executable}"],
                       check=True)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(["cmake", "--build", str(build), "--target", "_tierkv", "-j", jobs],
                       check=True)
        built = next((build / "python" / "tierkv").glob("_tierkv*.so"))
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


setup(ext_modules=[CMakeExtension("tierkv._tierkv")], cmdclass={"build_ext": CMakeBuild})
