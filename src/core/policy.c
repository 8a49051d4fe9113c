/* Policies: validation with derived exact-rational fields, the policy text grammar, durations. */
#include "algo.h"

#include "ratelimit/adaptive.h"

#include <stdio.h>

static const char *const algo_names[] = {
    [RLT_ALGO_NONE] = "none",
    [RLT_FIXED_WINDOW] = "fixed_window",
    [RLT_SLIDING_LOG] = "sliding_log",
    [RLT_SLIDING_WINDOW] = "sliding_window",
    [RLT_TOKEN_BUCKET] = "token_bucket",
    [RLT_GCRA] = "gcra",
    [RLT_LEAKY_BUCKET] = "leaky_bucket",
    [RLT_CONCURRENCY] = "concurrency",
};

const char *rlt_algo_name(rlt_algo algo)
{
    if ((int)algo < 0 || (int)algo > RLT_CONCURRENCY) return "none";
    return algo_names[algo];
}

rlt_algo rlt_algo_from_name(const char *name, size_t len)
{
    if (!name) return RLT_ALGO_NONE;
    for (int a = RLT_FIXED_WINDOW; a <= RLT_CONCURRENCY; a++)
        if (strlen(algo_names[a]) == len && memcmp(algo_names[a], name, len) == 0)
            return (rlt_algo)a;
    return RLT_ALGO_NONE;
}

int rlt_policy_init(rlt_policy *p, rlt_algo algo, int64_t limit, rlt_ns period, int64_t burst,
                    int64_t queue, int64_t delay)
{
    if (!p) return RLT_EINVAL;
    memset(p, 0, sizeof *p);
    if (algo < RLT_FIXED_WINDOW || algo > RLT_CONCURRENCY) return RLT_EINVAL;
    if (algo == RLT_CONCURRENCY && period <= 0) period = RLT_CONCURRENCY_DEFAULT_TIMEOUT;
    if (limit <= 0 || period <= 0 || burst < 0 || queue < 0 || delay < 0) return RLT_EINVAL;
    if (algo == RLT_SLIDING_LOG && limit > RLT_SLIDING_LOG_MAX) return RLT_ERANGE;
    if (algo == RLT_CONCURRENCY && limit > RLT_CONCURRENCY_MAX) return RLT_ERANGE;

    p->algo = algo;
    p->limit = limit;
    p->period = period;
    p->burst = burst ? burst : limit;
    p->queue = queue;
    p->delay = delay > queue ? queue : delay; /* delay beyond the queue changes nothing */

    int64_t g = rlt_gcd(limit, period);
    p->scale_ = limit / g;
    p->unit_ = period / g;
    if (algo == RLT_TOKEN_BUCKET || algo == RLT_GCRA) {
        if (__builtin_mul_overflow(p->burst, p->unit_, &p->cap_)) return RLT_ERANGE;
    } else if (algo == RLT_LEAKY_BUCKET) {
        int64_t whole;
        if (__builtin_mul_overflow(p->queue, p->unit_, &p->cap_)) return RLT_ERANGE;
        if (__builtin_add_overflow(p->cap_, p->unit_, &whole)) return RLT_ERANGE;
        p->free_ = p->delay * p->unit_; /* delay <= queue: cannot overflow */
    }
    return RLT_OK;
}

bool rlt_policy_equal(const rlt_policy *a, const rlt_policy *b)
{
    if (!a || !b) return a == b;
    return a->algo == b->algo && a->limit == b->limit && a->period == b->period &&
           a->burst == b->burst && a->queue == b->queue && a->delay == b->delay &&
           a->block == b->block && a->block_factor == b->block_factor &&
           a->block_max == b->block_max && a->jitter == b->jitter && a->origin == b->origin &&
           a->adapt == b->adapt && a->adapt_min == b->adapt_min &&
           a->adapt_init == b->adapt_init && a->adapt_slow == b->adapt_slow &&
           a->reserve == b->reserve &&
           rlt_policy_calendar_equal(a, b);
}

