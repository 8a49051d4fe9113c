/* A keyed hash's 16-byte secret, for the store and the top-offenders sketch (secret.c). */
#ifndef RLT_STORE_SECRET_H
#define RLT_STORE_SECRET_H

#include <stdbool.h>
#include <stdint.h>

/* Sets out to `given` when has_given, else to 16 bytes of the kernel's random source
 * (getrandom, retried on EINTR and short reads).  RLT_OK, or RLT_EIO when the source fails. */
int rlt__secret_init(uint8_t out[16], bool has_given, const uint8_t given[16]);

#endif
