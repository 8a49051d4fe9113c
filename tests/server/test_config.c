/* Tests of ratelimitd's YAML config (envoyproxy/ratelimit's format and our extensions), its
 * file:line errors, envoy descriptor matching, the envoy /json decision and the /v1/check
 * query parser. */
#include "test.h"

#include "server/resp/cmd.h"
#include "server/config/config.h"
#include "server/config/load.h"
#include "server/request/decide.h"
#include "server/http/httpin.h"
#include "server/stats/metrics.h"
#include "server/net/pipe.h"
#include "server/request/request.h"
#include "server/request/srv.h"

static char err_[600];

static rlt__config *parse(const char *y)
{
    rlt__config *c = NULL;
    err_[0] = '\0';
    rlt__config_parse(y, strlen(y), "t.yaml", &c, err_, sizeof err_);
    return c;
}

static const char *envoy_example =
    "domain: messaging\n"
    "descriptors:\n"
    "  - key: message_type\n"
    "    value: marketing\n"
    "    descriptors:\n"
    "      - key: to_number\n"
    "        rate_limit:\n"
    "          unit: day\n"
    "          requests_per_unit: 5\n"
    "  - key: to_number\n"
    "    rate_limit:\n"
    "      unit: day\n"
    "      requests_per_unit: 100\n"
    "  - key: remote_address\n"
    "    rate_limit: {unit: second, requests_per_unit: 10}\n"
    "  - key: remote_address\n"
    "    value: 50.0.0.5\n"
    "    rate_limit: {unit: second, requests_per_unit: 0}\n"
    "  - key: ldap\n"
    "    rate_limit: {unlimited: true}\n"
    "  - key: path\n"
    "    value: /api/*\n"
    "    detailed_metric: true\n"
    "    rate_limit: {unit: minute, requests_per_unit: 20, algorithm: gcra, burst: 5}\n";

static rlt__entry E(const char *k, const char *v)
{
    return (rlt__entry){k, strlen(k), v, strlen(v)};
}

static int match(const rlt__config *c, rlt__entry *e, size_t n)
{
    return rlt__config_match(c, "messaging", 9, e, n);
}

TEST(envoy_config_parses_and_matches_most_specific_first)
{
    rlt__config *c = parse(envoy_example);
    if (c == NULL) RLT_FAIL_("%s", err_);
    ASSERT_EQ(c->nrules, 6);
    rlt__entry a[] = {E("message_type", "marketing"), E("to_number", "2061111111")};
    int r = match(c, a, 2);
    ASSERT(r >= 0);
    ASSERT_EQ(c->rules[r].requests_per_unit, 5);
    ASSERT_STR_EQ(c->rules[r].unit, "DAY");
    ASSERT_EQ(c->rules[r].policy.algo, RLT_FIXED_WINDOW);
    rlt__entry b[] = {E("to_number", "2061111111")};
    ASSERT_EQ(c->rules[match(c, b, 1)].requests_per_unit, 100);
    rlt__entry ip1[] = {E("remote_address", "50.0.0.1")};
    rlt__entry ip5[] = {E("remote_address", "50.0.0.5")};
    ASSERT_EQ(c->rules[match(c, ip1, 1)].requests_per_unit, 10);
    ASSERT(c->rules[match(c, ip5, 1)].block_all);
    rlt__entry l[] = {E("ldap", "x")};
    ASSERT(c->rules[match(c, l, 1)].unlimited);
    rlt__entry w[] = {E("path", "/api/users")};
    r = match(c, w, 1);
    ASSERT(r >= 0);
    ASSERT_EQ(c->rules[r].policy.algo, RLT_GCRA);
    ASSERT_EQ(c->rules[r].policy.burst, 5);
    rlt__entry nw[] = {E("path", "/other")};
    ASSERT_EQ(match(c, nw, 1), -1);
    /* Levels must match in number (envoy's example 4). */
    rlt__entry deep[] = {E("to_number", "1"), E("x", "y")};
    ASSERT_EQ(match(c, deep, 2), -1);
    rlt__entry unknown[] = {E("nope", "1")};
    ASSERT_EQ(match(c, unknown, 1), -1);
    ASSERT_EQ(rlt__config_match(c, "other", 5, b, 1), -1);
    rlt__config_free(c);
}

