/* The client side of the RLQS codec (rlqs_client.h) over pbwire.h.  Field numbers are the
 * upstream ones, as in src/server/envoy/rlqs_pb.c:
 *   RateLimitQuotaUsageReports   1 domain, 2 bucket_quota_usages
 *     BucketQuotaUsage           1 bucket_id, 2 time_elapsed, 3 num_requests_allowed,
 *                                4 num_requests_denied
 *   BucketId                     1 bucket (map<string, string>: entries of 1 key, 2 value)
 *   RateLimitQuotaResponse       1 bucket_action
 *     BucketAction               1 bucket_id, 2 quota_assignment_action, 3 abandon_action
 *     QuotaAssignmentAction      2 assignment_time_to_live, 3 rate_limit_strategy
 *   RateLimitStrategy            1 blanket_rule (ALLOW_ALL 0, DENY_ALL 1),
 *                                2 requests_per_time_unit, 3 token_bucket
 *   TokenBucket                  1 max_tokens, 2 tokens_per_fill (UInt32Value), 3 fill_interval
 *   Duration                     1 seconds, 2 nanos */
#include "proto/rlqs_client.h"

#include "proto/pbwire.h"

#define NS_PER_S 1000000000LL

/* ---- reports ------------------------------------------------------------------------------ */

/* A sub-message is written into its own buffer first (its length precedes it); these bound
 * each level: a BucketId entry, a BucketId, a usage. */
#define ENTRY_MAX 1100
#define ID_MAX (RLT__RLQSC_MAX_PAIRS * (ENTRY_MAX + 4))

static void w_duration(wr *w, uint32_t num, int64_t ns)
{
    uint8_t b[24];
    wr d = {b, b + sizeof b, true};
    w_uint(&d, 1, (uint64_t)(ns / NS_PER_S));
    w_uint(&d, 2, (uint64_t)(ns % NS_PER_S));
    w_len(w, num, b, (size_t)(d.p - b));
}

static void w_id(wr *w, uint32_t num, const rlt__rlqsc_pair *pairs, size_t n)
{
    static __thread uint8_t idb[ID_MAX];
    uint8_t ent[ENTRY_MAX];
    wr id = {idb, idb + sizeof idb, true};
    for (size_t i = 0; i < n; i++) {
        wr en = {ent, ent + sizeof ent, true};
        w_len(&en, 1, pairs[i].key, pairs[i].klen);
        w_len(&en, 2, pairs[i].value, pairs[i].vlen);
        if (!en.ok) w->ok = false;
        w_len(&id, 1, ent, (size_t)(en.p - ent));
    }
    if (!id.ok) w->ok = false;
    w_len(w, num, idb, (size_t)(id.p - idb));
}

size_t rlt__rlqsc_encode_reports(const char *domain, const rlt__rlqsc_usage *u, size_t n,
                                 uint8_t *out, size_t cap)
{
    static __thread uint8_t ub[ID_MAX + 64];
    wr w = {out, out + cap, true};
    w_str(&w, 1, domain);
    for (size_t i = 0; i < n; i++) {
        wr m = {ub, ub + sizeof ub, true};
        w_id(&m, 1, u[i].pairs, u[i].n);
        w_duration(&m, 2, u[i].elapsed_ns < 0 ? 0 : u[i].elapsed_ns);
        w_uint(&m, 3, u[i].allowed);
        w_uint(&m, 4, u[i].denied);
        if (!m.ok) return 0;
        w_len(&w, 2, ub, (size_t)(m.p - ub));
    }
    return w.ok ? (size_t)(w.p - out) : 0;
}

/* ---- responses ---------------------------------------------------------------------------- */

void rlt__rlqsc_reader_init(rlt__rlqsc_reader *r, const uint8_t *buf, size_t len)
{
    r->p = buf;
    r->end = buf + len;
}

/* A BucketId's map entries into a->pairs, in the message's order; false when malformed or
 * longer than RLT__RLQSC_MAX_PAIRS. */
static bool rd_id(rd m, rlt__rlqsc_action *a)
{
    a->n = 0;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd ent;
        if (!rd_tag(&m, &num, &wt)) return false;
        if (num != 1) {
            if (!rd_skip(&m, wt)) return false;
            continue;
        }
        if (wt != WT_LEN || !rd_len(&m, &ent) || a->n == RLT__RLQSC_MAX_PAIRS) return false;
        rlt__rlqsc_pair *p = &a->pairs[a->n++];
        *p = (rlt__rlqsc_pair){"", 0, "", 0};
        while (ent.p < ent.end) {
            if (!rd_tag(&ent, &num, &wt)) return false;
            if (num == 1 || num == 2) {
                if (wt != WT_LEN ||
                    !rd_str(&ent, num == 1 ? &p->key : &p->value, num == 1 ? &p->klen : &p->vlen))
                    return false;
            } else if (!rd_skip(&ent, wt)) {
                return false;
            }
        }
    }
    return true;
}

