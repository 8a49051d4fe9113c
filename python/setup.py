"""Builds libratelimit's extension: the C libraries (libratelimit, libratelimit_redis) are built
with cmake from the repository this folder sits in, position-independent, and linked statically;
hiredis is the system's.  RLT_BUILD_DIR names a cmake build folder to take them from instead
(configured with -DCMAKE_POSITION_INDEPENDENT_CODE=ON).  Offline: nothing is downloaded."""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDED = os.path.join(HERE, "rlt_source_dir.txt")


def source_root():
    """The repository: RLT_SOURCE_DIR, else the folder above this one, else (building from an
    sdist that `python3 -m build` made of this folder) the one the sdist recorded."""
    if os.environ.get("RLT_SOURCE_DIR"):
        return os.environ["RLT_SOURCE_DIR"]
    up = os.path.dirname(HERE)
    if os.path.exists(os.path.join(up, "include", "ratelimit", "ratelimit.h")):
        return up
    if os.path.exists(RECORDED):
        return open(RECORDED).read().strip()
    return up


ROOT = source_root()


def libs_dir():
    """The cmake build folder holding src/store/libratelimit.a and src/redis/libratelimit_redis.a."""
    given = os.environ.get("RLT_BUILD_DIR")
    if given:
        return os.path.abspath(given)
    if not os.path.exists(os.path.join(ROOT, "include", "ratelimit", "ratelimit.h")):
        sys.exit("libratelimit: the C sources are not at %s; build from the repository "
                 "(pip install ./python) or set RLT_SOURCE_DIR" % ROOT)
    build = os.path.join(ROOT, "build", "python-ext")
    jobs = os.environ.get("JOBS", "2")
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                               "-DCMAKE_POSITION_INDEPENDENT_CODE=ON", "-DBUILD_TESTING=OFF"],
                              stdout=subprocess.DEVNULL)
    subprocess.check_call(["cmake", "--build", build, "-j", jobs, "--target", "ratelimit",
                           "ratelimit_redis"], stdout=subprocess.DEVNULL)
    return build


class BuildExt(build_ext):
    def build_extensions(self):
        build = libs_dir()
        for ext in self.extensions:
            ext.extra_objects = [os.path.join(build, "src", "redis", "libratelimit_redis.a"),
                                 os.path.join(build, "src", "store", "libratelimit.a")]
        super().build_extensions()


class Sdist(sdist):
    """Records where the C sources are, so that the wheel `python3 -m build` makes from this
    sdist (offline, on this machine) finds them."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        with open(os.path.join(base_dir, "rlt_source_dir.txt"), "w") as f:
            f.write(ROOT + "\n")


SOURCES = ["src/module.c", "src/store.c", "src/daemon.c", "src/decision.c", "src/limiter.c"]

setup(
    ext_modules=[Extension(
        "libratelimit._native",
        sources=SOURCES,
        include_dirs=[os.path.join(ROOT, "include")],
        libraries=["hiredis", "pthread"],
        extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
                            "-Wno-cast-function-type"],
        depends=["src/native.h"],
    )],
    cmdclass={"build_ext": BuildExt, "sdist": Sdist},
)
