/* `ratelimit replay`: a request trace ("TIME KEY [COST]") or an access log through one policy
 * with one limiter state per key (the keyed store), printing one verdict line per request, or a
 * per-key summary.  Streams its input with one reused line buffer: no allocation per line. */
#include "cli/cli.h"
#include "cli/cliutil.h"
#include "ratelimit/store.h"
#include "ratelimit/topk.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "replay"

static void usage(FILE *f)
{
    fputs(
        "usage: ratelimit replay --policy SPEC [--unit s|ms|us|ns] [--summary [--top-keys K]]\n"
        "                        [--format trace|combined [--key FIELD] [--cost FIELD] [--epoch]\n"
        "                         [--prefix N]]\n"
        "                        < INPUT\n"
        "Reads requests from stdin and decides each with one limiter state per key.\n"
        "  --policy SPEC    e.g. gcra:2/1s,burst=2  token_bucket:100/1m  "
        "leaky_bucket:10/1s,queue=5\n"
        "                   fixed_window:1000/1mo,tz=Europe/Paris (calendar months: a trace's\n"
        "                   TIME is then Unix time, a log's its own timestamps)\n"
        "  --unit U         unit of TIME and of the printed durations (default s)\n"
        "  --format trace   (default) lines 'TIME KEY [COST]': TIME a decimal (any sign, at most\n"
        "                   1 ns precise), KEY any non-blank token, COST a whole number >= 0\n"
        "                   (default 1; 0 peeks); '#' comments and blank lines are skipped\n"
        "  --format combined  nginx/Apache combined or common access log: KEY is the client\n"
        "                   address, TIME the [timestamp] in seconds since the first line's\n"
        "                   (--epoch: since 1970-01-01 UTC), COST 1\n"
        "  --key FIELD      combined: the field that is the KEY (default remote_addr): "
        "remote_addr,\n"
        "                   ident, user, time, request, status, bytes, referer, user_agent, or "
        "its\n"
        "                   number 1..16 (10 and up: fields appended after the user agent)\n"
        "  --cost FIELD     combined: COST is this field's whole number ('-' is 0), e.g. bytes\n"
        "  --prefix N       combined, keyed on remote_addr: an IPv6 client counts per /N\n"
        "                   (32..128, default 56), IPv4-mapped as its IPv4 (rlt_addr_key)\n"
        "  reserve:NAME     a fourth trace field: 'TIME KEY ESTIMATE reserve:NAME' reserves\n"
        "  settle:NAME      the estimate, 'TIME KEY REAL settle:NAME' settles it at its real\n"
        "                   cost (charge after the response); the verdict of a settle is\n"
        "                   'settle', or 'unknown' when NAME has nothing outstanding\n"
        "  --settle-timeout D  a reservation not settled within D (default 5m) stays charged\n"
        "                   as estimated\n"
        "  --summary        instead of one line per request, per key: accepted, rejected and\n"
        "                   the worst burst (largest accepted cost in any span of the period),\n"
        "                   most rejected first; then the top denied keys as ratelimitd's\n"
        "                   /v1/top finds them (the same sketch): KEY DENIED ERROR, at most 10\n"
        "  --top-keys K     the sketch's counters, 1..100000 (default 100, the daemon's);\n"
        "                   0 leaves the top denied keys out\n"
        "Output, one line per request (times and durations in --unit, exact, zeros trimmed):\n"
        "  TIME KEY COST VERDICT REMAINING RETRY_AFTER RESET_AFTER DELAY\n"
        "VERDICT is allow or deny (settle or unknown for settle:NAME); RETRY_AFTER is -1 when\n"
        "the cost can never fit; DELAY is the\n"
        "leaky bucket's queueing delay (0 for the others).  A malformed line stops the replay\n"
        "with an error naming its line number (exit 1).\n",
        f);
}

#define fail_usage(...) rlt__usage_error(CMD, __VA_ARGS__)

/* ---- Per-key tallies for --summary: keys interned in one arena, found by open addressing. */

typedef struct tally {
    size_t off, len; /* key bytes in the arena */
    int64_t ok, rej, worst;
} tally;