int64_t rlt_policy_limit(const rlt_policy *p)
{
    if (!p) return 0;
    switch (p->algo) {
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA:
        return p->burst;
    case RLT_LEAKY_BUCKET:
        return p->queue + 1;
    default:
        return p->limit;
    }
}

size_t rlt_state_size(const rlt_policy *p)
{
    size_t n = rlt__algo_state_size(p);
    return n ? n + rlt__block_size(p) : 0;
}

/* ---- text ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    rlt_ns ns;
} units[] = {
    {"ns", 1},
    {"us", RLT_NS_PER_US},
    {"ms", RLT_NS_PER_MS},
    {"s", RLT_NS_PER_S},
    {"m", 60 * RLT_NS_PER_S},
    {"h", 3600 * RLT_NS_PER_S},
    {"d", 86400 * RLT_NS_PER_S},
};

/* Parses an unsigned decimal integer of the whole of [s, s+len).  RLT_EPARSE or RLT_ERANGE. */
static int parse_uint(const char *s, size_t len, int64_t *out)
{
    if (len == 0) return RLT_EPARSE;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return RLT_EPARSE;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v))
            return RLT_ERANGE;
    }
    *out = v;
    return RLT_OK;
}

int rlt_duration_parse(const char *text, size_t len, rlt_ns default_unit, rlt_ns *out)
{
    if (!text || !out) return RLT_EINVAL;
    size_t digits = 0;
    while (digits < len && text[digits] >= '0' && text[digits] <= '9')
        digits++;
    rlt_ns unit = 0;
    if (digits == len) {
        unit = default_unit;
    } else {
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
            if (strlen(units[u].name) == len - digits &&
                memcmp(units[u].name, text + digits, len - digits) == 0)
                unit = units[u].ns;
    }
    if (unit <= 0) return RLT_EPARSE;
    int64_t n = 1; /* a bare unit means one of it: "100/s" */
    if (digits > 0) {
        int rc = parse_uint(text, digits, &n);
        if (rc) return rc;
    } else if (len == 0) {
        return RLT_EPARSE;
    }
    if (__builtin_mul_overflow(n, unit, out)) return RLT_ERANGE;
    return RLT_OK;
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, const char *part, size_t partlen)
{
    if (err && errlen) snprintf(err, errlen, fmt, (int)partlen, part);
    return rc;
}

/* ---- options every algorithm takes: block=, jitter= ----------------------------------- */

typedef struct any_opts {
    rlt_ns block, block_max;
    int64_t factor, jitter;
    bool has_block, has_jitter;
} any_opts;

/* "block=DURATION" or "block=DURATION*FACTOR..MAX"; "jitter=P%".  Returns 1 when the option at
 * o[0..olen) is one of these (parsed into *a), 0 when it is not, or a negative status with the
 * message in err. */
static int parse_any_option(const char *o, size_t olen, any_opts *a, char *err, size_t errlen)
{
    if (olen >= 6 && memcmp(o, "block=", 6) == 0) {
        const char *v = o + 6, *end = o + olen;
        if (a->has_block)
            return fail(err, errlen, RLT_EPARSE, "option \"%.*s\": given twice", o, olen);
        a->has_block = true;
        const char *star = memchr(v, '*', (size_t)(end - v));
        const char *dots = NULL;
        for (const char *q = star ? star : end; q && q + 1 < end; q++)
            if (q[0] == '.' && q[1] == '.') {
                dots = q;
                break;
            }
        int rc = rlt_duration_parse(v, (size_t)((star ? star : end) - v), 0, &a->block);
        a->factor = 1;
        if (!rc && star) {
            rc = dots ? parse_uint(star + 1, (size_t)(dots - star - 1), &a->factor) : RLT_EPARSE;
            if (!rc) rc = rlt_duration_parse(dots + 2, (size_t)(end - dots - 2), 0, &a->block_max);
            if (!rc && (a->factor < 2 || a->block_max < a->block)) rc = RLT_EPARSE;
        }
        if (rc == RLT_ERANGE)
            return fail(err, errlen, rc, "option \"%.*s\": value too large", o, olen);
        if (rc || a->block <= 0)
            return fail(err, errlen, RLT_EPARSE,
                        "option \"%.*s\": expected block=DURATION or block=DURATION*FACTOR..MAX "
                        "(e.g. block=10m, block=1m*2..1h; FACTOR >= 2, MAX >= DURATION)",
                        o, olen);
        return 1;
    }
    if (olen >= 7 && memcmp(o, "jitter=", 7) == 0) {
        if (a->has_jitter)
            return fail(err, errlen, RLT_EPARSE, "option \"%.*s\": given twice", o, olen);
        a->has_jitter = true;
        int rc =
            olen > 8 && o[olen - 1] == '%' ? parse_uint(o + 7, olen - 8, &a->jitter) : RLT_EPARSE;
        if (rc || a->jitter < 1 || a->jitter > 100)
            return fail(err, errlen, RLT_EPARSE,
                        "option \"%.*s\": expected jitter=P%% with P an integer 1..100 "
                        "(e.g. jitter=10%%)",
                        o, olen);
        return 1;
    }
    return 0;
}

