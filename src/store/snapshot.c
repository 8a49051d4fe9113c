/* Store snapshots: rlt_store_save writes policies, tiers, assignments and every entry's state
 * to a file atomically; rlt_store_load reads one back into a private table, checks it whole,
 * moves every instant by the downtime, and only then swaps it in.
 *
 * Format, version 1, every integer little-endian:
 *   header   "RLTSTORE" u32 version=1 u32 0x01020304 (native: states are raw host-order
 *            bytes, so a file from another byte order is refused) i64 now_save i64 wall_save
 *   records  u8 type, then
 *            1 policy      u16 id u8 nlen name u32 algo i64 limit period burst queue delay
 *            5 options     u16 id i64 block block_factor block_max jitter: the options every
 *                          algorithm takes (penalty box, jitter), written just before policy
 *                          record `id` and only when it has one (so files without them read as
 *                          before; a reader that predates them refuses such a file whole)
 *            2 tier        u16 index u8 nlen name u16 policy
 *            3 assignment  u16 klen key u16 tier
 *            4 entry       u16 policy u16 klen key state[rlt_state_size(policy)]
 *            6 calendar    u16 policy i32 months i64 origin u8 nlen zone-name i32 std_off
 *                          dst_off has_dst, then start and end: i32 kind day month week secs
 *                          (right after its policy, only for calendar windows: a file
 *                          without one reads as before)
 *            255 end       u64 number of records before it
 *   trailer  u32 CRC32C of every byte before it; the file ends there.
 * Ids and indexes must come dense and in order, so a file cannot name what it has not
 * defined, and every entry's state must pass rlt_state_valid under its policy.  Entries are written
 * shard by shard under that shard's lock: each key's state is exact, the set is not one instant
 * across shards. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/assign.h"
#include "store/crc32c.h"
#include "store/evict.h"
#include "store/lock.h"
#include "store/logs.h"
#include "store/policy.h"
#include "store/store.h"
#include "store/table.h"
#include "store/tier.h"

#define SNAP_VERSION 1u
#define SNAP_ENDIAN 0x01020304u
static const char magic[8] = {'R', 'L', 'T', 'S', 'T', 'O', 'R', 'E'};

enum {
    REC_POLICY = 1,
    REC_TIER = 2,
    REC_ASSIGN = 3,
    REC_ENTRY = 4,
    REC_OPTIONS = 5,
    REC_CALENDAR = 6,
    REC_END = 255
};

/* ---- writing -------------------------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n)
            nc *= 2;
        uint8_t *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put_uint(buf *b, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    put(b, t, (size_t)bytes);
}

#define PUT8(b, v) put_uint((b), (uint64_t)(v), 1)
#define PUT16(b, v) put_uint((b), (uint64_t)(v), 2)
#define PUT32(b, v) put_uint((b), (uint64_t)(v), 4)
#define PUT64(b, v) put_uint((b), (uint64_t)(v), 8)

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t x;
    if (__builtin_sub_overflow(a, b, &x)) return b < 0 ? INT64_MAX : INT64_MIN;
    return x;
}

/* The calendar record of policy `id` (the format above). */
static void put_calendar(buf *b, uint32_t id, const rlt_policy *p)
{
    const rlt_zone *z = &p->zone;
    size_t nlen = strnlen(z->name, sizeof z->name - 1);
    PUT8(b, REC_CALENDAR);
    PUT16(b, id);
    PUT32(b, (uint32_t)p->months);
    PUT64(b, p->origin);
    PUT8(b, nlen);
    put(b, z->name, nlen);
    const int32_t f[] = {z->std_off,     z->dst_off,    z->has_dst,    z->start.kind, z->start.day,
                         z->start.month, z->start.week, z->start.secs, z->end.kind,   z->end.day,
                         z->end.month,   z->end.week,   z->end.secs};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        PUT32(b, (uint32_t)f[i]);
}

typedef struct writer {
    FILE *f;
    uint32_t crc;
    uint64_t records;
    bool err;
} writer;

/* Flushes `b` to the file, folding it into the checksum. */
static void flush_buf(writer *w, buf *b)
{
    if (b->oom) w->err = true;
    if (!w->err && b->len) {
        w->crc = rlt__crc32c(w->crc, b->p, b->len);
        if (fwrite(b->p, 1, b->len, w->f) != b->len) w->err = true;
    }
    b->len = 0;
}

