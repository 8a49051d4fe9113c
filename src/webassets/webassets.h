/* The playground's site embedded at build time (embed.cmake writes the table from
 * <build>/web/site; webassets.c finds a request's file in it): what ratelimitd answers on
 * GET / and `ratelimit sim --serve` serves.  Both servers take the same answers from here:
 * which path is which file, its headers, whether the client's copy is still fresh. */
#ifndef RLT_WEBASSETS_H
#define RLT_WEBASSETS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct rlt__webasset {
    const char *name; /* "index.html", "app.js", ... (no slash) */
    const char *type; /* its Content-Type */
    const unsigned char *data;
    size_t len;
    const char *etag; /* a strong ETag, quotes included */
} rlt__webasset;

/* The generated table (embed.cmake) and whether it is the real site (1) or the page saying
 * the playground was not built (0: RLT_WASM off). */
extern const rlt__webasset rlt__webassets[];
extern const size_t rlt__webassets_count;
extern const int rlt__webassets_built;

/* The file a request path (without its query) names, or NULL (answer 404): "/", "/index.html",
 * "/ui", "/ui/" and "/ui/live" are the page; "/NAME" and "/ui/NAME" the file NAME when the
 * table has it.  Only names in the table match (no slash, no dot segment): nothing else of
 * the file system can be reached. */
const rlt__webasset *rlt__webasset_find(const char *path, size_t len);

/* Whether an If-None-Match value (a list of ETags or "*") names the asset's ETag: then the
 * answer is 304 Not Modified without a body. */
bool rlt__webasset_fresh(const rlt__webasset *a, const char *inm, size_t len);

/* The asset's headers besides Content-Type and Content-Length, as whole "Name: value\r\n"
 * lines: its ETag, Cache-Control (no-cache: the browser revalidates with the ETag, so a new
 * build shows at once) and nosniff.  Writes at most cap bytes, NUL-terminated; returns the
 * length, or 0 when cap is too small (RLT__WEBASSET_HEADERS always suffices). */
#define RLT__WEBASSET_HEADERS 160
size_t rlt__webasset_headers(const rlt__webasset *a, char *out, size_t cap);

#endif
