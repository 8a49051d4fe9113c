/* ngx_http_ratelimit_module: ratelimit's algorithms as nginx directives, with limit_req's habits
 * (a keyed zone in shared memory, a PREACCESS handler, a status variable, delays held on a
 * timer), deciding with src/core's exact integer code and answering with its header arithmetic.
 *
 * Shared memory.  One slab pool per ratelimit_zone: a header (an rbtree of keys by crc32, an
 * LRU queue, the policy in force, the clock offset) and one node per key laid out as
 *     ngx_rbtree_node_t up to `color` (32) | color dummy len (4) + pad (4) | LRU queue (16)
 *     | key bytes, padded to 8 | state (rlt_state_size: 8 for GCRA)
 * that is 64 + key bytes (padded) for GCRA, slab's 128-byte class for keys up to 64 bytes
 * (limit_req's node is 80 + key bytes, the same class up to 48).  Every worker decides with the
 * policy kept in the zone, so old and new workers agree while a reload drains.
 *
 * Locking.  Each zone's slab mutex.  A request limited by several zones takes their mutexes in
 * address order (no deadlock between two requests), decides every limit on a copy of its
 * state, and writes the copies back only when every limit passed: all or nothing, exact across
 * workers.  A request limited by one zone decides on the state itself: a denial changes nothing.
 *
 * Eviction.  Each new key first frees up to two idle keys from the LRU tail (idle: the state is
 * equivalent to fresh, rlt_is_fresh, so dropping it changes no decision).  When the slab still
 * has no room, up to RLT_NGX_IDLE_SCAN keys from the tail are checked for idle ones, then the
 * least recently used key is dropped, and again, until the new node fits.  That is logged (at
 * most once a second a zone) and never fails the request.
 *
 * Clock.  nginx's cached monotonic clock, ngx_current_msec (updated once per event loop turn),
 * times 1e6, plus the UTC-minus-monotonic offset taken when the zone was created, kept in the
 * zone: every worker and every reload share one origin, windows align on UTC, and a wall clock
 * step changes nothing.  The resolution is 1 ms and a decision sees the time of its loop turn.
 * `now` is so Unix time: calendar windows (policy=fixed_window:N/1mo,tz=ZONE) take their
 * months from it with the policy's origin 0 (the zone file is read with the configuration).
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ratelimit/ratelimit.h"

/* Limits one location may apply: the all-or-nothing check keeps them on the stack. */
#define RLT_NGX_MAX_LIMITS 8
/* Keys checked for idleness from the LRU tail before the least recently used is dropped. */
#define RLT_NGX_IDLE_SCAN 64
/* Forced evictions one new key may cause before the request is let through unlimited. */
#define RLT_NGX_MAX_EVICT 4096

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

/* Overlays ngx_rbtree_node_t from its `color` field on, as limit_req's node does. */
typedef struct {
    u_char color;
    u_char dummy;
    u_short len; /* key bytes */
    ngx_queue_t queue;
    u_char data[1]; /* the key, then the state at the next multiple of 8 */
} rlt_ngx_node_t;

typedef struct {
    ngx_rbtree_t rbtree;
    ngx_rbtree_node_t sentinel;
    ngx_queue_t queue;  /* most recently used first */
    rlt_policy *policy; /* the policy every worker decides with (in the zone, see init) */
    size_t state_size;  /* rlt_state_size(&policy), rounded up to 8 */
    int64_t offset_ns;  /* UTC minus monotonic time when the zone was created */
    uint64_t evicted;   /* keys dropped while still in use, since the zone was created */
    ngx_msec_t logged;  /* monotonic ms of the last "zone is full" message */
} rlt_ngx_shctx_t;

/* One chunk of the nodes' 128-byte slab class (see rlt_ngx_init_zone). */
_Static_assert(sizeof(rlt_ngx_shctx_t) <= 128, "the zone header outgrew its slab class");

typedef struct {
    rlt_ngx_shctx_t *sh;
    ngx_slab_pool_t *shpool;
    ngx_http_complex_value_t key;
    rlt_policy policy; /* as configured; the zone's copy wins while decisions run */
    ngx_str_t policy_text;
    ngx_str_t name;
} rlt_ngx_zone_t;

typedef struct {
    ngx_shm_zone_t *shm_zone;
    int64_t cost;                      /* when cost_cv is NULL */
    ngx_http_complex_value_t *cost_cv; /* cost=$var */
} rlt_ngx_limit_t;

