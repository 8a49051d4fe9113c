/* The directives of ngx_http_ratelimit_module: parsing and checking each one, so that a bad
 * argument stops `nginx -t` (and a reload, which keeps the old configuration) with a message
 * naming it; and the location configuration's inheritance.  docs/nginx.md has the reference. */
#include "ngx_http_ratelimit_conf.h"

#include <stdbool.h>

static ngx_conf_enum_t rlt_ngx_log_levels[] = {{ngx_string("info"), NGX_LOG_INFO},
                                               {ngx_string("notice"), NGX_LOG_NOTICE},
                                               {ngx_string("warn"), NGX_LOG_WARN},
                                               {ngx_string("error"), NGX_LOG_ERR},
                                               {ngx_null_string, 0}};

void *rlt__ngx_create_conf(ngx_conf_t *cf)
{
    rlt_ngx_conf_t *conf = ngx_pcalloc(cf->pool, sizeof(rlt_ngx_conf_t));
    if (conf == NULL) return NULL;
    conf->limits = NULL;
    conf->status_code = NGX_CONF_UNSET_UINT;
    conf->dry_run = NGX_CONF_UNSET;
    conf->log_level = NGX_CONF_UNSET_UINT;
    conf->headers = NGX_CONF_UNSET;
    return conf;
}

char *rlt__ngx_merge_conf(ngx_conf_t *cf, void *parent, void *child)
{
    rlt_ngx_conf_t *prev = parent;
    rlt_ngx_conf_t *conf = child;
    if (conf->limits == NULL) conf->limits = prev->limits;
    ngx_conf_merge_uint_value(conf->status_code, prev->status_code, 429);
    ngx_conf_merge_value(conf->dry_run, prev->dry_run, 0);
    ngx_conf_merge_uint_value(conf->log_level, prev->log_level, NGX_LOG_ERR);
    /* As limit_req: delays are logged one level below rejections. */
    conf->delay_log_level = (conf->log_level == NGX_LOG_INFO) ? NGX_LOG_INFO : conf->log_level + 1;
    ngx_conf_merge_value(conf->headers, prev->headers, 1);
    return NGX_CONF_OK;
}

static bool rlt_ngx_starts(const ngx_str_t *s, const char *prefix)
{
    size_t n = ngx_strlen(prefix);
    return s->len >= n && ngx_strncmp(s->data, prefix, n) == 0;
}

