/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) for snapshot checksums: detects every
 * burst error up to 32 bits, so any single flipped or truncated byte run is refused. */
#include <pthread.h>

#include "store/crc32c.h"

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ UINT32_C(0x82F63B78) : c >> 1;
        table[i] = c;
    }
}

uint32_t rlt__crc32c(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&table_once, table_init);
    const uint8_t *p = buf;
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