TEST(config_errors_name_file_and_line)
{
    struct {
        const char *yaml, *want;
    } cases[] = {
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n"
         "      requests_per_unit: 1\n",
         "t.yaml:5: unit must be second"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
         "      requests_per_unit: -3\n",
         "t.yaml:6: requests_per_unit must be an integer"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n",
         "t.yaml:5: rate_limit needs requests_per_unit"},
        {"domain: d\ndescriptors:\n  - value: v\n", "t.yaml:3: a descriptor needs a key"},
        {"domain: d\nbogus: 1\n", "t.yaml:2: unknown top-level key 'bogus'"},
        {"server:\n  port: 70000\n", "t.yaml:2: a port"},
        {"server:\n  threads: many\n", "t.yaml:2: threads must be an integer"},
        {"policies:\n  api: gcra:0/1s\n", "t.yaml:2: policy 'api'"},
        {"tiers:\n  free: nothere\n", "t.yaml:2: tier 'free': no policy named 'nothere'"},
        {"domain: d\n  descriptors: [\n", "t.yaml:"},
        {"domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "t.yaml:4: duplicate descriptor"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
         "requests_per_unit: 1, algorithm: magic}\n",
         "t.yaml:4: unknown algorithm"},
        {"tenants:\n  - name: a\n", "t.yaml:2: a tenant needs a name and a password"},
        {"server:\n  snapshot_interval: soon\n", "t.yaml:2: snapshot_interval must be a duration"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt__config *c = parse(cases[i].yaml);
        if (c != NULL) {
            rlt__config_free(c);
            RLT_FAIL_("case %zu was accepted", i);
        }
        if (strncmp(err_, cases[i].want, strlen(cases[i].want)) != 0)
            RLT_FAIL_("case %zu: got \"%s\", want prefix \"%s\"", i, err_, cases[i].want);
    }
}

TEST(settings_and_extensions_parse)
{
    rlt__config *c = parse("server:\n  bind: 0.0.0.0\n  port: 0\n  http_port: -1\n"
                           "  password: pw\n  snapshot: /tmp/x.snap\n  snapshot_interval: 250ms\n"
                           "  max_keys: 10\n  max_connections: 5\n  max_output_buffer: 4096\n"
                           "  client_timeout: 2s\n  shadow_mode: true\n"
                           "policies:\n  free: gcra:10/1m\n  pro: gcra:100/1m,burst=20\n"
                           "tiers:\n  free: free\n  pro: pro\ndefault_tier: free\n");
    if (c == NULL) RLT_FAIL_("%s", err_);
    ASSERT_STR_EQ(c->set.bind, "0.0.0.0");
    ASSERT_EQ(c->set.port, 0);
    ASSERT_EQ(c->set.http_port, -1);
    ASSERT_EQ(c->set.snapshot_interval, 250 * RLT_NS_PER_MS);
    ASSERT_EQ(c->set.max_keys, 10);
    ASSERT_EQ(c->set.max_output, 4096);
    ASSERT(c->set.shadow_mode);
    ASSERT_EQ(c->ntiers, 2);
    ASSERT(rlt__config_named(c, "pro", 3) != NULL);
    ASSERT(rlt__config_named(c, "default", 7) != NULL);
    rlt__config_free(c);
}

TEST(empty_config_is_the_default)
{
    rlt__config *c = parse("");
    if (c == NULL) RLT_FAIL_("%s", err_);
    ASSERT_EQ(c->set.port, 6380);
    ASSERT_STR_EQ(c->set.bind, "127.0.0.1");
    rlt__config_free(c);
}

TEST(alias_bombs_are_refused)
{
    rlt__config *c = parse("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                           "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c]\n"
                           "domain: x\n");
    ASSERT(c == NULL);
}

TEST(an_alias_bomb_in_descriptors_is_refused_at_once)
{
    /* Level k lists 9 descriptors whose children are all level k-1: 9^8 = 43 million
     * descriptor visits once the aliases are expanded, from a document of ~300 nodes. */
    static char y[16384];
    size_t o = (size_t)snprintf(y, sizeof y, "domains:\n  - domain: d0\n    descriptors: &L0 [{key: z}]\n");
    for (int k = 1; k <= 8; k++) {
        o += (size_t)snprintf(y + o, sizeof y - o, "  - domain: d%d\n    descriptors: &L%d [", k, k);
        for (int i = 0; i < 9; i++)
            o += (size_t)snprintf(y + o, sizeof y - o, "%s{key: k%d, descriptors: *L%d}",
                                  i ? ", " : "", i, k - 1);
        o += (size_t)snprintf(y + o, sizeof y - o, "]\n");
    }
    rlt__config *c = parse(y);
    ASSERT(c == NULL);
    ASSERT(strstr(err_, "alias bomb") != NULL);
}

