/* Internal helpers of the `ratelimit` command: exact decimal text <-> integers, the trace and
 * access-log line parsers, and option parsing.  Kept apart from the subcommands (and from I/O)
 * so that tests/cli can unit-test them; nothing here prints except rlt__opt's usage errors. */
#ifndef RLT_CLI_UTIL_H
#define RLT_CLI_UTIL_H

#include "ratelimit/store.h" /* RLT_KEY_MAX */

#include <stddef.h>
#include <stdint.h>

/* ---- Exact decimals ----------------------------------------------------------------------- */

enum {
    RLT__DEC_OK = 0,
    RLT__DEC_SYNTAX = -1,    /* not "[-]DIGITS[.DIGITS]" */
    RLT__DEC_PRECISION = -2, /* non-zero digits finer than 1/scale */
    RLT__DEC_RANGE = -3      /* value x scale leaves int64 */
};

/* Parses "[-]DIGITS[.DIGITS]" (at least one digit before the point, at least one after it if
 * it is written; no exponent, no '+', no blanks) and returns value x `scale` exactly in *out.
 * `scale` is a power of ten >= 1 (1e9 turns seconds into ns; 1 parses a whole number, where
 * "2.0" is accepted and "2.5" is RLT__DEC_PRECISION).  Returns RLT__DEC_OK or a code above. */
int rlt__dec_parse(const char *s, size_t len, int64_t scale, int64_t *out);

/* A short English reason for a RLT__DEC_* code ("not a decimal number", ...). */
const char *rlt__dec_strerror(int code);

/* Writes value/scale (scale a power of ten >= 1) as an exact decimal with trailing zeros
 * trimmed and no trailing point ("0.25", "3", "-1", "0.000000001") into buf, which must hold
 * at least RLT__DEC_BUF bytes.  Returns the length (without the NUL it also writes). */
#define RLT__DEC_BUF 32
size_t rlt__dec_format(char *buf, int64_t value, int64_t scale);

/* How rlt__frac_format rounds. */
enum { RLT__FLOOR = 0, RLT__ROUND = 1 /* half up */ };

/* Writes num/den (den > 0) with exactly `places` (0..18) decimals, rounded as `mode` says,
 * into buf[0..cap) with a NUL; when `trim`, trailing zeros (and a bare point) are removed.
 * Returns the length, or 0 if it does not fit. */
size_t rlt__frac_format(char *buf, size_t cap, __int128 num, __int128 den, int places, int mode,
                        int trim);

/* The ns in one `name` ("s", "ms", "us", "ns"), or 0 for an unknown unit. */
int64_t rlt__dec_unit_ns(const char *name);

/* ---- Trace lines: "TIME KEY [COST]" -------------------------------------------------------- */

typedef struct rlt__trace_line {
    rlt_ns time;     /* TIME x unit, exact */
    const char *key; /* points into the line */
    size_t klen;
    int64_t cost; /* >= 0; 1 when not written */
    /* Charge after the response (replay only): "TIME KEY ESTIMATE reserve:NAME" reserves,
     * "TIME KEY REAL settle:NAME" settles the reservation NAME (a trace-local token of at
     * most RLT__TRACE_NAME_MAX bytes) at its real cost. */
    enum { RLT__TRACE_REQUEST = 0, RLT__TRACE_RESERVE, RLT__TRACE_SETTLE } op;
    const char *name; /* points into the line; NULL for a request */
    size_t nlen;
} rlt__trace_line;
#define RLT__TRACE_NAME_MAX 64

/* Parses one line (without its '\n'; a trailing '\r' is ignored) of blank-separated fields
 * TIME KEY [COST], TIME a decimal in units of `unit_ns` ns.  When `key_optional`, KEY may be
 * missing too (the simulator's traces: "TIME"), and then out->key is NULL; otherwise a fourth
 * field reserve:NAME or settle:NAME may follow COST (out->op, out->name).  Returns 1 for a
 * request, 0 for a blank line or a comment ('#' as the first non-blank), -1 for a malformed line
 * with a message (no line number) in err[0..errlen). */
int rlt__trace_parse(const char *line, size_t len, int64_t unit_ns, int key_optional,
                     rlt__trace_line *out, char *err, size_t errlen);

/* ---- Combined / common access-log lines ---------------------------------------------------- */

/* One field of an access-log line as written: a bracketed or quoted field without its
 * brackets or quotes (backslash escapes kept). */
typedef struct rlt__field {
    const char *p; /* points into the line */
    size_t n;
} rlt__field;

/* Fields kept per line: the nine of the combined format and seven more appended after them. */
#define RLT__ACCESS_FIELDS 16

typedef struct rlt__access_line {
    int64_t epoch_s;  /* the bracketed timestamp as seconds since 1970-01-01T00:00:00Z */
    const char *host; /* the client address (first field), pointing into the line */
    size_t hlen;
    int nfield; /* fields present: 7 (common), 9 (combined) or more (appended fields) */
    rlt__field field[RLT__ACCESS_FIELDS]; /* field[k - 1] is field k, numbered as below */
} rlt__access_line;