typedef struct {
    ngx_array_t *limits; /* of rlt_ngx_limit_t; NULL: inherit */
    ngx_uint_t status_code;
    ngx_flag_t dry_run;
    ngx_uint_t log_level;
    ngx_uint_t delay_log_level;
    ngx_flag_t headers;
} rlt_ngx_conf_t;

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

static ngx_int_t rlt_ngx_add_variables(ngx_conf_t *cf);
static ngx_int_t rlt_ngx_init(ngx_conf_t *cf);
static void *rlt_ngx_create_conf(ngx_conf_t *cf);
static char *rlt_ngx_merge_conf(ngx_conf_t *cf, void *parent, void *child);
static char *rlt_ngx_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *rlt_ngx_limit_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *rlt_ngx_status_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *rlt_ngx_log_level_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

static ngx_conf_enum_t rlt_ngx_log_levels[] = {{ngx_string("info"), NGX_LOG_INFO},
                                               {ngx_string("notice"), NGX_LOG_NOTICE},
                                               {ngx_string("warn"), NGX_LOG_WARN},
                                               {ngx_string("error"), NGX_LOG_ERR},
                                               {ngx_null_string, 0}};

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
 * And the variable $ratelimit_status: PASSED, DELAYED, REJECTED or REJECTED_DRY_RUN. */