/* ---- adaptive concurrency's options (applied by adaptive_policy.c) ---------------------- */

static int adapt_fail(char *err, size_t errlen, const char *o, size_t olen, const char *why)
{
    if (err && errlen) snprintf(err, errlen, "option \"%.*s\": %s", (int)olen, o, why);
    return RLT_EPARSE;
}

static int parse_count_1e7(const char *v, size_t len, int64_t *out)
{
    int64_t x = 0;
    if (len == 0 || len > 7) return RLT_EPARSE;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') return RLT_EPARSE;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return RLT_OK;
}

int rlt__adapt_option(const char *o, size_t olen, rlt__adapt_opts *a, char *err, size_t errlen)
{
    static const char *const keys[] = {"adaptive=", "min=", "init=", "slow="};
    for (unsigned k = 0; k < 4; k++) {
        size_t kl = strlen(keys[k]);
        if (olen < kl || memcmp(o, keys[k], kl) != 0) continue;
        const char *v = o + kl;
        size_t vl = olen - kl;
        if (a->seen & (1u << k)) return adapt_fail(err, errlen, o, olen, "given twice");
        a->seen |= 1u << k;
        if (k == 0) {
            if (vl == 4 && memcmp(v, "aimd", 4) == 0)
                a->algo = RLT_ADAPT_AIMD;
            else if (vl == 5 && memcmp(v, "vegas", 5) == 0)
                a->algo = RLT_ADAPT_VEGAS;
            else
                return adapt_fail(err, errlen, o, olen, "expected adaptive=aimd or adaptive=vegas");
        } else if (k == 3) {
            if (rlt_duration_parse(v, vl, 0, &a->slow) || a->slow <= 0 ||
                a->slow > RLT_ADAPT_LATENCY_MAX)
                return adapt_fail(err, errlen, o, olen, "expected a duration up to 1h, e.g. slow=500ms");
        } else if (parse_count_1e7(v, vl, k == 1 ? &a->min : &a->init) ||
                   (k == 1 ? a->min : a->init) < 1) {
            return adapt_fail(err, errlen, o, olen, "expected a positive integer up to 65536");
        }
        return 1;
    }
    return 0;
}

/* The tz=ZONE option of a calendar window: the zone is read here, once. */
static int calendar_option(rlt_zone *zone, int32_t months, const char *v, size_t vlen, char *err,
                           size_t errlen)
{
    if (months == 0)
        return fail(err, errlen, RLT_EPARSE,
                    "option \"tz=%.*s\" applies to calendar periods only (fixed_window:N/1mo "
                    "or /1y)",
                    v, vlen);
    if (zone->name[0])
        return fail(err, errlen, RLT_EPARSE, "option \"tz=%.*s\": given twice", v, vlen);
    char zerr[160];
    int rc = rlt_zone_load(zone, v, vlen, zerr, sizeof zerr);
    if (rc == RLT_ENOMEM)
        return fail(err, errlen, rc, "option \"tz=%.*s\": out of memory", v, vlen);
    if (rc) {
        if (err && errlen) snprintf(err, errlen, "option tz=: %s", zerr);
        return RLT_EPARSE;
    }
    return RLT_OK;
}