static void write_shard(rlt_store *s, rlt__shard *sh, writer *w, buf *b)
{
    rlt__shard_lock(sh);
    for (uint32_t i = 0; i < sh->anb; i++) {
        for (const rlt__assign *a = sh->abuckets[i]; a; a = a->next) {
            PUT8(b, REC_ASSIGN);
            PUT16(b, a->klen);
            put(b, a->key, a->klen);
            PUT16(b, a->tier);
            w->records++;
        }
    }
    for (uint32_t i = 0; i < sh->cap; i++) {
        const rlt__slot *e = &sh->tab[i];
        if (!e->meta) continue;
        size_t klen = e->meta & RLT__KLEN_MASK;
        PUT8(b, REC_ENTRY);
        PUT16(b, e->policy);
        PUT16(b, klen);
        put(b, rlt__slot_key(s, e), klen);
        const rlt__pol *P = &s->pols[e->policy];
        if (rlt__pol_log(P)) { /* the file holds the full layout: compact logs expanded */
            uint8_t *full = malloc(P->ssz);
            if (full) rlt__state_get(s, e, full);
            if (full) put(b, full, P->ssz);
            b->oom |= !full;
            free(full);
        } else {
            put(b, rlt__slot_state(s, e), P->ssz);
        }
        w->records++;
    }
    rlt__shard_unlock(sh);
}

static int fsync_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return RLT_EIO;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0) return RLT_EIO;
    int rc = fsync(fd) == 0 ? RLT_OK : RLT_EIO;
    close(fd);
    return rc;
}

int rlt_store_save(rlt_store *s, const char *path, rlt_ns now, int64_t wall_ns)
{
    if (!s || !path || !*path) return RLT_EINVAL;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return RLT_EIO;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        free(tmp);
        return RLT_EIO;
    }
    writer w = {.f = fdopen(fd, "wb")};
    if (!w.f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        return RLT_EIO;
    }
    buf b = {0};
    put(&b, magic, sizeof magic);
    PUT32(&b, SNAP_VERSION);
    PUT32(&b, SNAP_ENDIAN);
    PUT64(&b, now);
    PUT64(&b, wall_ns);

    /* Policies and tiers cannot change while we hold the policy mutex. */
    pthread_mutex_lock(&s->pol_mu);
    for (uint32_t i = 0; i < s->npol; i++) {
        const rlt__pol *P = &s->pols[i];
        if (P->p.block > 0 || P->p.jitter > 0) {
            PUT8(&b, REC_OPTIONS);
            PUT16(&b, i);
            PUT64(&b, P->p.block);
            PUT64(&b, P->p.block_factor);
            PUT64(&b, P->p.block_max);
            PUT64(&b, P->p.jitter);
            w.records++;
        }
        PUT8(&b, REC_POLICY);
        PUT16(&b, i);
        PUT8(&b, P->nlen);
        put(&b, P->name, P->nlen);
        PUT32(&b, P->p.algo);
        PUT64(&b, P->p.limit);
        PUT64(&b, P->p.period);
        PUT64(&b, P->p.burst);
        PUT64(&b, P->p.queue);
        PUT64(&b, P->p.delay);
        w.records++;
        if (P->p.months != 0) {
            put_calendar(&b, i, &P->p);
            w.records++;
        }
    }
    for (uint32_t i = 0; i < s->ntier; i++) {
        const rlt__named_tier *t = &s->tiers[i];
        PUT8(&b, REC_TIER);
        PUT16(&b, i);
        PUT8(&b, t->nlen);
        put(&b, t->name, t->nlen);
        PUT16(&b, t->policy);
        w.records++;
    }
    flush_buf(&w, &b);
    for (uint32_t k = 0; k < s->nshards && !w.err; k++) {
        write_shard(s, &s->shards[k], &w, &b);
        flush_buf(&w, &b);
    }
    pthread_mutex_unlock(&s->pol_mu);

    PUT8(&b, REC_END);
    PUT64(&b, w.records);
    flush_buf(&w, &b);
    PUT32(&b, w.crc);
    if (!b.oom && !w.err && fwrite(b.p, 1, b.len, w.f) != b.len) w.err = true;
    free(b.p);
    if (fflush(w.f) != 0 || fsync(fileno(w.f)) != 0) w.err = true;
    if (fclose(w.f) != 0) w.err = true;
    int rc = w.err ? RLT_EIO : RLT_OK;
    if (!rc && rename(tmp, path) != 0) rc = RLT_EIO;
    if (rc)
        unlink(tmp);
    else
        rc = fsync_dir(path);
    free(tmp);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------- */

