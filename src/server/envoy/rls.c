/* envoyproxy/ratelimit's decision, one implementation for /json and gRPC ShouldRateLimit:
 * match every descriptor (or take its `limit` override), apply `replaces`, charge every
 * counted limit all or nothing, and describe each descriptor's limit as it now stands.
 *
 * Windows.  envoyproxy/ratelimit counts a unit U in the window floor(unix_seconds / U) with U
 * its divider (1, 60, 3600, 86400, 604800 for WEEK, 2592000 for MONTH, 31536000 for YEAR) and
 * answers duration_until_reset = U - unix_seconds % U.  The daemon's clock counts from UTC
 * midnight of its start day (clock.h), which every unit up to DAY divides; for the longer ones
 * a fixed-window rule is decided at now + phase, phase = origin mod U, so its windows are the
 * epoch's multiples of U too.  A request charging several limits with different phases is
 * decided at the smallest one: a limit seen earlier than its own time keeps counting in the
 * later window it already holds, so that can deny until the window really ends, never admit
 * more. */
#include "core/text.h"
#include "server/envoy/rls.h"
#include "server/envoy/rls_budget.h"

#include "server/config/units.h"
#include "server/base/clock.h"
#include "server/request/decide.h"
#include "server/stats/metrics.h"
#include "server/request/srv.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The unit a rule reports: its envoy unit, or the one its policy's period equals. */
static int rule_unit(const rlt__rule *r)
{
    if (r->unit != NULL) return rlt__unit_from_name(r->unit, strlen(r->unit));
    return rlt__unit_of_period(r->policy.period);
}

/* origin mod w: what moves the daemon's windows of length w onto the epoch's. */
static rlt_ns phase_of(rlt_ns w)
{
    if (w <= 0) return 0;
    int64_t o = rlt__clock_origin() % w;
    return o < 0 ? o + w : o;
}

void rlt__envoy_req_init(rlt__envoy_req *r)
{
    /* Only the header: descriptors are set up as they are added (rlt__envoy_desc_init), so
     * that a request costs what it holds, not the 16 KiB of the largest one. */
    r->json = NULL;
    r->domain = "";
    r->dlen = 0;
    r->ndesc = 0;
    r->hits_addend = 1;
}

void rlt__envoy_desc_init(rlt__envoy_desc *d)
{
    d->nentries = 0;
    d->hits_addend = -1;
    d->limit_rpu = -1;
    d->limit_unit = 0;
}

/* ---- the decision ------------------------------------------------------------------------ */

/* What limits one descriptor. */
typedef struct limit {
    int rule;       /* config rule, -1 none, -2 replaced, -3 the request's override */
    int policy;     /* store policy id (-1: none) */
    bool block_all; /* OVER_LIMIT without counting */
    bool unlimited;
    bool shadow;
    bool drain; /* drain_over_limit: charged in full, decided apart */
    int64_t rpu;
    int unit;
    const char *name;
    rlt_ns window; /* fixed window length (0: the limiter has no windows) */
    rlt_ns phase;
    int64_t cost;
    const rlt_policy *calendar; /* the rule's policy when it has calendar windows, else NULL */
} limit;

static char *put_len(char *o, size_t n)
{
    char b[24];
    size_t l = rlt__format_i64(b, (int64_t)n);
    memcpy(o, b, l);
    return o + l;
}

int rlt__envoy_key(const char *domain, size_t dlen, const rlt__entry *entries, size_t n,
                   const rlt__session *ss, char *out, size_t *len)
{
    /* 24 bytes bound each length's digits and separators; what cannot fit a key is refused
     * before anything is written. */
    char big[RLT_KEY_MAX + 24 * (RLT__ENVOY_MAX_ENTRIES + 1)];
    if (n > RLT__ENVOY_MAX_ENTRIES) return RLT_EKEYLEN;
    size_t need = dlen + 24;
    for (size_t j = 0; j < n; j++)
        need += entries[j].klen + entries[j].vlen + 24;
    if (need > sizeof big) return RLT_EKEYLEN;
    char *o = put_len(big, dlen);
    *o++ = ':';
    memcpy(o, domain, dlen);
    o += dlen;
    for (size_t j = 0; j < n; j++) {
        const rlt__entry *e = &entries[j];
        *o++ = '|';
        o = put_len(o, e->klen);
        *o++ = ':';
        memcpy(o, e->key, e->klen);
        o += e->klen;
        *o++ = '=';
        memcpy(o, e->value, e->vlen);
        o += e->vlen;
    }
    size_t used = (size_t)(o - big);
    if (used > RLT_KEY_MAX) return RLT_EKEYLEN;
    return rlt__session_key(ss, big, used, out, len);
}

