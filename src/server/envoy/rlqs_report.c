/* The RLQS quota buckets as JSON and Prometheus text (rlqs_report.h), from one snapshot. */
#include "server/envoy/rlqs_report.h"

#include "server/base/escape.h"
#include "server/stats/metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Printable ASCII but what JSON or a Prometheus label value would need escaped, and '%' (so
 * that percent-decoding is unambiguous): /v1/top's encoding. */
static bool plain(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '%' && c != '"' && c != '\\';
}

typedef char enc_text[3 * RLT__RLQS_VIEW_TEXT + 1];
typedef char enc_label[sizeof(enc_text) + 32]; /* and a cut one's "...#ID" */

/* A row's labels, encoded; a cut text ends in "...#ID" so that two cut rows never share a
 * series. */
static void enc_row(const rlt__rlqs_view_row *r, char *d, char *b)
{
    rlt__pct_encode(r->domain, d, sizeof(enc_text), plain);
    rlt__pct_encode(r->bucket, b, sizeof(enc_text), plain);
    if (r->cut) {
        size_t n = strlen(b);
        snprintf(b + n, sizeof(enc_text) + 32 - n, "...#%" PRIu64, r->id);
    }
}

static int64_t ms(rlt_ns ns)
{
    return ns / RLT_NS_PER_MS;
}

static void json_row(rlt__obuf *o, const rlt__rlqs_view_row *r, bool redis, bool other,
                     size_t nother)
{
    if (other) {
        rlt__obuf_printf(o, "{\"buckets\":%zu", nother);
    } else {
        enc_label d, b;
        enc_text p;
        enc_row(r, d, b);
        rlt__pct_encode(r->policy, p, sizeof p, plain);
        rlt__obuf_printf(
            o,
            "{\"domain\":\"%s\",\"bucket\":\"%s\",\"cut\":%s,\"rule\":%d,\"policy_text\":\"%s\","
            "\"kind\":\"%s\",\"shadow\":%s,\"ttl_ms\":%" PRId64 ",\"fill_interval_ms\":%" PRId64,
            d, b, r->cut ? "true" : "false", r->rule, p, rlt__rlqs_view_kind(r->kind),
            r->shadow ? "true" : "false", ms(r->ttl), ms(r->fill_interval));
    }
    rlt__obuf_printf(o,
                     ",\"members\":%" PRIu64 ",\"departed\":%" PRIu64 ",\"demand\":%" PRId64
                     ",\"unknown\":%" PRIu64 ",\"assigned_tokens_per_fill\":%" PRId64
                     ",\"assigned_max_tokens\":%" PRId64 ",\"budget_tokens_per_fill\":%" PRId64
                     ",\"budget_max_tokens\":%" PRId64 ",\"left_tokens_per_fill\":%" PRId64
                     ",\"left_max_tokens\":%" PRId64,
                     r->members, r->departed, r->demand, r->unknown, r->assigned_q, r->assigned_b,
                     r->budget_q, r->budget_b, r->left_q, r->left_b);
    if (redis) {
        if (!other) rlt__obuf_printf(o, ",\"claim\":\"%s\"", rlt__rlqs_view_claim_name(r->claim));
        rlt__obuf_printf(o, ",\"claim_tokens_per_fill\":%" PRId64 ",\"claim_max_tokens\":%" PRId64,
                         r->claim_q, r->claim_b);
    }
    rlt__obuf_printf(o, "}");
}

void rlt__rlqs_report_json(const rlt__rlqs_view *v, rlt__obuf *o)
{
    rlt__obuf_printf(o, "\"quotas\":{\"buckets\":%zu,\"redis\":%s,\"top\":%d,\"shown\":[",
                     v->buckets, v->redis ? "true" : "false", RLT__RLQS_VIEW_TOP);
    for (size_t i = 0; i < v->nrows; i++) {
        if (i) rlt__obuf_printf(o, ",");
        json_row(o, &v->rows[i], v->redis, false, 0);
    }
    rlt__obuf_printf(o, "],\"other\":");
    json_row(o, &v->other, v->redis, true, v->nother);
    rlt__obuf_printf(o, "}");
}