/* Builds "policies: " + n flow sequences nested in each other (n '[' then n ']'). */
static char *nested_flow(size_t n, const char *open, const char *close)
{
    size_t cap = 16 + n * (strlen(open) + strlen(close)) + 8, o = 0;
    char *y = malloc(cap);
    if (y == NULL) abort();
    o += (size_t)snprintf(y, cap, "policies: ");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(y + o, cap - o, "%s", open);
    o += (size_t)snprintf(y + o, cap - o, "1");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(y + o, cap - o, "%s", close);
    snprintf(y + o, cap - o, "\n");
    return y;
}

TEST(yaml_nested_deeper_than_64_levels_is_refused_before_it_is_loaded)
{
    /* libyaml's scanner is quadratic in flow nesting: 100k levels (200 KB) took minutes.  The
     * bound is checked on its events before the load, so this returns at once. */
    char *y = nested_flow(100000, "[", "]");
    ASSERT(parse(y) == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:1: nested deeper than 64 levels");
    free(y);
    y = nested_flow(100000, "{a: ", "}");
    ASSERT(parse(y) == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:1: nested deeper than 64 levels");
    free(y);
    /* Block nesting counts the same way, and the line is the one that passes the bound. */
    size_t cap = 64 + 70 * 140, o = 0;
    y = malloc(cap);
    ASSERT(y != NULL);
    o += (size_t)snprintf(y, cap, "policies:\n");
    for (int i = 0; i < 70; i++)
        o += (size_t)snprintf(y + o, cap - o, "%*sk%d:\n", i + 1, "", i);
    ASSERT(parse(y) == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:65: nested deeper than 64 levels"); /* the 65th collection */
    free(y);
    /* 64 levels (the root mapping and 63 below it) pass the bound: what refuses this document
     * is the policies reader, not the nesting check. */
    y = nested_flow(63, "[", "]");
    ASSERT(parse(y) == NULL);
    ASSERT(strstr(err_, "nested deeper") == NULL);
    ASSERT(err_[0] != '\0');
    free(y);
}

TEST(twenty_thousand_rules_load)
{
    /* A genuine big file (no aliases): every rule loads, in n log n. */
    size_t cap = 20000 * 120 + 64, o = 0;
    char *y = malloc(cap);
    ASSERT(y != NULL);
    o += (size_t)snprintf(y + o, cap - o, "domain: big\ndescriptors:\n");
    for (int i = 0; i < 20000; i++)
        o += (size_t)snprintf(y + o, cap - o,
                              "  - key: user\n    value: u%d\n    rate_limit: {unit: minute, "
                              "requests_per_unit: %d}\n",
                              i, 1 + i % 100);
    rlt__config *c = NULL;
    int st = rlt__config_parse(y, o, "big.yaml", &c, err_, sizeof err_);
    free(y);
    if (st != RLT_OK) fprintf(stderr, "%s\n", err_);
    ASSERT_EQ(st, RLT_OK);
    ASSERT_EQ(c->nrules, 20000);
    rlt__entry e = {.key = "user", .klen = 4, .value = "u19999", .vlen = 6};
    ASSERT_EQ(rlt__config_match(c, "big", 3, &e, 1), 19999);
    rlt__config_free(c);
}

TEST(duplicate_keys_are_refused_with_both_lines)
{
    ASSERT(parse("domain: a\ndomain: b\n") == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:2: duplicate key 'domain' (first on line 1)");
    ASSERT(parse("policies:\n  a: gcra:1/1s\nserver:\n  port: 1\npolicies:\n  b: gcra:2/1s\n") == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:5: duplicate key 'policies' (first on line 1)");
    ASSERT(parse("server:\n  port: 1\n  threads: 1\n  port: 2\n") == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:4: duplicate key 'port' (first on line 2)");
    ASSERT(parse("domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n") ==
           NULL);
    ASSERT_STR_EQ(err_, "t.yaml:5: duplicate descriptor 'k_v'");
}

TEST(a_second_yaml_document_is_refused)
{
    ASSERT(parse("domain: a\n---\ndomain: b\n") == NULL);
    ASSERT_STR_EQ(err_, "t.yaml:3: a second YAML document: one config file holds one document");
    /* A lone document marker is still one document. */
    rlt__config *c = parse("---\ndomain: a\n");
    ASSERT(c != NULL);
    rlt__config_free(c);
}

TEST(settings_that_cannot_work_are_refused)
{
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"server:\n  max_connections: 0\n", "t.yaml:2: max_connections must be an integer in [1,"},
        {"server:\n  max_output_buffer: 0\n", "t.yaml:2: max_output_buffer must be a size in [4096,"},
        {"server:\n  max_bulk: 1048576\n", "t.yaml:2: max_bulk must be an integer in [1024, 524288]"},
        {"server:\n  client_timeout: 0s\n", "t.yaml:2: client_timeout must be a duration in [10 ms,"},
        {"server:\n  max_inline_policies: 0\n", "t.yaml:2: max_inline_policies must be"},
        {"server:\n  max_reservations_per_client: 0\n",
         "t.yaml:2: max_reservations_per_client must be"},
        {"server:\n  max_reservation_timeout: 2d\n", "t.yaml:2: max_reservation_timeout must be"},
        {"server:\n  rlqs_max_buckets_per_client: 0\n",
         "t.yaml:2: rlqs_max_buckets_per_client must be an integer in [1, 65536]"},
        {"server:\n  rlqs_max_streams_per_client: 65537\n",
         "t.yaml:2: rlqs_max_streams_per_client must be an integer in [1, 65536]"},
        {"server:\n  threads: 65\n", "t.yaml:2: threads must be an integer in [0, 64]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rlt__config *c = parse(bad[i].yaml);
        if (c != NULL || strncmp(err_, bad[i].want, strlen(bad[i].want)) != 0)
            RLT_FAIL_("case %zu: got \"%s\"", i, c ? "(accepted)" : err_);
    }
    /* The documented zeros stay: no key cap, no idle timeout, snapshots only at exit. */
    rlt__config *c = parse("server:\n  max_keys: 0\n  idle_timeout: 0s\n  snapshot_interval: 0s\n");
    ASSERT(c != NULL);
    rlt__config_free(c);
}

static rlt__srv *open_with(const char *yaml)
{
    rlt__config *c = parse(yaml);
    if (c == NULL) return NULL;
    c->set.snapshot[0] = '\0';
    rlt__srv *s = NULL;
    rlt__srv_open(&s, c, 0, 0, err_, sizeof err_);
    return s;
}

static int envoy(rlt__srv *s, const char *body, char *out, size_t cap)
{
    rlt__envoy_req r;
    char err[300];
    if (rlt__envoy_parse(body, strlen(body), &r, err, sizeof err) < 0) {
        rlt__envoy_free(&r);
        snprintf(out, cap, "%s", err);
        return -1;
    }
    rlt__obuf o = {0};
    rlt__session ss;
    rlt__session_init(s, &ss);
    int code = -1;
    rlt__scratch *sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    if (sc == NULL ||
        rlt__envoy_decide_json(s, &r, &ss, sc, RLT_NS_PER_S, &o, &code, err, sizeof err) != RLT_OK)
        code = -1;
    rlt__scratch_free(sc);
    rlt__envoy_free(&r);
    rlt__obuf_put(&o, "", 1);
    snprintf(out, cap, "%s", code < 0 ? err : o.data);
    rlt__obuf_free(&o);
    return code;
}

TEST(envoy_json_endpoint_answers_like_envoy_ratelimit)
{
    rlt__srv *s = open_with(envoy_example);
    if (s == NULL) RLT_FAIL_("%s", err_);
    char out[2048];
    const char *req = "{\"domain\":\"messaging\",\"descriptors\":[{\"entries\":"
                      "[{\"key\":\"message_type\",\"value\":\"marketing\"},{\"key\":\"to_number\","
                      "\"value\":\"206\"}]}, {\"entries\":[{\"key\":\"ldap\",\"value\":\"u\"}]},"
                      "{\"entries\":[{\"key\":\"nothing\",\"value\":\"u\"}]}],\"hits_addend\":2}";
    ASSERT_EQ(envoy(s, req, out, sizeof out), 200);
    ASSERT_STR_EQ(out, "{\"overallCode\":\"OK\",\"statuses\":[{\"code\":\"OK\",\"currentLimit\":"
                       "{\"requestsPerUnit\":5,\"unit\":\"DAY\"},\"limitRemaining\":3,"
                       "\"durationUntilReset\":\"86399s\"},{\"code\":\"OK\",\"limitRemaining\":"
                       "4294967295},{\"code\":\"OK\"}]}");
    ASSERT_EQ(envoy(s, req, out, sizeof out), 200);
    ASSERT_EQ(envoy(s, req, out, sizeof out), 429);
    ASSERT(strncmp(out, "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{\"code\":\"OVER_LIMIT\"",
                   60) == 0);
    const char *blocked = "{\"domain\":\"messaging\",\"descriptors\":[{\"entries\":[{\"key\":"
                          "\"remote_address\",\"value\":\"50.0.0.5\"}]}]}";
    ASSERT_EQ(envoy(s, blocked, out, sizeof out), 429);
    rlt__srv_close(s);
}

TEST(envoy_multi_descriptor_requests_are_all_or_nothing)
{
    rlt__srv *s = open_with("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, "
                            "requests_per_unit: 10}\n  - key: b\n    rate_limit: {unit: hour, "
                            "requests_per_unit: 1}\n");
    ASSERT(s != NULL);
    char out[2048];
    const char *req = "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":"
                      "\"1\"}]},{\"entries\":[{\"key\":\"b\",\"value\":\"1\"}]}]}";
    ASSERT_EQ(envoy(s, req, out, sizeof out), 200);
    ASSERT_EQ(envoy(s, req, out, sizeof out), 429);
    /* a was charged once: 9 remain. */
    ASSERT(strstr(out, "\"limitRemaining\":9") != NULL);
    rlt__srv_close(s);
}

TEST(envoy_refused_requests_report_every_descriptors_remaining_and_reset)
{
    /* As envoyproxy/ratelimit: every limited status carries limitRemaining (its real value:
     * a refused request charged nothing) and durationUntilReset (to the window's end).  The
     * blocked rule's requestsPerUnit 0 is omitted, as proto3 JSON omits every zero field. */
    rlt__srv *s = open_with("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, "
                            "requests_per_unit: 10}\n  - key: b\n    rate_limit: {unit: hour, "
                            "requests_per_unit: 1}\n  - key: z\n    rate_limit: {unit: minute, "
                            "requests_per_unit: 0}\n");
    ASSERT(s != NULL);
    char out[2048];
    const char *blocked = "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\","
                          "\"value\":\"1\"}]},{\"entries\":[{\"key\":\"z\",\"value\":\"1\"}]}]}";
    ASSERT_EQ(envoy(s, blocked, out, sizeof out), 429);
    ASSERT_STR_EQ(out, "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{\"code\":\"OK\","
                       "\"currentLimit\":{\"requestsPerUnit\":10,\"unit\":\"HOUR\"},"
                       "\"limitRemaining\":10,\"durationUntilReset\":\"3599s\"},"
                       "{\"code\":\"OVER_LIMIT\",\"currentLimit\":{"
                       "\"unit\":\"MINUTE\"},\"durationUntilReset\":\"59s\"}]}");
    const char *req = "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":"
                      "\"2\"}]},{\"entries\":[{\"key\":\"b\",\"value\":\"2\"}]}]}";
    const char *other = "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\","
                        "\"value\":\"3\"}]},{\"entries\":[{\"key\":\"b\",\"value\":\"2\"}]}]}";
    ASSERT_EQ(envoy(s, req, out, sizeof out), 200);
    ASSERT_EQ(envoy(s, other, out, sizeof out), 429); /* b is used up; a:3 is fresh */
    ASSERT_STR_EQ(out, "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{\"code\":\"OK\","
                       "\"currentLimit\":{\"requestsPerUnit\":10,\"unit\":\"HOUR\"},"
                       "\"limitRemaining\":10,\"durationUntilReset\":\"3599s\"},"
                       "{\"code\":\"OVER_LIMIT\",\"currentLimit\":{\"requestsPerUnit\":1,"
                       "\"unit\":\"HOUR\"},\"durationUntilReset\":\"3599s\"}]}");
    rlt__srv_close(s);
}

TEST(envoy_bad_bodies_are_refused_with_a_reason)
{
    rlt__srv *s = open_with(envoy_example);
    ASSERT(s != NULL);
    char out[512];
    const char *bad[] = {
        "",
        "{",
        "[]",
        "{\"domain\":1}",
        "{\"domain\":\"d\"}",
        "{\"domain\":\"d\",\"descriptors\":[]}",
        "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"value\":\"v\"}]}]}",
        "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\"}]}],"
        "\"hits_addend\":-1}",
        "{\"domain\":\"d\",\"domain\":\"e\",\"descriptors\":[{\"entries\":[{\"key\""
        ":\"k\"}]}]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (envoy(s, bad[i], out, sizeof out) != -1) RLT_FAIL_("case %zu accepted", i);
    rlt__srv_close(s);
}

TEST(check_query_is_decoded_and_validated)
{
    rlt__check_req r;
    char err[200];
    const char *q = "key=user%3A1&policy=gcra%3A10%2F1s%2Cburst%3D2&cost=3&";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.klen, 6);
    ASSERT(memcmp(r.key, "user:1", 6) == 0);
    ASSERT_STR_EQ(r.policy, "gcra:10/1s,burst=2");
    ASSERT_EQ(r.cost, 3);
    ASSERT_EQ(rlt__check_parse("key=a", 5, &r, err, sizeof err), RLT_OK);
    ASSERT_STR_EQ(r.policy, "default");
    ASSERT_EQ(r.cost, 1);
    const char *bad[] = {"",
                         "policy=x",
                         "key=",
                         "key=a&key=b",
                         "key=a&cost=-1",
                         "key=a&cost=1e3",
                         "key=%zz",
                         "key=a%2",
                         "key=a&cost=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rlt__check_parse(bad[i], strlen(bad[i]), &r, err, sizeof err) != RLT_EINVAL)
            RLT_FAIL_("case %zu (%s) accepted", i, bad[i]);
}

TEST(check_query_repeated_policies_are_nested_limits_each_with_its_prefix)
{
    static rlt__check_req r;
    char err[200];
    const char *q = "prefix=56&addr=2001:db8:1:2:3::9&policy=p64&prefix=64&policy=p48&prefix=48"
                    "&policy=p56";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.nlimits, 3);
    ASSERT_STR_EQ(r.policy, "p64");
    ASSERT_STR_EQ(r.key, "2001:db8:1:2::/64");
    ASSERT_STR_EQ(r.more[0].policy, "p48");
    ASSERT_STR_EQ(r.more[0].key, "2001:db8:1::/48");
    ASSERT_STR_EQ(r.more[1].policy, "p56");
    ASSERT_STR_EQ(r.more[1].key, "2001:db8:1::/56");
    /* Without addr, every limit is on the key given. */
    ASSERT_EQ(rlt__check_parse("key=k&policy=a&policy=b", 23, &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.nlimits, 2);
    ASSERT_STR_EQ(r.key, "k");
    ASSERT_STR_EQ(r.more[0].key, "k");
    ASSERT_STR_EQ(r.more[0].policy, "b");
    /* One policy, prefix before or after it: as before. */
    ASSERT_EQ(rlt__check_parse("addr=10.1.2.3&policy=x&prefix=48", 32, &r, err, sizeof err),
              RLT_OK);
    ASSERT_EQ(r.nlimits, 1);
    ASSERT_STR_EQ(r.key, "10.1.2.3");
    const char *bad[] = {
        "addr=::1&policy=a&prefix=64&prefix=48", "addr=::1&prefix=64&prefix=48&policy=a",
        "key=k&policy=a&prefix=64&policy=b",     "addr=::1&policy=a&policy=&prefix=48",
        "key=k&policy=1&policy=2&policy=3&policy=4&policy=5&policy=6&policy=7&policy=8&policy=9",
        "addr=::1::2&policy=a&policy=b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rlt__check_parse(bad[i], strlen(bad[i]), &r, err, sizeof err) != RLT_EINVAL)
            RLT_FAIL_("case %zu (%s) accepted", i, bad[i]);
}

TEST(check_query_errors_name_bad_escapes_and_unknown_parameters)
{
    rlt__check_req r;
    char err[200];
    ASSERT_EQ(rlt__check_parse("key=%ZZ", 7, &r, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "bad percent-encoding in parameter 'key'") != NULL);
    ASSERT_EQ(rlt__check_parse("key=a&policy=x%4", 16, &r, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "bad percent-encoding in parameter 'policy'") != NULL);
    ASSERT_EQ(rlt__check_parse("key=a&polcy=gcra:1/1s", 21, &r, err, sizeof err), RLT_EINVAL);
    ASSERT(strstr(err, "unknown parameter 'polcy'") != NULL);
}

TEST(check_query_takes_the_reservation_parameters)
{
    rlt__check_req r;
    char err[200];
    const char *q = "key=a&cost=40&reserve=1&timeout_ms=30000";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT(r.reserve && r.has_cost);
    ASSERT_EQ(r.timeout_ms, 30000);
    ASSERT_EQ(r.reservation, 0);
    q = "key=a&reservation=00Ff&cost=0";
    ASSERT_EQ(rlt__check_parse(q, strlen(q), &r, err, sizeof err), RLT_OK);
    ASSERT_EQ(r.reservation, 255);
    ASSERT(!r.reserve && r.has_cost && r.cost == 0);
    ASSERT_EQ(rlt__check_parse("key=a", 5, &r, err, sizeof err), RLT_OK);
    ASSERT(!r.has_cost && !r.reserve);
    const char *bad[] = {"key=a&reserve=yes",   "key=a&reserve=",
                         "key=a&timeout_ms=0",  "key=a&timeout_ms=86400001",
                         "key=a&reservation=0", "key=a&reservation=12345678901234567",
                         "key=a&reservation=xy", "key=a&reservation=1&reservation=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rlt__check_parse(bad[i], strlen(bad[i]), &r, err, sizeof err) != RLT_EINVAL)
            RLT_FAIL_("case %zu (%s) accepted", i, bad[i]);
}

TEST(a_truncated_flow_node_is_reported_on_the_last_line)
{
    rlt__config *c = NULL;
    char err[300];
    const char *t1 = "policies: {a: \"gcra:1/1s\"";
    ASSERT_EQ(rlt__config_parse(t1, strlen(t1), "f.yaml", &c, err, sizeof err), RLT_EPARSE);
    ASSERT(strncmp(err, "f.yaml:1: ", 10) == 0);
    const char *t2 = "policies:\n  a: [1, 2\n";
    ASSERT_EQ(rlt__config_parse(t2, strlen(t2), "f.yaml", &c, err, sizeof err), RLT_EPARSE);
    ASSERT(strncmp(err, "f.yaml:2: ", 10) == 0);
}

TEST(rule_store_names_escape_spaces_and_non_ascii_bytes_and_stay_distinct)
{
    rlt__config *c = parse("domain: edge\ndescriptors:\n"
                           "  - key: path\n    value: \"/api v1\"\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "  - key: path\n    value: \"/api%20v1\"\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "  - key: city\n    value: \"Z\xc3\xbcrich\"\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "  - key: long\n    value: \"\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc"
                           "\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\xc3\xbc\"\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n");
    ASSERT(c != NULL);
    ASSERT_EQ(c->nrules, 4);
    ASSERT_STR_EQ(c->rules[0].name, "r:edge.path_/api%20v1");
    ASSERT_STR_EQ(c->rules[1].name, "r:edge.path_/api%2520v1");
    ASSERT_STR_EQ(c->rules[2].name, "r:edge.city_Z%C3%BCrich");
    ASSERT_STR_EQ(c->rules[2].path, "edge.city_Z\xc3\xbcrich");
    ASSERT(strncmp(c->rules[3].name, "r:#", 3) == 0);
    char err[300];
    ASSERT_EQ(rlt__srv_check_config(c, err, sizeof err), 0);
    rlt__config_free(c);
}

TEST(two_rules_with_one_store_name_are_refused_with_both_lines)
{
    /* key "a_b" value "c" and key "a" value "b_c" have one path: edge.a_b_c */
    rlt__config *c = parse("domain: edge\ndescriptors:\n"
                           "  - key: a_b\n    value: c\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
                           "  - key: a\n    value: b_c\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 3}\n");
    ASSERT(c == NULL);
    ASSERT(strstr(err_, "t.yaml:8: rule edge.a_b_c has the same store name") != NULL);
    ASSERT(strstr(err_, "line 5") != NULL);
}