static int fail(rlt__srv *s, int policy, rlt_ns now, int e, long desc, char *err, size_t errlen)
{
    char b[160];
    const char *msg = rlt__decide_strerror(s, policy, now, e, b, sizeof b);
    if (desc >= 0)
        snprintf(err, errlen, "descriptor %ld: %s", desc, msg);
    else
        snprintf(err, errlen, "%s", msg);
    return e;
}

/* The `limit` override of descriptor i as envoyproxy/ratelimit applies it: it replaces
 * whatever rule matches (or gives a limit where none does), a fixed window of
 * requests_per_unit per unit, never in shadow mode, unnamed. */
static int override_limit(rlt__srv *s, const rlt__envoy_desc *d, size_t i, limit *l,
                          const rlt__asker *who, char *err, size_t errlen)
{
    rlt_ns w = rlt__unit_ns(d->limit_unit);
    if (w == 0) {
        snprintf(err, errlen, "descriptor %zu: the limit override needs a known unit", i);
        return RLT_EINVAL;
    }
    *l = (limit){.rule = -3,
                 .policy = -1,
                 .rpu = d->limit_rpu,
                 .unit = d->limit_unit,
                 .name = "",
                 .window = w,
                 .phase = phase_of(w)};
    if (d->limit_rpu == 0) {
        l->block_all = true;
        return RLT_OK;
    }
    rlt_policy p;
    int st = rlt_policy_init(&p, RLT_FIXED_WINDOW, d->limit_rpu, w, 0, 0, 0);
    if (st != RLT_OK) {
        snprintf(err, errlen, "descriptor %zu: invalid limit override: %s", i, rlt_strerror(st));
        return RLT_EINVAL;
    }
    char key[48];
    int kl = snprintf(key, sizeof key, "\001envoy-override:%lld:%d", (long long)d->limit_rpu,
                      d->limit_unit);
    return rlt__srv_intern_cached(s, key, (size_t)kl, &p, who, &l->policy, err, errlen);
}

/* The limit of every descriptor, after `replaces` (a matched rule that replaces name N drops
 * every matched rule named N: reported OK without a limit, not counted). */
static int match_all(rlt__srv *s, const rlt__config *c, const rlt__envoy_req *r, limit *ls,
                     const rlt__asker *who, char *err, size_t errlen)
{
    for (size_t i = 0; i < r->ndesc; i++) {
        const rlt__envoy_desc *d = &r->desc[i];
        if (d->limit_rpu >= 0) {
            int st = override_limit(s, d, i, &ls[i], who, err, errlen);
            if (st != RLT_OK) return st;
        } else {
            int ri = rlt__config_match(c, r->domain, r->dlen, d->entries, d->nentries);
            ls[i] = (limit){.rule = ri, .policy = -1, .name = ""};
            if (ri >= 0) {
                const rlt__rule *ru = &c->rules[ri];
                ls[i].policy = ru->policy_id;
                ls[i].block_all = ru->block_all;
                ls[i].unlimited = ru->unlimited;
                ls[i].shadow = ru->shadow || c->set.shadow_mode;
                ls[i].drain = ru->drain;
                ls[i].unit = rule_unit(ru);
                ls[i].rpu = ru->unit != NULL ? ru->requests_per_unit : ru->policy.limit;
                ls[i].name = ru->rl_name;
                ls[i].window = ru->block_all ? rlt__unit_ns(ls[i].unit)
                               : ru->policy.algo == RLT_FIXED_WINDOW && ru->policy.months == 0
                                   ? ru->policy.period
                                   : 0; /* calendar windows: real months, no phase */
                ls[i].phase = phase_of(ls[i].window);
                ls[i].calendar = ru->policy.months != 0 ? &ru->policy : NULL;
            }
        }
        ls[i].cost = d->hits_addend >= 0 ? d->hits_addend : r->hits_addend;
    }
    for (size_t i = 0; i < r->ndesc; i++) {
        if (ls[i].rule < 0) continue;
        const rlt__rule *ri = &c->rules[ls[i].rule];
        for (size_t k = 0; k < ri->nreplaces; k++)
            for (size_t j = 0; j < r->ndesc; j++)
                if (j != i && ls[j].rule >= 0 &&
                    strcmp(c->rules[ls[j].rule].rl_name, ri->replaces[k]) == 0)
                    ls[j].rule = -2;
    }
    return RLT_OK;
}

