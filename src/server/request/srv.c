/* The server context: the store, the current config (swapped on reload), interned inline
 * policies with a per-thread cache in front, and the id -> name table. */
#include "server/request/srv.h"


#include "server/backend/backend.h"
#include "server/base/clock.h"
#include "server/config/config.h"
#include "server/request/inline.h"
#include "server/base/log.h"
#include "server/base/mem.h"
#include "server/stats/top.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Per-thread cache of resolved inline policy texts: one mutex-free lookup on the hot path.
 * Entries carry the context's generation (a cache never outlives its context) and the inline
 * table's epoch (a slot reused for another text makes older entries stale). */
/* Per-thread state, not scratch (tests/docs/thread_state.sh): a cache that outlives requests,
 * bounded at 256 x 128 bytes (32 KiB) a thread. */
#define TL_SLOTS 256
#define TL_TEXT 96
struct tl_entry {
    uint64_t gen, epoch;
    uint64_t hash;
    int id;
    uint32_t slot;
    uint8_t len;
    char text[TL_TEXT];
};
static __thread struct tl_entry tl_cache[TL_SLOTS];
static uint64_t next_gen = 1;

static uint64_t hash_bytes(const char *s, size_t n)
{
    return rlt_hash_fnv1a(s, n);
}

static uint64_t inl_epoch(rlt__srv *s)
{
    return __atomic_load_n(&s->inl.epoch, __ATOMIC_ACQUIRE);
}

/* A cached id, touched as used at `now`; -1 when not cached. */
static int tl_get(rlt__srv *s, const char *k, size_t n, rlt_ns now)
{
    if (n > TL_TEXT) return -1;
    uint64_t h = hash_bytes(k, n);
    struct tl_entry *e = &tl_cache[h % TL_SLOTS];
    if (e->gen != s->gen || e->hash != h || e->len != n || memcmp(e->text, k, n) != 0) return -1;
    /* Touch first, then check the epoch (both sequentially consistent, as the eviction's read
     * of the use time and its epoch bump are): either the evictor saw this use and kept the
     * slot, or this sees its new epoch and takes the slow path. */
    rlt__inline_touch(&s->inl, e->slot, now);
    if (e->epoch != __atomic_load_n(&s->inl.epoch, __ATOMIC_SEQ_CST)) return -1;
    return e->id;
}

static void tl_put(rlt__srv *s, const char *k, size_t n, int id, size_t slot, uint64_t epoch)
{
    if (n > TL_TEXT) return;
    uint64_t h = hash_bytes(k, n);
    struct tl_entry *e = &tl_cache[h % TL_SLOTS];
    e->gen = s->gen;
    e->epoch = epoch;
    e->hash = h;
    e->id = id;
    e->slot = (uint32_t)slot;
    e->len = (uint8_t)n;
    memcpy(e->text, k, n);
}

static void set_name(rlt__srv *s, int id, const char *name)
{
    if (id < 0) return;
    if ((size_t)id >= s->names_cap) {
        size_t cap = s->names_cap ? s->names_cap : 64;
        while (cap <= (size_t)id)
            cap *= 2;
        char(*nn)[RLT__STR_MAX] = realloc(s->names, cap * sizeof *nn);
        if (nn == NULL) return;
        memset(nn + s->names_cap, 0, (cap - s->names_cap) * sizeof *nn);
        s->names = nn;
        s->names_cap = cap;
    }
    snprintf(s->names[id], sizeof s->names[id], "%s", name);
}

const char *rlt__srv_policy_name(rlt__srv *s, int id, char *buf, size_t cap)
{
    pthread_mutex_lock(&s->lock);
    if (id >= 0 && (size_t)id < s->names_cap)
        snprintf(buf, cap, "%s", s->names[id]);
    else
        snprintf(buf, cap, "%s", "");
    pthread_mutex_unlock(&s->lock);
    return buf;
}

uint64_t rlt__srv_policy_gen(rlt__srv *s)
{
    return rlt__registry_gen(&s->reg);
}

size_t rlt__srv_policy_ids(rlt__srv *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->names_cap;
    pthread_mutex_unlock(&s->lock);
    return n;
}

