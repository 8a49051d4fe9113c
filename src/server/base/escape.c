/* Percent-encoding with a caller's rule for the bytes that stay as they are. */
#include "server/base/escape.h"

#include <string.h>

bool rlt__info_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("_./@#-()", c) != NULL);
}

void rlt__pct_encode(const char *in, char *out, size_t cap, bool (*plain)(unsigned char))
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < cap; p++) {
        if (plain(*p)) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (cap > 0) out[o] = '\0';
}