/* envoyproxy/ratelimit's per-rule counters: total_hits, over_limit, near_limit (within the
 * limit but past 80 % of it), within_limit, shadow_mode. */
static void count_rule(rlt__srv *s, int policy, int64_t hits, bool over, bool shadowed,
                       int64_t limit_n, int64_t remaining)
{
    if (policy < 0 || hits <= 0) return;
    rlt__mslot *m = rlt__mslot_get(&s->metrics);
    size_t i = policy < RLT__METRIC_IDS ? (size_t)policy : RLT__METRIC_IDS - 1;
    uint64_t h = (uint64_t)hits;
    rlt__mcount(&m->envoy.total_hits[i], h);
    if (shadowed) rlt__mcount(&m->envoy.shadow_mode[i], h);
    if (over) {
        rlt__mcount(&m->envoy.over_limit[i], h);
        return;
    }
    rlt__mcount(&m->envoy.within_limit[i], h);
    /* used >= 0.8 x limit, in integers */
    if (limit_n > 0 && (limit_n - remaining) * 5 >= limit_n * 4)
        rlt__mcount(&m->envoy.near_limit[i], h);
}

/* Until the end of the calendar window that holds `t` (a cost-1 decision on a fresh state
 * reports exactly that), on the daemon's clock. */
static rlt_ns calendar_left(const rlt_policy *p, rlt_ns t)
{
    rlt_policy q = *p;
    rlt_policy_set_origin(&q, rlt__clock_origin());
    unsigned char fresh[16] = {0};
    rlt_decision d;
    return rlt_decide(&q, fresh, t, 1, &d) == RLT_OK ? d.reset_after : 0;
}

/* The status of every descriptor, from its limit and (when charged or peeked) its decision;
 * `at` is the instant the counted limits were decided at. */
static void fill_statuses(rlt__envoy_result *res, const rlt__envoy_req *r, const limit *ls,
                          const bool *charged, const rlt_decision *dec, rlt_ns now, rlt_ns at)
{
    for (size_t i = 0; i < r->ndesc; i++) {
        rlt__envoy_status *st = &res->st[i];
        const limit *l = &ls[i];
        if (st->code == 0) st->code = RLT__CODE_OK;
        st->policy_id = -1;
        st->name = "";
        if (l->rule == -1 || l->rule == -2) continue;
        st->has_limit = !l->unlimited;
        st->unlimited = l->unlimited;
        if (l->unlimited) {
            st->remaining = UINT32_MAX;
            continue;
        }
        st->requests_per_unit = l->rpu;
        st->unit = l->unit;
        st->name = l->name;
        st->policy_id = l->block_all ? -1 : l->policy;
        rlt_ns reset = 0, t = l->shadow ? now + l->phase : at;
        if (charged[i]) {
            st->d = dec[i];
            st->remaining = dec[i].remaining;
            reset = dec[i].reset_after;
        } else {
            st->d.limit = l->rpu;
            st->d.retry_after = l->block_all ? -1 : 0;
        }
        /* envoyproxy/ratelimit reports the time to the end of the current window on every
         * status, OK or OVER_LIMIT, even when nothing was counted in it yet. */
        rlt_ns win = l->window;
        if (l->block_all) t = now + phase_of(win);
        if (win > 0 && reset <= 0) reset = win - ((t % win) + win) % win;
        if (l->calendar && reset <= 0) reset = calendar_left(l->calendar, t);
        st->reset_s = rlt_retry_after_seconds(reset);
        if (st->reset_s < 0) st->reset_s = 0;
    }
}

/* A drain_over_limit rule (gubernator's DRAIN_OVER_LIMIT): the charge-after-the-response half
 * of a settle for Envoy, whose stream-end call (apply_on_stream_done) carries the response's
 * real cost and ignores the answer.  Every hit is charged in full, past the limit as a debt
 * (a reservation of 0 settled at the cost: rlt_settle never mints), and the descriptor is
 * OVER_LIMIT when the cost did not fit what was left: with hits_addend 0, when the quota is
 * used up (a request-time check that charges nothing).  Decided apart from the all-or-nothing
 * charge of the other descriptors, as a shadowed one is. */