rlt__config *rlt__srv_config(rlt__srv *s)
{
    return rlt__registry_config(&s->reg);
}

/* GCRA works on absolute time: |now| x scale_ must fit int64.  A policy whose scale_ would
 * not let the daemon's clock (rlt__now: under a day at start, plus uptime) run 10 years runs
 * as the token bucket of the same N, W and B instead: the core decides both identically
 * (allowed, remaining, retry_after, reset_after) on a clock that never steps back, and the
 * token bucket only multiplies elapsed time.  The Redis library has its own limits: in
 * distributed mode the policy stays as given. */
#define RUN_YEARS_NS (10 * INT64_C(31557600) * RLT_NS_PER_S + 86400 * RLT_NS_PER_S)

bool rlt__srv_gcra_needs_bucket(const rlt_policy *p)
{
    return p->algo == RLT_GCRA && p->scale_ > INT64_MAX / RUN_YEARS_NS;
}

const rlt_policy *rlt__srv_runnable(const rlt_policy *p, bool redis, rlt_policy *tmp)
{
    if (p->months != 0) { /* calendar windows: the daemon's now starts at its clock's origin */
        *tmp = *p;
        rlt_policy_set_origin(tmp, rlt__clock_origin());
        return tmp;
    }
    if (redis || !rlt__srv_gcra_needs_bucket(p)) return p;
    if (rlt_policy_init(tmp, RLT_TOKEN_BUCKET, p->limit, p->period, p->burst, 0, 0) != RLT_OK ||
        rlt_policy_set_block(tmp, p->block, p->block_factor, p->block_max) != RLT_OK ||
        rlt_policy_set_jitter(tmp, p->jitter) != RLT_OK)
        return p;
    return tmp; /* the same decisions, with the options every algorithm takes kept */
}

static bool redis_mode(const rlt__config *c)
{
    return c != NULL && c->set.redis.address[0] != '\0';
}

static bool store_name_ok(const char *name)
{
    return rlt_store_name_valid(name, strnlen(name, RLT_NAME_MAX + 1));
}

/* The store re-derives a policy through rlt_policy_init (clean_policy in store.c): do the
 * same here so that rlt_store_set_policy cannot refuse it later. */
static bool policy_ok(const rlt_policy *p)
{
    rlt_policy q;
    int64_t burst = p->algo == RLT_TOKEN_BUCKET || p->algo == RLT_GCRA ? p->burst : 0;
    if (rlt_policy_init(&q, p->algo, p->limit, p->period, burst, p->queue, p->delay) != RLT_OK ||
        rlt_policy_copy_calendar(&q, p) != RLT_OK)
        return false;
    size_t n = rlt_state_size(&q);
    return n > 0 && n <= UINT32_MAX;
}

/* The instants a policy must decide at: the daemon's clock at start (under a day after UTC
 * midnight) and after 10 years of uptime.  A policy whose arithmetic overflows there for a
 * cost-1 request could never answer anything but "out of range": refused when it is read. */
static const char *cannot_decide(const rlt_policy *p, bool redis)
{
    if (redis) return NULL; /* Redis runs its own arithmetic (rlt_redis_policy_check) */
    rlt_policy tmp;
    const rlt_policy *run = rlt__srv_runnable(p, false, &tmp);
    size_t n = rlt_state_size(run);
    void *st = n > 0 ? calloc(1, n) : NULL;
    if (st == NULL) return NULL; /* the store refuses it with its own error */
    const char *why = NULL;
    const rlt_ns at[] = {0, 86400 * RLT_NS_PER_S, RUN_YEARS_NS};
    for (size_t i = 0; i < sizeof at / sizeof at[0] && why == NULL; i++) {
        rlt_decision d;
        memset(st, 0, n);
        if (rlt_decide(run, st, at[i], 1, &d) == RLT_ERANGE)
            why = "its arithmetic overflows on the daemon's clock for every request (use a "
                  "smaller count or a longer period)";
    }
    free(st);
    return why;
}

static void named_store_name(char *out, size_t cap, const rlt__named *n)
{
    snprintf(out, cap, "p:%s", n->name);
}