int rlt_policy_parse(rlt_policy *p, const char *text, size_t len, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!p || !text) return fail(err, errlen, RLT_EINVAL, "no policy text%.*s", "", 0);
    if (memchr(text, '\0', len))
        return fail(err, errlen, RLT_EPARSE, "policy text contains a NUL byte%.*s", "", 0);
    const char *end = text + len;
    const char *colon = memchr(text, ':', len);
    if (!colon)
        return fail(err, errlen, RLT_EPARSE,
                    "policy \"%.*s\": expected ALGORITHM:N/PERIOD, e.g. gcra:100/1m", text, len);
    rlt_algo algo = rlt_algo_from_name(text, (size_t)(colon - text));
    if (algo == RLT_ALGO_NONE)
        return fail(err, errlen, RLT_EPARSE,
                    "unknown algorithm \"%.*s\" (expected fixed_window, sliding_log, "
                    "sliding_window, token_bucket, gcra, leaky_bucket or concurrency)",
                    text, (size_t)(colon - text));

    const char *rate = colon + 1;
    const char *comma = memchr(rate, ',', (size_t)(end - rate));
    const char *rate_end = comma ? comma : end;
    const char *slash = memchr(rate, '/', (size_t)(rate_end - rate));
    const char *n_end = slash ? slash : rate_end;
    int64_t limit = 0;
    rlt_ns period = 0;
    int rc = parse_uint(rate, (size_t)(n_end - rate), &limit);
    if (rc == RLT_ERANGE)
        return fail(err, errlen, rc, "limit \"%.*s\" is too large", rate, (size_t)(n_end - rate));
    if (rc || limit <= 0)
        return fail(err, errlen, RLT_EPARSE, "limit \"%.*s\": expected a positive integer", rate,
                    (size_t)(n_end - rate));
    int32_t months = 0; /* calendar windows: "/1mo", "/1y" (calendar.c) */
    int cal =
        slash ? rlt__calendar_period(slash + 1, (size_t)(rate_end - slash - 1), &months, &period)
              : 0;
    if (cal < 0)
        return fail(err, errlen, cal,
                    "period \"%.*s\": expected a calendar period of 1 to 1200 months, e.g. "
                    "1mo, 3mo or 1y",
                    slash + 1, (size_t)(rate_end - slash - 1));
    if (cal > 0 && algo != RLT_FIXED_WINDOW)
        return fail(err, errlen, RLT_EPARSE,
                    "period \"%.*s\": calendar periods (mo, y) apply to fixed_window only",
                    slash + 1, (size_t)(rate_end - slash - 1));
    if (cal > 0) {
        /* period: the nominal mean length, set above */
    } else if (slash) {
        rc = rlt_duration_parse(slash + 1, (size_t)(rate_end - slash - 1), 0, &period);
        if (rc == RLT_ERANGE)
            return fail(err, errlen, rc, "period \"%.*s\" is too large", slash + 1,
                        (size_t)(rate_end - slash - 1));
        if (rc || period <= 0)
            return fail(err, errlen, RLT_EPARSE,
                        "period \"%.*s\": expected a positive integer with a unit "
                        "(ns us ms s m h d), e.g. 1s or 15m",
                        slash + 1, (size_t)(rate_end - slash - 1));
    } else if (algo != RLT_CONCURRENCY) {
        return fail(err, errlen, RLT_EPARSE, "\"%.*s\": expected N/PERIOD, e.g. 100/1m", rate,
                    (size_t)(rate_end - rate));
    }

    int64_t burst = 0, queue = 0, delay = 0;
    bool nodelay = false;
    rlt_zone zone;
    memset(&zone, 0, sizeof zone);
    unsigned seen = 0; /* each option once: 1 burst, 2 queue (or nginx's burst), 4 delay */
    any_opts any = {0};
    rlt__adapt_opts adapt = {0};
    int64_t reserve = -1;
    const char *opt = comma;
    while (opt && opt < end) {
        const char *o = opt + 1;
        const char *next = memchr(o, ',', (size_t)(end - o));
        const char *o_end = next ? next : end;
        const char *eq = memchr(o, '=', (size_t)(o_end - o));
        size_t olen = (size_t)(o_end - o);
        int any_rc = parse_any_option(o, olen, &any, err, errlen);
        if (any_rc == 0) any_rc = rlt__adapt_option(o, olen, &adapt, err, errlen);
        if (any_rc == 0 && olen >= 8 && memcmp(o, "reserve=", 8) == 0) {
            int64_t v = -1;
            if (reserve >= 0 || olen < 10 || o[olen - 1] != '%' ||
                parse_uint(o + 8, olen - 9, &v) || v > 100)
                return fail(err, errlen, RLT_EPARSE,
                            "option \"%.*s\": expected reserve=P%% with P 0..100, once (the "
                            "share kept from each lower priority class)",
                            o, olen);
            reserve = v;
            any_rc = 1;
        }
        if (any_rc < 0) return any_rc;
        if (any_rc > 0) {
            opt = next;
            continue;
        }
        if (eq && eq - o == 2 && memcmp(o, "tz", 2) == 0) {
            if ((rc =
                     calendar_option(&zone, months, eq + 1, (size_t)(o_end - eq - 1), err, errlen)))
                return rc;
        } else if (!eq && olen == 7 && memcmp(o, "nodelay", 7) == 0 && algo == RLT_LEAKY_BUCKET) {
            if (seen & 4)
                return fail(err, errlen, RLT_EPARSE,
                            "option \"%.*s\": give delay= or nodelay, once", o, olen);
            seen |= 4;
            nodelay = true;
        } else if (!eq) {
            return fail(err, errlen, RLT_EPARSE,
                        "option \"%.*s\": expected burst=B, queue=Q, delay=D or nodelay", o, olen);
        } else {
            size_t klen = (size_t)(eq - o);
            int64_t v = 0;
            rc = parse_uint(eq + 1, (size_t)(o_end - eq - 1), &v);
            if (rc == RLT_ERANGE)
                return fail(err, errlen, rc, "option \"%.*s\": value too large", o, olen);
            if (rc)
                return fail(err, errlen, RLT_EPARSE,
                            "option \"%.*s\": expected a non-negative integer", o, olen);
            bool bucket = algo == RLT_TOKEN_BUCKET || algo == RLT_GCRA;
            unsigned bit = klen == 5 && memcmp(o, "delay", 5) == 0 ? 4u : bucket ? 1u : 2u;
            if (seen & bit)
                return fail(err, errlen, RLT_EPARSE,
                            "option \"%.*s\": given twice (burst/queue and delay/nodelay once "
                            "each)",
                            o, olen);
            seen |= bit;
            if (klen == 5 && memcmp(o, "burst", 5) == 0 && bucket) {
                if (v == 0)
                    return fail(err, errlen, RLT_EPARSE, "option \"%.*s\": burst must be >= 1", o,
                                olen);
                burst = v;
            } else if (klen == 5 && memcmp(o, "burst", 5) == 0 && algo == RLT_LEAKY_BUCKET) {
                queue = v; /* nginx spells the queue "burst" */
            } else if (klen == 5 && memcmp(o, "queue", 5) == 0 && algo == RLT_LEAKY_BUCKET) {
                queue = v;
            } else if (klen == 5 && memcmp(o, "delay", 5) == 0 && algo == RLT_LEAKY_BUCKET) {
                delay = v;
            } else {
                return fail(err, errlen, RLT_EPARSE,
                            "option \"%.*s\" does not apply to this algorithm (token_bucket and "
                            "gcra take burst=; leaky_bucket takes queue=, delay=, nodelay; every "
                            "algorithm takes block= and jitter=)",
                            o, olen);
            }
        }
        opt = next;
    }
    if (nodelay) delay = queue;
    rc = rlt_policy_init(p, algo, limit, period, burst, queue, delay);
    if (rc == RLT_ERANGE)
        return fail(err, errlen, rc,
                    "policy \"%.*s\": numbers too large (the state or its arithmetic would "
                    "overflow)",
                    text, len);
    if (rc) return fail(err, errlen, RLT_EPARSE, "policy \"%.*s\": invalid numbers", text, len);
    if ((any.has_block && rlt_policy_set_block(p, any.block, any.factor, any.block_max)) ||
        (any.has_jitter && rlt_policy_set_jitter(p, any.jitter)))
        return fail(err, errlen, RLT_EPARSE, "policy \"%.*s\": invalid block= or jitter=", text,
                    len);
    if (months) {
        p->months = months;
        p->zone = zone;
    }
    if (reserve > 0) p->reserve = (int32_t)reserve;
    return rlt__adapt_apply(p, &adapt, text, len, err, errlen);
}

