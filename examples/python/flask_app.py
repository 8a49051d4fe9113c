"""A Flask app limited by libratelimit: app-wide defaults, a stricter login, a per-user API.
Run: python -m flask --app examples/python/flask_app.py run  (RATELIMIT_STORE=redis://... to share)."""
import os

from flask import Flask, g, request

from libratelimit.flask import FlaskLimiter, user_or_address

app = Flask(__name__)
# The key: g.user where the app's authentication set one, else the client address (the default
# key is the client address alone: a user identity is the app's to give).
limiter = FlaskLimiter(default="100/minute;1000/hour", store=os.environ.get("RATELIMIT_STORE"),
                       key=user_or_address)


@app.before_request
def authenticate():
    # Stand-in for real authentication: the API key names the user.  Registered before the
    # limiter's own hook (init_app below) so that the limiter sees g.user.
    key = request.headers.get("X-API-Key")
    if key:
        g.user = key


@app.route("/")
def index():
    return "hello\n"


@app.route("/login", methods=["POST"])
@limiter.limit("5/minute")
def login():
    return "welcome\n"


@app.route("/api/search")
@limiter.limit("gcra:10/1s,burst=20", name="search")
def search():
    return {"results": []}


@app.route("/healthz")
@limiter.exempt
def healthz():
    return "ok\n"


limiter.init_app(app)
