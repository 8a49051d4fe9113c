/* The keyed state of a ratelimit_zone in nginx's shared memory: the zone's header, one node per
 * key in an rbtree and an LRU queue, eviction, and the zone's creation and reload.
 *
 * Shared memory.  One slab pool per ratelimit_zone: a header (an rbtree of keys by crc32, an
 * LRU queue, the policy in force, the clock offset) and one node per key laid out as
 *     ngx_rbtree_node_t up to `color` (32) | color dummy len (4) + pad (4) | LRU queue (16)
 *     | key bytes, padded to 8 | state (rlt_state_size: 8 for GCRA)
 * that is 64 + key bytes (padded) for GCRA, slab's 128-byte class for keys up to 64 bytes
 * (limit_req's node is 80 + key bytes, the same class up to 48).  Every worker decides with the
 * policy kept in the zone, so old and new workers agree while a reload drains.
 *
 * Eviction.  Each new key first frees up to two idle keys from the LRU tail (idle: the state is
 * equivalent to fresh, rlt_is_fresh, so dropping it changes no decision).  When the slab still
 * has no room, up to RLT_NGX_IDLE_SCAN keys from the tail are checked for idle ones, then the
 * least recently used key is dropped, and again, until the new node fits.  That is logged (at
 * most once a second a zone) and never fails the request.  A key the zone cannot hold (longer
 * than rlt__ngx_key_max, or not fitting even in an empty zone) evicts nothing and its request
 * is refused, as limit_req refuses a request whose node it cannot allocate: let through, it
 * would be a way around the limit (a long header value as the key).  Logged at most once a
 * second a zone.
 *
 * Clock.  nginx's cached monotonic clock, ngx_current_msec (updated once per event loop turn),
 * times 1e6, plus the UTC-minus-monotonic offset taken when the zone was created, kept in the
 * zone (rlt__ngx_now): every worker and every reload share one origin, windows align on UTC,
 * and a wall clock step changes nothing.  The resolution is 1 ms and a decision sees the time of
 * its loop turn.  `now` is so Unix time: calendar windows (policy=fixed_window:N/1mo,tz=ZONE)
 * take their months from it with the policy's origin 0 (the zone file is read with the
 * configuration).
 */
#include "ngx_http_ratelimit_zone.h"

/* Keys checked for idleness from the LRU tail before the least recently used is dropped. */
#define RLT_NGX_IDLE_SCAN 64
/* Forced evictions one new key may cause before its request is refused. */
#define RLT_NGX_MAX_EVICT 4096

/* One chunk of the nodes' 128-byte slab class (see rlt__ngx_init_zone). */
_Static_assert(sizeof(rlt_ngx_shctx_t) <= 128, "the zone header outgrew its slab class");

static rlt_ngx_node_t *rlt_ngx_node(ngx_rbtree_node_t *node)
{
    return (rlt_ngx_node_t *)&node->color;
}

static ngx_rbtree_node_t *rlt_ngx_rbnode(rlt_ngx_node_t *n)
{
    return (ngx_rbtree_node_t *)((u_char *)n - offsetof(ngx_rbtree_node_t, color));
}

size_t rlt__ngx_node_size(size_t state_size, size_t key_len)
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

rlt_ngx_node_t *rlt__ngx_find(rlt_ngx_shctx_t *sh, uint32_t hash, u_char *key, size_t len)
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
        if (rlt_is_fresh(z->sh->policy, rlt__ngx_node_state(n), now)) {
            rlt_ngx_drop(z, n);
            freed++;
        }
        q = prev;
    }
    return freed;
}

size_t rlt__ngx_key_max(const rlt_ngx_zone_t *z)
{
    size_t quarter = (size_t)(z->shpool->end - z->shpool->start) / 4;
    size_t fixed = rlt__ngx_node_size(z->sh->state_size, 0);
    size_t max = quarter > fixed + 8 ? (quarter - fixed) & ~(size_t)7 : 0;
    return max < 65535 ? max : 65535;
}