static ngx_command_t rlt_ngx_commands[] = {
    {ngx_string("ratelimit_zone"), NGX_HTTP_MAIN_CONF | NGX_CONF_1MORE, rlt_ngx_zone_directive, 0,
     0, NULL},
    {ngx_string("ratelimit"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_1MORE,
     rlt_ngx_limit_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("ratelimit_status"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     rlt_ngx_status_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
    {ngx_string("ratelimit_dry_run"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_FLAG,
     ngx_conf_set_flag_slot, NGX_HTTP_LOC_CONF_OFFSET, offsetof(rlt_ngx_conf_t, dry_run), NULL},
    {ngx_string("ratelimit_log_level"),
     NGX_HTTP_MAIN_CONF | NGX_HTTP_SRV_CONF | NGX_HTTP_LOC_CONF | NGX_CONF_TAKE1,
     rlt_ngx_log_level_directive, NGX_HTTP_LOC_CONF_OFFSET, 0, NULL},
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
    rlt_ngx_create_conf,   /* create location configuration */
    rlt_ngx_merge_conf     /* merge location configuration */
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

/* ---- Time ---------------------------------------------------------------------------------- */

static rlt_ns rlt_ngx_now(const rlt_ngx_shctx_t *sh)
{
    return (rlt_ns)ngx_current_msec * RLT_NS_PER_MS + sh->offset_ns;
}

/* ---- The keyed state in shared memory ------------------------------------------------------ */

static rlt_ngx_node_t *rlt_ngx_node(ngx_rbtree_node_t *node)
{
    return (rlt_ngx_node_t *)&node->color;
}

static ngx_rbtree_node_t *rlt_ngx_rbnode(rlt_ngx_node_t *n)
{
    return (ngx_rbtree_node_t *)((u_char *)n - offsetof(ngx_rbtree_node_t, color));
}

/* The key comes first so the rbtree's insert can compare keys without knowing the state size;
 * the state follows at the next multiple of 8. */
static void *rlt_ngx_node_state(rlt_ngx_node_t *n)
{
    return n->data + ngx_align(n->len, 8);
}

static size_t rlt_ngx_node_size(size_t state_size, size_t key_len)
{
    return offsetof(ngx_rbtree_node_t, color) + offsetof(rlt_ngx_node_t, data) +
           ngx_align(key_len, 8) + state_size;
}

/* Ordered by crc32, ties by key bytes. */
static void rlt_ngx_rbtree_insert(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
                                  ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t **p;
    for (;;) {
        if (node->key < temp->key) {
            p = &temp->left;
        } else if (node->key > temp->key) {
            p = &temp->right;
        } else {
            rlt_ngx_node_t *a = rlt_ngx_node(node), *b = rlt_ngx_node(temp);
            p = ngx_memn2cmp(a->data, b->data, a->len, b->len) < 0 ? &temp->left : &temp->right;
        }
        if (*p == sentinel) break;
        temp = *p;
    }
    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

static rlt_ngx_node_t *rlt_ngx_find(rlt_ngx_shctx_t *sh, uint32_t hash, u_char *key, size_t len)
{
    ngx_rbtree_node_t *node = sh->rbtree.root, *sentinel = sh->rbtree.sentinel;
    while (node != sentinel) {
        if (hash != node->key) {
            node = hash < node->key ? node->left : node->right;
            continue;
        }
        rlt_ngx_node_t *n = rlt_ngx_node(node);
        ngx_int_t rc = ngx_memn2cmp(key, n->data, len, n->len);
        if (rc == 0) return n;
        node = rc < 0 ? node->left : node->right;
    }
    return NULL;
}

static void rlt_ngx_drop(rlt_ngx_zone_t *z, rlt_ngx_node_t *n)
{
    ngx_queue_remove(&n->queue);
    ngx_rbtree_delete(&z->sh->rbtree, rlt_ngx_rbnode(n));
    ngx_slab_free_locked(z->shpool, rlt_ngx_rbnode(n));
}

/* Frees up to `max` idle keys among the `scan` least recently used.  Returns how many. */
static ngx_uint_t rlt_ngx_expire_idle(rlt_ngx_zone_t *z, rlt_ns now, ngx_uint_t scan,
                                      ngx_uint_t max)
{
    ngx_uint_t freed = 0;
    ngx_queue_t *q = ngx_queue_last(&z->sh->queue);
    while (scan-- > 0 && freed < max && q != ngx_queue_sentinel(&z->sh->queue)) {
        ngx_queue_t *prev = ngx_queue_prev(q);
        rlt_ngx_node_t *n = ngx_queue_data(q, rlt_ngx_node_t, queue);
        if (rlt_is_fresh(z->sh->policy, rlt_ngx_node_state(n), now)) {
            rlt_ngx_drop(z, n);
            freed++;
        }
        q = prev;
    }
    return freed;
}

/* The node of `key`, created if missing.  Called with the zone locked.  NULL only when the
 * zone cannot hold the key even empty (logged): the caller lets the request through. */
static rlt_ngx_node_t *rlt_ngx_lookup(rlt_ngx_zone_t *z, uint32_t hash, u_char *key, size_t len,
                                      rlt_ns now, ngx_log_t *log)
{
    rlt_ngx_shctx_t *sh = z->sh;
    rlt_ngx_node_t *n = rlt_ngx_find(sh, hash, key, len);
    if (n) {
        ngx_queue_remove(&n->queue);
        ngx_queue_insert_head(&sh->queue, &n->queue);
        return n;
    }

    size_t size = rlt_ngx_node_size(sh->state_size, len);
    rlt_ngx_expire_idle(z, now, 2, 2);
    ngx_rbtree_node_t *node = ngx_slab_alloc_locked(z->shpool, size);
    ngx_uint_t idle = 0, forced = 0;
    while (node == NULL && !ngx_queue_empty(&sh->queue) && forced < RLT_NGX_MAX_EVICT) {
        ngx_uint_t freed = rlt_ngx_expire_idle(z, now, RLT_NGX_IDLE_SCAN, 8);
        idle += freed;
        if (freed == 0) {
            rlt_ngx_drop(z, ngx_queue_data(ngx_queue_last(&sh->queue), rlt_ngx_node_t, queue));
            forced++;
        }
        node = ngx_slab_alloc_locked(z->shpool, size);
    }
    sh->evicted += forced;
    if ((idle || forced || node == NULL) && ngx_current_msec - sh->logged >= 1000) {
        sh->logged = ngx_current_msec;
        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "ratelimit zone \"%V\" is full: dropped %ui idle and %ui busy keys for a "
                      "new one (%uL busy keys dropped since start)%s",
                      &z->name, idle, forced, (unsigned long long)sh->evicted,
                      node ? "" : "; the request is not limited");
    }
    if (node == NULL) return NULL;

    node->key = hash;
    n = rlt_ngx_node(node);
    n->len = (u_short)len;
    ngx_memcpy(n->data, key, len);
    ngx_memzero(rlt_ngx_node_state(n), sh->state_size);
    ngx_rbtree_insert(&sh->rbtree, node);
    ngx_queue_insert_head(&sh->queue, &n->queue);
    return n;
}

static ngx_int_t rlt_ngx_policy_same(const rlt_policy *a, const rlt_policy *b)
{
    return rlt_policy_equal(a, b); /* block=, jitter=, tz=: another policy too */
}

static size_t rlt_ngx_state_size(const rlt_policy *p)
{
    return ngx_align(rlt_state_size(p), 8);
}

/* A reload with another policy for an existing zone: states of the same algorithm and size are
 * carried over with their used allowance kept (rlt_state_convert); others are dropped. */
static void rlt_ngx_adopt_policy(rlt_ngx_zone_t *z, ngx_log_t *log)
{
    rlt_ngx_shctx_t *sh = z->sh;
    ngx_shmtx_lock(&z->shpool->mutex);
    if (rlt_ngx_policy_same(sh->policy, &z->policy)) {
        ngx_shmtx_unlock(&z->shpool->mutex);
        return;
    }
    rlt_ns now = rlt_ngx_now(sh);
    ngx_uint_t kept = 0, dropped = 0;
    ngx_int_t convert =
        sh->policy->algo == z->policy.algo && sh->state_size == rlt_ngx_state_size(&z->policy);
    ngx_queue_t *q = ngx_queue_head(&sh->queue);
    while (q != ngx_queue_sentinel(&sh->queue)) {
        ngx_queue_t *next = ngx_queue_next(q);
        rlt_ngx_node_t *n = ngx_queue_data(q, rlt_ngx_node_t, queue);
        if (convert && rlt_state_convert(sh->policy, &z->policy, rlt_ngx_node_state(n), now,
                                         RLT_CONVERT_KEEP) == RLT_OK) {
            kept++;
        } else if (convert) {
            ngx_memzero(rlt_ngx_node_state(n), sh->state_size);
            kept++;
        } else {
            rlt_ngx_drop(z, n);
            dropped++;
        }
        q = next;
    }
    *sh->policy = z->policy;
    sh->state_size = rlt_ngx_state_size(&z->policy);
    ngx_shmtx_unlock(&z->shpool->mutex);
    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "ratelimit zone \"%V\" now has policy \"%V\": %ui keys carried over, %ui "
                  "dropped (another algorithm or state size)",
                  &z->name, &z->policy_text, kept, dropped);
}

static ngx_int_t rlt_ngx_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    rlt_ngx_zone_t *octx = data;
    rlt_ngx_zone_t *z = shm_zone->data;

    if (octx) {
        if (z->key.value.len != octx->key.value.len ||
            ngx_strncmp(z->key.value.data, octx->key.value.data, z->key.value.len) != 0) {
            ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                          "ratelimit_zone \"%V\" uses the \"%V\" key while previously it used "
                          "the \"%V\" key",
                          &shm_zone->shm.name, &z->key.value, &octx->key.value);
            return NGX_ERROR;
        }
        z->sh = octx->sh;
        z->shpool = octx->shpool;
        rlt_ngx_adopt_policy(z, shm_zone->shm.log);
        return NGX_OK;
    }

    z->shpool = (ngx_slab_pool_t *)shm_zone->shm.addr;
    if (shm_zone->shm.exists) {
        z->sh = z->shpool->data;
        return NGX_OK;
    }

    z->sh = ngx_slab_alloc(z->shpool, sizeof(rlt_ngx_shctx_t));
    if (z->sh == NULL) return NGX_ERROR;
    ngx_memzero(z->sh, sizeof(rlt_ngx_shctx_t));
    z->shpool->data = z->sh;
    ngx_rbtree_init(&z->sh->rbtree, &z->sh->sentinel, rlt_ngx_rbtree_insert);
    ngx_queue_init(&z->sh->queue);
    z->sh->state_size = rlt_ngx_state_size(&z->policy);
    ngx_time_t *tp = ngx_timeofday();
    z->sh->offset_ns =
        ((rlt_ns)tp->sec * 1000 + (rlt_ns)tp->msec - (rlt_ns)ngx_current_msec) * RLT_NS_PER_MS;

    /* The policy shares one block with the slab's log text (limit_req's log text takes a page
     * of 32-byte chunks of its own). */
    size_t len = sizeof(" in ratelimit zone \"\"") + shm_zone->shm.name.len;
    u_char *block = ngx_slab_alloc(z->shpool, sizeof(rlt_policy) + len);
    if (block == NULL) return NGX_ERROR;
    z->sh->policy = (rlt_policy *)block;
    *z->sh->policy = z->policy;
    z->shpool->log_ctx = block + sizeof(rlt_policy);
    ngx_sprintf(z->shpool->log_ctx, " in ratelimit zone \"%V\"%Z", &shm_zone->shm.name);
    /* A full zone is handled (evicted and logged above), not an alert. */
    z->shpool->log_nomem = 0;
    return NGX_OK;
}

/* ---- Per-request record ---------------------------------------------------------------------- */

static void rlt_ngx_cleanup(void *data)
{
    rlt_ngx_req_t *req = data;
    for (ngx_uint_t i = 0; i < req->nleases; i++) {
        rlt_ngx_zone_t *z = req->leases[i].zone;
        ngx_shmtx_lock(&z->shpool->mutex);
        rlt_ngx_node_t *n = rlt_ngx_find(z->sh, req->leases[i].hash, req->leases[i].key.data,
                                         req->leases[i].key.len);
        /* A key evicted meanwhile has nothing left to release. */
        if (n)
            (void)rlt_release(z->sh->policy, rlt_ngx_node_state(n), rlt_ngx_now(z->sh),
                              req->leases[i].lease);
        ngx_shmtx_unlock(&z->shpool->mutex);
    }
    req->nleases = 0;
}

/* The main request's record, or NULL; with `create`, a new one (NULL when out of memory). */
static rlt_ngx_req_t *rlt_ngx_req(ngx_http_request_t *r, ngx_int_t create)
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

/* Adds the "Field: value\r\n" lines rlt_format_headers wrote to the response headers. */
static ngx_int_t rlt_ngx_push_headers(ngx_http_request_t *r, const char *text, size_t len)
{
    u_char *p = ngx_pnalloc(r->pool, len);
    if (p == NULL) return NGX_ERROR;
    ngx_memcpy(p, text, len);
    u_char *end = p + len;
    while (p < end) {
        u_char *colon = ngx_strlchr(p, end, ':');
        u_char *cr = ngx_strlchr(p, end, '\r');
        if (colon == NULL || cr == NULL || colon > cr || colon + 2 > cr) return NGX_ERROR;
        ngx_table_elt_t *h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) return NGX_ERROR;
        h->hash = 1;
        h->key.data = p;
        h->key.len = (size_t)(colon - p);
        h->value.data = colon + 2;
        h->value.len = (size_t)(cr - colon - 2);
        h->lowcase_key = NULL;
        p = cr + 2;
    }
    return NGX_OK;
}

static ngx_int_t rlt_ngx_add_headers(ngx_http_request_t *r, rlt_ngx_pending_t *pend, ngx_uint_t n,
                                     ngx_int_t allowed, ngx_int_t retry)
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
        if (len < 0 || rlt_ngx_push_headers(r, buf, (size_t)len) != NGX_OK) return NGX_ERROR;
    }
    if (!allowed && retry >= 0) {
        u_char *v = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        ngx_table_elt_t *h = v ? ngx_list_push(&r->headers_out.headers) : NULL;
        if (h == NULL) return NGX_ERROR;
        h->hash = 1;
        ngx_str_set(&h->key, "Retry-After");
        h->value.data = v;
        h->value.len = (size_t)(ngx_sprintf(v, "%L", (int64_t)retry) - v);
        h->lowcase_key = NULL;
    }
    return NGX_OK;
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

