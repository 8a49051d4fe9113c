/* Percent-encoding for the places that need it (escape.c): INFO values, grpc-message. */
#ifndef RLT_SERVER_BASE_ESCAPE_H
#define RLT_SERVER_BASE_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Writes `in` (NUL-terminated) into out[0..cap) with every byte for which plain() is false
 * written as %XX (upper-case hex), then a NUL; stops early rather than cut an escape in two. */
void rlt__pct_encode(const char *in, char *out, size_t cap, bool (*plain)(unsigned char));

/* The bytes INFO values keep as they are: [A-Za-z0-9_./@#()-], so that a value parses as k=v
 * pairs in every client (redis-py splits on ',' and '='). */
bool rlt__info_plain(unsigned char c);

#endif
