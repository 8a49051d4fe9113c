"""libratelimit.flask_limiter: Flask-Limiter's API.  Its documented quick start, changed only at
the import lines, runs as Flask-Limiter's docs say it does; then every argument the module
takes, through Flask's test client."""
import flask
import pytest
from werkzeug.exceptions import TooManyRequests

# ---- Flask-Limiter's quick start (flask-limiter.readthedocs.io), only the imports changed ----
from flask import Flask

from libratelimit.flask_limiter import Limiter
from libratelimit.flask_limiter.util import get_remote_address

app = Flask(__name__)
limiter = Limiter(
    get_remote_address,
    app=app,
    default_limits=["200 per day", "50 per hour"],
    storage_uri="memory://",
)


@app.route("/slow")
@limiter.limit("1 per day")
def slow():
    return ":("


@app.route("/medium")
@limiter.limit("1/second", override_defaults=False)
def medium():
    return ":|"


@app.route("/fast")
def fast():
    return ":)"


@app.route("/ping")
@limiter.exempt
def ping():
    return "PONG"
# ---- end of the quick start --------------------------------------------------------------


def codes(c, path, n, **kw):
    return [c.get(path, **kw).status_code for _ in range(n)]


def test_quick_start_behaves_as_documented():
    c = app.test_client()
    assert codes(c, "/slow", 3) == [200, 429, 429]  # 1 per day
    assert codes(c, "/fast", 51) == [200] * 50 + [429]  # the defaults: 50 per hour
    assert codes(c, "/ping", 60) == [200] * 60  # exempt
    # /medium: 1/second *and* the defaults; a fixed instant is not needed: 2 in a row breach
    assert codes(c, "/medium", 2) == [200, 429]
    other = {"environ_base": {"REMOTE_ADDR": "192.0.2.8"}}
    assert codes(c, "/slow", 2, **other) == [200, 429]  # each client its own count


def make(**kw):
    a = flask.Flask("t")
    lim = Limiter(get_remote_address, app=a, **kw)
    return a, lim


def test_429_goes_through_the_apps_errorhandler_with_retry_after():
    a, lim = make()

    @a.route("/")
    @lim.limit("2/minute", error_message="slow down")
    def index():
        return "ok"

    @a.errorhandler(429)
    def too_many(e):
        assert isinstance(e, TooManyRequests) and e.limit.limit == "fixed_window:2/1m"
        return flask.make_response("custom: %s" % e.description, 429)
    c = a.test_client()
    assert codes(c, "/", 2) == [200, 200]
    r = c.get("/")
    assert r.status_code == 429 and r.text == "custom: slow down"
    a2, lim2 = make()
    a2.add_url_rule("/", "index", lim2.limit("1/minute")(lambda: "ok"))
    c2 = a2.test_client()
    c2.get("/")
    r = c2.get("/")
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1


def test_stacked_limits_are_all_or_nothing():
    a, lim = make()

    @a.route("/")
    @lim.limit("3/minute")
    @lim.limit("5/hour")
    def index():
        return "ok"
    c = a.test_client()
    assert codes(c, "/", 4) == [200] * 3 + [429]
    # the denial charged nothing: 5/hour counted 3, not 4
    from libratelimit._web import store_key
    hourly = lim._limiter("fixed_window:5/1h")
    assert hourly.peek(store_key("index\0fixed_window:5/1h", "127.0.0.1")).remaining == 2


def test_methods_per_method_cost_exempt_when_and_callable_limits():
    a, lim = make()
    state = {"n": 2, "vip": False}

    @a.route("/m", methods=["GET", "POST"])
    @lim.limit("2/minute", methods=["POST"])
    def m():
        return "ok"

    @a.route("/pm", methods=["GET", "POST"])
    @lim.limit("1/minute", per_method=True)
    def pm():
        return "ok"

    @a.route("/cost")
    @lim.limit("5/minute", cost=lambda: 2)
    def cost():
        return "ok"

    @a.route("/vip")
    @lim.limit(lambda: "%d/minute" % state["n"], exempt_when=lambda: state["vip"])
    def vip():
        return "ok"
    c = a.test_client()
    assert codes(c, "/m", 5) == [200] * 5  # GET is not limited
    assert [c.post("/m").status_code for _ in range(3)] == [200, 200, 429]
    assert [c.get("/pm").status_code, c.post("/pm").status_code,
            c.get("/pm").status_code] == [200, 200, 429]
    assert codes(c, "/cost", 3) == [200, 200, 429]  # 2 + 2, then 6 > 5
    assert codes(c, "/vip", 3) == [200, 200, 429]
    state["vip"] = True
    assert codes(c, "/vip", 2) == [200, 200]
    state["vip"], state["n"] = False, 4
    assert codes(c, "/vip", 5) == [200] * 4 + [429]  # a new limit text: its own count


