/* The general decision under the shard lock: any algorithm, a new key, a large state, a peek,
 * a lagging clock, a cost outside 1..burst; what the hot path (hot.h) does not take, through
 * rlt_decide, with its answers. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "store/decision.h"
#include "store/evict.h"
#include "store/general.h"
#include "store/logs.h"
#include "store/table.h"

static bool fresh_after(const rlt_policy *p, const void *st, rlt_ns now, int64_t cost,
                        const rlt_decision *d)
{
    /* An allowed request of cost >= 1 has just consumed something; a denied one that can fit
     * later was denied by used allowance (a fresh state allows any cost that can ever fit).
     * Neither leaves a fresh state, and the hot path skips the check. */
    if (cost > 0 && (d->allowed || d->retry_after >= 0)) {
        assert(!rlt_is_fresh(p, st, now));
        return false;
    }
    return rlt_is_fresh(p, st, now);
}

/* The decision under the shard lock, the general way: any algorithm, a new key, a large
 * state, a peek.  `now` is the effective instant, `asked` the caller's. */
static __attribute__((noinline)) int decide_general(rlt_store *s, rlt__shard *sh, uint64_t h,
                                                    int id, const void *key, size_t klen,
                                                    rlt_ns asked, rlt_ns now, int64_t cost,
                                                    rlt__decide_fn fn, const void *arg,
                                                    rlt_decision *d)
{
    const rlt__pol *P = &s->pols[id];
    rlt__slot *e = rlt__find(s, sh, h, id, key, klen);
    int rc;
    if (e) {
        /* An existing entry is never dropped here: a peek or a denial consumed nothing and
         * must change nothing, not even which instants later calls are decided at.  The
         * sweep and the eviction (evict.c) drop it once it is fresh.  A compact log grows
         * before a charge it has no room for and shrinks after one that left it sparse. */
        if ((rc = rlt__log_fit(s, sh, e, now, cost, 0))) return rc;
        if ((rc = fn(&P->p, rlt__slot_state(s, e), now, cost, d, arg))) return rc;
        e->meta |= RLT__REF;
        if (rlt__pol_log(P) && cost > 0) rlt__log_trim(s, sh, e);
    } else if (P->ssz <= RLT__SMALL_STATE && !rlt__pol_log(P)) {
        uint64_t tmp[RLT__SMALL_STATE / 8] = {0};
        if ((rc = fn(&P->p, tmp, now, cost, d, arg))) return rc;
        if (!fresh_after(&P->p, tmp, now, cost, d)) {
            if ((rc = rlt__insert(s, sh, h, id, key, klen, now, NULL, &e))) return rc;
            memcpy(rlt__slot_state(s, e), tmp, P->ssz);
        }
    } else {
        /* Large state (sliding log, concurrency): decide in the block the entry will own (a
         * compact log with room for this cost). */
        uint8_t *block = rlt__ool_new(P, klen, cost);
        if (!block) return RLT_ENOMEM;
        uint8_t *st = block + rlt__pad8(klen);
        rc = fn(&P->p, st, now, cost, d, arg);
        if (rc || fresh_after(&P->p, st, now, cost, d)) {
            free(block);
        } else if ((rc = rlt__insert(s, sh, h, id, key, klen, now, block, &e))) {
            free(block);
        }
        if (rc) return rc;
    }
    rlt__from_effective(d, asked, now);
    rlt__count_decision(sh, d->allowed);
    return RLT_OK;
}

static int plain(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                 const void *arg)
{
    (void)arg;
    return rlt_decide(p, st, now, cost, d);
}

int rlt__decide_locked_with(rlt_store *s, rlt__shard *sh, uint64_t h, int id, const void *key,
                            size_t klen, rlt_ns now, int64_t cost, rlt__decide_fn fn,
                            const void *arg, rlt_decision *d)
{
    if (cost < 0) return RLT_EINVAL; /* decide.c's fast AES entry leaves this check to here */
    const rlt__pol *P = &s->pols[id];
    const rlt_ns floor = __atomic_load_n(&s->drop_floor, __ATOMIC_ACQUIRE);
    const rlt_ns eff = now < floor ? floor : now;
    rlt__note_now(sh, eff);
    int rc = decide_general(s, sh, h, id, key, klen, now, eff, cost, fn, arg, d);
    if (!rc) rlt__jitter_decision(&P->p, key, klen, now, d);
    return rc;
}

__attribute__((noinline)) int rlt__decide_locked_general(rlt_store *s, rlt__shard *sh, uint64_t h,
                                                         int id, const void *key, size_t klen,
                                                         rlt_ns now, int64_t cost, rlt_decision *d)
{
    return rlt__decide_locked_with(s, sh, h, id, key, klen, now, cost, plain, NULL, d);
}
