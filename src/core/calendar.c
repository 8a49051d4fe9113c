/* Calendar windows: months and years in a named time zone, for the fixed window.
 *
 * The zone.  rlt_zone holds one POSIX TZ rule (the footer of a TZif v2+ file) as integers:
 * a standard offset and, optionally, a daylight offset with the two dates of the year that
 * switch between them.  offset(t), for Unix second t: among the six changes of the years
 * y-1, y, y+1 around t's year y, the latest one at or before t says which offset holds (a
 * start and an end at the same instant: the start wins, which makes "0/0,J365/25", DST all
 * year, come out right).  Without DST, offset(t) is the standard offset.
 *
 * A change's instant: the rule gives a local date (Jn, n or Mm.w.d) and a local time of day
 * s (-167h..167h); the start is read in standard time, the end in daylight time, so
 *     start(y) = days(date) x 86400 + s - std_off,   end(y) = days(date) x 86400 + s - dst_off
 * with days() Howard Hinnant's days_from_civil: days since 1970-01-01, exact for any year.
 *
 * Month starts.  Month M (months since 1970-01 in local time) starts at local wall time
 * T = days(y, m, 1) x 86400, and local(u) = u + offset(u).  Its start is the first u with
 * local(u) >= T: between two changes the offset is a constant o, so on that piece [a, b) the
 * first such u is max(a, T - o) when that is < b; the pieces in order give the first one.
 * A local midnight skipped by a change starts the month at the change; one that happens
 * twice starts it at the first.  Boundaries are whole seconds.
 *
 * Windows.  A calendar policy of `months` months has windows [start(k x months),
 * start((k+1) x months)), k = floor(M / months), counted from 1970-01 (so /3mo is quarters,
 * /1y calendar years).  The instant of a decision is origin + now, in Unix ns, saturated at
 * the ends of int64: time there stands still, which never mints.  The window index is what
 * the fixed window keeps in its state, so a state means the same window under any origin. */
#include "internal.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>

#define DAY_S INT64_C(86400)
#define NOMINAL_MONTH_S INT64_C(2629746) /* 365.2425 days / 12 */
#define MONTHS_MAX 1200                  /* 100 years */
#define MONTH_LIMIT (INT64_C(1) << 36)
#define TIME_LIMIT (INT64_C(1) << 55)
/* A rule's transition time, as the grammar takes it (RFC 8536 3.3.1: hours -167..167, then
 * minutes and seconds): up to 167:59:59 either way.  The parser and rlt__zone_valid share it,
 * so a zone the parser accepts is one a policy runs on. */
#define RULE_SECS_MAX (167 * 3600 + 59 * 60 + 59)

#ifndef RLT_ZONEINFO_DIR
#define RLT_ZONEINFO_DIR "/usr/share/zoneinfo"
#endif

static int64_t floor_mod(int64_t a, int64_t b)
{
    return a - rlt__floor_div(a, b) * b;
}

