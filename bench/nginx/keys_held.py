#!/usr/bin/env python3
"""Counts the keys a 1 MiB zone holds, for limit_req and for the ratelimit module: sends one
request for each of N numeric keys (X-RL-Key, as randkey.lua), then probes from the newest key
down; a remembered key is refused (both limits allow one request per key), so the count of
refusals before the first pass is the number of keys the zone still holds.
  keys_held.py LIMIT_REQ_PORT RATELIMIT_PORT ZONE_BYTES"""
import http.client
import sys


def held(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def status(k):
        c.request("GET", "/index.html", headers={"X-RL-Key": str(k)})
        r = c.getresponse()
        r.read()
        return r.status

    for k in range(n):
        assert status(k) == 200, f"key {k} refused on its first request"
    count = 0
    for k in range(n - 1, -1, -1):
        if status(k) == 200:
            break
        count += 1
    c.close()
    return count


def main():
    lr_port, rl_port, zone = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    n = 16000  # more than either zone holds (at 128 bytes a key, 1 MiB holds under 8192)
    for name, port in (("limit_req", lr_port), ("ratelimit", rl_port)):
        k = held(port, n)
        assert k < n, f"{name}: the zone held all {n} keys; send more"
        print(f"{name:10} 1 MiB zone holds {k} keys: {zone / k:.1f} bytes a key (zone / keys)")


if __name__ == "__main__":
    main()
