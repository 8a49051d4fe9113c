/* libFuzzer target: the RESP request parser over arbitrary bytes, pipelined, with a check of
 * the "partial prefix" contract (any proper prefix of a parsed command is PARTIAL). */
#include "server/resp/resp.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rlt__resp_arg argv[64];
    rlt__resp_limits lim = {.max_args = 64, .max_bulk = 256, .max_inline = 512};
    char *buf = malloc(size ? size : 1);
    char *copy = malloc(size ? size : 1);
    if (buf == NULL || copy == NULL) abort();
    memcpy(buf, data, size);
    size_t off = 0;
    while (off < size) {
        size_t argc = 0;
        const char *err = NULL;
        memcpy(copy, buf + off, size - off);
        ssize_t r = rlt__resp_parse(buf + off, size - off, &lim, argv, &argc, &err);
        if (r == RLT__RESP_PARTIAL) break;
        if (r == RLT__RESP_ERROR) {
            if (err == NULL || strncmp(err, "Protocol error", 14) != 0) abort();
            break;
        }
        if (r <= 0 || (size_t)r > size - off || argc > lim.max_args) abort();
        for (size_t i = 0; i < argc; i++) {
            if (argv[i].ptr < buf + off || argv[i].ptr + argv[i].len > buf + off + (size_t)r)
                abort();
        }
        /* A proper prefix of a command is never a command. */
        size_t half = (size_t)r / 2;
        size_t argc2;
        if (rlt__resp_parse(copy, half, &lim, argv, &argc2, &err) != RLT__RESP_PARTIAL && half > 0)
            abort();
        off += (size_t)r;
    }
    free(copy);
    free(buf);
    return 0;
}
