"""Builds libratelimit's extension: the C libraries (libratelimit, libratelimit_redis) are built
with cmake from the repository this folder sits in, position-independent, and linked statically;
hiredis is the system's.  RLT_BUILD_DIR names a cmake build folder to take them from instead
(configured with -DCMAKE_POSITION_INDEPENDENT_CODE=ON).  Offline: nothing is downloaded."""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("RLT_SOURCE_DIR") or os.path.dirname(HERE)


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
    cmdclass={"build_ext": BuildExt},
)