static bool rlt_ngx_token(const u_char *s, size_t len)
{
    if (len == 0 || len > 63) return false;
    for (size_t i = 0; i < len; i++) {
        u_char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

/* Compiles the complex value `value` (a key, a cost=$var) into *cv.  RLT_OK, or RLT_EINVAL
 * when nginx refused it (and logged why). */
static int rlt_ngx_compile(ngx_conf_t *cf, ngx_str_t *value, ngx_http_complex_value_t *cv)
{
    ngx_http_compile_complex_value_t ccv;
    ngx_memzero(&ccv, sizeof(ccv));
    ccv.cf = cf;
    ccv.value = value;
    ccv.complex_value = cv;
    return ngx_http_compile_complex_value(&ccv) == NGX_OK ? RLT_OK : RLT_EINVAL;
}

char *rlt__ngx_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t *value = cf->args->elts;
    ngx_uint_t nargs = cf->args->nelts;

    if (rlt_ngx_starts(&value[1], "zone=") || rlt_ngx_starts(&value[1], "policy=")) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"ratelimit_zone\" needs a key first, e.g. \"ratelimit_zone "
                           "$binary_remote_addr zone=NAME:10m policy=gcra:100/1m\"");
        return NGX_CONF_ERROR;
    }

    rlt_ngx_zone_t *z = ngx_pcalloc(cf->pool, sizeof(rlt_ngx_zone_t));
    if (z == NULL) return NGX_CONF_ERROR;
    if (rlt_ngx_compile(cf, &value[1], &z->key) != RLT_OK) return NGX_CONF_ERROR;

    ssize_t size = 0;
    ngx_str_t name = ngx_null_string;
    bool have_policy = false;
    for (ngx_uint_t i = 2; i < nargs; i++) {
        if (rlt_ngx_starts(&value[i], "zone=")) {
            name.data = value[i].data + 5;
            u_char *colon = ngx_strlchr(name.data, value[i].data + value[i].len, ':');
            if (colon == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone \"%V\": expected zone=NAME:SIZE, e.g. "
                                   "zone=api:10m",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            name.len = (size_t)(colon - name.data);
            if (!rlt_ngx_token(name.data, name.len)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone name in \"%V\": 1 to 63 of A-Z a-z 0-9 _ . : - "
                                   "(it names the policy in the RateLimit headers)",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            ngx_str_t s;
            s.data = colon + 1;
            s.len = (size_t)(value[i].data + value[i].len - s.data);
            size = ngx_parse_size(&s);
            if (size == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid zone size \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (rlt_ngx_starts(&value[i], "policy=")) {
            char err[256];
            z->policy_text.data = value[i].data + 7;
            z->policy_text.len = value[i].len - 7;
            if (rlt_policy_parse(&z->policy, (const char *)z->policy_text.data, z->policy_text.len,
                                 err, sizeof(err)) != RLT_OK) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid policy \"%V\": %s",
                                   &z->policy_text, err);
                return NGX_CONF_ERROR;
            }
            if (z->policy.adapt) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid policy \"%V\": an adaptive limit (adaptive=) learns "
                                   "in ratelimitd's local store only",
                                   &z->policy_text);
                return NGX_CONF_ERROR;
            }
            have_policy = true;
            continue;
        }
        if (rlt_ngx_starts(&value[i], "addr_prefix=")) {
            ngx_int_t v = ngx_atoi(value[i].data + 12, value[i].len - 12);
            if (v < 32 || v > 128) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid \"%V\": the IPv6 prefix is 32 to 128 (56: a home "
                                   "line's /56)",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            z->addr_prefix = (int)v;
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" (expected zone=NAME:SIZE, policy=POLICY or "
                           "addr_prefix=N)",
                           &value[i]);
        return NGX_CONF_ERROR;
    }
    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have a \"zone=NAME:SIZE\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }
    if (!have_policy) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have a \"policy=POLICY\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }
    /* Room for the slab's own pages plus a handful of keys of 64 bytes. */
    size_t node = rlt__ngx_node_size(rlt__ngx_state_size(&z->policy), 64);
    size_t least = 8 * ngx_pagesize + 16 * ngx_align(node, ngx_pagesize);
    if (node <= ngx_pagesize / 2) least = 8 * ngx_pagesize;
    if ((size_t)size < least) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small: %z bytes, policy \"%V\" needs at least %uz "
                           "(%uz bytes a key)",
                           &name, size, &z->policy_text, least, node);
        return NGX_CONF_ERROR;
    }
    z->name = name;

    ngx_shm_zone_t *shm_zone = ngx_shared_memory_add(cf, &name, (size_t)size, cmd->post);
    if (shm_zone == NULL) return NGX_CONF_ERROR;
    if (shm_zone->data) {
        rlt_ngx_zone_t *other = shm_zone->data;
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "%V \"%V\" is already bound to key \"%V\"",
                           &cmd->name, &name, &other->key.value);
        return NGX_CONF_ERROR;
    }
    shm_zone->init = rlt__ngx_init_zone;
    shm_zone->data = z;
    return NGX_CONF_OK;
}

