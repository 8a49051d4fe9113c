#!/usr/bin/python3
"""A Flask app with one limited route, three ways: bare (no limiter), Flask-Limiter 3.3
(Debian's python3-flask-limiter, in-memory storage) and libratelimit's drop-in
(libratelimit.flask_limiter, the same code with the import changed; in-process store), plus
libratelimit.flask.FlaskLimiter.  Requests through Werkzeug's test client, each from one of
1000 client addresses, a limit no request reaches (every response 200: the cost measured is a
decision's, not a 429's).  Rounds interleave the apps; each app's time per request is the
median over the rounds; the added cost is that minus the bare app's.

Usage: bench/python/flask_bench.py [--rounds R] [--requests N]   (PYTHONPATH: the package)
"""
import argparse
import os
import random
import statistics
import sys
import time

import flask
import flask_limiter
import flask_limiter.util

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.environ.get("RLT_PY_PATH") or os.path.join(ROOT, "python"))
import libratelimit  # noqa: E402
import libratelimit.flask  # noqa: E402
import libratelimit.flask_limiter  # noqa: E402
import libratelimit.flask_limiter.util  # noqa: E402

LIMIT = "1000000 per minute"


def bare():
    app = flask.Flask("bare")

    @app.route("/")
    def index():
        return "ok"
    return app


def with_limiter(mod, util):
    """The same app for Flask-Limiter and for our drop-in: only `mod` differs."""
    app = flask.Flask("limited")
    limiter = mod.Limiter(util.get_remote_address, app=app, storage_uri="memory://")

    @app.route("/")
    @limiter.limit(LIMIT)
    def index():
        return "ok"
    return app


def ours_native():
    app = flask.Flask("native")
    limiter = libratelimit.flask.FlaskLimiter(app)

    @app.route("/")
    @limiter.limit("fixed_window:1000000/1m")
    def index():
        return "ok"
    return app


def per_request(app, addrs):
    c = app.test_client()
    t0 = time.perf_counter()
    for a in addrs:
        r = c.get("/", environ_base={"REMOTE_ADDR": a})
        if r.status_code != 200:
            sys.exit("unexpected %d from %s" % (r.status_code, app.name))
    return (time.perf_counter() - t0) / len(addrs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=5000)
    a = ap.parse_args()
    r = random.Random(1)
    addrs = ["10.0.%d.%d" % divmod(r.randrange(1000), 256) for _ in range(a.requests)]
    apps = {"bare Flask": bare(),
            "Flask-Limiter %s" % flask_limiter.__version__: with_limiter(flask_limiter,
                                                                         flask_limiter.util),
            "libratelimit.flask_limiter": with_limiter(libratelimit.flask_limiter,
                                                       libratelimit.flask_limiter.util),
            "libratelimit.flask.FlaskLimiter": ours_native()}
    for app in apps.values():  # warm-up
        per_request(app, addrs[:500])
    times = {k: [] for k in apps}
    for _ in range(a.rounds):
        for k, app in apps.items():
            times[k].append(per_request(app, addrs))
    print("Flask %s, Flask-Limiter %s, libratelimit %s, Python %s; %d rounds x %d requests, "
          "interleaved, medians" % (flask.__version__ if hasattr(flask, "__version__") else "?",
                                    flask_limiter.__version__, libratelimit.__version__,
                                    sys.version.split()[0], a.rounds, a.requests))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["bare Flask"]
    print("\n| app | us/request | requests/s | added us/request |\n|---|---:|---:|---:|")
    for k, v in med.items():
        print("| %s | %.1f | %s | %s |" % (k, v * 1e6, format(int(1 / v), ","),
                                           "-" if k == "bare Flask" else "%.1f" % ((v - base) * 1e6)))
    fl = [k for k in med if k.startswith("Flask-Limiter")][0]
    added_fl = med[fl] - base
    for k in ("libratelimit.flask_limiter", "libratelimit.flask.FlaskLimiter"):
        print("\nadded cost: %s / Flask-Limiter = %.2f (target <= 0.50)"
              % (k, (med[k] - base) / added_fl))


if __name__ == "__main__":
    main()
