"""Packs grove/ with the libgrove.so the CMake build already made (no C++ is
compiled here): $GROVE_LIBRARY if set, else $GROVE_BUILD_DIR/libgrove.so,
else <repo>/build/libgrove.so. Build the library first:

    cmake --build build --target grove
    pip install ./python                      # or GROVE_BUILD_DIR=/path/to/build pip install ./python
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution


def find_library() -> Path:
    if os.environ.get("GROVE_LIBRARY"):
        candidates = [Path(os.environ["GROVE_LIBRARY"])]
    else:
        build = os.environ.get("GROVE_BUILD_DIR") or str(Path(__file__).resolve().parent.parent / "build")
        candidates = [Path(build) / "libgrove.so"]
    for path in candidates:
        if path.is_file():
            return path.resolve()  # the versioned file behind the symlinks
    raise SystemExit(f"grove: no libgrove.so at {', '.join(map(str, candidates))}; build it first "
                     "(cmake --build build --target grove, GROVE_BUILD_SHARED=ON) or set GROVE_BUILD_DIR "
                     "or GROVE_LIBRARY")


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "grove" / "libgrove.so"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(find_library(), target)
        # The build's debug info (RelWithDebInfo: ~80 MB of it) is no use in a
        # package; the symbols stay.
        strip = shutil.which("strip")
        if strip:
            subprocess.run([strip, "--strip-debug", str(target)], check=True)


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