static const char *rd_token_bucket(rd m, rlt__rlqsc_action *a)
{
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        uint64_t v;
        rd sub;
        if (!rd_tag(&m, &num, &wt)) return "bad tag in a TokenBucket";
        if (num == 1) {
            if (wt != WT_VARINT || !rd_varint(&m, &v)) return "bad max_tokens";
            a->max_tokens = (uint32_t)v;
        } else if (num == 2) {
            if (wt != WT_LEN || !rd_len(&m, &sub)) return "bad tokens_per_fill";
            while (sub.p < sub.end) {
                if (!rd_tag(&sub, &num, &wt)) return "bad tokens_per_fill";
                if (num == 1 && wt == WT_VARINT) {
                    if (!rd_varint(&sub, &v)) return "bad tokens_per_fill";
                    a->tokens_per_fill = (uint32_t)v;
                } else if (!rd_skip(&sub, wt)) {
                    return "bad tokens_per_fill";
                }
            }
        } else if (num == 3) {
            if (wt != WT_LEN || !rd_len(&m, &sub) || !rd_duration(sub, &a->fill_interval_ns))
                return "bad fill_interval";
        } else if (!rd_skip(&m, wt)) {
            return "bad field in a TokenBucket";
        }
    }
    return NULL;
}

static const char *rd_assignment(rd m, rlt__rlqsc_action *a)
{
    bool strategy = false;
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        uint64_t v;
        rd sub;
        if (!rd_tag(&m, &num, &wt)) return "bad tag in a QuotaAssignmentAction";
        if (num == 2) {
            if (wt != WT_LEN || !rd_len(&m, &sub) || !rd_duration(sub, &a->ttl_ns))
                return "bad assignment_time_to_live";
        } else if (num == 3) {
            if (wt != WT_LEN || !rd_len(&m, &sub)) return "bad rate_limit_strategy";
            while (sub.p < sub.end) {
                rd tb;
                if (!rd_tag(&sub, &num, &wt)) return "bad tag in a rate_limit_strategy";
                if (num == 1) {
                    if (wt != WT_VARINT || !rd_varint(&sub, &v) || v > 1) return "bad blanket_rule";
                    a->kind = v == 1 ? RLT__RLQSC_DENY_ALL : RLT__RLQSC_ALLOW_ALL;
                    strategy = true;
                } else if (num == 2) {
                    return "requests_per_time_unit is not supported (only blanket rules and "
                           "token buckets)";
                } else if (num == 3) {
                    if (wt != WT_LEN || !rd_len(&sub, &tb)) return "bad token_bucket";
                    a->kind = RLT__RLQSC_TOKEN_BUCKET;
                    const char *why = rd_token_bucket(tb, a);
                    if (why != NULL) return why;
                    strategy = true;
                } else if (!rd_skip(&sub, wt)) {
                    return "bad field in a rate_limit_strategy";
                }
            }
        } else if (!rd_skip(&m, wt)) {
            return "bad field in a QuotaAssignmentAction";
        }
    }
    return strategy ? NULL : "a QuotaAssignmentAction without a rate_limit_strategy";
}

int rlt__rlqsc_next_action(rlt__rlqsc_reader *r, rlt__rlqsc_action *a, const char **why)
{
    rd m = {r->p, r->end};
    while (m.p < m.end) {
        uint32_t num;
        int wt;
        rd act;
        *why = "bad tag in a RateLimitQuotaResponse";
        if (!rd_tag(&m, &num, &wt)) return -1;
        if (num != 1) {
            *why = "bad field in a RateLimitQuotaResponse";
            if (!rd_skip(&m, wt)) return -1;
            continue;
        }
        *why = "bucket_action must be a message";
        if (wt != WT_LEN || !rd_len(&m, &act)) return -1;
        r->p = m.p;
        *a = (rlt__rlqsc_action){.n = 0};
        bool which = false;
        while (act.p < act.end) {
            rd sub;
            *why = "bad field in a BucketAction";
            if (!rd_tag(&act, &num, &wt)) return -1;
            if (num >= 1 && num <= 3) {
                if (wt != WT_LEN || !rd_len(&act, &sub)) return -1;
                if (num == 1) {
                    *why = "bad BucketId (or more than 16 pairs)";
                    if (!rd_id(sub, a)) return -1;
                } else if (num == 2) {
                    if ((*why = rd_assignment(sub, a)) != NULL) return -1;
                    which = true;
                } else {
                    a->kind = RLT__RLQSC_ABANDON;
                    which = true;
                }
            } else if (!rd_skip(&act, wt)) {
                return -1;
            }
        }
        *why = "a BucketAction with neither an assignment nor an abandon";
        if (!which) return -1;
        *why = "a BucketAction without a BucketId";
        if (a->n == 0) return -1;
        *why = NULL;
        return 1;
    }
    r->p = m.p;
    return 0;
}

bool rlt__rlqsc_same_id(const rlt__rlqsc_action *a, const rlt__rlqsc_pair *pairs, size_t n)
{
    if (a->n != n) return false;
    for (size_t i = 0; i < n; i++) {
        size_t hits = 0;
        for (size_t j = 0; j < a->n; j++)
            if (a->pairs[j].klen == pairs[i].klen &&
                memcmp(a->pairs[j].key, pairs[i].key, pairs[i].klen) == 0) {
                if (a->pairs[j].vlen != pairs[i].vlen ||
                    memcmp(a->pairs[j].value, pairs[i].value, pairs[i].vlen) != 0)
                    return false;
                hits++;
            }
        if (hits != 1) return false;
    }
    return true;
}
