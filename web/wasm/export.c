/* The WebAssembly face of src/core: a handful of exported calls (parse a policy, decide, peek,
 * release, the state's text) over the unchanged core, for web/ratelimit.js.  Policies and states
 * live in the module's own heap and are named to JavaScript by their addresses; a decision is
 * written to one static record that the caller reads right after the call (JavaScript runs the
 * module on one thread, so one record is enough). */
#include "ratelimit/ratelimit.h"

#include <stdlib.h>
#include <string.h>

/* Natively (bench/web/decide.c links this file to time the same batch loop) nothing is exported. */
#ifdef __wasm__
#define EXPORT(name) __attribute__((export_name(name)))
#else
#define EXPORT(name)
#endif

/* Exported entry points are declared here, once, as the style wants a declaration with a
 * contract for every non-static function; they are called only from JavaScript. */

/* Scratch bytes JavaScript writes policy text into (rlt_wasm_text_buf, RLT_WASM_TEXT bytes). */
#define RLT_WASM_TEXT 1024
static char text_buf[RLT_WASM_TEXT];
/* The last parse error or policy text, NUL-terminated; `out` points at it or at `big`, the
 * state's hex, which grows with the state. */
static char out_buf[1024];
static const char *out = out_buf;
static char *big;
static size_t big_cap;
static rlt_decision last;
/* The last decision as seven int64 (rlt_wasm_result's order), for one read from JavaScript. */
static int64_t last_fields[7];

/* Where JavaScript writes policy text; at most rlt_wasm_text_cap() bytes. */
EXPORT("rlt_wasm_text_buf") char *rlt_wasm_text_buf(void);
/* The capacity of that buffer. */
EXPORT("rlt_wasm_text_cap") int32_t rlt_wasm_text_cap(void);
/* The text output of the last call that produces text (an error, a policy, a state). */
EXPORT("rlt_wasm_out") const char *rlt_wasm_out(void);
/* Parses the `len` bytes of policy text in the text buffer; returns a new policy's address
 * (free it with rlt_wasm_free), or 0 with the parser's message in rlt_wasm_out(). */
EXPORT("rlt_wasm_parse") rlt_policy *rlt_wasm_parse(int32_t len);
/* The policy's canonical text (rlt_policy_format) in rlt_wasm_out(); returns its length or a
 * negative status. */
EXPORT("rlt_wasm_format") int32_t rlt_wasm_format(const rlt_policy *p);
/* One field of the policy: 0 algo, 1 limit, 2 period, 3 burst, 4 queue, 5 delay, 6 block,
 * 7 block_factor, 8 block_max, 9 jitter, 10 months; 0 for an unknown field. */
EXPORT("rlt_wasm_field") int64_t rlt_wasm_field(const rlt_policy *p, int32_t field);
/* A fresh (all-zero) state for `p`, or 0 when out of memory. */
EXPORT("rlt_wasm_state") void *rlt_wasm_state(const rlt_policy *p);
/* A copy of state `st` of policy `p`, or 0 when out of memory. */
EXPORT("rlt_wasm_state_copy") void *rlt_wasm_state_copy(const rlt_policy *p, const void *st);
/* Frees a policy or a state from this module. */
EXPORT("rlt_wasm_free") void rlt_wasm_free(void *ptr);
/* rlt_decide(p, st, now, cost) into the decision record; returns its status. */
EXPORT("rlt_wasm_decide")
int32_t rlt_wasm_decide(const rlt_policy *p, void *st, int64_t now, int64_t cost);
/* A peek (cost 0) on a copy of the state, which is left as it was; returns the status. */
EXPORT("rlt_wasm_peek")
int32_t rlt_wasm_peek(const rlt_policy *p, const void *st, int64_t now);
/* rlt_release(p, st, now, lease); returns its status (RLT_ENOENT: the lease had expired). */
EXPORT("rlt_wasm_release")
int32_t rlt_wasm_release(const rlt_policy *p, void *st, int64_t now, int64_t lease);
/* The address of the last decision's seven fields, int64 each, in rlt_wasm_result's order. */
EXPORT("rlt_wasm_last") const int64_t *rlt_wasm_last(void);
/* One field of the last decision: 0 allowed, 1 limit, 2 remaining, 3 retry_after,
 * 4 reset_after, 5 delay, 6 lease. */
EXPORT("rlt_wasm_result") int64_t rlt_wasm_result(int32_t field);
/* The state's bytes as lowercase hex in rlt_wasm_out() (what the byte-for-byte test compares);
 * returns the number of bytes, or -1 when out of memory. */
EXPORT("rlt_wasm_state_text") int32_t rlt_wasm_state_text(const rlt_policy *p, const void *st);
/* `n` bytes of the module's heap for the batch's arrays (free with rlt_wasm_free), or 0. */
EXPORT("rlt_wasm_alloc") void *rlt_wasm_alloc(int32_t n);
/* rlt_decide(p, st, now[i], cost[i]) for i = 0..n-1 in one call: res[2i] is the verdict (1
 * allowed, 0 denied) or the negative status of a failed call, res[2i+1] the delay.  Stops at
 * the first failure; returns the number of decisions made. */