/* Everything the store will be given by apply_locked, checked without touching the store. */
/* The tiers of config cfg: valid names, existing policies. */
static int validate_tiers(const rlt__config *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->ntiers; i++) {
        if (!store_name_ok(cfg->tiers[i].name)) {
            snprintf(err, errlen, "tier '%s': invalid name", cfg->tiers[i].name);
            return RLT_EINVAL;
        }
        if (rlt__config_named(cfg, cfg->tiers[i].policy, strlen(cfg->tiers[i].policy)) == NULL) {
            snprintf(err, errlen, "tier '%s': no policy named '%s'", cfg->tiers[i].name,
                     cfg->tiers[i].policy);
            return RLT_EINVAL;
        }
    }
    return RLT_OK;
}

/* Every secret distinct from every other: a tenant whose password is the admin's (or another
 * tenant's) would log in as whoever is checked first. */
static int validate_secrets(const rlt__config *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->ntenants; i++) {
        const rlt__tenant *t = &cfg->tenants[i];
        if (cfg->set.password[0] != '\0' && strcmp(t->password, cfg->set.password) == 0) {
            snprintf(err, errlen, "tenant '%s': its password is the server password (every "
                                  "secret must be distinct)", t->name);
            return RLT_EINVAL;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(t->password, cfg->tenants[j].password) == 0) {
                snprintf(err, errlen, "tenants '%s' and '%s' have the same password (every "
                                      "secret must be distinct)", cfg->tenants[j].name, t->name);
                return RLT_EINVAL;
            }
    }
    return RLT_OK;
}

static int validate_config(const rlt__config *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->nnamed; i++) {
        char name[RLT_NAME_MAX + 8];
        named_store_name(name, sizeof name, &cfg->named[i]);
        if (!store_name_ok(name)) {
            snprintf(err, errlen, "policy '%s': invalid name", cfg->named[i].name);
            return RLT_EINVAL;
        }
        if (!policy_ok(&cfg->named[i].policy)) {
            snprintf(err, errlen, "policy '%s': %s", cfg->named[i].name,
                     rlt_strerror(RLT_EINVAL));
            return RLT_EINVAL;
        }
        const char *why = cannot_decide(&cfg->named[i].policy, redis_mode(cfg));
        if (why != NULL) {
            snprintf(err, errlen, "policy '%s' can never decide: %s", cfg->named[i].name, why);
            return RLT_EINVAL;
        }
    }
    for (size_t i = 0; i < cfg->nrules; i++) {
        const rlt__rule *r = &cfg->rules[i];
        if (r->unlimited || r->block_all) continue;
        if (!store_name_ok(r->name) || !policy_ok(&r->policy)) {
            snprintf(err, errlen, "rule %s (line %d): %s", r->path, r->line,
                     store_name_ok(r->name) ? "invalid policy" : "invalid store name");
            return RLT_EINVAL;
        }
        const char *why = cannot_decide(&r->policy, redis_mode(cfg));
        if (why != NULL) {
            snprintf(err, errlen, "rule %s (line %d) can never decide: %s", r->path, r->line, why);
            return RLT_EINVAL;
        }
    }
    int st = validate_tiers(cfg, err, errlen);
    return st != RLT_OK ? st : validate_secrets(cfg, err, errlen);
}

int rlt__srv_check_config(const rlt__config *cfg, char *err, size_t errlen)
{
    return validate_config(cfg, err, errlen);
}

/* Test hook: store write number N (from 0) of the next apply fails once with RLT_ENOMEM, as
 * if memory ran out there; -1 (default): never.  Only tests set it. */
long rlt__srv_fail_apply_after = -1;

static bool injected_failure(long *writes)
{
    if ((*writes)++ != rlt__srv_fail_apply_after) return false;
    rlt__srv_fail_apply_after = -1; /* once */
    return true;
}

/* Writes cfg's policies and tiers into the store, filling their policy ids.  Called with the
 * lock.  After validate_config only running out of memory can fail here. */
static bool policy_same(const rlt_policy *a, const rlt_policy *b)
{
    return rlt_policy_equal(a, b);
}

/* How a write of policy `run` under `name` with change mode `change` touches the keys already
 * in the store: not at all (a new name, an unchanged policy: then keep, whatever the mode),
 * by converting (keep), or destructively (reset, scale: their keys' states change in a way a
 * restore could not undo). */
