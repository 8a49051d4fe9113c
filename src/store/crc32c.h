/* CRC32C (Castagnoli) for snapshot checksums (crc32c.c). */
#ifndef RLT_STORE_CRC32C_H
#define RLT_STORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Streaming: crc = rlt__crc32c(crc, buf, len), starting from 0; the CRC of the whole input. */
uint32_t rlt__crc32c(uint32_t crc, const void *buf, size_t len);

#endif