int64_t rlt__days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = rlt__floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The civil year and month (1..12) of day z since 1970-01-01. */
static void civil_from_days(int64_t z, int64_t *y, int64_t *m)
{
    z += 719468;
    int64_t era = rlt__floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

static bool leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* The day (since 1970-01-01) of rule date `r` in year y.  Any field values are safe: they are
 * clamped (rlt__zone_valid refuses them where policies are made). */
static int64_t rule_day(const rlt_zone_date *r, int64_t y)
{
    int64_t jan1 = rlt__days_from_civil(y, 1, 1);
    if (r->kind == 0) {
        int64_t n = r->day < 1 ? 1 : r->day > 365 ? 365 : r->day;
        return jan1 + n - 1 + (leap(y) && n >= 60);
    }
    if (r->kind == 1) return jan1 + (r->day < 0 ? 0 : r->day > 365 ? 365 : r->day);
    int64_t m = r->month < 1 ? 1 : r->month > 12 ? 12 : r->month;
    int64_t w = r->week < 1 ? 1 : r->week > 5 ? 5 : r->week;
    int64_t first = rlt__days_from_civil(y, m, 1);
    int64_t next = m == 12 ? rlt__days_from_civil(y + 1, 1, 1) : rlt__days_from_civil(y, m + 1, 1);
    int64_t wd = floor_mod(first + 4, 7); /* 1970-01-01 was a Thursday */
    int64_t d = first + floor_mod(floor_mod(r->day, 7) - wd, 7) + 7 * (w - 1);
    while (d >= next)
        d -= 7; /* week 5: the last such weekday */
    return d;
}

static int32_t clamp_secs(int32_t s)
{
    return s < -RULE_SECS_MAX ? -RULE_SECS_MAX : s > RULE_SECS_MAX ? RULE_SECS_MAX : s;
}

/* One change: its Unix second and the offset from then on. */
typedef struct change {
    int64_t at;
    int32_t off;
    int start; /* 1: into DST */
} change;

/* The changes of the years y-2..y+2, sorted (an end before a start at the same second): every
 * change that can bear on an instant or a month start of the years y-1..y+1 (a change lies
 * within 167 h + 25 h of its year), so one span answers a decision's few questions. */
typedef struct span {
    change c[10];
} span;

static void span_of(const rlt_zone *z, int64_t y, span *s)
{
    change *c = s->c;
    int n = 0;
    for (int64_t yy = y - 2; yy <= y + 2; yy++) {
        c[n++] = (change){rule_day(&z->start, yy) * DAY_S + clamp_secs(z->start.secs) - z->std_off,
                          z->dst_off, 1};
        c[n++] = (change){rule_day(&z->end, yy) * DAY_S + clamp_secs(z->end.secs) - z->dst_off,
                          z->std_off, 0};
    }
    for (int i = 1; i < 10; i++)
        for (int j = i; j > 0 && (c[j].at < c[j - 1].at ||
                                  (c[j].at == c[j - 1].at && c[j].start < c[j - 1].start));
             j--) {
            change t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
}

static int64_t year_of(int64_t t)
{
    int64_t y, m;
    civil_from_days(rlt__floor_div(t, DAY_S), &y, &m);
    return y;
}

/* offset(t) from the span of t's year (y-2's changes all lie before t). */
static int32_t span_offset(const rlt_zone *z, const span *s, int64_t t)
{
    int32_t off = z->std_off;
    for (int i = 0; i < 10 && s->c[i].at <= t; i++)
        off = s->c[i].off;
    return off;
}

/* The start of `month`, whose year lies within the span's y-1..y+1.  The piece before the
 * span's first change (in y-2, long before) cannot hold the answer, so its offset is moot. */
static int64_t span_month_start(const rlt_zone *z, const span *s, int64_t month)
{
    int64_t y = 1970 + rlt__floor_div(month, 12);
    int64_t T = rlt__days_from_civil(y, floor_mod(month, 12) + 1, 1) * DAY_S;
    if (!z->has_dst) return T - z->std_off;
    int64_t a = INT64_MIN;
    int32_t o = z->std_off;
    for (int i = 0; i <= 10; i++) {
        int64_t b = i < 10 ? s->c[i].at : INT64_MAX;
        int64_t u = T - o < a ? a : T - o;
        if (u < b) return u;
        a = b;
        o = s->c[i].off;
    }
    return T - o; /* not reached: the last piece is unbounded */
}

/* offset(t) for |t| within TIME_LIMIT. */
static int32_t offset_at(const rlt_zone *z, int64_t t)
{
    if (!z->has_dst) return z->std_off;
    span s;
    span_of(z, year_of(t + z->std_off), &s);
    return span_offset(z, &s, t);
}

int rlt_zone_offset(const rlt_zone *z, int64_t t, int32_t *off)
{
    if (!z || !off) return RLT_EINVAL;
    if (t > TIME_LIMIT || t < -TIME_LIMIT) return RLT_ERANGE;
    *off = offset_at(z, t);
    return RLT_OK;
}

/* The first Unix second of local month `month` (|month| within MONTH_LIMIT). */
static int64_t month_start(const rlt_zone *z, int64_t month)
{
    span s;
    if (z->has_dst) span_of(z, 1970 + rlt__floor_div(month, 12), &s);
    return span_month_start(z, &s, month);
}

int rlt_zone_month_start(const rlt_zone *z, int64_t month, int64_t *t)
{
    if (!z || !t) return RLT_EINVAL;
    if (month > MONTH_LIMIT || month < -MONTH_LIMIT) return RLT_ERANGE;
    *t = month_start(z, month);
    return RLT_OK;
}

/* Unix second -> ns, saturating. */
static int64_t s_to_ns(int64_t s)
{
    int64_t r;
    if (__builtin_mul_overflow(s, RLT_NS_PER_S, &r)) return s > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

void rlt__calendar_window(const rlt_policy *p, rlt_ns now, int64_t *win, rlt_ns *end)
{
    const rlt_zone *z = &p->zone;
    int64_t u = rlt__sat_add(p->origin, now);
    int64_t t = rlt__floor_div(u, RLT_NS_PER_S);
    span s;
    if (z->has_dst) span_of(z, year_of(t + z->std_off), &s);
    int32_t off = z->has_dst ? span_offset(z, &s, t) : z->std_off;
    int64_t y, m;
    civil_from_days(rlt__floor_div(t + off, DAY_S), &y, &m);
    int64_t month = (y - 1970) * 12 + m - 1;
    /* The local date's month is the window's but for the instants between a repeated local
     * midnight's first and second occurrence: step to the month whose start bounds t. */
    int64_t next;
    int64_t here = span_month_start(z, &s, month);
    if (t < here) {
        next = here;
        month--;
    } else {
        next = span_month_start(z, &s, month + 1);
        if (t >= next) {
            month++;
            next = span_month_start(z, &s, month + 1);
        }
    }
    *win = rlt__floor_div(month, p->months);
    if (!end) return;
    /* one-month windows end where the next month starts, already known */
    *end = p->months == 1 ? rlt__sat_sub(s_to_ns(next), p->origin) : rlt__calendar_end(p, *win);
}

rlt_ns rlt__calendar_end(const rlt_policy *p, int64_t win)
{
    int64_t m;
    if (__builtin_add_overflow(win, 1, &m) || __builtin_mul_overflow(m, p->months, &m) ||
        m > MONTH_LIMIT || m < -MONTH_LIMIT)
        return m > 0 || win >= 0 ? INT64_MAX : INT64_MIN;
    return rlt__sat_sub(s_to_ns(month_start(&p->zone, m)), p->origin);
}

bool rlt__zone_valid(const rlt_zone *z)
{
    if (memchr(z->name, '\0', sizeof z->name) == NULL) return false;
    if (z->std_off < -25 * 3600 || z->std_off > 25 * 3600) return false;
    if (!z->has_dst) return true;
    if (z->has_dst != 1 || z->dst_off < -25 * 3600 || z->dst_off > 25 * 3600) return false;
    const rlt_zone_date *r[2] = {&z->start, &z->end};
    for (int i = 0; i < 2; i++) {
        if (r[i]->secs < -RULE_SECS_MAX || r[i]->secs > RULE_SECS_MAX) return false;
        if (r[i]->kind == 0 && (r[i]->day < 1 || r[i]->day > 365)) return false;
        if (r[i]->kind == 1 && (r[i]->day < 0 || r[i]->day > 365)) return false;
        if (r[i]->kind == 2 && (r[i]->month < 1 || r[i]->month > 12 || r[i]->week < 1 ||
                                r[i]->week > 5 || r[i]->day < 0 || r[i]->day > 6))
            return false;
        if (r[i]->kind < 0 || r[i]->kind > 2) return false;
    }
    return true;
}

bool rlt__calendar_valid(const rlt_policy *p)
{
    return p->algo == RLT_FIXED_WINDOW && p->months >= 1 && p->months <= MONTHS_MAX &&
           rlt__zone_valid(&p->zone);
}

/* ---- POSIX TZ rule text ---------------------------------------------------------------- */

typedef struct cursor {
    const char *s, *end;
} cursor;

static int peek(const cursor *c)
{
    return c->s < c->end ? (unsigned char)*c->s : -1;
}

/* Up to `max` digits into *v; at least one. */
static bool digits(cursor *c, int max, int32_t *v)
{
    int n = 0;
    *v = 0;
    while (n < max && peek(c) >= '0' && peek(c) <= '9') {
        *v = *v * 10 + (*c->s++ - '0');
        n++;
    }
    return n > 0;
}

/* A zone abbreviation: three or more letters, or <[A-Za-z0-9+-]{3,}>. */
static bool abbrev(cursor *c)
{
    int n = 0;
    if (peek(c) == '<') {
        c->s++;
        while (peek(c) != '>') {
            int ch = peek(c);
            if (ch < 0 || !((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                            (ch >= '0' && ch <= '9') || ch == '+' || ch == '-'))
                return false;
            c->s++;
            n++;
        }
        c->s++;
    } else {
        while ((peek(c) >= 'A' && peek(c) <= 'Z') || (peek(c) >= 'a' && peek(c) <= 'z')) {
            c->s++;
            n++;
        }
    }
    return n >= 3;
}

/* [+-]hh[:mm[:ss]] with hours up to max_h, as signed seconds. */
static bool hms(cursor *c, int32_t max_h, int32_t *out)
{
    int32_t sign = 1, h, m = 0, s = 0;
    if (peek(c) == '+' || peek(c) == '-') sign = *c->s++ == '-' ? -1 : 1;
    if (!digits(c, 3, &h) || h > max_h) return false;
    if (peek(c) == ':') {
        c->s++;
        if (!digits(c, 2, &m) || m > 59) return false;
        if (peek(c) == ':') {
            c->s++;
            if (!digits(c, 2, &s) || s > 59) return false;
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return true;
}

static bool rule_date(cursor *c, rlt_zone_date *r)
{
    memset(r, 0, sizeof *r);
    if (peek(c) == 'J') {
        c->s++;
        r->kind = 0;
        if (!digits(c, 3, &r->day) || r->day < 1 || r->day > 365) return false;
    } else if (peek(c) == 'M') {
        c->s++;
        r->kind = 2;
        if (!digits(c, 2, &r->month) || r->month < 1 || r->month > 12) return false;
        if (peek(c) != '.') return false;
        c->s++;
        if (!digits(c, 1, &r->week) || r->week < 1 || r->week > 5) return false;
        if (peek(c) != '.') return false;
        c->s++;
        if (!digits(c, 1, &r->day) || r->day > 6) return false;
    } else {
        r->kind = 1;
        if (!digits(c, 3, &r->day) || r->day > 365) return false;
    }
    r->secs = 2 * 3600;
    if (peek(c) == '/') {
        c->s++;
        if (!hms(c, 167, &r->secs)) return false;
    }
    return true;
}

int rlt_zone_parse_rule(rlt_zone *z, const char *rule, size_t len)
{
    if (!z || !rule) return RLT_EINVAL;
    memset(z, 0, sizeof *z);
    cursor c = {rule, rule + len};
    int32_t off;
    if (!abbrev(&c) || !hms(&c, 24, &off)) return RLT_EPARSE;
    z->std_off = -off; /* POSIX offsets count west of Greenwich */
    if (peek(&c) < 0) return RLT_OK;
    if (!abbrev(&c)) return RLT_EPARSE;
    z->dst_off = z->std_off + 3600;
    if (peek(&c) != ',' && peek(&c) >= 0) {
        if (!hms(&c, 24, &off)) return RLT_EPARSE;
        z->dst_off = -off;
    }
    if (peek(&c) != ',') return RLT_EPARSE; /* DST without a rule: POSIX leaves it open */
    c.s++;
    if (!rule_date(&c, &z->start) || peek(&c) != ',') return RLT_EPARSE;
    c.s++;
    if (!rule_date(&c, &z->end) || peek(&c) >= 0) return RLT_EPARSE;
    z->has_dst = 1;
    /* Each field is in its own range, but a default daylight offset (standard + 1 h) can
     * leave the zones' +-25 h: what the policy check would refuse, the parser refuses. */
    return rlt__zone_valid(z) ? RLT_OK : RLT_EPARSE;
}

/* ---- TZif files (RFC 8536) ------------------------------------------------------------- */

static uint64_t be32(const unsigned char *b)
{
    return (uint64_t)b[0] << 24 | (uint64_t)b[1] << 16 | (uint64_t)b[2] << 8 | b[3];
}

/* The size of a TZif data block after header `h`, with `tsize`-byte times; or 0 when the
 * header is not a TZif header.  Counts are u32, so the sum cannot overflow uint64. */
static uint64_t block_size(const unsigned char *h, uint64_t tsize)
{
    if (memcmp(h, "TZif", 4) != 0) return 0;
    uint64_t isut = be32(h + 20), isstd = be32(h + 24), leapc = be32(h + 28), timec = be32(h + 32),
             typec = be32(h + 36), charc = be32(h + 40);
    return 44 + timec * tsize + timec + typec * 6 + charc + leapc * (tsize + 4) + isstd + isut;
}

int rlt_zone_from_tzif(rlt_zone *z, const void *data, size_t len)
{
    if (!z || !data) return RLT_EINVAL;
    memset(z, 0, sizeof *z);
    const unsigned char *b = data;
    if (len < 44) return RLT_ECORRUPT;
    uint64_t v1 = block_size(b, 4);
    if (v1 == 0 || b[4] < '2') return RLT_ECORRUPT;
    if (v1 + 44 > len) return RLT_ECORRUPT;
    uint64_t v2 = block_size(b + v1, 8);
    if (v2 == 0 || v1 + v2 >= len || b[v1 + v2] != '\n') return RLT_ECORRUPT;
    const unsigned char *f = b + v1 + v2 + 1, *end = b + len;
    const unsigned char *nl = memchr(f, '\n', (size_t)(end - f));
    if (!nl) return RLT_ECORRUPT;
    if (nl == f) return RLT_EPARSE; /* no rule: the zone's future is not given */
    return rlt_zone_parse_rule(z, (const char *)f, (size_t)(nl - f));
}

static bool zone_name_ok(const char *name, size_t len)
{
    if (len == 0 || len >= RLT_ZONE_NAME_MAX) return false;
    size_t part = 0;
    for (size_t i = 0; i <= len; i++) {
        char ch = i < len ? name[i] : '/';
        if (ch == '/') {
            if (part == 0) return false; /* empty part, leading or trailing '/' */
            part = 0;
        } else if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                   (ch >= '0' && ch <= '9') || ch == '_' || ch == '+' || ch == '-') {
            part++;
        } else {
            return false; /* no '.': no "..", no "posixrules.bak" */
        }
    }
    return true;
}

#define TZIF_MAX (1 << 20)

int rlt_zone_load(rlt_zone *z, const char *name, size_t len, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!z || !name) return RLT_EINVAL;
    memset(z, 0, sizeof *z);
    if (!zone_name_ok(name, len)) {
        if (err && errlen)
            snprintf(err, errlen,
                     "time zone \"%.*s\": expected a tz database name such as Europe/Paris",
                     (int)(len > 64 ? 64 : len), name);
        return RLT_EPARSE;
    }
    char path[sizeof RLT_ZONEINFO_DIR + RLT_ZONE_NAME_MAX + 1];
    snprintf(path, sizeof path, "%s/%.*s", RLT_ZONEINFO_DIR, (int)len, name);
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t n = 0;
    int rc = RLT_EPARSE;
    bool found = false;
    if (f) {
        /* the file's size, to read it whole in one buffer of that size (a few KiB) */
        long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
        if (size > 0 && size <= TZIF_MAX && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc((size_t)size);
            if (!buf) {
                fclose(f);
                return RLT_ENOMEM;
            }
            n = fread(buf, 1, (size_t)size, f);
            found = !ferror(f); /* a directory opens, and fails to read */
            rc = found ? rlt_zone_from_tzif(z, buf, n) : RLT_EPARSE;
            free(buf);
        } else {
            rc = RLT_EPARSE; /* empty, a directory, or too large to be a zone: not one */
        }
        fclose(f);
    }
    if (rc != RLT_OK) {
        memset(z, 0, sizeof *z);
        if (err && errlen)
            snprintf(err, errlen,
                     !found             ? "unknown time zone \"%.*s\" (not in %s)"
                     : rc == RLT_EPARSE ? "time zone \"%.*s\" (in %s) has no usable rule"
                                        : "time zone \"%.*s\" (in %s): damaged file",
                     (int)len, name, RLT_ZONEINFO_DIR);
        return rc == RLT_ECORRUPT ? RLT_EPARSE : rc;
    }
    memcpy(z->name, name, len);
    z->name[len] = '\0';
    return RLT_OK;
}

/* ---- policies -------------------------------------------------------------------------- */

int rlt__calendar_period(const char *s, size_t len, int32_t *months, rlt_ns *nominal)
{
    size_t ulen = len >= 2 && memcmp(s + len - 2, "mo", 2) == 0 ? 2
                  : len >= 1 && s[len - 1] == 'y'               ? 1
                                                                : 0;
    if (ulen == 0) return 0;
    int64_t n = 1, per = ulen == 2 ? 1 : 12;
    size_t nd = len - ulen;
    if (nd > 0) {
        if (nd > 4) return RLT_ERANGE;
        n = 0;
        for (size_t i = 0; i < nd; i++) {
            if (s[i] < '0' || s[i] > '9') return RLT_EPARSE;
            n = n * 10 + (s[i] - '0');
        }
    }
    if (n <= 0) return RLT_EPARSE;
    if (n * per > MONTHS_MAX) return RLT_ERANGE;
    *months = (int32_t)(n * per);
    *nominal = n * per * NOMINAL_MONTH_S * RLT_NS_PER_S;
    return 1;
}

int rlt__calendar_format(const rlt_policy *p, char *buf, size_t cap)
{
    int n = p->months % 12 == 0 ? snprintf(buf, cap, "%dy", p->months / 12)
                                : snprintf(buf, cap, "%dmo", p->months);
    if (n < 0 || (size_t)n >= cap) return RLT_ENOSPC;
    if (p->zone.name[0]) {
        int m = snprintf(buf + n, cap - (size_t)n, ",tz=%s", p->zone.name);
        if (m < 0 || (size_t)m >= cap - (size_t)n) return RLT_ENOSPC;
        n += m;
    }
    return n;
}

int rlt_policy_set_origin(rlt_policy *p, rlt_ns origin)
{
    if (!p) return RLT_EINVAL;
    p->origin = origin;
    return RLT_OK;
}

int rlt_policy_copy_calendar(rlt_policy *dst, const rlt_policy *src)
{
    if (!dst || !src) return RLT_EINVAL;
    if (src->months == 0) return RLT_OK;
    rlt_policy q = *dst;
    q.months = src->months;
    q.origin = src->origin;
    q.zone = src->zone;
    if (!rlt__calendar_valid(&q)) return RLT_EINVAL;
    *dst = q;
    return RLT_OK;
}

bool rlt_policy_calendar_equal(const rlt_policy *a, const rlt_policy *b)
{
    if (!a || !b) return a == b;
    if (a->months != b->months) return false;
    if (a->months == 0) return true;
    const rlt_zone *x = &a->zone, *y = &b->zone;
    return strcmp(x->name, y->name) == 0 && x->std_off == y->std_off && x->dst_off == y->dst_off &&
           x->has_dst == y->has_dst &&
           (!x->has_dst || (memcmp(&x->start, &y->start, sizeof x->start) == 0 &&
                            memcmp(&x->end, &y->end, sizeof x->end) == 0));
}
