/* The RLQS quota state's bounded snapshot (rlqs_view.h): every bucket is read once under the
 * lock, its division's ledger counted at `now`; the top RLT__RLQS_VIEW_TOP by demand are kept
 * in a small array sorted by insertion (20 rows: a shift costs less than a heap's bookkeeping),
 * every bucket pushed out of it is added to `other`. */
#include "server/envoy/rlqs_view.h"
#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_int.h"

#include <string.h>

typedef rlt__rlqs_view_row row;

const char *rlt__rlqs_view_kind(int kind)
{
    return kind == RLT__QUOTA_ALLOW_ALL  ? "allow_all"
           : kind == RLT__QUOTA_DENY_ALL ? "deny_all"
                                         : "policy";
}

const char *rlt__rlqs_view_claim_name(rlt__rlqs_view_claim c)
{
    static const char *const names[] = {"", "unclaimed", "claimed", "failing"};
    return (unsigned)c < 4 ? names[c] : "";
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Whether a ranks before b: more demand, then more members, then older. */
static bool before(const row *a, const row *b)
{
    if (a->demand != b->demand) return a->demand > b->demand;
    if (a->members != b->members) return a->members > b->members;
    return a->id < b->id;
}

static void add_to_other(rlt__rlqs_view *v, const row *r)
{
    row *o = &v->other;
    o->members += r->members;
    o->departed += r->departed;
    o->unknown += r->unknown;
    o->demand = sat_add(o->demand, r->demand);
    o->assigned_q = sat_add(o->assigned_q, r->assigned_q);
    o->assigned_b = sat_add(o->assigned_b, r->assigned_b);
    o->budget_q = sat_add(o->budget_q, r->budget_q);
    o->budget_b = sat_add(o->budget_b, r->budget_b);
    o->left_q = sat_add(o->left_q, r->left_q);
    o->left_b = sat_add(o->left_b, r->left_b);
    o->claim_q = sat_add(o->claim_q, r->claim_q);
    o->claim_b = sat_add(o->claim_b, r->claim_b);
    v->nother++;
}

/* Places r among the rows (their order kept), the one pushed out going to `other`. */
static void rank(rlt__rlqs_view *v, const row *r)
{
    size_t n = v->nrows;
    if (n == RLT__RLQS_VIEW_TOP && !before(r, &v->rows[n - 1])) return add_to_other(v, r);
    if (n == RLT__RLQS_VIEW_TOP) add_to_other(v, &v->rows[--n]);
    size_t i = n;
    while (i > 0 && before(r, &v->rows[i - 1]))
        i--;
    memmove(&v->rows[i + 1], &v->rows[i], (n - i) * sizeof *r);
    v->rows[i] = *r;
    v->nrows = n + 1;
}

/* Appends bytes to a NUL-ended text of RLT__RLQS_VIEW_TEXT; false when cut. */
static bool put(char *t, size_t *len, const char *p, size_t n)
{
    size_t room = RLT__RLQS_VIEW_TEXT - 1 - *len;
    size_t k = n < room ? n : room;
    memcpy(t + *len, p, k);
    *len += k;
    t[*len] = '\0';
    return k == n;
}

/* The key's scope (prefix + domain) and its BucketId's pairs (key NUL value NUL each) as
 * "k=v,k=v". */
static void texts(const rlt__rlqs_bucket *b, row *r)
{
    size_t slen = strnlen(b->key, b->klen), dl = 0, bl = 0;
    bool whole = put(r->domain, &dl, b->key, slen);
    const char *p = b->key + slen + 1, *end = b->key + b->klen;
    for (int i = 0; p < end; i++) {
        size_t k = strnlen(p, (size_t)(end - p));
        whole &= put(r->bucket, &bl, i % 2 ? "=" : (i ? "," : ""), i ? 1 : 0);
        whole &= put(r->bucket, &bl, p, k);
        p += k + 1;
    }
    r->cut = !whole;
}

static int rule_index(const rlt__rlqs_bucket *b)
{
    if (b->rule == NULL) return -1;
    for (size_t i = 0; i < b->cfg->ndomains; i++) {
        const rlt__domain *d = &b->cfg->domains[i];
        if (b->rule >= d->qrules && b->rule < d->qrules + d->nqrules)
            return (int)(b->rule - d->qrules);
    }
    return -1;
}

static void read_bucket(const rlt__rlqs *q, const rlt__rlqs_bucket *b, rlt_ns now, row *r)
{
    memset(r, 0, sizeof *r);
    texts(b, r);
    r->id = b->id;
    r->rule = rule_index(b);
    r->kind = b->kind;
    r->shadow = b->rule != NULL && b->rule->shadow;
    if (b->rule != NULL) {
        size_t n = 0;
        r->cut |= !put(r->policy, &n, b->rule->text, strnlen(b->rule->text, RLT__STR_MAX));
    }
    r->ttl = b->ttl;
    r->members = b->refs;
    rlt__quota_totals t;
    if (b->kind == RLT__QUOTA_POLICY &&
        rlt__quota_bucket_totals(b->dv->div, b->qb, now, &t) == RLT_OK) {
        r->fill_interval = t.fill_interval;
        r->members = t.active;
        r->departed = t.members - t.active;
        r->demand = t.demand;
        r->unknown = t.unknown;
        r->assigned_q = t.tokens_per_fill;
        r->assigned_b = t.max_tokens;
        r->budget_q = t.fill_capacity;
        r->budget_b = t.burst;
        r->left_q = t.fill_capacity > t.tokens_per_fill ? t.fill_capacity - t.tokens_per_fill : 0;
        r->left_b = t.burst > t.max_tokens ? t.burst - t.max_tokens : 0;
    }
    if (q->redis && b->kind == RLT__QUOTA_POLICY) {
        r->claim = b->claim == RLT__RLQS_CLAIMED   ? RLT__QV_CLAIM_CLAIMED
                   : b->claim == RLT__RLQS_FAILING ? RLT__QV_CLAIM_FAILING
                                                     : RLT__QV_CLAIM_UNCLAIMED;
        r->claim_q = b->claim_q;
        r->claim_b = b->claim_b;
    }
}

void rlt__rlqs_view_get(rlt__rlqs *q, rlt_ns now, rlt__rlqs_view *v)
{
    memset(v, 0, sizeof *v);
    v->at = now;
    if (q == NULL) return;
    row r;
    rlt__rlqs_lock(q);
    v->redis = q->redis;
    for (size_t i = 0; i < q->cap; i++)
        for (const rlt__rlqs_bucket *b = q->tab[i]; b != NULL; b = b->next) {
            read_bucket(q, b, now, &r);
            rank(v, &r);
        }
    v->buckets = q->n;
    rlt__rlqs_unlock(q);
}
