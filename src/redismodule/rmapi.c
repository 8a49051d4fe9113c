/* Looks up the module API functions of rmapi.h by name, through the GetApi function Redis
 * leaves in the first word of the load context. */
#include "rmapi.h"

#include "ratelimit/ratelimit.h"

#include <string.h>

rlt__rm_api rlt__rm;

int rlt__rm_init(RedisModuleCtx *ctx, const char *name, int ver)
{
    int (*get_api)(const char *, void *);
    void *first;
    memcpy(&first, (void *)ctx, sizeof first);
    memcpy(&get_api, &first, sizeof get_api);
    int missing = 0;
#define RLT_RM_GET(ret, fname, params)                                                             \
    if (get_api("RedisModule_" #fname, (void *)&rlt__rm.fname) != RLT_RM_OK || !rlt__rm.fname)     \
        missing = 1;
    RLT_RM_FUNCS(RLT_RM_GET)
#undef RLT_RM_GET
    if (missing) return RLT_ENOENT;
    if (rlt__rm.IsModuleNameBusy(name)) return RLT_EINVAL;
    rlt__rm.SetModuleAttribs(ctx, name, ver, RLT_RM_APIVER_1);
    return RLT_OK;
}