static int64_t rlt_ngx_cost(ngx_http_request_t *r, const rlt_ngx_limit_t *l)
{
    if (l->cost_cv == NULL) return l->cost;
    ngx_str_t v;
    if (ngx_http_complex_value(r, l->cost_cv, &v) != NGX_OK) return -1;
    ngx_int_t c = v.len ? ngx_atoi(v.data, v.len) : NGX_ERROR;
    if (c == NGX_ERROR) {
        /* Counted as 1, so that a bad value can neither bypass the limit nor fail the
         * request. */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "ratelimit cost \"%V\" is \"%V\", not a whole number >= 0: counted as 1",
                      &l->cost_cv->value, &v);
        return 1;
    }
    return (int64_t)c;
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

static ngx_int_t rlt_ngx_handler(ngx_http_request_t *r)
{
    rlt_ngx_conf_t *conf = ngx_http_get_module_loc_conf(r, ngx_http_ratelimit_module);
    if (conf->limits == NULL || conf->limits->nelts == 0) return NGX_DECLINED;
    if (rlt_ngx_req(r, 0)) return NGX_DECLINED; /* decided once per main request */
    rlt_ngx_req_t *req = rlt_ngx_req(r, 1);
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
        if (p->key.len > 65535) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "the value of the \"%V\" key is more than 65535 bytes: not limited",
                          &p->zone->key.value);
            continue;
        }
        p->cost = rlt_ngx_cost(r, &limits[i]);
        if (p->cost < 0) return NGX_HTTP_INTERNAL_SERVER_ERROR;
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

    ngx_int_t allowed = 1;
    for (ngx_uint_t i = 0; i < n; i++) {
        rlt_ngx_pending_t *p = &pend[i];
        rlt_ngx_shctx_t *sh = p->zone->sh;
        rlt_ns now = rlt_ngx_now(sh);
        p->node =
            rlt_ngx_lookup(p->zone, p->hash, p->key.data, p->key.len, now, r->connection->log);
        if (p->node == NULL) continue;
        p->work = rlt_ngx_node_state(p->node);
        if (n > 1) {
            p->work = ngx_pnalloc(r->pool, sh->state_size);
            if (p->work == NULL) {
                p->node = NULL;
                continue;
            }
            ngx_memcpy(p->work, rlt_ngx_node_state(p->node), sh->state_size);
        }
        p->rc = rlt_decide(sh->policy, p->work, now, p->cost, &p->d);
        if (p->rc == RLT_OK && !p->d.allowed) allowed = 0;
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
                ngx_memcpy(rlt_ngx_node_state(pend[i].node), pend[i].work,
                           pend[i].zone->sh->state_size);
    } else if (n > 1) {
        /* A refused request charges nothing, but a zone with block= that refused it keeps the
         * block its decision started (its copy holds nothing else: a denial charges nothing). */
        for (ngx_uint_t i = 0; i < n; i++)
            if (pend[i].node && pend[i].rc == RLT_OK && !pend[i].d.allowed &&
                pend[i].zone->sh->policy->block > 0)
                ngx_memcpy(rlt_ngx_node_state(pend[i].node), pend[i].work,
                           pend[i].zone->sh->state_size);
    }
    for (ngx_uint_t i = n; i-- > 0;)
        ngx_shmtx_unlock(&order[i]->zone->shpool->mutex);

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

    ngx_int_t retry_s = rlt_retry_after_seconds(retry);
    if (!allowed) {
        const char *dry = conf->dry_run ? ", dry run," : "";
        if (retry < 0) {
            ngx_log_error(conf->log_level, r->connection->log, 0,
                          "limiting requests%s by ratelimit zone \"%V\": cost %L can never pass",
                          dry, &worst->zone->name, (int64_t)worst->cost);
        } else {
            ngx_log_error(conf->log_level, r->connection->log, 0,
                          "limiting requests%s by ratelimit zone \"%V\", retry after %L ms", dry,
                          &worst->zone->name,
                          (int64_t)((retry + RLT_NS_PER_MS - 1) / RLT_NS_PER_MS));
        }
        req->status = conf->dry_run ? RLT_NGX_REJECTED_DRY_RUN : RLT_NGX_REJECTED;
        if (conf->headers &&
            rlt_ngx_add_headers(r, pend, n, 0, conf->dry_run ? -1 : retry_s) != NGX_OK)
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        return conf->dry_run ? NGX_DECLINED : (ngx_int_t)conf->status_code;
    }

    if (conf->headers && rlt_ngx_add_headers(r, pend, n, 1, -1) != NGX_OK)
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    if (delay <= 0 || conf->dry_run) {
        req->status = RLT_NGX_PASSED;
        return NGX_DECLINED;
    }

    /* Held like limit_req's delay=: the timer has ms resolution, so the wait rounds up. */
    ngx_msec_t ms = (ngx_msec_t)((delay + RLT_NS_PER_MS - 1) / RLT_NS_PER_MS);
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
    rlt_ngx_req_t *req = rlt_ngx_req(r, 0);
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

