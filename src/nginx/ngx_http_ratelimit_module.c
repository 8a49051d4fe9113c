/* ngx_http_ratelimit_module: ratelimit's algorithms as nginx directives, with limit_req's habits
 * (a keyed zone in shared memory, a PREACCESS handler, a status variable, delays held on a
 * timer), deciding with src/core's exact integer code and answering with its header arithmetic.
 * This file is the module: its definition and directive table, the request handler, the
 * per-request record and $ratelimit_status.  The zones' shared memory (layout, eviction, clock)
 * is ngx_http_ratelimit_zone.c; the directives' parsing, ngx_http_ratelimit_conf.c.
 *
 * Locking.  Each zone's slab mutex.  A request limited by several zones takes their mutexes in
 * address order (no deadlock between two requests), decides every limit on a copy of its
 * state, and writes the copies back only when every limit passed: all or nothing, exact across
 * workers.  A request limited by one zone decides on the state itself: a denial changes nothing.
 */
#include "ngx_http_ratelimit_conf.h"
#include "ngx_http_ratelimit_zone.h"

#include <stdbool.h>

typedef enum {
    RLT_NGX_UNDECIDED = 0,
    RLT_NGX_PASSED,
    RLT_NGX_DELAYED,
    RLT_NGX_REJECTED,
    RLT_NGX_REJECTED_DRY_RUN
} rlt_ngx_status_e;

static ngx_str_t rlt_ngx_status_names[] = {ngx_null_string, ngx_string("PASSED"),
                                           ngx_string("DELAYED"), ngx_string("REJECTED"),
                                           ngx_string("REJECTED_DRY_RUN")};

/* What one main request was decided: kept as a pool cleanup's data, so that it outlives the
 * module context (cleared by internal redirects) and releases concurrency leases at the end. */
typedef struct {
    rlt_ngx_status_e status;
    ngx_uint_t nleases;
    struct {
        rlt_ngx_zone_t *zone;
        ngx_str_t key;
        uint32_t hash;
        int64_t lease;
    } leases[RLT_NGX_MAX_LIMITS];
} rlt_ngx_req_t;

/* One limit while a request is being decided. */
typedef struct {
    rlt_ngx_zone_t *zone;
    ngx_str_t key;
    uint32_t hash;
    int64_t cost;
    rlt_ngx_node_t *node; /* NULL: the zone could not hold the key; not limited */
    void *work;           /* the state decided on: the node's, or a copy */
    rlt_decision d;
    int rc;
} rlt_ngx_pending_t;

extern ngx_module_t ngx_http_ratelimit_module;
static ngx_int_t rlt_ngx_add_variables(ngx_conf_t *cf);
static ngx_int_t rlt_ngx_init(ngx_conf_t *cf);

/* The directives (docs/nginx.md has the full reference and a migration table from limit_req).
 * Every bad argument stops `nginx -t` (and a reload, which keeps the old configuration) with a
 * message naming it.
 *   ratelimit_zone KEY zone=NAME:SIZE policy=POLICY;   http.  KEY a complex value (empty: not
 *       limited); NAME a token (it names the policy in the headers); POLICY rlt_policy_parse's
 *       text.  One key per name; the zone must be declared before a ratelimit uses it.
 *   ratelimit zone=NAME [cost=N|cost=$var];   http, server, location (inherited when a level
 *       has none).  Up to 8 zones, each once: all pass or the request is refused consuming from
 *       none.  A $var cost that is not a whole number >= 0 counts as 1.
 *   ratelimit_status CODE;          400-599, default 429.
 *   ratelimit_dry_run on|off;       default off: decide and report, never refuse or delay.
 *   ratelimit_log_level LEVEL;      info|notice|warn|error, default error; delays one lower.
 *   ratelimit_headers on|off;       default on: RateLimit-Policy and RateLimit per limiting
 *       zone, Retry-After (whole seconds, rounded up) on a rejection.
 * And the variable $ratelimit_status: PASSED, DELAYED, REJECTED or REJECTED_DRY_RUN.
 * The zone and ratelimit commands' `post` is the module: their shared memory's tag. */