/* Writes a duration in the largest unit that divides it exactly. */
static int format_duration(char *buf, size_t cap, rlt_ns d)
{
    size_t u = sizeof units / sizeof units[0];
    while (u-- > 1)
        if (d % units[u].ns == 0) break;
    return snprintf(buf, cap, "%lld%s", (long long)(d / units[u].ns), units[u].name);
}

/* Appends ",block=..." and ",jitter=P%" to the n bytes of buf; the length or RLT_ENOSPC. */
static int format_any_options(const rlt_policy *p, char *buf, size_t cap, size_t n)
{
    char b[32], m[32];
    int k = 0;
    if (p->block > 0) {
        format_duration(b, sizeof b, p->block);
        format_duration(m, sizeof m, p->block_max);
        k = p->block_factor > 1
                ? snprintf(buf + n, cap - n, ",block=%s*%lld..%s", b, (long long)p->block_factor, m)
                : snprintf(buf + n, cap - n, ",block=%s", b);
        if (k < 0 || (size_t)k >= cap - n) return RLT_ENOSPC;
        n += (size_t)k;
    }
    if (p->jitter > 0) {
        k = snprintf(buf + n, cap - n, ",jitter=%lld%%", (long long)p->jitter);
        if (k < 0 || (size_t)k >= cap - n) return RLT_ENOSPC;
        n += (size_t)k;
    }
    if (p->reserve > 0) {
        k = snprintf(buf + n, cap - n, ",reserve=%d%%", (int)p->reserve);
        if (k < 0 || (size_t)k >= cap - n) return RLT_ENOSPC;
        n += (size_t)k;
    }
    return rlt__adapt_format(p, buf, cap, n);
}

