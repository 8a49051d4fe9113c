/* Envoy's reserve-then-settle over several descriptors (rls_budget.h).  Envoy's protocol
 * cannot name an earlier call, so the id is the request's own (x-request-id, sent by both
 * calls as a descriptor entry); a table maps domain + id to the store's multi-limit
 * reservation (rlt__decide_reserve_limits), each descriptor k weighing usage name "dk".  The
 * table holds RLT__BUDGET_SLOTS; full, the oldest is forgotten (its reservation then expires
 * charged as estimated, as an abandoned stream is).  Taken out under the lock before it is
 * settled: exactly one settle per reservation. */
#include "server/envoy/rls_budget.h"

#include "server/request/decide.h"

#include <ratelimit/budget.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define RLT__BUDGET_SLOTS 256

typedef struct slot {
    bool used;
    uint64_t rid;
    rlt_ns at;
    size_t n;
    char id[RLT__BUDGET_ID_MAX * 2 + 24]; /* slot_name's */
    int policy[RLT_USAGE_NAMES];
    size_t klen[RLT_USAGE_NAMES];
    char key[RLT_USAGE_NAMES][RLT_KEY_MAX];
} slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static slot table[RLT__BUDGET_SLOTS];

/* Usage name "dk" of descriptor k (k < RLT_USAGE_NAMES, one digit). */
static void name_of(char *out, size_t k)
{
    out[0] = 'd';
    out[1] = (char)('0' + k);
    out[2] = '\0';
}

static const char RESERVE[] = "ratelimit.reserve", SETTLE[] = "ratelimit.settle";

int rlt__envoy_budget_mark(const rlt__entry *e, char *id, char *err, size_t errlen)
{
    int o = e->klen == sizeof RESERVE - 1 && memcmp(e->key, RESERVE, e->klen) == 0
                ? RLT__BUDGET_RESERVE
            : e->klen == sizeof SETTLE - 1 && memcmp(e->key, SETTLE, e->klen) == 0
                ? RLT__BUDGET_SETTLE
                : RLT__BUDGET_NONE;
    if (o == RLT__BUDGET_NONE) return o;
    if (e->vlen == 0 || e->vlen >= RLT__BUDGET_ID_MAX || memchr(e->value, '\0', e->vlen)) {
        snprintf(err, errlen, "the %s id must be 1 to %d bytes",
                 o == RLT__BUDGET_RESERVE ? RESERVE : SETTLE, RLT__BUDGET_ID_MAX - 1);
        return -1;
    }
    memcpy(id, e->value, e->vlen);
    id[e->vlen] = '\0';
    return o;
}

/* The table's name of an id: the tenant (odd holders; a connection's, even, is not kept: the
 * stream-end call may come on another), the domain and the id, so tenants never meet. */
static void slot_name(char *out, uint64_t holder, const char *domain, size_t dlen, const char *id)
{
    snprintf(out, RLT__BUDGET_ID_MAX * 2 + 24, "%llx\x01%.*s\x01%s",
             (unsigned long long)(holder & 1 ? holder : 0),
             (int)(dlen < RLT__BUDGET_ID_MAX ? dlen : RLT__BUDGET_ID_MAX), domain, id);
}

