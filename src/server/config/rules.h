/* The sections of the config that hold its limits (rules.c): envoy descriptor trees and
 * their rules, named policies, tiers and tenants, read from YAML nodes into the parse
 * context's config (yaml.h).  Each returns RLT_OK, or RLT_EPARSE after writing "file:line:
 * reason" into the context's error buffer; load.c calls them. */
#ifndef RLT_SERVER_CONFIG_RULES_H
#define RLT_SERVER_CONFIG_RULES_H

#include "server/config/yaml.h"

/* `policies:`: named policies (a map of name -> policy text or a map with `policy:` and the
 * options shadow_mode, fail, change, lease). */
int rlt__cy_parse_policies(rlt__cy *x, yaml_node_t *n);
/* `tiers:`: tier name -> named policy, and `default_tier`. */
int rlt__cy_parse_tiers(rlt__cy *x, yaml_node_t *n);
/* `tenants:`: each tenant's name, password and key prefix. */
int rlt__cy_parse_tenants(rlt__cy *x, yaml_node_t *n);
/* One domain (`domain:` + `descriptors:`): its descriptor tree and their rules. */
int rlt__cy_add_domain(rlt__cy *x, yaml_node_t *name_node, yaml_node_t *descs);
/* After every domain: no two rules share a store name (a hash collision, or equal paths). */
int rlt__cy_check_rule_names(rlt__cy *x);

#endif