static ngx_command_t rlt_ngx_commands[] = {
    {ngx_string("ratelimit_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, rlt__ngx_zone_directive, 0,
     0, &ngx_http_ratelimit_module},
    {ngx_string("ratelimit"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
     rlt__ngx_limit_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, &ngx_http_ratelimit_module},
    {ngx_string("ratelimit_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     rlt__ngx_status_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("ratelimit_dry_run"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(rlt_ngx_conf_t, dry_run), NULL},
    {ngx_string("ratelimit_log_level"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     rlt__ngx_log_level_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("ratelimit_headers"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(rlt_ngx_conf_t, headers), NULL},
    ngx_null_command};

static ngx_http_module_t rlt_ngx_module_ctx = {
    rlt_ngx_add_variables, /* preconfiguration */
    rlt_ngx_init,          /* postconfiguration */
    NULL,                  /* create main configuration */
    NULL,                  /* init main configuration */
    NULL,                  /* create server configuration */
    NULL,                  /* merge server configuration */
    rlt__ngx_create_conf,  /* create location configuration */
    rlt__ngx_merge_conf    /* merge location configuration */
};

ngx_module_t ngx_http_ratelimit_module = {NGX_MODULE_V1,
                                          &rlt_ngx_module_ctx,
                                          rlt_ngx_commands,
                                          NGX_HTTP_MODULE,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NGX_MODULE_V1_PADDING};

/* ---- Per-request record ---------------------------------------------------------------------- */

static void rlt_ngx_cleanup(void *data)
{
    rlt_ngx_req_t *req = data;
    for (ngx_uint_t i = 0; i < req->nleases; i++) {
        rlt_ngx_zone_t *z = req->leases[i].zone;
        ngx_shmtx_lock(&z->shpool->mutex);
        rlt_ngx_node_t *n = rlt__ngx_find(z->sh, req->leases[i].hash, req->leases[i].key.data,
                                          req->leases[i].key.len);
        /* A key evicted meanwhile has nothing left to release. */
        if (n)
            (void)rlt_release(z->sh->policy, rlt__ngx_node_state(n), rlt__ngx_now(z->sh),
                              req->leases[i].lease);
        ngx_shmtx_unlock(&z->shpool->mutex);
    }
    req->nleases = 0;
}

/* The main request's record, or NULL; with `create`, a new one (NULL when out of memory). */
static ngx_inline rlt_ngx_req_t *rlt_ngx_req(ngx_http_request_t *r, bool create)
{
    ngx_http_request_t *m = r->main;
    rlt_ngx_req_t *req = ngx_http_get_module_ctx(m, ngx_http_ratelimit_module);
    if (req) return req;
    /* An internal redirect clears the module contexts; the cleanup list survives it. */
    for (ngx_pool_cleanup_t *c = m->pool->cleanup; c; c = c->next) {
        if (c->handler == rlt_ngx_cleanup) {
            ngx_http_set_ctx(m, c->data, ngx_http_ratelimit_module);
            return c->data;
        }
    }
    if (!create) return NULL;
    ngx_pool_cleanup_t *c = ngx_pool_cleanup_add(m->pool, sizeof(rlt_ngx_req_t));
    if (c == NULL) return NULL;
    req = c->data;
    req->status = RLT_NGX_UNDECIDED;
    req->nleases = 0;
    c->handler = rlt_ngx_cleanup;
    ngx_http_set_ctx(m, req, ngx_http_ratelimit_module);
    return req;
}

/* ---- Headers --------------------------------------------------------------------------------- */

/* Adds the "Field: value\r\n" lines rlt_format_headers wrote to the response headers.
 * RLT_OK, RLT_ENOMEM, or RLT_EPARSE for a line that is no header. */
static int rlt_ngx_push_headers(ngx_http_request_t *r, const char *text, size_t len)
{
    u_char *p = ngx_pnalloc(r->pool, len);
    if (p == NULL) return RLT_ENOMEM;
    ngx_memcpy(p, text, len);
    u_char *end = p + len;
    while (p < end) {
        u_char *colon = ngx_strlchr(p, end, ':');
        u_char *cr = ngx_strlchr(p, end, '\r');
        if (colon == NULL || cr == NULL || colon > cr || colon + 2 > cr) return RLT_EPARSE;
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) return RLT_ENOMEM;
        h->hash = 1;
        h->key.data = p;
        h->key.len = (size_t)(colon - p);
        h->value.data = colon + 2;
        h->value.len = (size_t)(cr - colon - 2);
        h->lowcase_key = NULL;
        p = cr + 2;
    }
    return RLT_OK;
}

/* The RateLimit headers of the limits that decided (on a rejection, of those that refused), and
 * Retry-After: `retry` seconds when >= 0.  RLT_OK or the first error. */
static int rlt_ngx_add_headers(ngx_http_request_t *r, rlt_ngx_pending_t *pend, ngx_uint_t n,
                               bool allowed, int64_t retry)
{
    char buf[512];
    for (ngx_uint_t i = 0; i < n; i++) {
        rlt_ngx_pending_t *p = &pend[i];
        if (p->node == NULL || p->rc != RLT_OK) continue;
        /* On a rejection, the limits that refused say why; the others consumed nothing. */
        if (!allowed && p->d.allowed) continue;
        char name[64];
        size_t nl = ngx_min(p->zone->name.len, sizeof(name) - 1);
        ngx_memcpy(name, p->zone->name.data, nl);
        name[nl] = '\0';
        int len =
            rlt_format_headers(buf, sizeof(buf), name, p->zone->sh->policy, &p->d, RLT_HDR_IETF);
        int rc = len < 0 ? len : rlt_ngx_push_headers(r, buf, (size_t)len);
        if (rc != RLT_OK) return rc;
    }
    if (!allowed && retry >= 0) {
        u_char *v = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        ngx_table_elt_t *h = v ? ngx_list_push(&r->headers_out.headers) : NULL;
        if (h == NULL) return RLT_ENOMEM;
        h->hash = 1;
        ngx_str_set(&h->key, "Retry-After");
        h->value.data = v;
        h->value.len = (size_t)(ngx_sprintf(v, "%L", (int64_t)retry) - v);
        h->lowcase_key = NULL;
    }
    return RLT_OK;
}

/* ---- The handler ----------------------------------------------------------------------------- */

static void rlt_ngx_delay_done(ngx_http_request_t *r)
{
    ngx_event_t *wev = r->connection->write;
    if (!wev->timedout) {
        if (ngx_handle_write_event(wev, 0) != NGX_OK)
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    wev->timedout = 0;
    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }
    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}

/* The cost of limit l for request r into *cost.  RLT_OK, or RLT_ENOMEM when evaluating cost=$var
 * failed (nginx fails it only when out of memory). */
static int rlt_ngx_cost(ngx_http_request_t *r, const rlt_ngx_limit_t *l, int64_t *cost)
{
    *cost = l->cost;
    if (l->cost_cv == NULL) return RLT_OK;
    ngx_str_t v;
    if (ngx_http_complex_value(r, l->cost_cv, &v) != NGX_OK) return RLT_ENOMEM;
    ngx_int_t c = v.len ? ngx_atoi(v.data, v.len) : NGX_ERROR;
    if (c == NGX_ERROR) {
        /* Counted as 1, so that a bad value can neither bypass the limit nor fail the
         * request. */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "ratelimit cost \"%V\" is \"%V\", not a whole number >= 0: counted as 1",
                      &l->cost_cv->value, &v);
        c = 1;
    }
    *cost = (int64_t)c;
    return RLT_OK;
}

static void rlt_ngx_sort_by_zone(rlt_ngx_pending_t **order, ngx_uint_t n)
{
    for (ngx_uint_t i = 1; i < n; i++) {
        rlt_ngx_pending_t *p = order[i];
        ngx_uint_t j = i;
        for (; j > 0 && (uintptr_t)order[j - 1]->zone > (uintptr_t)p->zone; j--)
            order[j] = order[j - 1];
        order[j] = p;
    }
}

/* addr_prefix=: replaces p->key, a client address, by its key (rlt_addr_key, in the request's
 * pool).  A malformed address is logged at most once a second a zone (with the unheld keys).
 * Returns RLT_OK, RLT_EPARSE or RLT_ENOMEM. */
static int rlt_ngx_addr_key(ngx_http_request_t *r, rlt_ngx_pending_t *p)
{
    u_char *k = ngx_pnalloc(r->pool, RLT_ADDR_KEY_MAX);
    if (k == NULL) return RLT_ENOMEM;
    int n = rlt_addr_key((const char *)p->key.data, p->key.len, p->zone->addr_prefix, (char *)k,
                         RLT_ADDR_KEY_MAX);
    if (n < 0) {
        rlt_ngx_shctx_t *sh = p->zone->sh;
        if (sh->logged_big == 0 || ngx_current_msec - sh->logged_big >= 1000) {
            sh->logged_big = ngx_current_msec ? ngx_current_msec : 1;
            ngx_str_t shown = p->key;
            if (shown.len > 64) shown.len = 64;
            ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                          "ratelimit zone \"%V\": malformed address \"%V\" in its key (an IPv4 "
                          "or IPv6 address, no port): the request is refused",
                          &p->zone->name, &shown);
        }
        return RLT_EPARSE;
    }
    p->key.data = k;
    p->key.len = (size_t)n;
    return RLT_OK;
}

static ngx_int_t rlt_ngx_handler(ngx_http_request_t *r)
{
    rlt_ngx_conf_t *conf = ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module);
    if (conf->limits == NULL || conf->limits->nelts == 0) return NGX_DECLINED;
    if (rlt_ngx_req(r, false)) return NGX_DECLINED; /* decided once per main request */
    rlt_ngx_req_t *req = rlt_ngx_req(r, true);
    if (req == NULL) return NGX_HTTP_INTERNAL_SERVER_ERROR;

    rlt_ngx_pending_t pend[RLT_NGX_MAX_LIMITS];
    rlt_ngx_pending_t *order[RLT_NGX_MAX_LIMITS];
    rlt_ngx_limit_t *limits = conf->limits->elts;
    ngx_uint_t n = 0;
    for (ngx_uint_t i = 0; i < conf->limits->nelts; i++) {
        rlt_ngx_pending_t *p = &pend[n];
        p->zone = limits[i].shm_zone->data;
        if (ngx_http_complex_value(r, &p->zone->key, &p->key) != NGX_OK)
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        if (p->key.len == 0) continue; /* an empty key is not limited, as in limit_req */
        if (p->zone->addr_prefix && rlt_ngx_addr_key(r, p) != RLT_OK) {
            /* A malformed address is refused, never keyed as a string; nothing is charged. */
            req->status = conf->dry_run ? RLT_NGX_REJECTED_DRY_RUN : RLT_NGX_REJECTED;
            return conf->dry_run ? NGX_DECLINED : (ngx_int_t)conf->status_code;
        }
        if (rlt_ngx_cost(r, &limits[i], &p->cost) != RLT_OK) return NGX_HTTP_INTERNAL_SERVER_ERROR;
        p->hash = ngx_crc32_short(p->key.data, p->key.len);
        p->node = NULL;
        p->rc = RLT_OK;
        order[n] = p;
        n++;
    }
    if (n == 0) return NGX_DECLINED;

    rlt_ngx_sort_by_zone(order, n);
    for (ngx_uint_t i = 0; i < n; i++)
        ngx_shmtx_lock(&order[i]->zone->shpool->mutex);

    bool allowed = true, unheld = false;
    for (ngx_uint_t i = 0; i < n; i++) {
        rlt_ngx_pending_t *p = &pend[i];
        rlt_ngx_shctx_t *sh = p->zone->sh;
        rlt_ns now = rlt__ngx_now(sh);
        p->node =
            rlt__ngx_lookup(p->zone, p->hash, p->key.data, p->key.len, now, r->connection->log);
        if (p->node == NULL) { /* a key the zone cannot hold: refused (logged by the zone) */
            unheld = true;
            allowed = false;
            continue;
        }
        p->work = rlt__ngx_node_state(p->node);
        if (n > 1) {
            p->work = ngx_pnalloc(r->pool, sh->state_size);
            if (p->work == NULL) {
                p->node = NULL;
                continue;
            }
            ngx_memcpy(p->work, rlt__ngx_node_state(p->node), sh->state_size);
        }
        p->rc = rlt_decide(sh->policy, p->work, now, p->cost, &p->d);
        if (p->rc == RLT_OK && !p->d.allowed) allowed = false;
        /* jitter=: the store's and the Redis library's spread, over the key's FNV-1a. */
        if (p->rc == RLT_OK && sh->policy->jitter > 0)
            p->d.retry_after = rlt_jitter(sh->policy, rlt_hash_fnv1a(p->key.data, p->key.len), now,
                                          p->d.retry_after);
    }
    /* All or nothing: the copies go back only when every limit passed.  Dry run enforces
     * nothing, so a refused request consumes nothing there either. */
    if (allowed && n > 1) {
        for (ngx_uint_t i = 0; i < n; i++)
            if (pend[i].node && pend[i].rc == RLT_OK)
                ngx_memcpy(rlt__ngx_node_state(pend[i].node), pend[i].work,
                           pend[i].zone->sh->state_size);
    } else if (n > 1) {
        /* A refused request charges nothing, but a zone with block= that refused it keeps the
         * block its decision started (its copy holds nothing else: a denial charges nothing). */
        for (ngx_uint_t i = 0; i < n; i++)
            if (pend[i].node && pend[i].rc == RLT_OK && !pend[i].d.allowed &&
                pend[i].zone->sh->policy->block > 0)
                ngx_memcpy(rlt__ngx_node_state(pend[i].node), pend[i].work,
                           pend[i].zone->sh->state_size);
    }
    for (ngx_uint_t i = n; i-- > 0;)
        ngx_shmtx_unlock(&order[i]->zone->shpool->mutex);
    if (unheld) { /* as limit_req refuses a key it cannot allocate a node for; nothing charged */
        req->status = conf->dry_run ? RLT_NGX_REJECTED_DRY_RUN : RLT_NGX_REJECTED;
        return conf->dry_run ? NGX_DECLINED : (ngx_int_t)conf->status_code;
    }

    rlt_ns delay = 0, retry = 0;
    rlt_ngx_pending_t *worst = NULL;
    for (ngx_uint_t i = 0; i < n; i++) {
        rlt_ngx_pending_t *p = &pend[i];
        if (p->node == NULL) continue;
        if (p->rc != RLT_OK) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "ratelimit zone \"%V\" cannot decide cost %L: %s; not limited",
                          &p->zone->name, (int64_t)p->cost, rlt_strerror(p->rc));
            continue;
        }
        if (allowed) {
            if (p->d.lease > 0) {
                ngx_uint_t k = req->nleases++;
                req->leases[k].zone = p->zone;
                req->leases[k].key = p->key;
                req->leases[k].hash = p->hash;
                req->leases[k].lease = p->d.lease;
            }
            if (p->d.delay > delay) {
                delay = p->d.delay;
                worst = p;
            }
        } else if (!p->d.allowed) {
            /* The request may retry when every refusing limit allows it: the longest wait,
             * or never (-1) when one of them can never pass. */
            if (worst == NULL) worst = p;
            if (p->d.retry_after < 0) {
                retry = -1;
                worst = p;
            } else if (retry >= 0 && p->d.retry_after > retry) {
                retry = p->d.retry_after;
                worst = p;
            }
        }
    }

    int64_t retry_s = rlt_retry_after_seconds(retry);
    if (!allowed) {
        const char *dry = conf->dry_run ? ", dry run," : "";
        if (retry < 0) {
            ngx_log_error(conf->log_level, r->connection->log, 0,
                          "limiting requests%s by ratelimit zone \"%V\": cost %L can never pass",
                          dry, &worst->zone->name, (int64_t)worst->cost);
        } else {
            ngx_log_error(conf->log_level, r->connection->log, 0,
                          "limiting requests%s by ratelimit zone \"%V\", retry after %L ms", dry,
                          &worst->zone->name, rlt_retry_after_ms(retry));
        }
        req->status = conf->dry_run ? RLT_NGX_REJECTED_DRY_RUN : RLT_NGX_REJECTED;
        if (conf->headers &&
            rlt_ngx_add_headers(r, pend, n, false, conf->dry_run ? -1 : retry_s) != RLT_OK)
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        return conf->dry_run ? NGX_DECLINED : (ngx_int_t)conf->status_code;
    }

    if (conf->headers && rlt_ngx_add_headers(r, pend, n, true, -1) != RLT_OK)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (delay <= 0 || conf->dry_run) {
        req->status = RLT_NGX_PASSED;
        return NGX_DECLINED;
    }

    /* Held like limit_req's delay=: the timer has ms resolution, so the wait rounds up. */
    ngx_msec_t ms = (ngx_msec_t)rlt_retry_after_ms(delay);
    req->status = RLT_NGX_DELAYED;
    ngx_log_error(conf->delay_log_level, r->connection->log, 0,
                  "delaying request by %M ms by ratelimit zone \"%V\"", ms, &worst->zone->name);
    if (ngx_handle_read_event(r->connection->read, 0) != NGX_OK)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = rlt_ngx_delay_done;
    ngx_add_timer(r->connection->write, ms);
    return NGX_AGAIN;
}

/* ---- $ratelimit_status ----------------------------------------------------------------------- */

static ngx_int_t rlt_ngx_status_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
                                         uintptr_t data)
{
    rlt_ngx_req_t *req = rlt_ngx_req(r, false);
    if (req == NULL || req->status == RLT_NGX_UNDECIDED) {
        v->not_found = 1;
        return NGX_OK;
    }
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;
    v->len = rlt_ngx_status_names[req->status].len & 0xffff; /* the names are short */
    v->data = rlt_ngx_status_names[req->status].data;
    return NGX_OK;
}

static ngx_int_t rlt_ngx_add_variables(ngx_conf_t *cf)
{
    static ngx_str_t name = ngx_string("ratelimit_status");
    ngx_http_variable_t *var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) return NGX_ERROR;
    var->get_handler = rlt_ngx_status_variable;
    return NGX_OK;
}

static ngx_int_t rlt_ngx_init(ngx_conf_t *cf)
{
    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) return NGX_ERROR;
    *h = rlt_ngx_handler;
    return NGX_OK;
}