char *rlt__ngx_limit_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    rlt_ngx_conf_t *lc = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_shm_zone_t *shm_zone = NULL;
    int64_t cost = 1;
    ngx_http_complex_value_t *cost_cv = NULL;

    for (ngx_uint_t i = 1; i < cf->args->nelts; i++) {
        if (rlt_ngx_starts(&value[i], "zone=")) {
            ngx_str_t s = {value[i].len - 5, value[i].data + 5};
            shm_zone = ngx_shared_memory_add(cf, &s, 0, cmd->post);
            if (shm_zone == NULL) return NGX_CONF_ERROR;
            if (shm_zone->data == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "unknown ratelimit_zone \"%V\" (declare it with "
                                   "ratelimit_zone at the http level, before it is used)",
                                   &s);
                return NGX_CONF_ERROR;
            }
            continue;
        }
        if (rlt_ngx_starts(&value[i], "cost=")) {
            ngx_str_t s = {value[i].len - 5, value[i].data + 5};
            if (s.len > 0 && ngx_http_script_variables_count(&s) > 0) {
                cost_cv = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
                if (cost_cv == NULL) return NGX_CONF_ERROR;
                if (rlt_ngx_compile(cf, &s, cost_cv) != RLT_OK) return NGX_CONF_ERROR;
                continue;
            }
            ngx_int_t c = s.len ? ngx_atoi(s.data, s.len) : NGX_ERROR;
            if (c == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid cost \"%V\": a whole number >= 0 or a variable",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }
            cost = (int64_t)c;
            continue;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\" (expected zone=NAME or cost=N|$variable)",
                           &value[i]);
        return NGX_CONF_ERROR;
    }
    if (shm_zone == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" must have a \"zone=NAME\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }
    rlt_ngx_zone_t *z = shm_zone->data;
    if (cost_cv == NULL && z->policy.algo == RLT_CONCURRENCY && cost > 1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid cost %L for the concurrency zone \"%V\": 0 or 1", (int64_t)cost,
                           &z->name);
        return NGX_CONF_ERROR;
    }

    if (lc->limits == NULL) {
        lc->limits = ngx_array_create(cf->pool, 2, sizeof(rlt_ngx_limit_t));
        if (lc->limits == NULL) return NGX_CONF_ERROR;
    }
    rlt_ngx_limit_t *limits = lc->limits->elts;
    for (ngx_uint_t i = 0; i < lc->limits->nelts; i++)
        if (limits[i].shm_zone == shm_zone) return "is duplicate: one ratelimit per zone here";
    if (lc->limits->nelts >= RLT_NGX_MAX_LIMITS) return "is one too many: at most 8 apply here";
    rlt_ngx_limit_t *l = ngx_array_push(lc->limits);
    if (l == NULL) return NGX_CONF_ERROR;
    l->shm_zone = shm_zone;
    l->cost = cost;
    l->cost_cv = cost_cv;
    return NGX_CONF_OK;
}

char *rlt__ngx_status_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    rlt_ngx_conf_t *lc = conf;
    ngx_str_t *value = cf->args->elts;
    if (lc->status_code != NGX_CONF_UNSET_UINT) return "is duplicate";
    ngx_int_t code = ngx_atoi(value[1].data, value[1].len);
    if (code < 400 || code > 599) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"%V\" \"%V\": a status code from 400 to 599", &cmd->name,
                           &value[1]);
        return NGX_CONF_ERROR;
    }
    lc->status_code = (ngx_uint_t)code;
    return NGX_CONF_OK;
}

char *rlt__ngx_log_level_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    rlt_ngx_conf_t *lc = conf;
    ngx_str_t *value = cf->args->elts;
    if (lc->log_level != NGX_CONF_UNSET_UINT) return "is duplicate";
    for (ngx_conf_enum_t *e = rlt_ngx_log_levels; e->name.len; e++) {
        if (e->name.len == value[1].len &&
            ngx_strncmp(e->name.data, value[1].data, value[1].len) == 0) {
            lc->log_level = e->value;
            return NGX_CONF_OK;
        }
    }
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid \"%V\" \"%V\": info, notice, warn or error",
                       &cmd->name, &value[1]);
    return NGX_CONF_ERROR;
}