static int drain(rlt__srv *s, const limit *l, const char *key, size_t klen, rlt_ns at,
                 rlt_decision *d)
{
    rlt_decision pk;
    int e = rlt__decide_peek(s, l->policy, key, klen, at, &pk);
    if (e != RLT_OK) return e;
    bool fits = l->cost == 0 ? pk.allowed : pk.allowed && l->cost <= pk.remaining;
    if (l->cost > 0) {
        uint64_t id = 0;
        e = rlt__decide_reserve(s, 0, l->policy, false, key, klen, at, 0, 0, d, &id);
        if (e == RLT_OK) e = rlt__decide_settle(s, l->policy, key, klen, at, id, l->cost, d);
        if (e != RLT_OK) return e;
    } else {
        *d = pk;
    }
    count_rule(s, l->policy, l->cost, !fits, false, d->limit, d->remaining);
    d->allowed = fits;
    if (!fits && d->retry_after <= 0) d->retry_after = d->reset_after;
    if (fits) d->retry_after = 0;
    return RLT_OK;
}

/* Which call r is (RLT__BUDGET_*: a reserve or settle marks a descriptor's last entry); for
 * a reserve or settle, *out gets r without the marks and id the id.  -1 with a message for
 * marks that disagree (a reserve and a settle, two ids) or a bad id. */
static int budget_op(const rlt__envoy_req *r, rlt__envoy_req *out, char *id, char *err,
                     size_t errlen)
{
    int op = RLT__BUDGET_NONE;
    char one[RLT__BUDGET_ID_MAX], msg[128];
    for (size_t i = 0; i < r->ndesc; i++) {
        const rlt__envoy_desc *d = &r->desc[i];
        if (d->nentries == 0) continue;
        int o = rlt__envoy_budget_mark(&d->entries[d->nentries - 1], one, msg, sizeof msg);
        if (o < 0) snprintf(err, errlen, "descriptor %zu: %s", i, msg);
        if (o < 0) return -1;
        if (o == RLT__BUDGET_NONE) continue;
        if (op != RLT__BUDGET_NONE && (o != op || strcmp(one, id) != 0)) {
            snprintf(err, errlen, "descriptor %zu: one call reserves or settles one id", i);
            return -1;
        }
        if (op == RLT__BUDGET_NONE) *out = *r;
        op = o;
        memcpy(id, one, sizeof one);
        out->desc[i].nentries--;
    }
    return op;
}

