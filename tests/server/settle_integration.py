#!/usr/bin/env python3
"""Charge after the response, end to end: RL.RESERVE / RL.SETTLE over RESP (redis-cli and a raw
pipelined socket) and reserve=1 on /v1/check with POST /v1/settle over HTTP (curl), against the
real daemon on loopback ports.  A refund comes back, an extra cost is charged as debt past the
limit, a reservation settles once, errors name what to change, and replies keep their order
with staged checks.  Usage: settle_integration.py PATH_TO_RATELIMITD [TEST_NAME...]."""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import integration as it  # noqa: E402  (the Daemon class, raw sockets, resp())

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def body(reply):
    return json.loads(reply.split("\n\n", 1)[1])  # curl output read as text: \r\n is \n


def status(reply):
    return int(reply.split(" ", 2)[1])


@test
def resp_reserve_refunds_the_difference_and_settles_once(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "token_bucket:10/m"
        r = d.cli("RL.RESERVE", "llm:alice", pol, 8).split("\n")
        assert [int(x) for x in r[:3]] == [1, 10, 2], r
        rid = r[5]
        assert len(rid) == 16 and int(rid, 16) != 0, r
        s = d.cli("RL.SETTLE", "llm:alice", pol, rid, 3).split("\n")
        assert [int(x) for x in s[:3]] == [1, 10, 7], s  # 5 of the 8 came back
        again = d.cli("RL.SETTLE", "llm:alice", pol, rid, 0)
        assert again.startswith("ERR unknown reservation"), again
        p = d.cli("RL.PEEK", "llm:alice", pol).split("\n")
        assert int(p[2]) == 7, p  # the second settle refunded nothing
    finally:
        d.stop()


@test
def resp_settle_above_the_estimate_charges_debt_past_the_limit(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "fixed_window:100/h"
        r = d.cli("RL.RESERVE", "llm:bob", pol, 10).split("\n")
        rid = r[5]
        s = d.cli("RL.SETTLE", "llm:bob", pol, rid, 250).split("\n")
        assert int(s[0]) == 0 and int(s[2]) == 0 and int(s[3]) > 0, s
        c = d.cli("RL.CHECK", "llm:bob", pol, 1).split("\n")
        assert int(c[0]) == 0, c  # denied until the window ends: the client used 250
        # Estimate 0 (Flask-Limiter's deduct_when): check without charging, charge after.
        r = d.cli("RL.RESERVE", "llm:carol", pol, 0).split("\n")
        assert int(r[0]) == 1 and int(r[2]) == 100, r
        s = d.cli("RL.SETTLE", "llm:carol", pol, r[5], 40).split("\n")
        assert int(s[2]) == 60, s
    finally:
        d.stop()


@test
def resp_denied_reservation_has_no_id_and_charges_nothing(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "gcra:5/h"
        r = it.raw(d.port, it.resp("RL.RESERVE", "k", pol, 6) + it.resp("RL.PEEK", "k", pol),
                   wait=0.5)
        assert r.startswith(b"*6\r\n:0\r\n:5\r\n:5\r\n:-1\r\n"), r
        assert b"$-1\r\n" in r, r
        assert r.endswith(b":1\r\n:5\r\n:5\r\n:0\r\n:0\r\n:0\r\n"), r
    finally:
        d.stop()


@test
def resp_reserve_and_settle_errors_name_what_to_change(tmp):
    d = it.Daemon(tmp)
    try:
        e = d.cli("RL.RESERVE", "k", "concurrency:3", 1)
        assert e.startswith("ERR reservations need a fixed_window"), e
        e = d.cli("RL.RESERVE", "k", "leaky_bucket:10/s", 1)
        assert e.startswith("ERR reservations need a fixed_window"), e
        e = d.cli("RL.RESERVE", "k", "gcra:10/s", -1)
        assert e == "ERR estimate must be an integer >= 0", e
        e = d.cli("RL.RESERVE", "k", "gcra:10/s", 1, "TIMEOUT", 0)
        assert e.startswith("ERR syntax: RL.RESERVE key policy estimate [TIMEOUT ms]"), e
        e = d.cli("RL.RESERVE", "k", "gcra:10/s")
        assert e.startswith("ERR wrong number of arguments"), e
        e = d.cli("RL.SETTLE", "k", "gcra:10/s", "xyz", 1)
        assert e.startswith("ERR reservation must be the id"), e
        e = d.cli("RL.SETTLE", "k", "gcra:10/s", "00ff", -2)
        assert e == "ERR real_cost must be an integer >= 0", e
        # The id belongs to its key and policy.
        rid = d.cli("RL.RESERVE", "k", "gcra:10/s", 2).split("\n")[5]
        e = d.cli("RL.SETTLE", "other", "gcra:10/s", rid, 0)
        assert e.startswith("ERR unknown reservation"), e
        e = d.cli("RL.SETTLE", "k", "gcra:11/s", rid, 0)
        assert e.startswith("ERR unknown reservation"), e
        ok = d.cli("RL.SETTLE", "k", "gcra:10/s", rid.upper(), 2).split("\n")
        assert int(ok[0]) == 1, ok
    finally:
        d.stop()


@test
def resp_reservation_expires_after_its_timeout_charged_as_estimated(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "fixed_window:10/h"
        rid = d.cli("RL.RESERVE", "exp", pol, 6, "TIMEOUT", 50).split("\n")[5]
        it.time.sleep(0.3)
        e = d.cli("RL.SETTLE", "exp", pol, rid, 0)
        assert e.startswith("ERR unknown reservation"), e
        p = d.cli("RL.PEEK", "exp", pol).split("\n")
        assert int(p[2]) == 4, p
    finally:
        d.stop()


@test
def reserve_and_settle_replies_keep_their_order_among_staged_checks(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "fixed_window:10/h"
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        rd = it.Replies(s)
        s.sendall(it.resp("RL.CHECK", "o", pol, 2) + it.resp("RL.RESERVE", "o", pol, 5) +
                  it.resp("RL.CHECK", "o", pol, 1))
        a, b, c = rd.one(), rd.one(), rd.one()
        assert a[2] == 8 and b[2] == 3 and c[2] == 2, (a, b, c)
        s.sendall(it.resp("RL.SETTLE", "o", pol, b[5], 1) + it.resp("RL.CHECK", "o", pol, 0))
        e, f = rd.one(), rd.one()
        assert e[2] == 6 and f[2] == 6, (e, f)
        s.close()
    finally:
        d.stop()


@test
def http_reserve_on_check_and_post_settle(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "fixed_window:100/h"
        r = d.curl("/v1/check?key=u1&policy=%s&cost=30&reserve=1" % pol)
        assert status(r) == 200, r
        b = body(r)
        assert b["allowed"] and b["remaining"] == 70 and len(b["reservation"]) == 16, b
        rid = b["reservation"]
        form = "key=u1&policy=%s&reservation=%s&cost=12" % (pol, rid)
        s = d.curl("/v1/settle", "-X", "POST", "--data", form)
        assert status(s) == 200, s
        sb = body(s)
        assert sb["settled"] and sb["remaining"] == 88, sb
        assert "RateLimit: " in s and "Retry-After" not in s, s
        again = d.curl("/v1/settle", "-X", "POST", "--data", form)
        assert status(again) == 404 and "unknown reservation" in again, again
        # A denied reservation: 429, no id.
        r = d.curl("/v1/check?key=u1&policy=%s&cost=101&reserve=1" % pol)
        assert status(r) == 429 and body(r)["reservation"] is None, r
        # POST body with a timeout.
        r = d.curl("/v1/check", "-X", "POST", "--data",
                   "key=u2&policy=%s&cost=5&reserve=1&timeout_ms=60000" % pol)
        assert status(r) == 200 and body(r)["reservation"], r
    finally:
        d.stop()


@test
def http_settle_refuses_what_it_cannot_do(tmp):
    d = it.Daemon(tmp)
    try:
        r = d.curl("/v1/settle")
        assert status(r) == 405 and "Allow: POST" in r, r
        r = d.curl("/v1/settle", "-X", "POST", "--data", "key=a&policy=gcra:1/s&cost=1")
        assert status(r) == 400 and "takes key, policy, reservation" in r, r
        r = d.curl("/v1/settle", "-X", "POST", "--data",
                   "key=a&policy=gcra:1/s&reservation=zz&cost=1")
        assert status(r) == 400 and "reservation must be given once" in r, r
        r = d.curl("/v1/check?key=a&policy=concurrency:2&reserve=1")
        assert status(r) == 400 and "reservations need a fixed_window" in r, r
        r = d.curl("/v1/check?key=a&policy=gcra:1/s&reservation=ab")
        assert status(r) == 400 and "belongs to POST /v1/settle" in r, r
        r = d.curl("/v1/check?key=a&policy=gcra:1/s&reserve=2")
        assert status(r) == 400 and "reserve must be 0 or 1" in r, r
        r = d.curl("/v1/check?key=a&policy=gcra:1/s&reserve=1", "-I")
        assert status(r) == 400, r
    finally:
        d.stop()


@test
def max_reservations_bounds_the_outstanding_ones_and_refuses_before_charging(tmp):
    d = it.Daemon(tmp, config="server:\n  max_reservations: 2\n")
    try:
        pol = "fixed_window:100/h"
        s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        rep = it.Replies(s)

        def cmd(*args):
            s.sendall(it.resp(*args))
            return rep.one()

        a, b = cmd("RL.RESERVE", "m1", pol, 10), cmd("RL.RESERVE", "m2", pol, 10)
        assert a[0] == 1 and b[0] == 1, (a, b)
        # Full, and this connection holds the most: refused, before anything is charged.
        e = cmd("RL.RESERVE", "m3", pol, 10)
        assert e.startswith(b"-ERR reservation refused: too many outstanding"), e
        p = d.cli("RL.PEEK", "m3", pol).split("\n")
        assert int(p[2]) == 100, p  # the refused one charged nothing
        # Another client is not locked out: the biggest holder's reservations end early,
        # charged as estimated (never minting).
        c = d.cli("RL.RESERVE", "m3", pol, 10).split("\n")
        assert int(c[0]) == 1 and len(c[5]) == 16, c
        assert cmd("RL.SETTLE", "m1", pol, a[5], 0).startswith(b"-ERR"), "ended early"
        assert int(d.cli("RL.PEEK", "m1", pol).split("\n")[2]) == 90  # charged as estimated
        r = d.curl("/v1/check?key=m4&policy=%s&cost=10&reserve=1" % pol)
        assert status(r) == 200, r
        s.close()
    finally:
        d.stop()


@test
def outstanding_reservations_show_in_info_and_metrics(tmp):
    d = it.Daemon(tmp)
    try:
        pol = "gcra:100/m"
        rid = d.cli("RL.RESERVE", "i1", pol, 3).split("\n")[5]
        d.cli("RL.RESERVE", "i2", pol, 3)
        assert "reservations:2" in d.cli("INFO", "keyspace"), d.cli("INFO", "keyspace")
        d.cli("RL.SETTLE", "i1", pol, rid, 3)
        m = d.curl("/metrics")
        assert "\nratelimitd_reservations 1\n" in m, m[-2000:]
    finally:
        d.stop()


def main():
    return it.run_tests(TESTS, sys.argv[2:], prefix="rltd-settle-")


if __name__ == "__main__":
    sys.exit(main())
