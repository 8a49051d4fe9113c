/* The RLQS service on the server context: opened and closed here, rendered here (request/
 * report.c calls these through rlt__srv_service where each part belongs). */
#include "server/envoy/rlqs_srv.h"

#include "server/backend/backend.h"
#include "server/base/clock.h"
#include "server/envoy/rlqs.h"
#include "server/envoy/rlqs_report.h"
#include "server/envoy/rlqs_sync.h"
#include "server/envoy/rlqs_view.h"
#include "server/stats/metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void svc_close(rlt__srv *s)
{
    rlt__rlqs_sync_stop(s->rlqs_sync); /* before the quota state and the backend it uses */
    rlt__rlqs_close(s->rlqs);          /* before the configs its buckets point into */
    s->rlqs_sync = NULL;
    s->rlqs = NULL;
}

static uint64_t svc_shadow_denied(rlt__srv *s)
{
    rlt__rlqs_stats q = {0};
    if (s->rlqs != NULL) rlt__rlqs_stats_get(s->rlqs, &q);
    return q.c.shadow_denied;
}

/* INFO's "# RLQS" section. */
static void info_section(rlt__srv *s, rlt__obuf *o)
{
    rlt__rlqs_stats q = {0};
    if (s->rlqs != NULL) rlt__rlqs_stats_get(s->rlqs, &q);
    rlt__obuf_printf(o,
                     "\r\n# RLQS\r\nrlqs_streams:%zu\r\nrlqs_buckets:%zu\r\nrlqs_members:%zu"
                     "\r\nrlqs_usages:%" PRIu64 "\r\nrlqs_usages_skipped:%" PRIu64
                     "\r\nrlqs_actions:%" PRIu64 "\r\nrlqs_shadow_denied:%" PRIu64
                     "\r\nrlqs_usages_over_cap:%" PRIu64 "\r\n",
                     q.streams, q.buckets, q.members, q.c.usages, q.c.skipped, q.c.actions,
                     q.c.shadow_denied, q.c.over_cap);
}

static void svc_info(rlt__srv *s, rlt__obuf *o, bool backend)
{
    if (!backend) return info_section(s, o);
    if (s->rlqs_sync == NULL) return;
    rlt__rlqs_sync_stats q;
    rlt__rlqs_sync_stats_get(s->rlqs_sync, &q);
    rlt__obuf_printf(o,
                     "rlqs_redis_server:%016" PRIx64 "\r\nrlqs_redis_exchanges_ok:%" PRIu64
                     "\r\nrlqs_redis_exchanges_error:%" PRIu64
                     "\r\nrlqs_redis_fail_buckets:%" PRIu64 "\r\n",
                     q.server, q.ok, q.errors, q.failing);
}

/* The ratelimitd_rlqs_* families and the per-bucket series (rlqs_report.h). */
static void prometheus(rlt__srv *s, rlt__obuf *o)
{
    rlt__rlqs_stats q = {0};
    if (s->rlqs != NULL) rlt__rlqs_stats_get(s->rlqs, &q);
    rlt__prom_value(o, "ratelimitd_rlqs_streams", "gauge",
                    "Open StreamRateLimitQuotas streams (Envoys).", q.streams);
    rlt__prom_value(o, "ratelimitd_rlqs_buckets", "gauge",
                    "RLQS BucketIds held (idle ones awaiting their TTL included).", q.buckets);
    rlt__prom_value(o, "ratelimitd_rlqs_members", "gauge", "RLQS (stream, bucket) memberships.",
                    q.members);
    rlt__prom_value(o, "ratelimitd_rlqs_usages_total", "counter", "RLQS bucket usages reported.",
                    q.c.usages);
    rlt__prom_value(o, "ratelimitd_rlqs_usages_skipped_total", "counter",
                    "RLQS bucket usages skipped: no BucketId or an empty one.", q.c.skipped);
    rlt__prom_value(o, "ratelimitd_rlqs_actions_total", "counter", "RLQS bucket actions sent.",
                    q.c.actions);
    rlt__prom_value(o, "ratelimitd_rlqs_usages_over_cap_total", "counter",
                    "RLQS usages of new buckets past their client's "
                    "rlqs_max_buckets_per_client: not kept, not answered.",
                    q.c.over_cap);
    rlt__prom_value(o, "ratelimitd_rlqs_shadow_denied_total", "counter",
                    "Requests RLQS shadow-mode buckets would have denied (also in "
                    "ratelimitd_decisions_total{outcome=\"shadow_denied\"}).",
                    q.c.shadow_denied);
    rlt__rlqs_view qv; /* ~11 kB */
    rlt__rlqs_view_get(s->rlqs, rlt__now(), &qv);
    rlt__rlqs_report_prometheus(&qv, o);
}