typedef struct event {
    size_t key; /* index into tallies */
    rlt_ns t;   /* arrival, or send time for a shaper */
    int64_t cost;
} event;

typedef struct summary {
    char *arena;
    size_t arena_len, arena_cap;
    tally *keys;
    size_t nkeys, keys_cap;
    size_t *slots; /* key index + 1; 0 = empty */
    size_t nslots;
    event *ev;
    size_t nev, ev_cap;
    rlt_topk *top; /* the top denied keys, as the daemon keeps them (NULL: --top-keys 0) */
} summary;

/* A slot of the summary's and the reservations' tables, from the low bits of the core's
 * FNV-1a.  Those bits depend on the low bits of each byte alone (the multiply carries
 * upward only): fold the high bits in, so keys that differ in high bits alone spread too. */
static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = rlt_hash_fnv1a(p, n);
    return h ^ (h >> 29);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static int rehash(summary *s, size_t nslots)
{
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return -1;
    for (size_t k = 0; k < s->nkeys; k++) {
        size_t i = hash_bytes(s->arena + s->keys[k].off, s->keys[k].len) & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = k + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    return 0;
}

/* A key as one output column: quoted when it has blanks or quotes (a --key request or
 * user_agent field), as the access log writes it; backslash escapes are the log's own. */
static char *put_key(char *o, const char *k, size_t n)
{
    int q = memchr(k, ' ', n) || memchr(k, '\t', n) || memchr(k, '"', n);
    if (q) *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        if (q && k[i] == '"' && (i == 0 || k[i - 1] != '\\')) *o++ = '\\';
        *o++ = k[i];
    }
    if (q) *o++ = '"';
    return o;
}

/* The index of `key`, adding it if new; (size_t)-1 when out of memory. */
static size_t key_index(summary *s, const char *key, size_t len)
{
    if (s->nkeys * 2 >= s->nslots && rehash(s, s->nslots ? s->nslots * 2 : 1024)) return (size_t)-1;
    size_t i = hash_bytes(key, len) & (s->nslots - 1);
    while (s->slots[i]) {
        tally *t = &s->keys[s->slots[i] - 1];
        if (t->len == len && memcmp(s->arena + t->off, key, len) == 0) return s->slots[i] - 1;
        i = (i + 1) & (s->nslots - 1);
    }
    if (grow((void **)&s->arena, &s->arena_cap, s->arena_len + len, 1) ||
        grow((void **)&s->keys, &s->keys_cap, s->nkeys + 1, sizeof *s->keys))
        return (size_t)-1;
    memcpy(s->arena + s->arena_len, key, len);
    s->keys[s->nkeys] = (tally){s->arena_len, len, 0, 0, 0};
    s->arena_len += len;
    s->slots[i] = ++s->nkeys;
    return s->nkeys - 1;
}

