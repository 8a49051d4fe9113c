"""Reading an LLM response's usage where it passes: an OpenAI-compatible ``usage`` object
(``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``) from a JSON
response body, or from the last event that carries one in a server-sent-events stream, turned
into the named counts a multi-limit reservation settles with (``RL.MSETTLE``, ``POST
/v1/msettle``, docs/llm.md): ``in`` (uncached prompt tokens), ``cached``, ``out``.

Pure Python, no dependency; integers only.  A response without a usable ``usage`` gives None,
never a guess: the caller then settles by its own count or lets the reservation stand."""
import json

__all__ = ["usage_from_json", "usage_from_sse", "usage_text", "SSEUsage"]


def _count(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _from_usage(u):
    if not isinstance(u, dict):
        return None
    prompt, out = _count(u.get("prompt_tokens")), _count(u.get("completion_tokens"))
    if prompt is None or out is None:
        return None
    details = u.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = min(cached or 0, prompt)
    return {"in": prompt - cached, "cached": cached, "out": out}


def usage_from_json(body):
    """The usage of a whole JSON response (bytes, str or an already parsed dict): a dict
    ``{"in", "cached", "out"}``, or None when it has no well-formed ``usage``."""
    if isinstance(body, (bytes, bytearray, str)):
        try:
            body = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return None
    return _from_usage(body.get("usage")) if isinstance(body, dict) else None


class SSEUsage:
    """Feeds a server-sent-events stream chunk by chunk (bytes, split anywhere) and keeps the
    usage of the last ``data:`` event that carries one (OpenAI sends it in the final chunk when
    ``stream_options.include_usage`` is set); ``[DONE]`` and other events are passed over.
    Holds at most one incomplete event (``max_event`` bytes, default 1 MiB: longer is dropped)."""

    def __init__(self, max_event=1 << 20):
        self.usage = None
        self._buf = b""
        self._max = max_event

    def feed(self, chunk):
        self._buf += chunk
        while True:
            cut = [i for i in (self._buf.find(b"\n\n"), self._buf.find(b"\r\n\r\n")) if i >= 0]
            if not cut:
                break
            end = min(cut)
            sep = 4 if self._buf[end:end + 4] == b"\r\n\r\n" else 2
            self._event(self._buf[:end])
            self._buf = self._buf[end + sep:]
        if len(self._buf) > self._max:
            self._buf = b""
        return self.usage

    def close(self):
        """Ends the stream: an event not followed by a blank line still counts."""
        if self._buf.strip():
            self._event(self._buf)
        self._buf = b""
        return self.usage

    def _event(self, raw):
        data = [ln[5:].lstrip(b" ") for ln in raw.splitlines() if ln.startswith(b"data:")]
        if not data:
            return
        u = usage_from_json(b"\n".join(data))
        if u is not None:
            self.usage = u


def usage_from_sse(stream):
    """The usage of the last event carrying one in a whole SSE body (bytes or str), or None."""
    s = SSEUsage(max_event=len(stream) + 1)
    s.feed(stream.encode() if isinstance(stream, str) else bytes(stream))
    return s.close()


def usage_text(usage):
    """A usage dict as the daemon's text form: ``in=1000,cached=200,out=350``."""
    return ",".join("%s=%d" % (k, v) for k, v in usage.items())