/* ---- Configuration --------------------------------------------------------------------------- */

static void *rlt_ngx_create_conf(ngx_conf_t *cf)
{
    rlt_ngx_conf_t *conf = ngx_pcalloc(cf->pool, sizeof(rlt_ngx_conf_t));
    if (conf == NULL) return NULL;
    conf->limits = NULL;
    conf->status_code = NGX_CONF_UNSET_UINT;
    conf->dry_run = NGX_CONF_UNSET;
    conf->log_level = NGX_CONF_UNSET_UINT;
    conf->headers = NGX_CONF_UNSET;
    return conf;
}

static char *rlt_ngx_merge_conf(ngx_conf_t *cf, void *parent, void *child)
{
    rlt_ngx_conf_t *prev = parent;
    rlt_ngx_conf_t *conf = child;
    if (conf->limits == NULL) conf->limits = prev->limits;
    ngx_conf_merge_uint_value(conf->status_code, prev->status_code, 429);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    /* As limit_req: delays are logged one level below rejections. */
    conf->delay_log_level = (conf->log_level == NGX_LOG_INFO) ? NGX_LOG_INFO : conf->log_level + 1;
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    return NGX_CONF_OK;
}

static ngx_int_t rlt_ngx_starts(const ngx_str_t *s, const char *prefix)
{
    size_t n = ngx_strlen(prefix);
    return s->len >= n && ngx_strncmp(s->data, prefix, n) == 0;
}

