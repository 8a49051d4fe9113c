/* libFuzzer target: the HTTP/1.1 request parser over arbitrary bytes, pipelined, under two sets
 * of limits, checking its contract rather than only its survival: consumed <= len, every slice
 * inside the consumed bytes, only a chunked body rewritten, the consumed prefix alone parses to
 * the same request, and split feeding agrees (a prefix is PARTIAL or already the same result). */
#include "server/http/http1.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

typedef struct outcome {
    ssize_t r;
    int status;
    const char *err;
    rlt__http_req req;
} outcome;

/* Parses a private, exactly sized copy of src[0..n) (so ASan sees any read past it). */
static void run(const char *src, size_t n, const rlt__http_limits *lim, outcome *o, char **keep)
{
    char *b = malloc(n ? n : 1);
    CHECK(b != NULL);
    memcpy(b, src, n);
    o->status = 0;
    o->err = NULL;
    o->r = rlt__http_parse(b, n, lim, &o->req, &o->status, &o->err);
    if (keep != NULL)
        *keep = b;
    else
        free(b);
}

static bool inside(const char *p, size_t n, const char *lo, size_t span)
{
    return p >= lo && n <= span && (size_t)(p - lo) <= span - n;
}

static void check_error(const outcome *o)
{
    CHECK(o->status == 400 || o->status == 413 || o->status == 414 || o->status == 431 ||
          o->status == 501 || o->status == 505);
    CHECK(o->err != NULL && strchr(o->err, '\r') == NULL && strchr(o->err, '\n') == NULL);
}

/* Two outcomes of the same request (pointers relative to their own buffers). */
static void check_same(const outcome *a, const char *ba, const outcome *b, const char *bb)
{
    CHECK(a->r == b->r);
    if (a->r == RLT__HTTP_ERROR) {
        CHECK(a->status == b->status && a->err == b->err);
        return;
    }
    if (a->r == RLT__HTTP_PARTIAL) return;
    const rlt__http_req *x = &a->req, *y = &b->req;
    CHECK(x->method == y->method && x->minor == y->minor && x->keep_alive == y->keep_alive);
    CHECK(x->expect_continue == y->expect_continue && x->chunked == y->chunked);
    CHECK(x->header_len == y->header_len && x->nheaders == y->nheaders);
    CHECK(x->target - ba == y->target - bb && x->target_len == y->target_len);
    CHECK(x->query_len == y->query_len && x->path_len == y->path_len);
    CHECK(x->body_len == y->body_len);
    if (x->body_len) CHECK(memcmp(x->body, y->body, x->body_len) == 0);
}

static void check_request(const outcome *o, const char *b, const char *orig, size_t len,
                          const rlt__http_limits *lim)
{
    size_t r = (size_t)o->r;
    const rlt__http_req *q = &o->req;
    CHECK(r > 0 && r <= len);
    size_t hb = lim->max_header_bytes ? lim->max_header_bytes : RLT__HTTP_MAX_HEADER_BYTES_DEFAULT;
    size_t mb = lim->max_body ? lim->max_body : RLT__HTTP_MAX_BODY_DEFAULT;
    CHECK(r <= 2 * (hb + mb) + 2);
    CHECK(q->content_length == (q->chunked ? 0 : q->body_len));
    CHECK(q->header_len > 0 && q->header_len <= r);
    CHECK(inside(q->method_str, q->method_len, b, q->header_len) && q->method_len > 0);
    CHECK(inside(q->target, q->target_len, b, q->header_len) && q->target_len > 0);
    CHECK(q->target[0] == '/' && q->path == q->target && q->path_len <= q->target_len);
    if (q->query != NULL) {
        CHECK(q->query == q->path + q->path_len + 1 && q->path[q->path_len] == '?');
        CHECK(q->path_len + 1 + q->query_len == q->target_len);
    } else {
        CHECK(q->query_len == 0 && q->path_len == q->target_len);
        CHECK(memchr(q->target, '?', q->target_len) == NULL);
    }
    CHECK(q->minor == 0 || q->minor == 1);
    CHECK(q->nheaders <= (lim->max_headers ? lim->max_headers : RLT__HTTP_MAX_HEADERS_DEFAULT));
    for (size_t i = 0; i < q->nheaders; i++) {
        const rlt__http_header *h = &q->headers[i];
        CHECK(inside(h->name, h->nlen, b, q->header_len) && h->nlen > 0);
        CHECK(inside(h->value, h->vlen, b, q->header_len));
    }
    CHECK(q->header_len <= hb);
    CHECK(q->body_len <= mb);
    if (q->body_len == 0) {
        CHECK(q->body == NULL);
    } else {
        CHECK(q->body == b + q->header_len && inside(q->body, q->body_len, b, r));
    }
    /* Only a chunked body is rewritten, and never the header section. */
    CHECK(memcmp(b, orig, q->chunked ? q->header_len : r) == 0);
    if (!q->chunked) CHECK(q->body_len == r - q->header_len);
    if (q->minor == 1) CHECK(rlt__http_find(q, "host") != NULL);
}

/* Split feeding: prefixes of src[0..n) are PARTIAL up to the settling point, then the same. */
static void check_prefixes(const char *src, size_t n, const rlt__http_limits *lim,
                           const outcome *whole, const char *wb)
{
    size_t picks[6] = {0, 1, n / 3, n / 2, n ? n - 1 : 0, n};
    size_t count = n <= 200 ? n + 1 : 6;
    for (size_t j = 0; j < count; j++) {
        size_t k = n <= 200 ? j : picks[j];
        if (k > n) continue;
        outcome o;
        char *b;
        run(src, k, lim, &o, &b);
        if (o.r == RLT__HTTP_PARTIAL) {
            if (whole->r > 0) CHECK(k < (size_t)whole->r);
        } else {
            if (whole->r > 0) CHECK(k >= (size_t)whole->r);
            check_same(&o, b, whole, wb);
        }
        free(b);
    }
}

static void one(const uint8_t *data, size_t size, const rlt__http_limits *lim)
{
    const char *src = (const char *)data;
    size_t off = 0;
    while (off <= size) {
        outcome o;
        char *b;
        run(src + off, size - off, lim, &o, &b);
        if (o.r == RLT__HTTP_ERROR) check_error(&o);
        if (o.r > 0) {
            check_request(&o, b, src + off, size - off, lim);
            /* The consumed bytes alone give the same request. */
            outcome again;
            char *b2;
            run(src + off, (size_t)o.r, lim, &again, &b2);
            check_same(&again, b2, &o, b);
            free(b2);
        } else {
            CHECK(o.r == RLT__HTTP_PARTIAL || o.r == RLT__HTTP_ERROR);
        }
        check_prefixes(src + off, size - off, lim, &o, b);
        free(b);
        if (o.r <= 0) break;
        off += (size_t)o.r;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const rlt__http_limits defaults = {0};
    static const rlt__http_limits tight = {
        .max_header_bytes = 96, .max_headers = 4, .max_body = 32};
    one(data, size, &defaults);
    one(data, size, &tight);
    return 0;
}