typedef struct reader {
    FILE *f;
    uint32_t crc;
    bool bad; /* short read or malformed: RLT_ECORRUPT */
    bool ioerr;
} reader;

static void get(reader *r, void *out, size_t n)
{
    if (r->bad) {
        memset(out, 0, n);
        return;
    }
    size_t got = fread(out, 1, n, r->f);
    if (got != n) {
        if (ferror(r->f)) r->ioerr = true;
        r->bad = true;
        memset(out, 0, n);
        return;
    }
    r->crc = rlt__crc32c(r->crc, out, n);
}

static uint64_t get_uint(reader *r, int bytes)
{
    uint8_t t[8];
    get(r, t, (size_t)bytes);
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)t[i] << (8 * i);
    return v;
}

static bool read_name(reader *r, char name[RLT_NAME_MAX + 1], size_t *len)
{
    *len = (size_t)get_uint(r, 1);
    if (*len < 1 || *len > RLT_NAME_MAX) return false;
    get(r, name, *len);
    name[*len] = 0;
    return !r->bad && rlt__valid_name(name, *len);
}

/* Reads records into the private store t.  Returns RLT_OK, RLT_ECORRUPT, RLT_ENOMEM. */
/* A calendar window's fields onto policy `pid`, already read.  Its origin moves the other way
 * from the instants (an instant x is x + delta on our clock, so origin + now stays the same
 * Unix time); its states keep their month indices. */
static int read_calendar(reader *r, rlt_store *t, rlt_ns delta)
{
    uint32_t pid = (uint32_t)get_uint(r, 2);
    rlt_policy c;
    memset(&c, 0, sizeof c);
    c.months = (int32_t)(uint32_t)get_uint(r, 4);
    c.origin = sat_sub((int64_t)get_uint(r, 8), delta);
    size_t nlen = (size_t)get_uint(r, 1);
    if (r->bad || pid >= t->npol || nlen >= sizeof c.zone.name) return RLT_ECORRUPT;
    get(r, c.zone.name, nlen);
    int32_t *f[] = {&c.zone.std_off,   &c.zone.dst_off,     &c.zone.has_dst,    &c.zone.start.kind,
                    &c.zone.start.day, &c.zone.start.month, &c.zone.start.week, &c.zone.start.secs,
                    &c.zone.end.kind,  &c.zone.end.day,     &c.zone.end.month,  &c.zone.end.week,
                    &c.zone.end.secs};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        *f[i] = (int32_t)(uint32_t)get_uint(r, 4);
    if (r->bad) return RLT_ECORRUPT;
    /* validated like any policy: not a fixed window, a bad zone rule refuse the file */
    return rlt_policy_copy_calendar(&t->pols[pid].p, &c) == RLT_OK ? RLT_OK : RLT_ECORRUPT;
}

