/* A domain's quota buckets for Envoy's Rate Limit Quota Service, read from YAML (rlqs_cfg.c):
 * `quota_buckets:`, `quota_default:` and `assignment_ttl:` beside `domain:`.  Returns RLT_OK,
 * or RLT_EPARSE after writing "file:line: reason" into the context's error buffer. */
#ifndef RLT_SERVER_CONFIG_RLQS_CFG_H
#define RLT_SERVER_CONFIG_RLQS_CFG_H

#include "server/config/yaml.h"

/* Reads the three keys into dom (each node may be NULL: absent). */
int rlt__rlqs_cfg_parse(rlt__cy *x, rlt__domain *dom, yaml_node_t *buckets, yaml_node_t *dflt,
                        yaml_node_t *ttl);

#endif