static rlt_change effective_change(rlt__srv *s, const char *name, const rlt_policy *run,
                                   rlt_change change, bool *destructive)
{
    rlt_policy old;
    int id = rlt__registry_policy_id(&s->reg, name);
    bool exists = id >= 0 && rlt__registry_policy(&s->reg, id, &old) == RLT_OK;
    if (!exists || policy_same(&old, run)) change = RLT_CHANGE_KEEP;
    /* A new algorithm or state size (block= added or removed) resets the keys whatever the
     * mode (rlt_store_set_policy): destructive, so it runs after every undoable write. */
    bool resized = exists && (old.algo != run->algo || rlt_state_size(&old) != rlt_state_size(run));
    *destructive = change != RLT_CHANGE_KEEP || resized;
    return change;
}

/* Writes one policy in `pass` (0: every write that a restore can undo; 1: the destructive
 * ones, which run only after everything else succeeded).  The id is stored only when it
 * differs: a restore writes the same ids back while workers read them. */
static int write_policy(rlt__srv *s, const char *name, const rlt_policy *p, rlt_change change,
                        bool redis, bool restore, int pass, long *writes, int *id)
{
    rlt_policy tmp;
    const rlt_policy *run = rlt__srv_runnable(p, redis, &tmp);
    bool destructive;
    rlt_change how = restore ? RLT_CHANGE_KEEP : effective_change(s, name, run, change, &destructive);
    if (restore) destructive = false;
    if ((pass == 1) != destructive) return RLT_OK;
    int nid = -1;
    int st = injected_failure(writes) ? RLT_ENOMEM
                                      : rlt__registry_set_policy(&s->reg, name, run, how, &nid);
    if (st == RLT_OK && *id != nid) *id = nid;
    return st;
}

/* Writes cfg's policies and tiers into the store, filling their policy ids.  Called with the
 * lock.  After validate_config only running out of memory can fail here, and only in the
 * first pass: the writes that reset or scale existing keys come last, after every other write
 * succeeded, so that a failed reload can be undone exactly.  `restore`: writing an old config
 * back after a failed reload: every policy keeps its keys' state. */
static int apply_locked(rlt__srv *s, rlt__config *cfg, bool restore, char *err, size_t errlen)
{
    long writes = 0;
    bool redis = redis_mode(cfg);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < cfg->nnamed; i++) {
            rlt__named *n = &cfg->named[i];
            char name[RLT_NAME_MAX + 8];
            named_store_name(name, sizeof name, n);
            int st = write_policy(s, name, &n->policy, n->change, redis, restore, pass, &writes,
                                  &n->policy_id);
            if (st != RLT_OK) {
                snprintf(err, errlen, "policy '%s': %s", n->name, rlt_strerror(st));
                return RLT_ENOMEM;
            }
            set_name(s, n->policy_id, name);
        }
        for (size_t i = 0; i < cfg->nrules; i++) {
            rlt__rule *r = &cfg->rules[i];
            if (r->unlimited || r->block_all) continue;
            int st = write_policy(s, r->name, &r->policy, r->change, redis, restore, pass, &writes,
                                  &r->policy_id);
            if (st != RLT_OK) {
                snprintf(err, errlen, "rule %s (line %d): %s", r->path, r->line, rlt_strerror(st));
                return RLT_ENOMEM;
            }
            set_name(s, r->policy_id, r->path);
        }
        if (pass == 1) break;
        for (size_t i = 0; i < cfg->ntiers; i++) {
            const rlt__named *n =
                rlt__config_named(cfg, cfg->tiers[i].policy, strlen(cfg->tiers[i].policy));
            int st = n ? rlt__registry_set_tier(&s->reg, cfg->tiers[i].name, n->policy_id)
                       : RLT_ENOENT;
            if (st != RLT_OK) {
                snprintf(err, errlen, "tier '%s': %s", cfg->tiers[i].name, rlt_strerror(st));
                return RLT_ENOMEM;
            }
        }
    }
    rlt__registry_bump(&s->reg);
    return RLT_OK;
}