EXPORT("rlt_wasm_decide_batch")
int32_t rlt_wasm_decide_batch(const rlt_policy *p, void *st, const int64_t *now,
                              const int64_t *cost, int32_t n, int64_t *res);
/* rlt_strerror(code). */
EXPORT("rlt_wasm_strerror") const char *rlt_wasm_strerror(int32_t code);

char *rlt_wasm_text_buf(void)
{
    return text_buf;
}

int32_t rlt_wasm_text_cap(void)
{
    return RLT_WASM_TEXT;
}

const char *rlt_wasm_out(void)
{
    return out;
}

rlt_policy *rlt_wasm_parse(int32_t len)
{
    out = out_buf;
    out_buf[0] = '\0';
    if (len < 0 || len > RLT_WASM_TEXT) {
        strcpy(out_buf, "policy text too long");
        return NULL;
    }
    rlt_policy *p = malloc(sizeof *p);
    if (!p) {
        strcpy(out_buf, rlt_strerror(RLT_ENOMEM));
        return NULL;
    }
    int rc = rlt_policy_parse(p, text_buf, (size_t)len, out_buf, sizeof out_buf);
    if (rc != RLT_OK) {
        if (!out_buf[0]) strcpy(out_buf, rlt_strerror(rc));
        free(p);
        return NULL;
    }
    return p;
}

int32_t rlt_wasm_format(const rlt_policy *p)
{
    out = out_buf;
    int rc = rlt_policy_format(p, out_buf, sizeof out_buf);
    return rc < 0 ? rc : (int32_t)strlen(out_buf);
}

int64_t rlt_wasm_field(const rlt_policy *p, int32_t field)
{
    switch (field) {
    case 0:
        return p->algo;
    case 1:
        return p->limit;
    case 2:
        return p->period;
    case 3:
        return p->burst;
    case 4:
        return p->queue;
    case 5:
        return p->delay;
    case 6:
        return p->block;
    case 7:
        return p->block_factor;
    case 8:
        return p->block_max;
    case 9:
        return p->jitter;
    case 10:
        return p->months;
    default:
        return 0;
    }
}

void *rlt_wasm_state(const rlt_policy *p)
{
    return calloc(1, rlt_state_size(p));
}

void *rlt_wasm_state_copy(const rlt_policy *p, const void *st)
{
    size_t n = rlt_state_size(p);
    void *c = malloc(n);
    return c ? memcpy(c, st, n) : NULL;
}

void rlt_wasm_free(void *ptr)
{
    free(ptr);
}

static void keep_fields(void)
{
    const int64_t f[7] = {last.allowed,     last.limit, last.remaining, last.retry_after,
                          last.reset_after, last.delay, last.lease};
    memcpy(last_fields, f, sizeof f);
}

const int64_t *rlt_wasm_last(void)
{
    return last_fields;
}

int32_t rlt_wasm_decide(const rlt_policy *p, void *st, int64_t now, int64_t cost)
{
    memset(&last, 0, sizeof last);
    int rc = rlt_decide(p, st, now, cost, &last);
    keep_fields();
    return rc;
}

void *rlt_wasm_alloc(int32_t n)
{
    return n > 0 ? malloc((size_t)n) : NULL;
}

int32_t rlt_wasm_decide_batch(const rlt_policy *p, void *st, const int64_t *now,
                              const int64_t *cost, int32_t n, int64_t *res)
{
    rlt_decision d;
    for (int32_t i = 0; i < n; i++) {
        int rc = rlt_decide(p, st, now[i], cost[i], &d);
        res[2 * i] = rc != RLT_OK ? rc : d.allowed;
        res[2 * i + 1] = rc != RLT_OK ? 0 : d.delay;
        if (rc != RLT_OK) return i;
    }
    return n;
}

int32_t rlt_wasm_peek(const rlt_policy *p, const void *st, int64_t now)
{
    void *c = rlt_wasm_state_copy(p, st);
    memset(&last, 0, sizeof last);
    if (!c) return RLT_ENOMEM;
    int rc = rlt_decide(p, c, now, 0, &last);
    keep_fields();
    free(c);
    return rc;
}

int32_t rlt_wasm_release(const rlt_policy *p, void *st, int64_t now, int64_t lease)
{
    return rlt_release(p, st, now, lease);
}

int64_t rlt_wasm_result(int32_t field)
{
    return field >= 0 && field < 7 ? last_fields[field] : 0;
}

int32_t rlt_wasm_state_text(const rlt_policy *p, const void *st)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = rlt_state_size(p);
    out = out_buf;
    out_buf[0] = '\0';
    if (2 * n + 1 > big_cap) {
        char *nb = realloc(big, 2 * n + 1);
        if (!nb) return -1;
        big = nb;
        big_cap = 2 * n + 1;
    }
    const unsigned char *b = st;
    for (size_t i = 0; i < n; i++) {
        big[2 * i] = hex[b[i] >> 4];
        big[2 * i + 1] = hex[b[i] & 15];
    }
    big[2 * n] = '\0';
    out = big;
    return (int32_t)n;
}

const char *rlt_wasm_strerror(int32_t code)
{
    return rlt_strerror(code);
}