static int read_records(reader *r, rlt_store *t, rlt_ns now, rlt_ns delta)
{
    uint64_t records = 0;
    uint8_t key[RLT_KEY_MAX];
    uint8_t *state = NULL;
    size_t state_cap = 0;
    int rc = RLT_ECORRUPT;
    rlt_policy opts = {0}; /* a REC_OPTIONS record waiting for its policy record */
    bool opts_pending = false;
    for (;;) {
        unsigned type = (unsigned)get_uint(r, 1);
        if (r->bad || (opts_pending && type != REC_POLICY)) goto out;
        if (type == REC_END) break;
        records++;
        if (type == REC_OPTIONS) {
            uint32_t id = (uint32_t)get_uint(r, 2);
            if (opts_pending || id != t->npol) goto out;
            opts.block = (int64_t)get_uint(r, 8);
            opts.block_factor = (int64_t)get_uint(r, 8);
            opts.block_max = (int64_t)get_uint(r, 8);
            opts.jitter = (int64_t)get_uint(r, 8);
            if (r->bad) goto out;
            opts_pending = true;
        } else if (type == REC_POLICY) {
            char name[RLT_NAME_MAX + 1];
            size_t nlen;
            uint32_t id = (uint32_t)get_uint(r, 2);
            if (id != t->npol || !read_name(r, name, &nlen)) goto out;
            rlt_policy p;
            memset(&p, 0, sizeof p);
            p.algo = (rlt_algo)get_uint(r, 4);
            p.limit = (int64_t)get_uint(r, 8);
            p.period = (int64_t)get_uint(r, 8);
            p.burst = (int64_t)get_uint(r, 8);
            p.queue = (int64_t)get_uint(r, 8);
            p.delay = (int64_t)get_uint(r, 8);
            if (opts_pending) { /* rlt__add_policy validates them with the rest */
                p.block = opts.block;
                p.block_factor = opts.block_factor;
                p.block_max = opts.block_max;
                p.jitter = opts.jitter;
                opts_pending = false;
            }
            if (r->bad || rlt__add_policy(t, name, nlen, &p) != RLT_OK) goto out;
        } else if (type == REC_CALENDAR) {
            if (read_calendar(r, t, delta) != RLT_OK) goto out;
        } else if (type == REC_TIER) {
            char name[RLT_NAME_MAX + 1];
            size_t nlen;
            uint32_t idx = (uint32_t)get_uint(r, 2);
            if (idx != t->ntier || !read_name(r, name, &nlen)) goto out;
            int pol = (int)get_uint(r, 2);
            if (r->bad || rlt__add_tier(t, name, nlen, pol) != RLT_OK) goto out;
        } else if (type == REC_ASSIGN) {
            size_t klen = (size_t)get_uint(r, 2);
            if (klen < 1 || klen > RLT_KEY_MAX) goto out;
            get(r, key, klen);
            uint32_t tier = (uint32_t)get_uint(r, 2);
            if (r->bad || tier >= t->ntier) goto out;
            uint64_t h = rlt__key_hash(t, key, klen);
            int as = rlt__assign_set(t, &t->shards[h & t->shard_mask], h, key, klen, tier);
            if (as == RLT_ENOMEM) {
                rc = RLT_ENOMEM;
                goto out;
            }
            /* RLT_EFULL: more assignments than this store's caps hold (a smaller max_keys
             * than the saver's): the rest is left out, as keys are evicted. */
        } else if (type == REC_ENTRY) {
            uint32_t pid = (uint32_t)get_uint(r, 2);
            size_t klen = (size_t)get_uint(r, 2);
            if (r->bad || pid >= t->npol || klen < 1 || klen > RLT_KEY_MAX) goto out;
            get(r, key, klen);
            const rlt__pol *P = &t->pols[pid];
            if (P->ssz > state_cap) {
                uint8_t *ns = realloc(state, P->ssz);
                if (!ns) {
                    rc = RLT_ENOMEM;
                    goto out;
                }
                state = ns;
                state_cap = P->ssz;
            }
            get(r, state, P->ssz);
            /* A valid CRC proves the bytes are what some writer wrote, not that the writer
             * was ours: a crafted file can carry a checksum.  The core's decision code may
             * only see states that keep its invariants, so one bad state refuses the file. */
            if (r->bad || !rlt_state_valid(&P->p, state)) goto out;
            rlt_state_shift(&P->p, state, delta);
            if (rlt_is_fresh(&P->p, state, now)) continue; /* downtime refilled it */
            uint64_t h = rlt__key_hash(t, key, klen);
            rlt__shard *sh = &t->shards[h & t->shard_mask];
            if (rlt__find(t, sh, h, (int)pid, key, klen)) goto out; /* duplicate */
            rlt__slot *e;
            int irc = rlt__insert(t, sh, h, (int)pid, key, klen, now, NULL, &e);
            if (irc == RLT_EFULL) continue; /* counted in refused_full */
            if (irc) {
                rc = irc;
                goto out;
            }
            if (rlt__state_put(t, sh, e, state)) { /* a compact log sized to its entries */
                rc = RLT_ENOMEM;
                goto out;
            }
        } else {
            goto out;
        }
    }
    if (get_uint(r, 8) != records || r->bad) goto out;
    uint32_t want = r->crc;
    uint8_t t4[4];
    if (fread(t4, 1, 4, r->f) != 4) goto out;
    uint32_t crc =
        (uint32_t)t4[0] | (uint32_t)t4[1] << 8 | (uint32_t)t4[2] << 16 | (uint32_t)t4[3] << 24;
    if (crc != want || fgetc(r->f) != EOF) goto out;
    rc = RLT_OK;
out:
    free(state);
    return rc;
}