int rlt__srv_apply_config(rlt__srv *s, rlt__config *cfg, char *err, size_t errlen)
{
    int r = validate_config(cfg, err, errlen);
    if (r != RLT_OK) return r;
    pthread_mutex_lock(&s->lock);
    r = apply_locked(s, cfg, false, err, errlen);
    if (r != RLT_OK) {
        /* Part of cfg may be in the store: put the old config's policies and tiers back
         * (same names, so the same ids).  Policies only cfg added stay, unused. */
        if (s->reg.cfg != NULL) {
            char e2[200];
            size_t used = strlen(err);
            if (apply_locked(s, s->reg.cfg, true, e2, sizeof e2) == RLT_OK)
                snprintf(err + used, errlen - used, "; the previous policies were restored");
            else
                snprintf(err + used, errlen - used,
                         "; restoring the previous policies failed too (%s): the store may "
                         "mix both configs",
                         e2);
        }
        pthread_mutex_unlock(&s->lock);
        return RLT_EINVAL;
    }
    rlt__config *old = s->reg.cfg;
    rlt__registry_set_config(&s->reg, cfg);
    if (old != NULL) {
        /* Other threads may still read the old config: keep it until close. */
        old->retired_next = s->retired;
        s->retired = old;
    }
    pthread_mutex_unlock(&s->lock);
    return RLT_OK;
}

int rlt__srv_open(rlt__srv **out, rlt__config *cfg, rlt_ns now, int64_t wall_ns, char *err,
                  size_t errlen)
{
    *out = NULL;
    rlt__srv *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        rlt__config_free(cfg);
        return RLT_EINVAL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->gen = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
    s->started = now;
    s->metrics.slots = calloc(RLT__METRIC_SLOTS, sizeof *s->metrics.slots);
    rlt_store_options opt = {.max_keys = cfg->set.max_keys,
                             .max_bytes = rlt__mem_store_share(cfg->set.max_memory),
                             .fail_closed = cfg->set.fail_closed,
                             .max_reservations = cfg->set.max_reservations,
                             .max_reservations_per_holder = cfg->set.max_reservations_per_client};
    int st = s->metrics.slots ? rlt__registry_open(&s->reg, &opt) : RLT_ENOMEM;
    if (st != RLT_OK) {
        snprintf(err, errlen, "cannot open the store: %s", rlt_strerror(st));
        rlt__config_free(cfg);
        rlt__srv_close(s);
        return RLT_EINVAL;
    }
    struct stat sb;
    if (cfg->set.snapshot[0] != '\0' && stat(cfg->set.snapshot, &sb) == 0) {
        st = rlt__registry_load(&s->reg, cfg->set.snapshot, now, wall_ns);
        if (st != RLT_OK) {
            snprintf(err, errlen, "snapshot %s: %s (move it away to start empty, or fix the path)",
                     cfg->set.snapshot, rlt_strerror(st));
            rlt__config_free(cfg);
            rlt__srv_close(s);
            return RLT_EINVAL;
        }
        /* Say what came back: an operator restarting the daemon wants to see that the
         * limits survived (and from which file, how old). */
        rlt_store_stats ss;
        rlt__registry_stats(&s->reg, &ss);
        long long age = wall_ns / RLT_NS_PER_S - (long long)sb.st_mtime;
        rlt__log(RLT__LOG_INFO, "restored %llu keys from snapshot %s, written %llds ago",
                 (unsigned long long)ss.keys, cfg->set.snapshot, age < 0 ? 0 : age);
    }
    if (rlt__inline_open(&s->inl, cfg->set.max_inline_policies, &s->reg, now) != RLT_OK) {
        snprintf(err, errlen, "out of memory");
        rlt__config_free(cfg);
        rlt__srv_close(s);
        return RLT_ENOMEM;
    }
    if (rlt__srv_apply_config(s, cfg, err, errlen) != RLT_OK) {
        rlt__config_free(cfg);
        rlt__srv_close(s);
        return RLT_EINVAL;
    }
    if (rlt__top_open(&s->top, cfg->set.top_keys) != RLT_OK) {
        snprintf(err, errlen, "cannot open the top offenders' sketches");
        rlt__srv_close(s);
        return RLT_ENOMEM;
    }
    if (rlt__series_open(&s->series) != RLT_OK) {
        snprintf(err, errlen, "out of memory");
        rlt__srv_close(s);
        return RLT_ENOMEM;
    }
    /* The backend, chosen once: Redis when `redis.address` is set, else the local store. */
    if (cfg->set.redis.address[0] != '\0') {
        st = rlt__backend_redis_open(&s->reg, &s->be, err, errlen);
    } else if ((st = rlt__backend_local_open(&s->reg, &s->be)) != RLT_OK) {
        snprintf(err, errlen, "out of memory");
    }
    if (st != RLT_OK) {
        rlt__srv_close(s);
        return st;
    }
    *out = s;
    return RLT_OK;
}