/* Parses an nginx/Apache "combined" (or "common") log line
 *   HOST IDENT USER [DD/Mon/YYYY:HH:MM:SS +ZZZZ] "REQUEST" STATUS BYTES ["REFERER" "AGENT"]
 * followed by any number of appended fields, each quoted or a blank-free token (the first
 * RLT__ACCESS_FIELDS fields are kept), with English month names whatever the locale.
 * Returns 1, 0 for a blank line, -1 with a message in err[0..errlen) for a malformed line. */
int rlt__combined_parse(const char *line, size_t len, rlt__access_line *out, char *err,
                        size_t errlen);

/* The number (1-based) of the access-log field called `name`: 1 remote_addr, 2 ident,
 * 3 user (or remote_user), 4 time (time_local), 5 request, 6 status, 7 bytes
 * (body_bytes_sent), 8 referer (http_referer), 9 user_agent (http_user_agent), or a number
 * 1..RLT__ACCESS_FIELDS written as digits (10 and up: fields appended after the user agent).
 * 0 for an unknown name. */
int rlt__access_field(const char *name);

/* Seconds since the epoch of a UTC civil date-time (proleptic Gregorian), with `offset_min`
 * minutes east of UTC subtracted (a -0700 local time is offset -420).  Fields must be in
 * range (month 1..12, day valid for the month and year, hour < 24, minute < 60, second <= 60);
 * returns 0 and *out, or -1. */
int rlt__civil_to_epoch(int64_t year, int month, int day, int hour, int minute, int second,
                        int offset_min, int64_t *out);

/* ---- Options ------------------------------------------------------------------------------ */

/* Matches argv[*i] against the long option `name` ("--limit"), written "--limit V" or
 * "--limit=V".  Returns 1 and *val (advancing *i past a separate value), 0 when argv[*i] is
 * another option, -1 (after printing "ratelimit CMD: option --limit needs a value") when the
 * value is missing. */
int rlt__opt(int argc, char **argv, int *i, const char *cmd, const char *name, const char **val);

/* Parses a whole number in [min, max] for option `name`; prints a usage error naming it and
 * returns -1 when it is not one. */
int rlt__opt_int(const char *cmd, const char *name, const char *val, int64_t min, int64_t max,
                 int64_t *out);

/* Parses a decimal value of option `name` x scale into [min, max], as rlt__opt_int. */
int rlt__opt_dec(const char *cmd, const char *name, const char *val, int64_t scale, int64_t min,
                 int64_t max, int64_t *out);

/* Parses a duration of option `name`: a decimal in seconds, or with a unit (ns us ms s m), into
 * ns in [min, max]; prints a usage error naming it ("ratelimit CMD: --x '1x': unknown unit")
 * and returns -1 when it is not one, else 0 and *out. */
int rlt__opt_time(const char *cmd, const char *name, const char *v, rlt_ns min, rlt_ns max,
                  rlt_ns *out);

/* Prints "ratelimit CMD: <message> (see ratelimit CMD --help)" to stderr and returns 2, the
 * usage-error exit code. */
int rlt__usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses policy text for option --policy, printing the parser's message on error; 0 or -1. */
int rlt__opt_policy(const char *cmd, const char *val, rlt_policy *p);

/* ---- Algorithm contracts (the simulator's check, contract.c) ---------------------------- */

/* One accepted request: its time (for the leaky bucket, its send time) and cost. */
typedef struct rlt__accepted {
    rlt_ns t;
    int64_t cost;
} rlt__accepted;

/* The index k of the window [kW, (k+1)W) that holds t, for W > 0 (division rounding down). */
static inline int64_t rlt__window_of(rlt_ns t, rlt_ns W)
{
    int64_t q = t / W;
    return (t % W != 0 && t < 0) ? q - 1 : q;
}

/* The largest accepted cost inside any half-open span [x, x + W) of e[0..m), sorted by time;
 * *at (when at is not NULL) gets the time of the first request of the first such span (e[0].t
 * when every span holds 0; 0 when m = 0).  Pure: O(m). */
int64_t rlt__worst_span(const rlt__accepted *e, size_t m, rlt_ns W, rlt_ns *at);

/* Checks that what an algorithm accepted, e[0..m) sorted by time, keeps the contract
 * include/ratelimit/ratelimit.h states for policy `p`:
 *   fixed window        at most N per aligned window [kW, (k+1)W)
 *   sliding log         at most N in any half-open span of W
 *   sliding window      at most N per aligned window and 2N in any span of W
 *   token bucket, GCRA  from any accepted request to any later one, at most B + elapsed x N/W
 *   leaky bucket        sends at least cost x W/N after the previous one (each send rounded up
 *                       to a whole ns), no wait (max_wait) above Q x W/N + 1 ns
 *   concurrency         at most N in flight, each request holding its slot for `hold` ns
 * Writes the contract in words (with W in ticks of `tick` ns) into text[0..cap).  Returns 1
 * when it held, 0 when it was broken.  Pure: O(m), no allocation. */
int rlt__contract_check(const rlt_policy *p, const rlt__accepted *e, size_t m, rlt_ns max_wait,
                        rlt_ns hold, rlt_ns tick, char *text, size_t cap);

#endif