static int reserve(struct rlt__srv *s, const rlt__session *ss, const char *name,
                   const rlt_check *checks, size_t n, rlt_ns now, rlt_decision *each,
                   int *refused)
{
    rlt_limit l[RLT_USAGE_NAMES];
    rlt_usage est;
    memset(&est, 0, sizeof est);
    for (size_t k = 0; k < n; k++) {
        memset(&l[k], 0, sizeof l[k]);
        l[k].policy = checks[k].policy;
        l[k].key = checks[k].key;
        l[k].klen = checks[k].klen;
        l[k].weights.n = 1;
        name_of(l[k].weights.term[0].name, k);
        l[k].weights.term[0].weight = 1;
        name_of(est.item[k].name, k);
        est.item[k].count = checks[k].cost;
    }
    est.n = (uint32_t)n;
    rlt_decision d;
    uint64_t rid = 0;
    int st = rlt__decide_reserve_limits(s, rlt__session_holder(ss), l, n, &est, now, 0, &d, each,
                                        refused, &rid);
    if (st != RLT_OK || rid == 0) return st;
    pthread_mutex_lock(&lock);
    slot *f = &table[0];
    for (size_t i = 0; i < RLT__BUDGET_SLOTS; i++) {
        slot *t = &table[i];
        if (t->used && strcmp(t->id, name) == 0) {
            f = t; /* the id reused: the newer reservation replaces it */
            break;
        }
        if (!t->used ? f->used : f->used && t->at < f->at) f = t;
    }
    f->used = true;
    f->rid = rid;
    f->at = now;
    f->n = n;
    snprintf(f->id, sizeof f->id, "%s", name);
    for (size_t k = 0; k < n; k++) {
        f->policy[k] = checks[k].policy;
        f->klen[k] = checks[k].klen;
        memcpy(f->key[k], checks[k].key, checks[k].klen);
    }
    pthread_mutex_unlock(&lock);
    return RLT_OK;
}

static int settle(struct rlt__srv *s, const char *name, const rlt_check *checks, size_t n, rlt_ns now,
                  rlt_decision *each, bool *found)
{
    slot t;
    *found = false;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < RLT__BUDGET_SLOTS; i++)
        if (table[i].used && strcmp(table[i].id, name) == 0) {
            t = table[i];
            table[i].used = false;
            *found = true;
            break;
        }
    pthread_mutex_unlock(&lock);
    if (!*found) return RLT_OK;
    rlt_check keys[RLT_USAGE_NAMES];
    rlt_usage u;
    memset(&u, 0, sizeof u);
    for (size_t j = 0; j < t.n; j++) {
        keys[j] = (rlt_check){t.policy[j], t.key[j], t.klen[j], 0};
        name_of(u.item[j].name, j);
        for (size_t k = 0; k < n; k++)
            if (checks[k].policy == t.policy[j] && checks[k].klen == t.klen[j] &&
                memcmp(checks[k].key, t.key[j], t.klen[j]) == 0)
                u.item[j].count = checks[k].cost;
    }
    u.n = (uint32_t)t.n;
    rlt_decision d, ev[RLT_USAGE_NAMES];
    int64_t charged[RLT_USAGE_NAMES];
    int st = rlt__decide_settle_limits(s, t.rid, keys, t.n, &u, true, now, &d, ev, charged);
    if (st == RLT_ENOENT) { /* expired in the store: charged as estimated, as it stands */
        *found = false;
        return RLT_OK;
    }
    for (size_t k = 0; st == RLT_OK && k < n; k++)
        for (size_t j = 0; j < t.n; j++)
            if (checks[k].policy == t.policy[j] && checks[k].klen == t.klen[j] &&
                memcmp(checks[k].key, t.key[j], t.klen[j]) == 0)
                each[k] = ev[j];
    return st;
}

int rlt__envoy_budget(struct rlt__srv *s, const rlt__session *ss, int op, const char *domain,
                      size_t dlen, const char *id, const rlt_check *checks, size_t n, rlt_ns now,
                      rlt_decision *each, int *refused, bool *found)
{
    char name[RLT__BUDGET_ID_MAX * 2 + 24];
    *refused = -1;
    *found = false;
    if (n > RLT_USAGE_NAMES) return RLT_EINVAL;
    slot_name(name, rlt__session_holder(ss), domain, dlen, id);
    if (op == RLT__BUDGET_RESERVE) {
        *found = true;
        return n == 0 ? RLT_OK : reserve(s, ss, name, checks, n, now, each, refused);
    }
    return settle(s, name, checks, n, now, each, found);
}