static ngx_int_t rlt_ngx_token(const u_char *s, size_t len)
{
    if (len == 0 || len > 63) return 0;
    for (size_t i = 0; i < len; i++) {
        u_char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

static char *rlt_ngx_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t nargs = cf->args->nelts;

    if (rlt_ngx_starts(&value[1], "zone=") || rlt_ngx_starts(&value[1], "policy=")) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"ratelimit_zone\" needs a key first, e.g. \"ratelimit_zone "
                           "$binary_remote_addr zone=NAME:10m policy=gcra:100/1m\"");
        return NGX_CONF_ERROR;
    }

    rlt_ngx_zone_t *z = ngx_pcalloc(cf->pool, sizeof(rlt_ngx_zone_t));
    if (z == NULL) return NGX_CONF_ERROR;
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = &z->key;
    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;

    ssize_t size = 0;
    ngx_str_t name = ngx_null_string;
    ngx_int_t have_policy = 0;
    for (ngx_uint_t i = 2; i < nargs; i++) {
        if (rlt_ngx_starts(&value[i], "zone=")) {
            name.data = value[i].data + 5;
            u_char *colon = ngx_strlchr(name.data, value[i].data + value[i].len, ':');
            if (colon == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone \"%V\": expected zone=NAME:SIZE, e.g. "
                                   "zone=api:10m",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            name.len = (size_t)(colon - name.data);
            if (!rlt_ngx_token(name.data, name.len)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone name in \"%V\": 1 to 63 of A-Z a-z 0-9 _ . : - "
                                   "(it names the policy in the RateLimit headers)",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            ngx_str_t s;
            s.data = colon + 1;
            s.len = (size_t)(value[i].data + value[i].len - s.data);
            size = ngx_parse_size(&s);
            if (size == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid zone size \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (rlt_ngx_starts(&value[i], "policy=")) {
            char err[256];
            z->policy_text.data = value[i].data + 7;
            z->policy_text.len = value[i].len - 7;
            if (rlt_policy_parse(&z->policy, (const char *)z->policy_text.data, z->policy_text.len,
                                 err, sizeof(err)) != RLT_OK) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid policy \"%V\": %s",
                                   &z->policy_text, err);
                return NGX_CONF_ERROR;
            }
            have_policy = 1;
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" (expected zone=NAME:SIZE or policy=POLICY)",
                           &value[i]);
        return NGX_CONF_ERROR;
    }
    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have a \"zone=NAME:SIZE\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }
    if (!have_policy) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have a \"policy=POLICY\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }
    /* Room for the slab's own pages plus a handful of keys of 64 bytes. */
    size_t node = rlt_ngx_node_size(rlt_ngx_state_size(&z->policy), 64);
    size_t least = 8 * ngx_pagesize + 16 * ngx_align(node, ngx_pagesize);
    if (node <= ngx_pagesize / 2) least = 8 * ngx_pagesize;
    if ((size_t)size < least) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small: %z bytes, policy \"%V\" needs at least %uz "
                           "(%uz bytes a key)",
                           &name, size, &z->policy_text, least, node);
        return NGX_CONF_ERROR;
    }
    z->name = name;

    ngx_shm_zone_t *shm_zone =
        ngx_shared_memory_add(cf, &name, (size_t)size, &ngx_http_ratelimit_module);
    if (shm_zone == NULL) return NGX_CONF_ERROR;
    if (shm_zone->data) {
        rlt_ngx_zone_t *other = shm_zone->data;
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V \"%V\" is already bound to key \"%V\"",
                           &cmd->name, &name, &other->key.value);
        return NGX_CONF_ERROR;
    }
    shm_zone->init = rlt_ngx_init_zone;
    shm_zone->data = z;
    return NGX_CONF_OK;
}