def test_shared_limit_scope_and_blueprint_exempt_and_request_filter():
    a, lim = make(default_limits=["1/minute"])
    shared = lim.shared_limit("3/minute", scope="search")
    a.add_url_rule("/a", "a", shared(lambda: "a"))
    a.add_url_rule("/b", "b", shared(lambda: "b"))
    bp = flask.Blueprint("free", "free")
    bp.add_url_rule("/x", "x", lambda: "x")
    lim.exempt(bp)
    a.register_blueprint(bp, url_prefix="/free")
    a.add_url_rule("/internal", "internal", lambda: "i")

    @lim.request_filter
    def local():
        return flask.request.headers.get("X-Internal") == "1"
    c = a.test_client()
    assert [c.get(p).status_code for p in ["/a", "/b", "/a", "/b"]] == [200, 200, 200, 429]
    assert codes(c, "/free/x", 5) == [200] * 5
    assert codes(c, "/internal", 3, headers={"X-Internal": "1"}) == [200] * 3
    assert codes(c, "/internal", 2) == [200, 429]


def test_blueprint_limit_and_application_limits():
    a, lim = make(application_limits=["4/minute"])
    bp = flask.Blueprint("api", "api")
    bp.add_url_rule("/x", "x", lambda: "x")
    bp.add_url_rule("/y", "y", lambda: "y")
    lim.limit("2/minute")(bp)
    a.register_blueprint(bp, url_prefix="/api")
    a.add_url_rule("/z", "z", lambda: "z")
    c = a.test_client()
    assert codes(c, "/api/x", 3) == [200, 200, 429]  # the blueprint's 2/minute
    assert codes(c, "/api/y", 1) == [200]
    assert codes(c, "/z", 2) == [200, 429]  # the application's 4/minute: 3 spent + 1


def test_deduct_when_charges_only_what_it_selects_and_on_breach():
    breaches = []
    a, lim = make(on_breach=lambda rl: breaches.append(rl.limit))

    @a.route("/<int:code>")
    @lim.limit("2/minute", deduct_when=lambda r: r.status_code >= 400)
    def status(code):
        return "x", code
    c = a.test_client()
    assert codes(c, "/200", 5) == [200] * 5  # successes are not counted
    assert codes(c, "/404", 3) == [404, 404, 429]
    assert breaches == ["fixed_window:2/1m"]


def test_config_keys_and_headers_enabled():
    a = flask.Flask("cfg")
    a.config.update(RATELIMIT_DEFAULT="2/minute", RATELIMIT_HEADERS_ENABLED=True,
                    RATELIMIT_STRATEGY="moving-window", RATELIMIT_STORAGE_URI="memory://",
                    RATELIMIT_DEFAULTS_PER_METHOD=True)
    lim = Limiter(get_remote_address)
    a.add_url_rule("/", "index", lambda: "ok", methods=["GET", "POST"])
    lim.init_app(a)
    c = a.test_client()
    r = c.get("/")
    assert r.headers["X-RateLimit-Limit"] == "2" and r.headers["X-RateLimit-Remaining"] == "1"
    assert codes(c, "/", 2) == [200, 429]
    assert c.post("/").status_code == 200  # per method
    assert "sliding_log:2/1m" in lim._limiters
    a2 = flask.Flask("off")
    a2.config["RATELIMIT_ENABLED"] = False
    Limiter(get_remote_address, app=a2, default_limits=["1/minute"])
    a2.add_url_rule("/", "index", lambda: "ok")
    assert codes(a2.test_client(), "/", 3) == [200] * 3


def test_default_limits_per_method_and_exempt_when_and_unsupported_arguments():
    a, lim = make(default_limits=["1/minute"], default_limits_per_method=True,
                  default_limits_exempt_when=lambda: flask.request.args.get("free") == "1")
    a.add_url_rule("/", "index", lambda: "ok", methods=["GET", "POST"])
    c = a.test_client()
    assert [c.get("/").status_code, c.post("/").status_code] == [200, 200]
    assert codes(c, "/", 1) == [429]
    assert codes(c, "/?free=1", 2) == [200, 200]
    with pytest.raises(TypeError):
        Limiter(get_remote_address, header_name_mapping={})


def test_limit_as_a_context_manager_inside_a_view():
    from libratelimit.flask_limiter import RateLimitExceeded
    a, lim = make()

    @a.route("/")
    def index():
        try:
            with lim.limit("2/minute"):
                return "inside"
        except RateLimitExceeded:
            return "outside"
    c = a.test_client()
    assert [c.get("/").text for _ in range(3)] == ["inside", "inside", "outside"]


def test_get_remote_address_masks_ipv6_to_56():
    a, lim = make(default_limits=["2/minute"])
    a.add_url_rule("/", "index", lambda: "ok")
    c = a.test_client()
    ips = ["2001:db8:0:1::1", "2001:db8:0:2::2", "2001:db8:0:3::3", "2001:db8:1::1"]
    assert [c.get("/", environ_base={"REMOTE_ADDR": ip}).status_code for ip in ips] == \
        [200, 200, 429, 200]
