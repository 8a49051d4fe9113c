/* libFuzzer target for the `ratelimit` command's input parsers: trace lines, combined access-log
 * lines and exact decimals.  The first byte picks the parser (and the unit); the rest is the
 * line.  Invariants: parsers never read past `len`, a parsed key lies inside the line, and an
 * exact decimal formats back to text that parses to the same value. */
#include "cli/cliutil.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t sel = data[0];
    /* Copy into an exact-size heap buffer so ASan sees any read past the end. */
    size_t len = size - 1;
    char *line = malloc(len ? len : 1);
    if (!line) return 0;
    memcpy(line, data + 1, len);
    char err[256];
    static const int64_t units[] = {1, 1000, 1000000, 1000000000};
    switch (sel % 3) {
    case 0: {
        rlt__trace_line t;
        int rc =
            rlt__trace_parse(line, len, units[(sel >> 2) & 3], (sel >> 4) & 1, &t, err, sizeof err);
        if (rc == 1 && t.key) {
            if (t.key < line || t.key + t.klen > line + len || t.klen == 0) abort();
            if (t.cost < 0) abort();
        }
        if (rc == -1 && strnlen(err, sizeof err) == 0) abort(); /* errors say why */
        break;
    }
    case 1: {
        rlt__access_line a;
        int rc = rlt__combined_parse(line, len, &a, err, sizeof err);
        if (rc == 1 && (a.host < line || a.host + a.hlen > line + len || a.hlen == 0)) abort();
        break;
    }
    default: {
        int64_t v, back;
        int64_t scale = units[(sel >> 2) & 3];
        if (rlt__dec_parse(line, len, scale, &v) == RLT__DEC_OK) {
            char buf[RLT__DEC_BUF];
            size_t n = rlt__dec_format(buf, v, scale);
            if (n == 0 || n >= sizeof buf) abort();
            if (rlt__dec_parse(buf, n, scale, &back) != RLT__DEC_OK || back != v) abort();
        }
        break;
    }
    }
    free(line);
    return 0;
}

#ifdef RLT_FUZZ_STANDALONE
#include "../standalone.h"
#endif