static char *rlt_ngx_limit_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    rlt_ngx_conf_t *lc = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_shm_zone_t *shm_zone = NULL;
    int64_t cost = 1;
    ngx_http_complex_value_t *cost_cv = NULL;

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        if (rlt_ngx_starts(&value[i], "zone=")) {
            ngx_str_t s = {value[i].len - 5, value[i].data + 5};
            shm_zone = ngx_shared_memory_add(cf, &s, 0, &ngx_http_ratelimit_module);
            if (shm_zone == NULL) return NGX_CONF_ERROR;
            if (shm_zone->data == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "unknown ratelimit_zone \"%V\" (declare it with "
                                   "ratelimit_zone at the http level, before it is used)",
                                   &s);
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (rlt_ngx_starts(&value[i], "cost=")) {
            ngx_str_t s = {value[i].len - 5, value[i].data + 5};
            if (s.len > 0 && ngx_http_script_variables_count(&s) > 0) {
                cost_cv = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
                if (cost_cv == NULL) return NGX_CONF_ERROR;
                ngx_http_compile_complex_value_t ccv;
                ngx_memzero(&ccv, sizeof(ccv));
                ccv.cf = cf;
                ccv.value = &s;
                ccv.complex_value = cost_cv;
                if (ngx_http_compile_complex_value(&ccv) != NGX_OK) return NGX_CONF_ERROR;
                continue;
            }
            ngx_int_t c = s.len ? ngx_atoi(s.data, s.len) : NGX_ERROR;
            if (c == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid cost \"%V\": a whole number >= 0 or a variable",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            cost = (int64_t)c;
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" (expected zone=NAME or cost=N|$variable)",
                           &value[i]);
        return NGX_CONF_ERROR;
    }
    if (shm_zone == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have a \"zone=NAME\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }
    rlt_ngx_zone_t *z = shm_zone->data;
    if (cost_cv == NULL && z->policy.algo == RLT_CONCURRENCY && cost > 1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid cost %L for the concurrency zone \"%V\": 0 or 1", (int64_t)cost,
                           &z->name);
        return NGX_CONF_ERROR;
    }

    if (lc->limits == NULL) {
        lc->limits = ngx_array_create(cf->pool, 2, sizeof(rlt_ngx_limit_t));
        if (lc->limits == NULL) return NGX_CONF_ERROR;
    }
    rlt_ngx_limit_t *limits = lc->limits->elts;
    for (ngx_uint_t i = 0; i < lc->limits->nelts; i++)
        if (limits[i].shm_zone == shm_zone) return "is duplicate: one ratelimit per zone here";
    if (lc->limits->nelts >= RLT_NGX_MAX_LIMITS) return "is one too many: at most 8 apply here";
    rlt_ngx_limit_t *l = ngx_array_push(lc->limits);
    if (l == NULL) return NGX_CONF_ERROR;
    l->shm_zone = shm_zone;
    l->cost = cost;
    l->cost_cv = cost_cv;
    return NGX_CONF_OK;
}