static int decide(rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss,
                  char (*keys)[RLT_KEY_MAX], rlt__envoy_req *plain, rlt_ns now,
                  rlt__envoy_result *res, char *err, size_t errlen)
{
    rlt__config *c = rlt__srv_config(s);
    limit ls[RLT__ENVOY_MAX_DESCRIPTORS];
    rlt_check checks[RLT__ENVOY_MAX_DESCRIPTORS];
    size_t map[RLT__ENVOY_MAX_DESCRIPTORS], n = 0;
    bool over = false, charged[RLT__ENVOY_MAX_DESCRIPTORS] = {0};
    rlt_decision dec[RLT__ENVOY_MAX_DESCRIPTORS];
    res->over = false;
    res->n = r->ndesc;
    memset(res->st, 0, r->ndesc * sizeof res->st[0]);
    rlt__asker who;
    rlt__session_asker(ss, now, &who);
    char bid[RLT__BUDGET_ID_MAX];
    int bop = budget_op(r, plain, bid, err, errlen);
    if (bop < 0) return RLT_EINVAL;
    if (bop != RLT__BUDGET_NONE) r = plain;
    int e = match_all(s, c, r, ls, &who, err, errlen);
    if (e != RLT_OK) return e;

    /* Collect the counted limits; block-all ones deny; shadow ones are decided apart. */
    rlt_ns phase = INT64_MAX;
    for (size_t i = 0; i < r->ndesc; i++) {
        limit *l = &ls[i];
        if (l->rule == -1 || l->rule == -2 || l->unlimited) continue;
        if (l->block_all) {
            over = true;
            res->st[i].code = RLT__CODE_OVER_LIMIT;
            continue;
        }
        size_t klen;
        if (rlt__envoy_key(r->domain, r->dlen, r->desc[i].entries, r->desc[i].nentries, ss, keys[i],
                           &klen) != RLT_OK) {
            snprintf(err, errlen, "descriptor %zu is longer than %d bytes", i, RLT_KEY_MAX);
            return RLT_EKEYLEN;
        }
        if (l->drain) {
            e = drain(s, l, keys[i], klen, now + l->phase, &dec[i]);
            if (e != RLT_OK) return fail(s, l->policy, now, e, (long)i, err, errlen);
            if (!dec[i].allowed && !l->shadow) {
                over = true;
                res->st[i].code = RLT__CODE_OVER_LIMIT;
            }
            charged[i] = true;
            continue;
        }
        if (l->cost == 0) {
            /* hits_addend 0 only looks, as envoyproxy/ratelimit's "limit after an increase of
             * 0 > limit" never holds for a count that stops at the limit: OK, as it stands. */
            e = rlt__decide_peek(s, l->policy, keys[i], klen, now + l->phase, &dec[i]);
            if (e != RLT_OK) return fail(s, l->policy, now, e, (long)i, err, errlen);
            dec[i].allowed = true;
            dec[i].retry_after = 0;
            charged[i] = true;
            continue;
        }
        if (l->shadow) {
            /* The seam reports a shadowed denial as allowed: a peek first tells whether it
             * would have been one (for envoy's per-rule shadow_mode count). */
            rlt_decision pk, d;
            bool would =
                rlt__decide_peek(s, l->policy, keys[i], klen, now + l->phase, &pk) == RLT_OK &&
                (!pk.allowed || l->cost > pk.remaining);
            e = rlt__decide(s, l->policy, true, keys[i], klen, now + l->phase, l->cost, &d);
            if (e != RLT_OK) return fail(s, l->policy, now, e, (long)i, err, errlen);
            count_rule(s, l->policy, l->cost, false, would, d.limit, d.remaining);
            dec[i] = d;
            charged[i] = true;
            continue;
        }
        map[n] = i;
        if (l->phase < phase) phase = l->phase;
        checks[n++] =
            (rlt_check){.policy = l->policy, .key = keys[i], .klen = klen, .cost = l->cost};
    }
    if (n == 0) phase = 0;
    rlt_ns at = now + phase;

    /* Charge all or nothing.  A block-all rule matched: nothing else is charged. */
    bool peek_all = over;
    int refused = -1;
    if (!over && bop != RLT__BUDGET_NONE) {
        /* Envoy's reserve (request time) or settle (stream end): rls_budget.c */
        rlt_decision each[RLT__ENVOY_MAX_DESCRIPTORS];
        bool found;
        e = rlt__envoy_budget(s, ss, bop, r->domain, r->dlen, bid, checks, n, at, each, &refused,
                              &found);
        if (e == RLT_EINVAL && n > RLT_USAGE_NAMES)
            snprintf(err, errlen, "a reservation holds at most %d counted descriptors",
                     RLT_USAGE_NAMES);
        if (e == RLT_EINVAL && n > RLT_USAGE_NAMES) return e;
        if (e != RLT_OK) return fail(s, -1, now, e, -1, err, errlen);
        over = refused >= 0;
        peek_all = true;
    } else if (!over && n == 1) {
        size_t i = map[0];
        e = rlt__decide(s, checks[0].policy, false, checks[0].key, checks[0].klen, at,
                        checks[0].cost, &dec[i]);
        if (e != RLT_OK) return fail(s, checks[0].policy, now, e, (long)i, err, errlen);
        over = !dec[i].allowed;
        refused = over ? 0 : -1;
    } else if (!over && n > 1) {
        rlt_decision d;
        e = rlt__decide_multi(s, checks, n, at, &d, &refused);
        if (e != RLT_OK) return fail(s, -1, now, e, -1, err, errlen);
        over = !d.allowed;
        peek_all = true;
    }
    if (peek_all) {
        /* Each limit's real remaining and reset as it now stands (charged when the request
         * was allowed, untouched when refused). */
        for (size_t k = 0; k < n; k++) {
            size_t i = map[k];
            if (rlt__decide_peek(s, checks[k].policy, checks[k].key, checks[k].klen, at, &dec[i]) !=
                RLT_OK)
                memset(&dec[i], 0, sizeof dec[i]);
            if (over && (int)k == refused) {
                dec[i].allowed = false;
                if (dec[i].retry_after == 0) dec[i].retry_after = dec[i].reset_after;
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = map[k];
        charged[i] = true;
        if ((int)k == refused) res->st[i].code = RLT__CODE_OVER_LIMIT;
        count_rule(s, checks[k].policy, checks[k].cost, (int)k == refused, false, dec[i].limit,
                   dec[i].remaining);
    }
    for (size_t i = 0; i < r->ndesc; i++)
        if (ls[i].block_all) count_rule(s, ls[i].policy, ls[i].cost, true, false, 0, 0);

    res->over = over;
    fill_statuses(res, r, ls, charged, dec, now, at);
    return RLT_OK;
}

/* ---- proto3 JSON ------------------------------------------------------------------------- */

static void putj(rlt__obuf *o, const char *s)
{
    rlt__obuf_put(o, s, strlen(s));
}

static void put_json_str(rlt__obuf *o, const char *s)
{
    json_t *j = json_string(s);
    char *enc = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    /* json_string() of invalid UTF-8 is NULL: fall back to an empty string. */
    if (enc == NULL) {
        putj(o, "\"\"");
        return;
    }
    putj(o, enc);
    free(enc);
}

static void status_json(const rlt__envoy_status *st, rlt__obuf *out)
{
    char buf[256];
    if (!st->has_limit && !st->unlimited)
        return putj(out, st->code == RLT__CODE_OVER_LIMIT ? "{\"code\":\"OVER_LIMIT\"}"
                                                          : "{\"code\":\"OK\"}");
    if (st->unlimited) return putj(out, "{\"code\":\"OK\",\"limitRemaining\":4294967295}");
    snprintf(buf, sizeof buf, "{\"code\":\"%s\",\"currentLimit\":{",
             st->code == RLT__CODE_OVER_LIMIT ? "OVER_LIMIT" : "OK");
    putj(out, buf);
    if (st->name[0] != '\0') {
        putj(out, "\"name\":");
        put_json_str(out, st->name);
        putj(out, ",");
    }
    /* proto3 JSON omits zero values: a blocked rule's requestsPerUnit 0 too. */
    const char *unit = rlt__unit_name(st->unit);
    if (st->requests_per_unit > 0) {
        snprintf(buf, sizeof buf, "\"requestsPerUnit\":%lld%s", (long long)st->requests_per_unit,
                 unit ? "," : "");
        putj(out, buf);
    }
    if (unit != NULL) {
        snprintf(buf, sizeof buf, "\"unit\":\"%s\"", unit);
        putj(out, buf);
    }
    putj(out, "}");
    if (st->remaining > 0) {
        snprintf(buf, sizeof buf, ",\"limitRemaining\":%lld", (long long)st->remaining);
        putj(out, buf);
    }
    if (st->reset_s > 0) {
        snprintf(buf, sizeof buf, ",\"durationUntilReset\":\"%llds\"", (long long)st->reset_s);
        putj(out, buf);
    }
    putj(out, "}");
}

void rlt__envoy_render_json(const rlt__envoy_result *res, rlt__obuf *out)
{
    putj(out, res->over ? "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":["
                        : "{\"overallCode\":\"OK\",\"statuses\":[");
    for (size_t i = 0; i < res->n; i++) {
        if (i > 0) putj(out, ",");
        status_json(&res->st[i], out);
    }
    putj(out, "]}");
}

int rlt__envoy_decide(rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss,
                      rlt__scratch *sc, rlt_ns now, rlt__envoy_result *res, char *err,
                      size_t errlen)
{
    size_t mark = rlt__scratch_mark(sc);
    char(*keys)[RLT_KEY_MAX] = rlt__scratch_alloc(sc, (r->ndesc ? r->ndesc : 1) * RLT_KEY_MAX);
    /* r without its reserve or settle marks (rls_budget.c), when it has them */
    rlt__envoy_req *plain = keys ? rlt__scratch_alloc(sc, sizeof *plain) : NULL;
    int st = RLT_ENOMEM;
    if (plain == NULL)
        snprintf(err, errlen, "out of scratch space for the keys");
    else
        st = decide(s, r, ss, keys, plain, now, res, err, errlen);
    rlt__scratch_release(sc, mark);
    return st;
}

int rlt__envoy_decide_json(rlt__srv *s, const rlt__envoy_req *r, const rlt__session *ss,
                           rlt__scratch *sc, rlt_ns now, rlt__obuf *out, int *http_status,
                           char *err, size_t errlen)
{
    size_t mark = rlt__scratch_mark(sc);
    rlt__envoy_result *res = rlt__scratch_alloc(sc, sizeof *res);
    int st = RLT_ENOMEM;
    if (res == NULL)
        snprintf(err, errlen, "out of scratch space for the result");
    else
        st = rlt__envoy_decide(s, r, ss, sc, now, res, err, errlen);
    if (st == RLT_OK) {
        rlt__envoy_render_json(res, out);
        *http_status = res->over ? 429 : 200;
    }
    rlt__scratch_release(sc, mark);
    return st;
}

/* ---- response headers -------------------------------------------------------------------- */

/* A token for the IETF fields' policy name: the rule's name with bytes outside
 * [A-Za-z0-9_.:-] as '_', or "default". */
static void token_of(const char *name, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = name; *p && o + 1 < cap; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == ':' || ch == '-';
        out[o++] = ok ? ch : '_';
    }
    out[o] = '\0';
    if (o == 0) snprintf(out, cap, "default");
}

/* Appends z at o (the caller's buffer has room: names <= 63 bytes, numbers <= 20). */
static char *cat(char *o, const char *z)
{
    size_t n = strlen(z);
    memcpy(o, z, n);
    return o + n;
}

static char *num(char *o, int64_t v)
{
    return o + rlt__format_i64(o, v);
}

void rlt__envoy_headers(rlt__srv *s, const rlt__envoy_result *res,
                        void (*fn)(void *ctx, const char *name, const char *value), void *ctx)
{
    const rlt__settings *set = &rlt__srv_config(s)->set;
    const rlt__envoy_status *pick = NULL;
    for (size_t i = 0; i < res->n; i++) {
        const rlt__envoy_status *st = &res->st[i];
        if (!st->has_limit) continue;
        if (pick == NULL ||
            (st->code == RLT__CODE_OVER_LIMIT) > (pick->code == RLT__CODE_OVER_LIMIT) ||
            ((st->code == RLT__CODE_OVER_LIMIT) == (pick->code == RLT__CODE_OVER_LIMIT) &&
             st->remaining < pick->remaining))
            pick = st;
    }
    if (pick == NULL) return;
    char name[64], v[256];
    token_of(pick->name, name, sizeof name);
    rlt_policy p;
    bool have_policy =
        pick->policy_id >= 0 && rlt__registry_policy(&s->reg, pick->policy_id, &p) == RLT_OK;
    bool over = pick->code == RLT__CODE_OVER_LIMIT;
    int64_t window_s = rlt__unit_ns(pick->unit) / RLT_NS_PER_S;
    if (have_policy) window_s = rlt_retry_after_seconds(p.period);
    int64_t quota = have_policy ? rlt_policy_limit(&p) : pick->requests_per_unit;
    int64_t reset = pick->reset_s;
    int64_t retry = over ? (pick->d.retry_after > 0   ? rlt_retry_after_seconds(pick->d.retry_after)
                            : pick->d.retry_after < 0 ? -1
                                                      : reset)
                         : 0;
    if (over && retry > reset) reset = retry;
    /* Built with memcpy and one integer formatter: this runs on every gRPC call. */
    if (set->envoy_headers.ietf) {
        char *o = v;
        o = cat(cat(cat(o, "\""), name), "\";q=");
        o = num(cat(num(o, quota), ";w="), window_s);
        *o = '\0';
        fn(ctx, "ratelimit-policy", v);
        o = cat(cat(cat(v, "\""), name), "\";r=");
        o = num(cat(num(o, pick->remaining), ";t="), reset);
        *o = '\0';
        fn(ctx, "ratelimit", v);
    }
    if (set->envoy_headers.retry_after && over && retry >= 0) {
        *num(v, retry > 0 ? retry : 1) = '\0';
        fn(ctx, "retry-after", v);
    }
    if (set->envoy_headers.x) {
        *num(v, pick->requests_per_unit) = '\0';
        fn(ctx, set->envoy_headers.x_limit, v);
        *num(v, pick->remaining) = '\0';
        fn(ctx, set->envoy_headers.x_remaining, v);
        *num(v, reset) = '\0';
        fn(ctx, set->envoy_headers.x_reset, v);
    }
}
