/* libFuzzer target: ratelimitd's top offenders without sockets.  The first byte picks
 * /v1/top's query parser (rlt__top_query) over the rest, or a run of denials: the rest split
 * at 0xfe bytes into binary keys (a tenant's "t:" keys among them) counted in a fresh
 * 4-counter registry, then rendered as the admin and as the tenant would see them.  The JSON
 * must parse, every key must percent-decode to a key that was denied (a tenant's without its
 * prefix), and INFO and Prometheus lines must be printable ASCII in their fixed shapes. */
#include "server/request/srv.h"
#include "server/request/report.h"
#include "server/stats/top.h"
#include "fuzz_srv.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rlt__srv *srv(void)
{
    static rlt__srv *s;
    if (s != NULL) return s;
    static const char yaml[] = "server:\n  top_keys: 4\npolicies:\n  api: fixed_window:1/1h\n";
    s = fuzz_srv_open(yaml, sizeof yaml - 1);
    return s;
}

static int unhex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decodes z into out; returns the length, or -1 for a malformed escape. */
static long decode(const char *z, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (; *z; z++) {
        if (n == cap) return -1;
        if (*z == '%') {
            int h = unhex(z[1]), l = h < 0 ? -1 : unhex(z[2]);
            if (l < 0) return -1;
            out[n++] = (uint8_t)(h * 16 + l);
            z += 2;
        } else {
            out[n++] = (uint8_t)*z;
        }
    }
    return (long)n;
}

/* Whether key[0..n) is one of the denied keys (after `skip` prefix bytes). */
static bool was_denied(const uint8_t *data, size_t size, const uint8_t *key, size_t n,
                       const char *prefix)
{
    size_t pl = strlen(prefix);
    for (size_t i = 1; i <= size;) {
        size_t j = i;
        while (j < size && data[j] != 0xfe)
            j++;
        if (j - i == n + pl && memcmp(data + i, prefix, pl) == 0 &&
            memcmp(data + i + pl, key, n) == 0)
            return true;
        i = j + 1;
    }
    return false;
}

static void check_json(const rlt__obuf *o, const uint8_t *data, size_t size, const char *prefix)
{
    json_error_t je;
    json_t *doc = json_loadb(o->data, o->len, 0, &je);
    json_t *keys = doc ? json_object_get(doc, "keys") : NULL;
    if (keys == NULL || !json_is_array(keys) || json_array_size(keys) > 4) abort();
    for (size_t i = 0; i < json_array_size(keys); i++) {
        json_t *e = json_array_get(keys, i);
        const char *k = json_string_value(json_object_get(e, "key"));
        static uint8_t buf[RLT_KEY_MAX];
        long n = k ? decode(k, buf, sizeof buf) : -1;
        if (n < 0 || !was_denied(data, size, buf, (size_t)n, prefix)) abort();
        if (json_integer_value(json_object_get(e, "denied")) < 1) abort();
    }
    json_decref(doc);
}

/* Every byte printable ASCII but the line ends; every line of the top family in its shape. */
static void check_text(const rlt__obuf *o, bool info)
{
    for (size_t i = 0; i < o->len; i++) {
        unsigned char c = (unsigned char)o->data[i];
        if (c == '\n') {
            if (info && (i == 0 || o->data[i - 1] != '\r')) abort();
            continue;
        }
        if (c == '\r' && info && i + 1 < o->len && o->data[i + 1] == '\n') continue;
        if (c < 0x20 || c > 0x7e) abort();
        if (info && c == ' ' && !(i >= 1 && o->data[i - 1] == '#')) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 65536) return 0;
    char err[128];
    if (!(data[0] & 1)) {
        size_t n;
        if (rlt__top_query((const char *)data + 1, size - 1, 4, &n, err, sizeof err) == RLT_OK &&
            (n < 1 || n > 4))
            abort();
        return 0;
    }
    rlt__srv *s = srv();
    rlt__top *keep = s->top, *t;
    if (rlt__top_open(&t, 4) != RLT_OK) abort();
    s->top = t;
    const rlt__named *api = rlt__config_named(rlt__srv_config(s), "api", 3);
    int id = api ? api->policy_id : 0;
    for (size_t i = 1; i <= size;) {
        size_t j = i;
        while (j < size && data[j] != 0xfe)
            j++;
        rlt__top_denied(t, id, data + i, j - i);
        i = j + 1;
    }
    rlt__session admin = {.auth = RLT__AUTH_ADMIN};
    rlt__session tenant = {.auth = RLT__AUTH_TENANT, .prefix = "t:", .prefix_len = 2};
    const rlt__session *who[2] = {&admin, &tenant};
    for (int w = 0; w < 2; w++) {
        rlt__obuf o = {0};
        rlt__report_top_json(s, who[w], 4, &o);
        check_json(&o, data, size, w ? "t:" : "");
        rlt__obuf_free(&o);
        rlt__report_top_info(s, who[w], &o);
        check_text(&o, true);
        rlt__obuf_free(&o);
        rlt__report_top_prometheus(s, who[w], &o);
        check_text(&o, false);
        rlt__obuf_free(&o);
    }
    s->top = keep;
    rlt__top_close(t);
    return 0;
}
