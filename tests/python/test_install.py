"""The install as documented, on a fresh venv: the sdist built from python/, copied to another
folder, installed with `pip install --no-build-isolation --no-index` into a venv that has no
`wheel` package (what `python3 -m venv` gives on Debian 12), then imported and used.  The sdist
holds the C sources and names no folder of the machine that made it."""
import glob
import os
import shutil
import subprocess
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"  # Debian's, with python3-build and python3-venv


def run(*args, **kw):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    assert r.returncode == 0, "%s:\n%s" % (" ".join(args), r.stdout[-4000:])
    return r.stdout


def test_sdist_installs_from_another_folder_into_a_fresh_venv_without_wheel(tmp_path):
    src = tmp_path / "checkout"  # a copy of what the sdist is made of, away from the checkout
    shutil.copytree(os.path.join(ROOT, "python"), src / "python",
                    ignore=shutil.ignore_patterns("build", "*.so", "*.egg-info", "__pycache__"))
    for part in ("include", "src/core", "src/store", "src/redis"):
        shutil.copytree(os.path.join(ROOT, part), src / part)
    run(PY, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path / "dist"),
        str(src / "python"))
    [sdist] = glob.glob(str(tmp_path / "dist" / "libratelimit-*.tar.gz"))
    with tarfile.open(sdist) as t:
        names = t.getnames()
        for m in t.getmembers():
            if m.isfile():
                data = t.extractfile(m).read()
                assert str(tmp_path).encode() not in data, m.name
                assert ROOT.encode() not in data, m.name
    assert any(n.endswith("/csrc/include/ratelimit/ratelimit.h") for n in names)
    shutil.rmtree(src)  # the sources it was made of are gone: the sdist must stand alone
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = shutil.copy(sdist, elsewhere)
    venv = tmp_path / "v"
    run(PY, "-m", "venv", str(venv))
    vpy = str(venv / "bin" / "python")
    r = subprocess.run([vpy, "-c", "import wheel"], stderr=subprocess.DEVNULL)
    assert r.returncode != 0, "the venv has `wheel`: this test needs one without"
    run(vpy, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", moved,
        cwd=str(elsewhere))
    out = run(vpy, "-c", "import libratelimit as rl, sys\n"
              "lim = rl.Limiter('2/minute')\n"
              "print([lim.hit('k').allowed for _ in range(3)], rl.__file__.startswith(sys.prefix))",
              cwd=str(tmp_path))
    assert out.strip() == "[True, True, False] True"
    meta = run(vpy, "-m", "pip", "show", "libratelimit")
    assert "Version: 0.1.0" in meta
