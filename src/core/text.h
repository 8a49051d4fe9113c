/* The helpers every part shares with the core, so that none writes its own: the one strict
 * decimal integer parser (RESP arguments, HTTP parameters, configuration values, the Redis
 * module's stored fields) and the one civil-date conversion (calendar periods, the CLI's
 * timestamps).  Internal (rlt__): not installed, not exported by libratelimit.so; the other
 * parts link the core's objects statically. */
#ifndef RLT_CORE_TEXT_H
#define RLT_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest decimal int64: "-9223372036854775808". */
#define RLT__I64_TEXT_MAX 20

/* Parses all of p[0..len) as a decimal int64: an optional '-', then digits only; no '+', no
 * spaces, no leading zeros ("0" is fine, "-0" is not), no overflow (INT64_MIN parses).
 * Returns true and sets *out, or false and leaves *out alone.  p may be NULL when len is 0.
 * Thread-safe (no state). */
bool rlt__parse_i64(const char *p, size_t len, int64_t *out);

/* Writes v in decimal into buf (room for RLT__I64_TEXT_MAX bytes; no NUL) and returns the
 * length: the inverse of rlt__parse_i64.  Thread-safe (no state). */
size_t rlt__format_i64(char *buf, int64_t v);

/* Days since 1970-01-01 of the proleptic Gregorian date y-m-d (m 1..12, d 1..31, not checked
 * against the month's length: the caller validates), exact for any |y| < 2^50 (H. Hinnant's
 * days_from_civil).  Defined in calendar.c. */
int64_t rlt__days_from_civil(int64_t y, int64_t m, int64_t d);

#endif