void rlt__srv_close(rlt__srv *s)
{
    if (s == NULL) return;
    /* An attached service first: before the backend and the configs it uses. */
    if (s->service != NULL) s->service->svc_close(s);
    if (s->be != NULL) s->be->ops->close(s->be);
    if (s->reg.store != NULL) rlt__registry_close(&s->reg);
    rlt__config_free(s->reg.cfg);
    while (s->retired != NULL) {
        rlt__config *n = s->retired->retired_next;
        rlt__config_free(s->retired);
        s->retired = n;
    }
    rlt__inline_close(&s->inl);
    rlt__top_close(s->top);
    rlt__series_close(&s->series);
    free(s->names);
    free(s->metrics.slots);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The owner of an inline policy: a hash of the tenant's key prefix, 0 for the admin. */
static uint64_t owner_of(const rlt__asker *who)
{
    return who == NULL || who->olen == 0 ? 0 : rlt_hash_fnv1a(who->owner, who->olen) | 1;
}

static rlt_ns now_of(const rlt__asker *who)
{
    return who ? who->now : 0;
}

/* The quota of one tenant: its share of the table with every other tenant and the admin. */
static size_t quota_of(const rlt__srv *s, const rlt__config *c)
{
    size_t q = s->inl.max / (c->ntenants + 1);
    return q > 0 ? q : 1;
}

static int intern_slot(rlt__srv *s, const rlt_policy *p, const rlt__asker *who, int *id,
                       size_t *slot, uint64_t *epoch, char *err, size_t errlen)
{
    char canon[256];
    *id = -1;
    size_t state = rlt_state_size(p);
    if (state > RLT__INLINE_STATE_MAX) {
        snprintf(err, errlen,
                 "an inline policy keeps at most %d bytes of state per key and this one needs %zu "
                 "(a sliding log of %lld entries): name it in the config's policies",
                 RLT__INLINE_STATE_MAX, state, (long long)p->limit);
        return RLT_EINVAL;
    }
    const rlt__config *c = rlt__srv_config(s);
    const char *why = cannot_decide(p, redis_mode(c));
    if (why != NULL) {
        snprintf(err, errlen, "policy can never decide: %s", why);
        return RLT_ERANGE;
    }
    if (rlt_policy_format(p, canon, sizeof canon) < 0) {
        snprintf(err, errlen, "policy text too long");
        return RLT_EINVAL;
    }
    rlt_policy tmp;
    const rlt_policy *run = rlt__srv_runnable(p, redis_mode(c), &tmp);
    pthread_mutex_lock(&s->lock);
    *epoch = inl_epoch(s);
    /* A policy in use past its grace goes with its keys as a full store's key would: unless
     * the store refuses rather than evict (fail_closed); Redis keys carry the policy's numbers,
     * so there an eviction drops no state at all. */
    bool evict_live = redis_mode(c) || !c->set.fail_closed;
    rlt__inline_who iw = {
        .owner = owner_of(who), .client = who ? who->client : 0, .addr = who ? who->addr : 0};
    int st = rlt__inline_intern(&s->inl, &s->reg, run, canon, iw, quota_of(s, c), evict_live,
                                now_of(who), slot, id, err, errlen);
    if (st == RLT_OK && inl_epoch(s) != *epoch) rlt__registry_bump(&s->reg);
    if (st == RLT_OK) {
        char name[RLT__STR_MAX + 4];
        snprintf(name, sizeof name, "i:%.*s", RLT__STR_MAX - 3, canon); /* the text, for metrics */
        set_name(s, *id, name);
        *epoch = inl_epoch(s);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

int rlt__srv_intern(rlt__srv *s, const rlt_policy *p, const rlt__asker *who, int *id, char *err,
                    size_t errlen)
{
    size_t slot;
    uint64_t epoch;
    return intern_slot(s, p, who, id, &slot, &epoch, err, errlen);
}

int rlt__srv_intern_cached(rlt__srv *s, const char *key, size_t klen, const rlt_policy *p,
                           const rlt__asker *who, int *id, char *err, size_t errlen)
{
    *id = tl_get(s, key, klen, now_of(who));
    if (*id >= 0) return RLT_OK;
    size_t slot;
    uint64_t epoch;
    int st = intern_slot(s, p, who, id, &slot, &epoch, err, errlen);
    if (st == RLT_OK) tl_put(s, key, klen, *id, slot, epoch);
    return st;
}

int rlt__srv_cached_id(rlt__srv *s, const char *key, size_t klen, const rlt__asker *who)
{
    return tl_get(s, key, klen, now_of(who));
}

/* "r:PATH": the envoy rule whose path (its /metrics label) is PATH, so that RESP and
 * /v1/peek reach the state ShouldRateLimit and /json charge.  No policy text starts "r:". */
static int resolve_rule(rlt__srv *s, const char *path, size_t len, int *id, bool *shadow,
                        char *err, size_t errlen)
{
    const rlt__config *c = rlt__srv_config(s);
    for (size_t i = 0; i < c->nrules; i++) {
        const rlt__rule *r = &c->rules[i];
        if (strlen(r->path) != len || memcmp(r->path, path, len) != 0) continue;
        if (r->unlimited || r->block_all || r->policy_id < 0) {
            snprintf(err, errlen, "rule '%s' keeps no state (%s)", r->path,
                     r->unlimited ? "unlimited" : "requests_per_unit: 0 denies every request");
            return RLT_EINVAL;
        }
        *id = r->policy_id;
        *shadow = r->shadow || c->set.shadow_mode;
        return RLT_OK;
    }
    snprintf(err, errlen, "unknown rule '%.*s' (GET /v1/rules lists the envoy rules)",
             (int)(len > 64 ? 64 : len), path);
    return RLT_ENOENT;
}

int rlt__srv_resolve(rlt__srv *s, const char *text, size_t len, const rlt__asker *who, int *id,
                     bool *shadow, char *err, size_t errlen)
{
    *shadow = false;
    *id = -1;
    if (len == 0) {
        snprintf(err, errlen, "empty policy");
        return RLT_EINVAL;
    }
    if (memchr(text, ':', len) == NULL) {
        rlt__config *c = rlt__srv_config(s);
        const rlt__named *n = rlt__config_named(c, text, len);
        if (n == NULL) {
            snprintf(err, errlen,
                     "unknown policy '%.*s' (a name from the config, or text "
                     "such as gcra:100/1m,burst=20)",
                     (int)(len > 64 ? 64 : len), text);
            return RLT_ENOENT;
        }
        *shadow = n->shadow;
        *id = n->policy_id;
        return RLT_OK;
    }
    if (len > 2 && text[0] == 'r' && text[1] == ':')
        return resolve_rule(s, text + 2, len - 2, id, shadow, err, errlen);
    *id = tl_get(s, text, len, now_of(who));
    if (*id >= 0) return RLT_OK;
    rlt_policy p;
    char perr[200];
    if (rlt_policy_parse(&p, text, len, perr, sizeof perr) != RLT_OK) {
        snprintf(err, errlen, "invalid policy: %s", perr);
        return RLT_EPARSE;
    }
    size_t slot;
    uint64_t epoch;
    int st = intern_slot(s, &p, who, id, &slot, &epoch, err, errlen);
    if (st == RLT_OK) tl_put(s, text, len, *id, slot, epoch);
    return st;
}

int rlt__srv_tier_policy(rlt__srv *s, const char *default_tier, const void *key, size_t klen,
                         int *policy_id)
{
    return rlt__registry_tier_policy(&s->reg, default_tier, key, klen, policy_id);
}
