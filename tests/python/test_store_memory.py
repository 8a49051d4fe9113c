"""The in-process store's memory as the package shows it (MemoryStore.stats()["bytes"]): a
sliding log pays for the entries in its window, not for its limit (issue 36, item 7)."""
import libratelimit as rl

S = 10**9
FULL_LOG = 16 + 8 * 1000  # the state of a log of N = 1000 slots


def test_a_sliding_log_holds_bytes_for_its_entries_not_its_limit():
    store = rl.MemoryStore(shards=1, origin_ns=0)
    lim = rl.Limiter("sliding_log:1000/1m", store)
    base = store.stats()["bytes"]
    for i in range(1000):  # 1,000 keys, one hit each
        assert lim.hit("user:%d" % i, now_ns=S).allowed
    per_key = (store.stats()["bytes"] - base) / 1000
    assert per_key < 200, per_key  # table share + key + a one-slot log; a full log: 8,016
    before = store.stats()["bytes"]
    for t in range(999):  # one key fills its window
        assert lim.hit("user:0", now_ns=S + 1 + t).allowed
    assert not lim.hit("user:0", now_ns=2 * S).allowed  # exact: the 1,001st is refused
    grown = store.stats()["bytes"] - before
    assert 999 * 8 <= grown <= FULL_LOG, grown  # the log grew to N slots, no further
    # A window later, one hit: the log holds one live entry and shrinks back to it.
    assert lim.hit("user:0", now_ns=62 * S).allowed
    assert store.stats()["bytes"] - before <= 64
