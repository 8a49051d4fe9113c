/* Compact sliding logs in the keyed store (logs.h); the maths is src/core/sliding_log.c's. */
#include <stdlib.h>
#include <string.h>

#include "core/sliding_log.h"
#include "store/logs.h"
#include "store/table.h"

/* An empty log of n slots at `st`: the live entries (none) of an empty header. */
static void empty_log(const rlt__pol *P, void *st, int64_t n)
{
    const int64_t none[2] = {0, 0};
    rlt__sliding_log_copy(&P->p, none, st, n, INT64_MIN);
}

uint8_t *rlt__ool_new(const rlt__pol *P, size_t klen, int64_t slots)
{
    const bool log = rlt__pol_log(P);
    if (slots < 1) slots = 1;
    if (slots > P->p.limit) slots = P->p.limit;
    size_t bytes = log ? rlt__sliding_log_bytes(slots) : P->ssz;
    uint8_t *b = calloc(1, rlt__pad8(klen) + bytes);
    if (b && log) empty_log(P, b + rlt__pad8(klen), slots);
    return b;
}

/* Moves e's log into a new block of n slots, keeping its entries live at `now` (all with
 * INT64_MIN).  RLT_OK or RLT_ENOMEM (e unchanged). */
static int resize(rlt_store *s, rlt__shard *sh, rlt__slot *e, int64_t n, rlt_ns now)
{
    const rlt__pol *P = &s->pols[e->policy];
    const size_t klen = e->meta & RLT__KLEN_MASK, kpad = rlt__pad8(klen);
    uint8_t *old = e->u.ool, *b = malloc(kpad + rlt__sliding_log_bytes(n));
    if (!b) return RLT_ENOMEM;
    memcpy(b, old, kpad);
    rlt__sliding_log_copy(&P->p, old + kpad, b + kpad, n, now);
    size_t was = rlt__ool_state_bytes(P, old + kpad);
    e->u.ool = b;
    free(old);
    RLT__STAT_ADD(sh->bytes, rlt__sliding_log_bytes(n) - was);
    return RLT_OK;
}

void rlt__state_get(const rlt_store *s, const rlt__slot *e, void *full)
{
    const rlt__pol *P = &s->pols[e->policy];
    const uint8_t *st = rlt__slot_state(s, e);
    if (rlt__pol_log(P))
        rlt__sliding_log_copy(&P->p, st, full, P->p.limit, INT64_MIN);
    else
        memcpy(full, st, P->ssz);
}

int rlt__state_reserve(rlt_store *s, rlt__shard *sh, rlt__slot *e, const void *full)
{
    const rlt__pol *P = &s->pols[e->policy];
    if (!rlt__pol_log(P)) return RLT_OK;
    const int64_t need = rlt__sliding_log_count(full);
    const int64_t n = rlt__sliding_log_slots(&P->p, rlt__slot_state(s, e));
    if (need <= n) return RLT_OK;
    int64_t to = need > 2 * n ? need : 2 * n;
    return resize(s, sh, e, to < P->p.limit ? to : P->p.limit, INT64_MIN);
}

int rlt__state_put(rlt_store *s, rlt__shard *sh, rlt__slot *e, const void *full)
{
    const rlt__pol *P = &s->pols[e->policy];
    if (!rlt__pol_log(P)) {
        memcpy(rlt__slot_state(s, e), full, P->ssz);
        return RLT_OK;
    }
    int rc = rlt__state_reserve(s, sh, e, full);
    if (rc) return rc;
    uint8_t *st = rlt__slot_state(s, e);
    /* `full` is apart from the entry's block */
    rlt__sliding_log_copy(&P->p, full, st, rlt__sliding_log_slots(&P->p, st), INT64_MIN);
    rlt__log_trim(s, sh, e);
    return RLT_OK;
}

int rlt__log_fit(rlt_store *s, rlt__shard *sh, rlt__slot *e, rlt_ns now, int64_t cost,
                 int64_t settle_x)
{
    const rlt__pol *P = &s->pols[e->policy];
    if (!rlt__pol_log(P)) return RLT_OK;
    const uint8_t *st = rlt__slot_state(s, e);
    const int64_t n = rlt__sliding_log_slots(&P->p, st);
    int64_t need = rlt__sliding_log_room(&P->p, st, now, cost, settle_x);
    if (need <= n) return RLT_OK;
    if (need < 2 * n) need = 2 * n < P->p.limit ? 2 * n : P->p.limit;
    /* The call will record, which drops the entries expired at `now`: the copy leaves them. */
    return resize(s, sh, e, need, now);
}

void rlt__log_trim(rlt_store *s, rlt__shard *sh, rlt__slot *e)
{
    const rlt__pol *P = &s->pols[e->policy];
    if (!rlt__pol_log(P)) return;
    const uint8_t *st = rlt__slot_state(s, e);
    const int64_t n = rlt__sliding_log_slots(&P->p, st), c = rlt__sliding_log_count(st);
    if (n <= 1 || c * 4 > n) return;
    (void)resize(s, sh, e, c > 0 ? 2 * c : 1, INT64_MIN);
}
