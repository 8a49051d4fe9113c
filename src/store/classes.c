/* Priority classes in the store (rlt_store_decide_class): the core's rlt_decide_class on the
 * key's state under its shard lock, through the general path (general.c), so that the class's
 * ceiling is checked and the cost charged in one critical section.  Critical traffic and a
 * reserve of 0 take rlt_store_decide itself, hot path included. */
#include "ratelimit/store.h"

#include "store/general.h"
#include "store/lock.h"
#include "store/table.h"

typedef struct class_arg {
    rlt_class c;
    int reserve_pct;
} class_arg;

static int by_class(const rlt_policy *p, void *st, rlt_ns now, int64_t cost, rlt_decision *d,
                    const void *arg)
{
    const class_arg *a = arg;
    return rlt_decide_class(p, st, now, cost, a->c, a->reserve_pct, d);
}

int rlt_store_decide_class(rlt_store *s, int id, const void *key, size_t klen, rlt_ns now,
                           int64_t cost, rlt_class c, int reserve_pct, rlt_decision *d)
{
    int64_t top;
    if (!s || !d || cost < 0 || reserve_pct < -1 ||
        rlt_class_ceiling(0, reserve_pct < 0 ? 0 : reserve_pct, c, &top) != RLT_OK)
        return RLT_EINVAL;
    if (c == RLT_CLASS_CRITICAL || reserve_pct == 0)
        return rlt_store_decide(s, id, key, klen, now, cost, d);
    uint64_t h;
    rlt__shard *sh;
    int rc = rlt__lock_key(s, key, klen, &h, &sh);
    if (rc) return rc;
    if (!rlt__pol_known(s, id)) {
        rlt__shard_unlock(sh);
        return RLT_ENOENT;
    }
    const class_arg a = {c, reserve_pct};
    rc = rlt__decide_locked_with(s, sh, h, id, key, klen, now, cost, by_class, &a, d);
    rlt__shard_unlock(sh);
    return rc;
}