int rlt_policy_format(const rlt_policy *p, char *buf, size_t cap)
{
    if (!p || !buf || p->scale_ <= 0) return RLT_EINVAL;
    char period[32 + RLT_ZONE_NAME_MAX];
    if (p->months == 0)
        format_duration(period, sizeof period, p->period);
    else if (rlt__calendar_format(p, period, sizeof period) < 0)
        return RLT_EINVAL;
    int n;
    switch (p->algo) {
    case RLT_TOKEN_BUCKET:
    case RLT_GCRA:
        if (p->burst != p->limit)
            n = snprintf(buf, cap, "%s:%lld/%s,burst=%lld", rlt_algo_name(p->algo),
                         (long long)p->limit, period, (long long)p->burst);
        else
            n = snprintf(buf, cap, "%s:%lld/%s", rlt_algo_name(p->algo), (long long)p->limit,
                         period);
        break;
    case RLT_LEAKY_BUCKET:
        if (p->delay > 0)
            n = snprintf(buf, cap, "leaky_bucket:%lld/%s,queue=%lld,delay=%lld",
                         (long long)p->limit, period, (long long)p->queue, (long long)p->delay);
        else
            n = snprintf(buf, cap, "leaky_bucket:%lld/%s,queue=%lld", (long long)p->limit, period,
                         (long long)p->queue);
        break;
    default:
        n = snprintf(buf, cap, "%s:%lld/%s", rlt_algo_name(p->algo), (long long)p->limit, period);
        break;
    }
    if (n < 0 || (size_t)n >= cap) return RLT_ENOSPC;
    return format_any_options(p, buf, cap, (size_t)n);
}
