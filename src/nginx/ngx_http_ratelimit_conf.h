/* The configuration of ngx_http_ratelimit_module (ngx_http_ratelimit_conf.c): the location
 * configuration and the directives' handlers, which the module's command table names.  The
 * handlers have nginx's signatures and answer nginx's way (NGX_CONF_OK, NGX_CONF_ERROR or a
 * message, logged with the directive's file and line); they do not name the module: the
 * ratelimit_zone and ratelimit commands carry it in their `post` (the shared memory's tag). */
#ifndef RLT_NGX_CONF_H
#define RLT_NGX_CONF_H

#include "ngx_http_ratelimit_zone.h"

/* Limits one location may apply: the all-or-nothing check keeps them on the stack. */
#define RLT_NGX_MAX_LIMITS 8

/* One `ratelimit` directive in force. */
typedef struct {
    ngx_shm_zone_t *shm_zone;
    int64_t cost;                      /* when cost_cv is NULL */
    ngx_http_complex_value_t *cost_cv; /* cost=$var */
} rlt_ngx_limit_t;

/* The location configuration. */
typedef struct {
    ngx_array_t *limits; /* of rlt_ngx_limit_t; NULL: inherit */
    ngx_uint_t status_code;
    ngx_flag_t dry_run;
    ngx_uint_t log_level;
    ngx_uint_t delay_log_level;
    ngx_flag_t headers;
} rlt_ngx_conf_t;

/* ngx_http_module_t's create and merge of the location configuration. */
void *rlt__ngx_create_conf(ngx_conf_t *cf);
char *rlt__ngx_merge_conf(ngx_conf_t *cf, void *parent, void *child);

/* ratelimit_zone KEY zone=NAME:SIZE policy=POLICY (cmd->post: the module, the zone's tag). */
char *rlt__ngx_zone_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* ratelimit zone=NAME [cost=N|cost=$var] (cmd->post: the module, the zone's tag). */
char *rlt__ngx_limit_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* ratelimit_status CODE. */
char *rlt__ngx_status_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* ratelimit_log_level info|notice|warn|error. */
char *rlt__ngx_log_level_directive(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

#endif
