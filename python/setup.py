"""Builds libratelimit's extension.  The C libraries it links statically (libratelimit,
libratelimit_redis) are built with cmake (cmake/CMakeLists.txt: the parts' own CMakeLists,
position-independent, Release) from the C sources: an sdist's csrc/ (a copy of the
repository's include/, src/core, src/store, src/redis), else the repository this folder sits
in.  RLT_SOURCE_DIR names another folder holding include/ and src/; RLT_BUILD_DIR an existing
cmake build of the repository to take the libraries from instead.  hiredis is the system's.
Offline: nothing is downloaded.  The wheel is zipped by _rlt_backend.py (no `wheel` needed)."""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
# What the sdist copies of the repository: the library's headers and the three parts it links.
C_PARTS = ["include/ratelimit", "src/core", "src/store", "src/redis"]


def has_sources(d):
    return os.path.exists(os.path.join(d, "include", "ratelimit", "ratelimit.h"))


def c_root():
    """Where include/ and src/ are: RLT_SOURCE_DIR, the sdist's csrc/, or the repository."""
    for d in (os.environ.get("RLT_SOURCE_DIR"), os.path.join(HERE, "csrc"), os.path.dirname(HERE)):
        if d and has_sources(d):
            return os.path.abspath(d)
    sys.exit("libratelimit: the C sources are not here: build from the repository "
             "(pip install ./python), from an sdist, or set RLT_SOURCE_DIR")


def static_libs(root):
    """The two static libraries, [libratelimit_redis.a, libratelimit.a], built if need be."""
    given = os.environ.get("RLT_BUILD_DIR")
    if given:
        b = os.path.abspath(given)
        return [os.path.join(b, "src", "redis", "libratelimit_redis.a"),
                os.path.join(b, "src", "store", "libratelimit.a")]
    build = os.path.join(HERE, "build", "clibs")
    subprocess.check_call(["cmake", "-S", os.path.join(HERE, "cmake"), "-B", build,
                           "-DRLT_ROOT=" + root, "-DCMAKE_BUILD_TYPE=Release"],
                          stdout=subprocess.DEVNULL)
    subprocess.check_call(["cmake", "--build", build, "-j", os.environ.get("JOBS", "2"),
                           "--target", "ratelimit", "ratelimit_redis"], stdout=subprocess.DEVNULL)
    libs = [os.path.join(build, "redis", "libratelimit_redis.a"),
            os.path.join(build, "store", "libratelimit.a")]
    for lib in libs:
        if not os.path.exists(lib):
            sys.exit("libratelimit: %s was not built (is libhiredis-dev installed?)" % lib)
    return libs


class BuildExt(build_ext):
    def build_extensions(self):
        root = c_root()
        libs = static_libs(root)
        for ext in self.extensions:
            ext.include_dirs = [os.path.join(root, "include")]
            ext.extra_objects = libs
        super().build_extensions()


class Sdist(sdist):
    """Copies the C sources into the sdist (csrc/), so that it builds anywhere: nothing in it
    names the machine or the folder it was made in."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = c_root()
        for part in C_PARTS:
            shutil.copytree(os.path.join(root, part), os.path.join(base_dir, "csrc", part),
                            ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.a"))


SOURCES = ["src/module.c", "src/util.c", "src/store.c", "src/pool.c", "src/memory.c",
           "src/redis.c", "src/daemon.c", "src/budget.c",
           "src/decision.c", "src/limiter.c"]

setup(
    ext_modules=[Extension(
        "libratelimit._native",
        sources=SOURCES,
        libraries=["hiredis", "pthread"],
        extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
        depends=["src/native.h", "src/backend.h"],
    )],
    cmdclass={"build_ext": BuildExt, "sdist": Sdist},
)
