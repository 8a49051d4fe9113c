"""Reading an OpenAI-compatible usage (libratelimit.llm): from a JSON body, from the last SSE
event carrying one (split anywhere), refusing what is not a usage; and, against a real
ratelimitd, a streamed response's usage settling a multi-limit reservation exactly."""
import json
import socket

from libratelimit.llm import SSEUsage, usage_from_json, usage_from_sse, usage_text

BODY = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 350, "total_tokens": 1550,
                  "prompt_tokens_details": {"cached_tokens": 200}}}


def sse(events):
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + \
        b"data: [DONE]\n\n"


CHUNKS = [{"choices": [{"delta": {"content": "h"}}], "usage": None},
          {"choices": [{"delta": {"content": "i"}}], "usage": None},
          {"choices": [], "usage": BODY["usage"]}]


def test_a_json_response_gives_uncached_cached_and_output_tokens():
    want = {"in": 1000, "cached": 200, "out": 350}
    assert usage_from_json(json.dumps(BODY)) == want
    assert usage_from_json(json.dumps(BODY).encode()) == want
    assert usage_from_json(BODY) == want
    no_details = dict(BODY, usage={"prompt_tokens": 7, "completion_tokens": 3})
    assert usage_from_json(no_details) == {"in": 7, "cached": 0, "out": 3}
    assert usage_text(want) == "in=1000,cached=200,out=350"


def test_what_is_not_a_usage_gives_none_never_a_guess():
    for bad in [b"not json", b"[]", {"usage": None}, {"usage": {"prompt_tokens": 5}},
                {"usage": {"prompt_tokens": -1, "completion_tokens": 2}},
                {"usage": {"prompt_tokens": 1.5, "completion_tokens": 2}},
                {"usage": {"prompt_tokens": True, "completion_tokens": 2}}, {}]:
        assert usage_from_json(bad) is None, bad
    # cached above the prompt is clamped to it: nothing negative is ever produced
    odd = {"usage": {"prompt_tokens": 5, "completion_tokens": 1,
                     "prompt_tokens_details": {"cached_tokens": 9}}}
    assert usage_from_json(odd) == {"in": 0, "cached": 5, "out": 1}


def test_the_last_sse_event_with_a_usage_wins_however_the_stream_is_split():
    body = sse(CHUNKS)
    assert usage_from_sse(body) == {"in": 1000, "cached": 200, "out": 350}
    for step in (1, 3, 7, 64):
        s = SSEUsage()
        for i in range(0, len(body), step):
            s.feed(body[i:i + step])
        assert s.close() == {"in": 1000, "cached": 200, "out": 350}, step
    crlf = body.replace(b"\n\n", b"\r\n\r\n")
    assert usage_from_sse(crlf) == {"in": 1000, "cached": 200, "out": 350}
    assert usage_from_sse(sse(CHUNKS[:2])) is None  # no include_usage: no usage, no guess
    unterminated = b"data: " + json.dumps(CHUNKS[2]).encode()
    assert usage_from_sse(unterminated) == {"in": 1000, "cached": 200, "out": 350}


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def lines(sock, n):
    """The next n lines of RESP (a reply of known shape), or the error line."""
    data = b""
    while data.count(b"\r\n") < n and not (data.startswith(b"-") and data.endswith(b"\r\n")):
        data += sock.recv(65536)
    assert not data.startswith(b"-"), data
    return data.split(b"\r\n")[:n]


def test_a_streamed_usage_settles_a_multi_limit_reservation_in_ratelimitd(ratelimitd):
    s = socket.create_connection(("127.0.0.1", ratelimitd), timeout=10)
    pol = "fixed_window:100000/1000d"
    usd = "fixed_window:10000000/1000d"
    s.sendall(resp("RL.MRESERVE", "in=1200,out=4096", "u", pol, "in+cached+out", "o", usd,
                   "in*3+out*15+cached*1"))
    r = lines(s, 18)  # *8, 5 integers, $16 and the id, refused, *2, 2 x (*3 and 3 integers)
    assert r[0] == b"*8" and r[1] == b":1", r
    rid = r[7].decode()
    u = usage_from_sse(sse(CHUNKS))
    s.sendall(resp("RL.MSETTLE", rid, usage_text(u), "u", pol, "o", usd))
    got = lines(s, 17)  # *6, 5 integers, *2, 2 x (*4 and 4 integers)
    ints = [int(x[1:]) for x in got if x.startswith(b":")]
    assert ints[5:7] == [100000, 100000 - 1550], ints  # the user: 1550 tokens
    assert ints[9:11] == [10000000, 10000000 - (3000 + 5250 + 200)], ints  # $0.00845
    assert ints[8] == 0 and ints[12] == 0, ints  # within the reservation: nothing over
    s.close()