/* First pass: the CRC of everything before the trailer must match it, so that nothing is
 * interpreted before the whole file is known to be what was written (an accidental bit flip
 * is refused here).  The second pass still checks every state with rlt_state_valid: the core
 * trusts the state bytes it is given (a bad sliding-log index would read out of bounds), and
 * a deliberately crafted file can carry a correct CRC. */
static int check_crc(FILE *f)
{
    if (fseek(f, 0, SEEK_END) != 0) return RLT_EIO;
    long n = ftell(f);
    if (n < 0) return RLT_EIO;
    if (n < 4 || fseek(f, 0, SEEK_SET) != 0) return n < 4 ? RLT_ECORRUPT : RLT_EIO;
    uint8_t chunk[65536];
    uint32_t crc = 0;
    for (long left = n - 4; left > 0;) {
        size_t want = left < (long)sizeof chunk ? (size_t)left : sizeof chunk;
        if (fread(chunk, 1, want, f) != want) return ferror(f) ? RLT_EIO : RLT_ECORRUPT;
        crc = rlt__crc32c(crc, chunk, want);
        left -= (long)want;
    }
    uint8_t t4[4];
    if (fread(t4, 1, 4, f) != 4) return RLT_ECORRUPT;
    uint32_t want =
        (uint32_t)t4[0] | (uint32_t)t4[1] << 8 | (uint32_t)t4[2] << 16 | (uint32_t)t4[3] << 24;
    if (crc != want) return RLT_ECORRUPT;
    return fseek(f, 0, SEEK_SET) == 0 ? RLT_OK : RLT_EIO;
}

int rlt_store_load(rlt_store *s, const char *path, rlt_ns now, int64_t wall_ns)
{
    if (!s || !path) return RLT_EINVAL;
    reader r = {.f = fopen(path, "rbe")};
    if (!r.f) return RLT_EIO;
    int crc_rc = check_crc(r.f);
    if (crc_rc) {
        fclose(r.f);
        return crc_rc;
    }
    char m[8];
    get(&r, m, sizeof m);
    uint32_t version = (uint32_t)get_uint(&r, 4);
    uint32_t endian = (uint32_t)get_uint(&r, 4);
    rlt_ns now_save = (rlt_ns)get_uint(&r, 8);
    int64_t wall_save = (int64_t)get_uint(&r, 8);
    if (r.bad || memcmp(m, magic, sizeof m) != 0 || version != SNAP_VERSION ||
        endian != SNAP_ENDIAN) {
        bool io = r.ioerr;
        fclose(r.f);
        return io ? RLT_EIO : RLT_ECORRUPT;
    }
    /* Saved instant x is x + delta on our clock: the wall-clock downtime counts as elapsed;
     * a wall clock that went back counts as none.  In 128 bits, clamped to int64. */
    __int128 down = (__int128)wall_ns - wall_save;
    if (down < 0) down = 0;
    __int128 delta = ((__int128)now - down) - now_save;
    if (delta > INT64_MAX) delta = INT64_MAX;
    if (delta < INT64_MIN) delta = INT64_MIN;

    rlt_store *t;
    int rc = rlt__store_new_like(s, &t);
    if (rc) {
        fclose(r.f);
        return rc;
    }
    rc = read_records(&r, t, now, (rlt_ns)delta);
    if (rc == RLT_ECORRUPT && r.ioerr) rc = RLT_EIO;
    fclose(r.f);
    if (rc == RLT_OK) rlt__store_swap(s, t, now); /* t now holds the old contents */
    rlt_store_close(t);
    return rc;
}