static char *rlt_ngx_status_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    rlt_ngx_conf_t *lc = conf;
    ngx_str_t *value = cf->args->elts;
    if (lc->status_code != NGX_CONF_UNSET_UINT) return "is duplicate";
    ngx_int_t code = ngx_atoi(value[1].data, value[1].len);
    if (code < 400 || code > 599) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%V\" \"%V\": a status code from 400 to 599", &cmd->name,
                           &value[1]);
        return NGX_CONF_ERROR;
    }
    lc->status_code = (ngx_uint_t)code;
    return NGX_CONF_OK;
}

static char *rlt_ngx_log_level_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    rlt_ngx_conf_t *lc = conf;
    ngx_str_t *value = cf->args->elts;
    if (lc->log_level != NGX_CONF_UNSET_UINT) return "is duplicate";
    for (ngx_conf_enum_t *e = rlt_ngx_log_levels; e->name.len; e++) {
        if (e->name.len == value[1].len &&
            ngx_strncmp(e->name.data, value[1].data, value[1].len) == 0) {
            lc->log_level = e->value;
            return NGX_CONF_OK;
        }
    }
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"%V\" \"%V\": info, notice, warn or error",
                       &cmd->name, &value[1]);
    return NGX_CONF_ERROR;
}

static ngx_int_t rlt_ngx_init(ngx_conf_t *cf)
{
    ngx_http_core_main_conf_t *cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    ngx_http_handler_pt *h = ngx_array_push(&cmcf->phases[NGX_HTTP_PREACCESS_PHASE].handlers);
    if (h == NULL) return NGX_ERROR;
    *h = rlt_ngx_handler;
    return NGX_OK;
}