static int event_cmp(const void *a, const void *b)
{
    const event *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

static const summary *sort_ctx;
static int tally_cmp(const void *a, const void *b)
{
    const tally *x = &sort_ctx->keys[*(const size_t *)a], *y = &sort_ctx->keys[*(const size_t *)b];
    if (x->rej != y->rej) return x->rej > y->rej ? -1 : 1;
    if (x->ok != y->ok) return x->ok > y->ok ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(sort_ctx->arena + x->off, sort_ctx->arena + y->off, n);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Lines of the top denied keys after a summary (as many as /metrics shows). */
#define RLT__TOP_LINES 10

static int print_summary(summary *s, const rlt_policy *p, int64_t unit, const char *unit_name)
{
    /* Worst burst per key: sort accepted events by (key, time), slide a window of W. */
    qsort(s->ev, s->nev, sizeof *s->ev, event_cmp);
    size_t start = 0;
    while (start < s->nev) {
        size_t end = start;
        while (end < s->nev && s->ev[end].key == s->ev[start].key)
            end++;
        int64_t sum = 0, best = 0;
        for (size_t lo = start, hi = start; hi < end; hi++) {
            sum += s->ev[hi].cost;
            while (s->ev[hi].t - s->ev[lo].t >= p->period)
                sum -= s->ev[lo++].cost;
            if (sum > best) best = sum;
        }
        s->keys[s->ev[start].key].worst = best;
        start = end;
    }
    size_t *order = malloc((s->nkeys ? s->nkeys : 1) * sizeof *order);
    if (!order) return -1;
    for (size_t k = 0; k < s->nkeys; k++)
        order[k] = k;
    sort_ctx = s;
    qsort(order, s->nkeys, sizeof *order, tally_cmp);
    char per[RLT__DEC_BUF], pol[128];
    rlt__dec_format(per, p->period, unit);
    if (rlt_policy_format(p, pol, sizeof pol) < 0) snprintf(pol, sizeof pol, "?");
    int64_t ok = 0, rej = 0;
    for (size_t k = 0; k < s->nkeys; k++) {
        ok += s->keys[k].ok;
        rej += s->keys[k].rej;
    }
    printf("# policy %s: %zu keys, %lld accepted, %lld rejected\n", pol, s->nkeys, (long long)ok,
           (long long)rej);
    printf("# KEY ACCEPTED REJECTED WORST_BURST (largest accepted cost in any %s %s span)\n", per,
           unit_name);
    for (size_t k = 0; k < s->nkeys; k++) {
        const tally *t = &s->keys[order[k]];
        char kb[2 * RLT_KEY_MAX + 2];
        fwrite(kb, 1, (size_t)(put_key(kb, s->arena + t->off, t->len) - kb), stdout);
        printf(" %lld %lld %lld\n", (long long)t->ok, (long long)t->rej, (long long)t->worst);
    }
    free(order);
    if (s->top == NULL) return 0;
    /* The daemon's sketch on the same denials: its estimate next to the exact counts above. */
    rlt_topk_entry top[RLT__TOP_LINES];
    size_t n = rlt_topk_list(s->top, top, RLT__TOP_LINES);
    printf("# KEY DENIED ERROR (top denied, ratelimitd's sketch of %zu counters: DENIED - ERROR "
           "<= true <= DENIED; any other key at most %llu)\n",
           rlt_topk_capacity(s->top), (unsigned long long)rlt_topk_floor(s->top));
    for (size_t i = 0; i < n; i++) {
        char kb[2 * RLT_KEY_MAX + 2];
        fwrite(kb, 1, (size_t)(put_key(kb, (const char *)top[i].key, top[i].klen) - kb), stdout);
        printf(" %llu %llu\n", (unsigned long long)top[i].count, (unsigned long long)top[i].error);
    }
    return 0;
}

static void free_summary(summary *s)
{
    free(s->arena);
    free(s->keys);
    free(s->slots);
    free(s->ev);
    rlt_topk_close(s->top);
}

/* ---- Reservations of a trace: each NAME of reserve:NAME / settle:NAME to the store's id,
 * by open addressing over the names (a settled or denied name keeps its slot with id 0). */

typedef struct resv_name {
    char name[RLT__TRACE_NAME_MAX];
    size_t nlen; /* 0: an empty slot */
    uint64_t id; /* 0: nothing outstanding under this name */
} resv_name;

typedef struct resv_names {
    resv_name *slot;
    size_t n, cap; /* cap a power of two, at most half full */
} resv_names;

static resv_name *name_find(resv_names *r, const char *name, size_t nlen, int add)
{
    if (add && (r->n + 1) * 2 > r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 64;
        resv_name *ns = calloc(ncap, sizeof *ns);
        if (!ns) return NULL;
        for (size_t i = 0; i < r->cap; i++) {
            if (!r->slot[i].nlen) continue;
            size_t j = hash_bytes(r->slot[i].name, r->slot[i].nlen) & (ncap - 1);
            while (ns[j].nlen)
                j = (j + 1) & (ncap - 1);
            ns[j] = r->slot[i];
        }
        free(r->slot);
        r->slot = ns;
        r->cap = ncap;
    }
    if (!r->cap) return NULL;
    for (size_t j = hash_bytes(name, nlen) & (r->cap - 1);; j = (j + 1) & (r->cap - 1)) {
        resv_name *e = &r->slot[j];
        if (e->nlen == nlen && memcmp(e->name, name, nlen) == 0) return e;
        if (!e->nlen) {
            if (!add) return NULL;
            memcpy(e->name, name, nlen);
            e->nlen = nlen;
            r->n++;
            return e;
        }
    }
}

/* A reserve or settle line.  *verdict: "allow"/"deny" for a reservation; "settle", or
 * "unknown" when NAME has nothing outstanding (never reserved, denied, settled, or expired:
 * then the numbers are a peek).  Returns an RLT_* status. */
static int replay_reservation(rlt_store *store, int id, resv_names *names, rlt_ns timeout,
                              const rlt__trace_line *tl, rlt_decision *d, const char **verdict)
{
    if (tl->op == RLT__TRACE_RESERVE) {
        resv_name *e = name_find(names, tl->name, tl->nlen, 1);
        if (!e) return RLT_ENOMEM;
        int rc =
            rlt_store_reserve(store, id, tl->key, tl->klen, tl->time, tl->cost, timeout, d, &e->id);
        if (rc == RLT_OK) *verdict = d->allowed ? "allow" : "deny";
        return rc;
    }
    resv_name *e = name_find(names, tl->name, tl->nlen, 0);
    int rc = e && e->id
                 ? rlt_store_settle(store, id, tl->key, tl->klen, tl->time, e->id, tl->cost, d)
                 : RLT_ENOENT;
    if (e) e->id = 0; /* settled, or gone: the name has nothing outstanding now */
    *verdict = "settle";
    if (rc == RLT_ENOENT) {
        *verdict = "unknown";
        rc = rlt_store_decide(store, id, tl->key, tl->klen, tl->time, 0, d);
    }
    return rc;
}

/* ---- The replay loop ---- */

typedef struct opts {
    rlt_policy policy;
    const char *policy_text;
    int64_t unit;
    const char *unit_name;
    int summary;
    long top_keys; /* --top-keys: the summary's sketch; 0 = none */
    int combined;
    int epoch;
    int key_field;  /* combined: 1-based field number of the key (1: the client address) */
    int cost_field; /* combined: 1-based field number of the cost, 0: cost 1 */
    const char *key_name, *cost_name;
    int prefix;            /* combined, keyed on remote_addr: rlt_addr_key's IPv6 prefix (0: 56) */
    rlt_ns settle_timeout; /* reserve:NAME waits this long for its settle:NAME (0: default) */
} opts;

/* Field `f` (1-based) of an access-log line, which option `opt` NAME asks for; NULL with a
 * message in err when the line is shorter. */
static const rlt__field *access_get(const rlt__access_line *al, int f, const char *opt,
                                    const char *name, char *err, size_t errlen)
{
    if (f <= al->nfield) return &al->field[f - 1];
    snprintf(err, errlen, "no field %d (%s %s): the line has %d", f, opt, name, al->nfield);
    return NULL;
}

/* The cost written in field `f` (1-based) of an access-log line: digits, or '-' for 0. */
static int access_cost(const rlt__access_line *al, int f, const char *name, int64_t *cost,
                       char *err, size_t errlen)
{
    const rlt__field *x = access_get(al, f, "--cost", name, err, errlen);
    if (!x) return -1;
    *cost = 0;
    if (x->n == 1 && x->p[0] == '-') return 0; /* the log's "none", e.g. no body bytes */
    int ok = x->n > 0;
    for (size_t k = 0; k < x->n && ok; k++)
        ok = x->p[k] >= '0' && x->p[k] <= '9' && !__builtin_mul_overflow(*cost, 10, cost) &&
             !__builtin_add_overflow(*cost, x->p[k] - '0', cost);
    if (!ok) {
        snprintf(err, errlen, "--cost %s: '%.*s' is not a whole number", name,
                 (int)(x->n > 40 ? 40 : x->n), x->p);
        return -1;
    }
    return 0;
}

/* The key in field `f` (1-based) of an access-log line; the client address (field 1) made a
 * key by rlt_addr_key with `prefix` (into a static buffer: one line at a time). */
static int access_key(const rlt__access_line *al, int f, const char *name, int prefix,
                      rlt__trace_line *tl, char *err, size_t errlen)
{
    const rlt__field *x = access_get(al, f, "--key", name, err, errlen);
    if (!x) return -1;
    if (f == 1) {
        static char ak[RLT_ADDR_KEY_MAX];
        int n = rlt_addr_key(x->p, x->n, prefix, ak, sizeof ak);
        if (n < 0) {
            snprintf(err, errlen,
                     "--key %s: malformed address '%.*s' (an IPv4 or IPv6 address; --key names "
                     "another field)",
                     name, (int)(x->n > 64 ? 64 : x->n), x->p);
            return -1;
        }
        tl->key = ak;
        tl->klen = (size_t)n;
        return 0;
    }
    if (x->n == 0 || x->n > RLT_KEY_MAX) {
        snprintf(err, errlen, "--key %s: the field is %s", name,
                 x->n ? "longer than the longest key" : "empty");
        return -1;
    }
    tl->key = x->p;
    tl->klen = x->n;
    return 0;
}

static char *put(char *o, const char *s, size_t n)
{
    memcpy(o, s, n);
    return o + n;
}

static char *put_dec(char *o, int64_t v, int64_t unit)
{
    char b[RLT__DEC_BUF];
    size_t n = rlt__dec_format(b, v, unit);
    *o++ = ' ';
    return put(o, b, n);
}

/* A calendar policy (fixed_window:N/1mo) needs Unix time: a log's times count from its first
 * line's, so the policy's origin is that line's instant.  No key has a state yet. */
static int set_origin(rlt_store *store, const opts *op, int64_t origin_s, int *id)
{
    rlt_policy p = op->policy;
    rlt_policy_set_origin(&p, origin_s * RLT_NS_PER_S);
    int rc = rlt_store_set_policy(store, "replay", &p, RLT_CHANGE_RESET, id);
    if (rc) fprintf(stderr, "ratelimit " CMD ": cannot set up the store: %s\n", rlt_strerror(rc));
    return rc;
}

static int replay(const opts *op)
{
    rlt_store *store = NULL;
    int id = -1, rc = RLT_OK, status = 0;
    summary sum;
    memset(&sum, 0, sizeof sum);
    resv_names names = {0};
    rlt_topk_options to = {.k = (size_t)op->top_keys};
    if ((op->summary && op->top_keys > 0 && (rc = rlt_topk_open(&sum.top, &to)) != RLT_OK) ||
        (rc = rlt_store_open(&store, NULL)) != RLT_OK ||
        (rc = rlt_store_set_policy(store, "replay", &op->policy, RLT_CHANGE_RESET, &id)) !=
            RLT_OK) {
        fprintf(stderr, "ratelimit " CMD ": cannot set up the store: %s\n", rlt_strerror(rc));
        rlt_store_close(store);
        rlt_topk_close(sum.top);
        return 1;
    }
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    char *line = NULL, err[200];
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int have_origin = 0;
    int64_t origin = 0;
    char out[2 * RLT_KEY_MAX + 256];
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if (len && line[len - 1] == '\n') len--;
        rlt__trace_line tl = {.op = RLT__TRACE_REQUEST}; /* the access-log path sets no op */
        int pr;
        if (op->combined) {
            rlt__access_line al;
            pr = rlt__combined_parse(line, (size_t)len, &al, err, sizeof err);
            if (pr == 1) {
                if (!have_origin) {
                    origin = op->epoch ? 0 : al.epoch_s;
                    have_origin = 1;
                    if (origin && op->policy.months && set_origin(store, op, origin, &id)) {
                        status = 1;
                        break;
                    }
                }
                int64_t secs = al.epoch_s - origin;
                if (__builtin_mul_overflow(secs, RLT_NS_PER_S, &tl.time)) {
                    snprintf(err, sizeof err, "timestamp out of range");
                    pr = -1;
                }
                tl.cost = 1;
                if (pr == 1 && (access_key(&al, op->key_field, op->key_name, op->prefix, &tl, err,
                                           sizeof err) ||
                                (op->cost_field && access_cost(&al, op->cost_field, op->cost_name,
                                                               &tl.cost, err, sizeof err))))
                    pr = -1;
            }
        } else {
            pr = rlt__trace_parse(line, (size_t)len, op->unit, 0, &tl, err, sizeof err);
        }
        if (pr == 0) continue;
        if (pr < 0) {
            fflush(stdout);
            fprintf(stderr, "ratelimit " CMD ": line %ld: %s\n", lineno, err);
            status = 1;
            break;
        }
        rlt_decision d;
        const char *verdict = NULL;
        if (tl.op != RLT__TRACE_REQUEST)
            rc = replay_reservation(store, id, &names, op->settle_timeout, &tl, &d, &verdict);
        else
            rc = rlt_store_decide(store, id, tl.key, tl.klen, tl.time, tl.cost, &d);
        if (rc == RLT_EINVAL && tl.op != RLT__TRACE_REQUEST) {
            fflush(stdout);
            fprintf(stderr,
                    "ratelimit " CMD ": line %ld: reserve:/settle: need a fixed_window, "
                    "sliding_window, sliding_log, token_bucket or gcra policy\n",
                    lineno);
            status = 1;
            break;
        }
        if (rc != RLT_OK) {
            fflush(stdout);
            fprintf(stderr, "ratelimit " CMD ": line %ld: %s\n", lineno, rlt_strerror(rc));
            status = 1;
            break;
        }
        if (op->summary && tl.op == RLT__TRACE_SETTLE) continue; /* tallies count requests */
        if (op->summary) {
            size_t k = key_index(&sum, tl.key, tl.klen);
            if (k == (size_t)-1 ||
                (d.allowed && grow((void **)&sum.ev, &sum.ev_cap, sum.nev + 1, sizeof *sum.ev))) {
                fprintf(stderr, "ratelimit " CMD ": out of memory\n");
                status = 1;
                break;
            }
            if (d.allowed) {
                sum.keys[k].ok++;
                rlt_ns sent;
                if (__builtin_add_overflow(tl.time, d.delay, &sent)) sent = INT64_MAX;
                sum.ev[sum.nev++] = (event){k, sent, tl.cost};
            } else {
                sum.keys[k].rej++;
                /* As the daemon counts: denied requests that asked for something. */
                if (sum.top != NULL && tl.cost > 0 &&
                    (rc = rlt_topk_add(sum.top, id, tl.key, tl.klen, 1)) != RLT_OK) {
                    fprintf(stderr, "ratelimit " CMD ": line %ld: %s\n", lineno, rlt_strerror(rc));
                    status = 1;
                    break;
                }
            }
            continue;
        }
        char *o = out;
        char b[RLT__DEC_BUF];
        o = put(o, b, rlt__dec_format(b, tl.time, op->unit));
        *o++ = ' ';
        o = put_key(o, tl.key, tl.klen);
        o = put_dec(o, tl.cost, 1);
        if (verdict) {
            *o++ = ' ';
            o = put(o, verdict, strlen(verdict));
        } else {
            o = d.allowed ? put(o, " allow", 6) : put(o, " deny", 5);
        }
        o = put_dec(o, d.remaining, 1);
        o = d.retry_after < 0 ? put(o, " -1", 3) : put_dec(o, d.retry_after, op->unit);
        o = put_dec(o, d.reset_after, op->unit);
        o = put_dec(o, d.delay, op->unit);
        *o++ = '\n';
        fwrite(out, 1, (size_t)(o - out), stdout);
    }
    if (!status && ferror(stdin)) {
        fprintf(stderr, "ratelimit " CMD ": error reading stdin\n");
        status = 1;
    }
    if (!status && op->summary && print_summary(&sum, &op->policy, op->unit, op->unit_name)) {
        fprintf(stderr, "ratelimit " CMD ": out of memory\n");
        status = 1;
    }
    if (fflush(stdout) != 0 && !status) {
        fprintf(stderr, "ratelimit " CMD ": error writing stdout\n");
        status = 1;
    }
    free(line);
    free(names.slot);
    free_summary(&sum);
    rlt_store_close(store);
    return status;
}

/* The access-log field named by option `opt` (--key, --cost): its number, or 0 after a usage
 * error that lists what `expected`. */
static int access_field(const char *opt, const char *v, const char *expected)
{
    int f = rlt__access_field(v);
    if (!f)
        fail_usage("%s '%s': expected %s or a field number 1..%d", opt, v, expected,
                   RLT__ACCESS_FIELDS);
    return f;
}

int rlt__cli_replay(int argc, char **argv)
{
    opts op;
    memset(&op, 0, sizeof op);
    op.unit = RLT_NS_PER_S;
    op.unit_name = "s";
    op.key_field = 1;
    op.key_name = "remote_addr";
    op.top_keys = 100;
    int has_key = 0, has_top = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int m;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--summary") == 0) {
            op.summary = 1;
        } else if (strcmp(a, "--epoch") == 0) {
            op.epoch = 1;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--policy", &v)) != 0) {
            if (m < 0 || rlt__opt_policy(CMD, v, &op.policy)) return 2;
            op.policy_text = v;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--top-keys", &v)) != 0) {
            char *end;
            if (m < 0) return 2;
            op.top_keys = strtol(v, &end, 10);
            if (*v < '0' || *v > '9' || *end != '\0' || op.top_keys > RLT_TOPK_MAX)
                return fail_usage("--top-keys '%s': expected 0..%d", v, RLT_TOPK_MAX);
            has_top = 1;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--unit", &v)) != 0) {
            if (m < 0) return 2;
            if (!(op.unit = rlt__dec_unit_ns(v)))
                return fail_usage("--unit '%s': expected s, ms, us or ns", v);
            op.unit_name = v;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--key", &v)) != 0) {
            if (m < 0) return 2;
            if (!(op.key_field =
                      access_field("--key", v,
                                   "remote_addr, ident, user, time, request, status, bytes, "
                                   "referer, user_agent")))
                return 2;
            op.key_name = v;
            has_key = 1;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--prefix", &v)) != 0) {
            char *end;
            if (m < 0) return 2;
            long pv = strtol(v, &end, 10);
            if (*v < '0' || *v > '9' || *end != '\0' || pv < 32 || pv > 128)
                return fail_usage("--prefix '%s': expected an IPv6 prefix length 32..128", v);
            op.prefix = (int)pv;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--cost", &v)) != 0) {
            if (m < 0) return 2;
            if (!(op.cost_field = access_field("--cost", v, "a field name (e.g. bytes)"))) return 2;
            op.cost_name = v;
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--settle-timeout", &v)) != 0) {
            if (m < 0) return 2;
            if (rlt_duration_parse(v, strlen(v), 0, &op.settle_timeout) != RLT_OK ||
                op.settle_timeout <= 0)
                return fail_usage("--settle-timeout '%s': expected a duration such as 30s", v);
        } else if ((m = rlt__opt(argc, argv, &i, CMD, "--format", &v)) != 0) {
            if (m < 0) return 2;
            if (strcmp(v, "combined") == 0)
                op.combined = 1;
            else if (strcmp(v, "trace") == 0)
                op.combined = 0;
            else
                return fail_usage("--format '%s': expected trace or combined", v);
        } else {
            return fail_usage("unknown option '%s'", a);
        }
    }
    if (!op.policy_text) return fail_usage("--policy is required");
    if (op.prefix && (!op.combined || op.key_field != 1))
        return fail_usage("--prefix applies to --format combined keyed on remote_addr only");
    if (op.epoch && !op.combined) return fail_usage("--epoch applies to --format combined only");
    if (has_top && !op.summary) return fail_usage("--top-keys applies to --summary only");
    if ((has_key || op.cost_field) && !op.combined)
        return fail_usage("--key and --cost apply to --format combined only (a trace has its "
                          "KEY and COST columns)");
    return replay(&op);
}
