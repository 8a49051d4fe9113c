"""A bare WSGI app behind libratelimit's WSGI middleware.
Run: python3 examples/python/wsgi_app.py  (serves on 127.0.0.1:8000)."""
from libratelimit.wsgi import RateLimitMiddleware, remote_user_or_address


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


app = RateLimitMiddleware(hello, default="10/second",
                          routes={"/login": "5/minute", "/api/*": "gcra:100/1m,burst=20"},
                          key=remote_user_or_address)  # REMOTE_USER: set by the server's auth

if __name__ == "__main__":
    from wsgiref.simple_server import make_server
    make_server("127.0.0.1", 8000, app).serve_forever()