static void svc_prometheus(rlt__srv *s, rlt__obuf *o, bool backend)
{
    if (!backend) return prometheus(s, o);
    if (s->rlqs_sync == NULL) return; /* RLQS in Redis mode (rlqs_sync.h) */
    rlt__rlqs_sync_stats q;
    rlt__rlqs_sync_stats_get(s->rlqs_sync, &q);
    rlt__obuf_printf(o,
                     "# HELP ratelimitd_rlqs_redis_exchanges_total RLQS quota bucket "
                     "exchanges with Redis, by result.\n"
                     "# TYPE ratelimitd_rlqs_redis_exchanges_total counter\n"
                     "ratelimitd_rlqs_redis_exchanges_total{result=\"ok\"} %" PRIu64 "\n"
                     "ratelimitd_rlqs_redis_exchanges_total{result=\"error\"} %" PRIu64 "\n"
                     "# HELP ratelimitd_rlqs_redis_fail_buckets RLQS quota buckets answered "
                     "in their fail mode (their last exchange failed).\n"
                     "# TYPE ratelimitd_rlqs_redis_fail_buckets gauge\n"
                     "ratelimitd_rlqs_redis_fail_buckets %" PRIu64 "\n",
                     q.ok, q.errors, q.failing);
}

static void svc_stats_json(rlt__srv *s, rlt_ns now, rlt__obuf *o)
{
    rlt__rlqs_view qv;
    rlt__rlqs_view_get(s->rlqs, now, &qv);
    rlt__obuf_put(o, ",", 1);
    rlt__rlqs_report_json(&qv, o);
}

static const rlt__srv_service rlqs_service = {svc_close, svc_shadow_denied, svc_info,
                                              svc_prometheus, svc_stats_json};

int rlt__rlqs_attach(rlt__srv *s, char *err, size_t errlen)
{
    int st = rlt__rlqs_open(&s->rlqs);
    if (st != RLT_OK) {
        snprintf(err, errlen, "out of memory");
        return st;
    }
    /* A backend with a fleet (Redis): each quota bucket's budget is shared with the fleet. */
    if (s->be->ops->quota_exchange != NULL &&
        (st = rlt__rlqs_sync_start(&s->rlqs_sync, s->rlqs, s->be)) != RLT_OK) {
        snprintf(err, errlen, "cannot start the RLQS exchanges with Redis");
        svc_close(s);
        return st;
    }
    s->service = &rlqs_service;
    return RLT_OK;
}

int rlt__rlqs_feed_report(rlt__rlqs *q, const rlt__config *cfg, rlt__rlqs_stream *qs,
                          const char *domain, size_t dlen, rlt__rlqs_reader *it, rlt_ns now,
                          rlt__obuf *out, size_t *actions)
{
    size_t mark = out->len, n = 0;
    rlt__obuf_put(out, "\0\0\0\0\0", 5);
    rlt__rlqs_usage u; /* about 550 bytes: on the stack */
    char key[RLT__RLQS_MAX_ID + 2 * RLT__RLQS_MAX_PAIRS];
    char err[300];
    int e = RLT_OK;
    rlt__rlqs_lock(q);
    rlt__rlqs_counters *cnt = rlt__rlqs_counted(q);
    while (rlt__rlqs_next_usage(it, &u, err, sizeof err) == RLT__RLQS_OK) {
        cnt->usages++;
        if (u.id.n == 0) { /* no BucketId: nothing to answer it with; the others are */
            cnt->skipped++;
            continue;
        }
        rlt__rlqs_use qu = {
            u.id.pairs, u.id.n,    key,     rlt__rlqs_id_key(&u.id, key, sizeof key),
            u.elapsed,  u.allowed, u.denied};
        rlt__rlqs_answer a;
        if ((e = rlt__rlqs_report(q, cfg, qs, domain, dlen, &qu, now, &a)) != RLT_OK) break;
        cnt->shadow_denied += a.shadow_denied;
        if (a.kind == RLT__QA_NONE) continue;
        rlt__rlqs_action act = {
            &u.id, (rlt__rlqs_kind)a.kind, a.max_tokens, a.tokens_per_fill, a.fill_interval, a.ttl};
        rlt__rlqs_encode_response(&act, 1, out);
        n++;
    }
    cnt->actions += n;
    rlt__rlqs_unlock(q);
    *actions = n;
    if (n == 0 || out->overflow) {
        if (!out->overflow) out->len = mark;
        return e;
    }
    size_t len = out->len - mark - 5;
    uint8_t pre[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                      (uint8_t)len};
    memcpy(out->data + mark, pre, 5);
    return e;
}
