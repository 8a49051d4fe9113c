"""libratelimit's PEP 517 build backend: setuptools makes the sdist and compiles; the wheel is
zipped here, so it builds where the `wheel` package is not installed.  A fresh venv has pip and
setuptools but no `wheel`, and setuptools (before 70) needs it for bdist_wheel: with setuptools'
own backend `pip install --no-build-isolation ./python` failed there with "invalid command
'bdist_wheel'".  The wheel is what bdist_wheel would write: the built package, and a .dist-info
with METADATA (setuptools' PKG-INFO plus the extras' Requires-Dist), WHEEL and RECORD."""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

from setuptools import build_meta as _setuptools

build_sdist = _setuptools.build_sdist
get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def get_requires_for_build_wheel(config_settings=None):
    return []  # setuptools' answer is ["wheel"]: not needed here


def _tags():
    """(python, abi, platform): this interpreter's, as the extension is built for it."""
    py = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return py, py + getattr(sys, "abiflags", ""), plat


def _metadata(egg_info):
    """PKG-INFO, with the extras' requirements (egg-info keeps them in requires.txt)."""
    with open(os.path.join(egg_info, "PKG-INFO"), encoding="utf-8") as f:
        head, sep, body = f.read().partition("\n\n")
    have = set(line for line in head.splitlines() if line.startswith("Requires-Dist:"))
    extra, lines = None, []
    req = os.path.join(egg_info, "requires.txt")
    if os.path.exists(req):
        for line in open(req, encoding="utf-8").read().splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("[") and line.endswith("]"):
                extra = line[1:-1]
                continue
            entry = "Requires-Dist: %s" % line + ('; extra == "%s"' % extra if extra else "")
            if entry not in have:
                lines.append(entry)
    return head + "".join("\n" + x for x in lines) + sep + body


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="rlt-wheel-") as tmp:
        lib = os.path.join(tmp, "lib")
        subprocess.check_call([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", tmp,
                               "build", "--build-base", os.path.join(tmp, "build"),
                               "--build-lib", lib], cwd=HERE)
        egg_info = [os.path.join(tmp, d) for d in os.listdir(tmp) if d.endswith(".egg-info")][0]
        meta = _metadata(egg_info)
        fields = dict(line.split(": ", 1) for line in meta.partition("\n\n")[0].splitlines()
                      if ": " in line)
        name, version = fields["Name"].replace("-", "_"), fields["Version"]
        py, abi, plat = _tags()
        dist_info = "%s-%s.dist-info" % (name, version)
        wheel_name = "%s-%s-%s-%s-%s.whl" % (name, version, py, abi, plat)
        files = []
        for folder, _, names in os.walk(lib):
            for n in sorted(names):
                path = os.path.join(folder, n)
                files.append((os.path.relpath(path, lib).replace(os.sep, "/"),
                              open(path, "rb").read()))
        files.append((dist_info + "/METADATA", meta.encode("utf-8")))
        files.append((dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: libratelimit "
                                             "(_rlt_backend.py)\nRoot-Is-Purelib: false\n"
                                             "Tag: %s-%s-%s\n" % (py, abi, plat)).encode()))
        files.append((dist_info + "/top_level.txt", b"libratelimit\n"))
        record = [_record_line(a, d) for a, d in files] + [dist_info + "/RECORD,,"]
        files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
        out = os.path.join(wheel_directory, wheel_name)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for arcname, data in files:
                info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
        return wheel_name