/* Logs, at most once a second a zone, that a key of `len` bytes cannot be held. */
static void rlt_ngx_log_unheld(rlt_ngx_zone_t *z, size_t len, ngx_log_t *log)
{
    if (ngx_current_msec - z->sh->logged_big < 1000 && z->sh->logged_big != 0) return;
    z->sh->logged_big = ngx_current_msec ? ngx_current_msec : 1;
    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "ratelimit zone \"%V\" cannot hold a key of %uz bytes (at most %uz): the "
                  "request is refused",
                  &z->name, len, rlt__ngx_key_max(z));
}

/* Eviction as the head of the file says: idle keys first (dropping them changes no decision),
 * then the least recently used. */
rlt_ngx_node_t *rlt__ngx_create(rlt_ngx_zone_t *z, uint32_t hash, u_char *key, size_t len,
                                rlt_ns now, ngx_log_t *log)
{
    rlt_ngx_shctx_t *sh = z->sh;
    if (len > rlt__ngx_key_max(z)) {
        rlt_ngx_log_unheld(z, len, log);
        return NULL;
    }
    size_t size = rlt__ngx_node_size(sh->state_size, len);
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
                      "new one (%uL busy keys dropped since start)",
                      &z->name, idle, forced, (unsigned long long)sh->evicted);
    }
    if (node == NULL) {
        rlt_ngx_log_unheld(z, len, log);
        return NULL;
    }

    node->key = hash;
    rlt_ngx_node_t *n = rlt_ngx_node(node);
    n->len = (u_short)len;
    ngx_memcpy(n->data, key, len);
    ngx_memzero(rlt__ngx_node_state(n), sh->state_size);
    ngx_rbtree_insert(&sh->rbtree, node);
    ngx_queue_insert_head(&sh->queue, &n->queue);
    return n;
}

size_t rlt__ngx_state_size(const rlt_policy *p)
{
    return ngx_align(rlt_state_size(p), 8);
}

/* A reload with another policy for an existing zone: states of the same algorithm and size are
 * carried over with their used allowance kept (rlt_state_convert); others are dropped. */
static void rlt_ngx_adopt_policy(rlt_ngx_zone_t *z, ngx_log_t *log)
{
    rlt_ngx_shctx_t *sh = z->sh;
    ngx_shmtx_lock(&z->shpool->mutex);
    if (rlt_policy_equal(sh->policy, &z->policy)) { /* block=, jitter=, tz=: another too */
        ngx_shmtx_unlock(&z->shpool->mutex);
        return;
    }
    rlt_ns now = rlt__ngx_now(sh);
    ngx_uint_t kept = 0, dropped = 0;
    bool convert =
        sh->policy->algo == z->policy.algo && sh->state_size == rlt__ngx_state_size(&z->policy);
    ngx_queue_t *q = ngx_queue_head(&sh->queue);
    while (q != ngx_queue_sentinel(&sh->queue)) {
        ngx_queue_t *next = ngx_queue_next(q);
        rlt_ngx_node_t *n = ngx_queue_data(q, rlt_ngx_node_t, queue);
        if (convert && rlt_state_convert(sh->policy, &z->policy, rlt__ngx_node_state(n), now,
                                         RLT_CONVERT_KEEP) == RLT_OK) {
            kept++;
        } else if (convert) {
            ngx_memzero(rlt__ngx_node_state(n), sh->state_size);
            kept++;
        } else {
            rlt_ngx_drop(z, n);
            dropped++;
        }
        q = next;
    }
    *sh->policy = z->policy;
    sh->state_size = rlt__ngx_state_size(&z->policy);
    ngx_shmtx_unlock(&z->shpool->mutex);
    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "ratelimit zone \"%V\" now has policy \"%V\": %ui keys carried over, %ui "
                  "dropped (another algorithm or state size)",
                  &z->name, &z->policy_text, kept, dropped);
}

ngx_int_t rlt__ngx_init_zone(ngx_shm_zone_t *shm_zone, void *data)
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
    z->sh->state_size = rlt__ngx_state_size(&z->policy);
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
