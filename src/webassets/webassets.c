/* Which embedded file a request path names, and the headers every server sends with it
 * (webassets.h).  The table itself is generated (embed.cmake). */
#include "webassets/webassets.h"

#include <stdio.h>
#include <string.h>

static bool eq(const char *p, size_t n, const char *z)
{
    return n == strlen(z) && memcmp(p, z, n) == 0;
}

static const rlt__webasset *named(const char *p, size_t n)
{
    if (n == 0 || memchr(p, '/', n) != NULL) return NULL;
    for (size_t i = 0; i < rlt__webassets_count; i++)
        if (eq(p, n, rlt__webassets[i].name)) return &rlt__webassets[i];
    return NULL;
}

const rlt__webasset *rlt__webasset_find(const char *path, size_t len)
{
    if (len == 0 || path[0] != '/') return NULL;
    if (eq(path, len, "/") || eq(path, len, "/ui") || eq(path, len, "/ui/") ||
        eq(path, len, "/ui/live") || eq(path, len, "/ui/live/"))
        return named("index.html", 10);
    /* /ui/live/ with a slash: its relative URLs (app.js) resolve under it. */
    if (len > 9 && memcmp(path, "/ui/live/", 9) == 0) return named(path + 9, len - 9);
    if (len > 4 && memcmp(path, "/ui/", 4) == 0) return named(path + 4, len - 4);
    return named(path + 1, len - 1);
}

bool rlt__webasset_fresh(const rlt__webasset *a, const char *inm, size_t len)
{
    size_t el = strlen(a->etag);
    for (size_t i = 0; i < len;) {
        while (i < len && (inm[i] == ' ' || inm[i] == '\t' || inm[i] == ','))
            i++;
        size_t j = i;
        while (j < len && inm[j] != ',')
            j++;
        size_t k = j;
        while (k > i && (inm[k - 1] == ' ' || inm[k - 1] == '\t'))
            k--;
        const char *t = inm + i;
        size_t tl = k - i;
        if (tl >= 2 && t[0] == 'W' && t[1] == '/') t += 2, tl -= 2; /* weak comparison */
        if ((tl == 1 && t[0] == '*') || (tl == el && memcmp(t, a->etag, el) == 0)) return true;
        i = j;
    }
    return false;
}

size_t rlt__webasset_headers(const rlt__webasset *a, char *out, size_t cap)
{
    int n = snprintf(out, cap,
                     "ETag: %s\r\nCache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n",
                     a->etag);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}