/* One family: a sample per shown bucket and one for the rest, of field `off` (or, with two
 * offsets, one sample per part). */
typedef struct family {
    const char *name, *help;
    int64_t (*get)(const rlt__rlqs_view_row *r, int part);
    int parts; /* 1: no part label; 2: tokens_per_fill then max_tokens */
} family;

static int64_t members(const rlt__rlqs_view_row *r, int part)
{
    (void)part;
    return (int64_t)r->members;
}
static int64_t demand(const rlt__rlqs_view_row *r, int part)
{
    (void)part;
    return r->demand;
}
static int64_t assigned(const rlt__rlqs_view_row *r, int part)
{
    return part ? r->assigned_b : r->assigned_q;
}
static int64_t budget(const rlt__rlqs_view_row *r, int part)
{
    return part ? r->budget_b : r->budget_q;
}
static int64_t left(const rlt__rlqs_view_row *r, int part)
{
    return part ? r->left_b : r->left_q;
}
static int64_t claim(const rlt__rlqs_view_row *r, int part)
{
    return part ? r->claim_b : r->claim_q;
}

static void sample(rlt__obuf *o, const family *f, const char *d, const char *b,
                   const rlt__rlqs_view_row *r)
{
    static const char *const parts[] = {"tokens_per_fill", "max_tokens"};
    for (int p = 0; p < f->parts; p++) {
        if (f->parts == 1)
            rlt__obuf_printf(o, "%s{domain=\"%s\",bucket=\"%s\"} %" PRId64 "\n", f->name, d, b,
                             f->get(r, p));
        else
            rlt__obuf_printf(o, "%s{domain=\"%s\",bucket=\"%s\",part=\"%s\"} %" PRId64 "\n",
                             f->name, d, b, parts[p], f->get(r, p));
    }
}

void rlt__rlqs_report_prometheus(const rlt__rlqs_view *v, rlt__obuf *o)
{
    static const family fams[] = {
        {"ratelimitd_rlqs_bucket_members", "Streams (Envoys) holding an RLQS quota bucket now.",
         members, 1},
        {"ratelimitd_rlqs_bucket_demand",
         "An RLQS quota bucket's summed demand, tokens per fill interval.", demand, 1},
        {"ratelimitd_rlqs_bucket_assigned",
         "Live assignments of an RLQS quota bucket, summed (tokens per fill, burst tokens).",
         assigned, 2},
        {"ratelimitd_rlqs_bucket_budget",
         "The budget an RLQS quota bucket divides now (tokens per fill, burst tokens).", budget, 2},
        {"ratelimitd_rlqs_bucket_left",
         "An RLQS quota bucket's budget not assigned (tokens per fill, burst tokens).", left, 2},
        {"ratelimitd_rlqs_bucket_claim",
         "Redis mode: an RLQS quota bucket's claim on the global budget (tokens per fill, "
         "burst tokens).",
         claim, 2},
    };
    size_t nf = sizeof fams / sizeof *fams - (v->redis ? 0 : 1);
    for (size_t f = 0; f < nf; f++) {
        rlt__prom_family(o, fams[f].name, "gauge", fams[f].help);
        for (size_t i = 0; i < v->nrows; i++) {
            enc_label d, b;
            enc_row(&v->rows[i], d, b);
            sample(o, &fams[f], d, b, &v->rows[i]);
        }
        sample(o, &fams[f], "", "other", &v->other); /* always: a stable series */
    }
    rlt__prom_value(o, "ratelimitd_rlqs_buckets_other", "gauge",
                    "RLQS quota buckets summed in the bucket=\"other\" series (past the top by "
                    "demand).",
                    v->nother);
}
