"""A Starlette app behind libratelimit's ASGI middleware, keyed by the authenticated user (a
toy bearer-token authentication) or the client address.
Run: python -m uvicorn examples.python.asgi_app:app  (any ASGI server)."""
from starlette.applications import Starlette
from starlette.authentication import (AuthCredentials, AuthenticationBackend, SimpleUser)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from libratelimit.asgi import RateLimitMiddleware, user_or_address


class TokenAuth(AuthenticationBackend):
    async def authenticate(self, conn):
        auth = conn.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            return AuthCredentials(["authenticated"]), SimpleUser(auth[7:])
        return None


async def hello(request):
    return PlainTextResponse("hello %s\n" % request.user.display_name)


app = Starlette(routes=[Route("/", hello), Route("/login", hello, methods=["POST"])],
                middleware=[Middleware(AuthenticationMiddleware, backend=TokenAuth()),
                            Middleware(RateLimitMiddleware, default="10/second",
                                       routes={"/login": "5/minute"},
                                       key=user_or_address)])
