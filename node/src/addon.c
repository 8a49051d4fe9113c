/* ratelimit for Node.js: the addon's entry point; one output area per environment (the main
 * thread and each worker_thread load the addon anew). */
#include "native.h"

#include <stdlib.h>

static void env_free(napi_env env, void *data, void *hint)
{
    (void)hint;
    nrlt_env *e = data;
    if (e->out_ref) napi_delete_reference(env, e->out_ref);
    if (e->store_ctor) napi_delete_reference(env, e->store_ctor);
    if (e->limiter_ctor) napi_delete_reference(env, e->limiter_ctor);
    free(e);
}

static napi_value init(napi_env env, napi_value exports)
{
    nrlt_env *e = calloc(1, sizeof *e);
    napi_value ab;
    void *data;
    if (!e) return nrlt_throw_status(env, RLT_ENOMEM, "ratelimit");
    if (napi_set_instance_data(env, e, env_free, NULL) != napi_ok) {
        free(e);
        return NULL;
    }
    if (napi_create_arraybuffer(env, NRLT_OUT_WORDS * 8, &data, &ab) != napi_ok) return NULL;
    e->out = data;
    napi_create_reference(env, ab, 1, &e->out_ref);
    napi_set_named_property(env, exports, "out", ab);
    if (nrlt_store_init(env, exports, e) != napi_ok) return NULL;
    if (nrlt_limiter_init(env, exports, e) != napi_ok) return NULL;
    if (nrlt_redis_init(env, exports) != napi_ok) return NULL;
    return exports;
}

NAPI_MODULE_INIT()
{
    return init(env, exports);
}
