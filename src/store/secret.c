/* The secret a keyed hash starts from (secret.h): the caller's, or drawn at open so that
 * clients choosing keys cannot predict where they land. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "ratelimit/ratelimit.h"
#include "store/secret.h"

int rlt__secret_init(uint8_t out[16], bool has_given, const uint8_t given[16])
{
    if (has_given) {
        memcpy(out, given, 16);
        return RLT_OK;
    }
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom(out + got, 16 - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return RLT_EIO;
        got += (size_t)r;
    }
    return RLT_OK;
}
