/* Tests of envoyproxy/ratelimit's decision shared by /json and gRPC (rls.h) and of the gRPC
 * protobuf codec (pb.h): every shipped config loads, an upstream-style config with the long
 * units loads, the long units count in the epoch's windows, hostile protobuf is refused, and
 * what we encode has the upstream field numbers. */
#include "test.h"

#include "server/config/config.h"
#include "server/config/load.h"
#include "server/envoy/rls.h"
#include "server/http/httpin.h"
#include "server/grpc/pb.h"
#include "server/request/srv.h"

#include <dirent.h>

static char err_[600];

static rlt__srv *open_with(const char *yaml)
{
    rlt__config *c = NULL;
    if (rlt__config_parse(yaml, strlen(yaml), "t.yaml", &c, err_, sizeof err_) != RLT_OK)
        return NULL;
    c->set.snapshot[0] = '\0';
    rlt__srv *s = NULL;
    rlt__srv_open(&s, c, 0, 0, err_, sizeof err_);
    return s;
}

/* Loads path as the daemon does at start (parse, then the store's checks). */
static int load_and_check(const char *path)
{
    rlt__config *c = NULL;
    int st = rlt__config_load(path, &c, err_, sizeof err_);
    if (st == RLT_OK) st = rlt__srv_check_config(c, err_, sizeof err_);
    rlt__config_free(c);
    return st;
}

TEST(every_shipped_config_file_loads_and_passes_the_start_checks)
{
    const char *dirs[] = {RLT_SOURCE_DIR "/config", RLT_SOURCE_DIR "/examples/envoy"};
    int files = 0;
    for (size_t k = 0; k < 2; k++) {
        DIR *d = opendir(dirs[k]);
        ASSERT(d != NULL);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t l = strlen(e->d_name);
            if (l < 6 || strcmp(e->d_name + l - 5, ".yaml") != 0) continue;
            if (strncmp(e->d_name, "envoy", 5) == 0) continue; /* Envoy's own configs */
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
            if (load_and_check(path) != RLT_OK) RLT_FAIL_("%s: %s", path, err_);
            files++;
        }
        closedir(d);
    }
    ASSERT(files >= 3);
    /* The directory form: one domain per file. */
    rlt__config *c = NULL;
    ASSERT_EQ(rlt__config_load(RLT_SOURCE_DIR "/examples/envoy", &c, err_, sizeof err_), RLT_EPARSE);
    ASSERT(strstr(err_, "envoy.yaml") != NULL); /* Envoy's file is not ours: named */
    rlt__config_free(c);
}

/* The shape of envoyproxy/ratelimit's README examples, with every unit it knows. */
static const char *upstream =
    "domain: mongo_cps\n"
    "descriptors:\n"
    "  - key: database\n"
    "    value: users\n"
    "    rate_limit:\n"
    "      unit: second\n"
    "      requests_per_unit: 500\n"
    "  - key: database\n"
    "    value: default\n"
    "    rate_limit:\n"
    "      unit: second\n"
    "      requests_per_unit: 500\n"
    "  - key: generic_key\n"
    "    value: weekly\n"
    "    rate_limit: {unit: week, requests_per_unit: 7}\n"
    "  - key: generic_key\n"
    "    value: monthly\n"
    "    rate_limit: {unit: MONTH, requests_per_unit: 30}\n"
    "  - key: generic_key\n"
    "    value: yearly\n"
    "    detailed_metric: true\n"
    "    rate_limit: {unit: Year, requests_per_unit: 365}\n"
    "  - key: source_cluster\n"
    "    value: proxy\n"
    "    descriptors:\n"
    "      - key: destination_cluster\n"
    "        value: bad_service\n"
    "        rate_limit:\n"
    "          unit: minute\n"
    "          requests_per_unit: 0\n"
    "      - key: destination_cluster\n"
    "        shadow_mode: true\n"
    "        rate_limit:\n"
    "          name: dest\n"
    "          unit: hour\n"
    "          requests_per_unit: 10\n"
    "          replaces:\n"
    "            - name: other\n";

static int decide(rlt__srv *s, const char *body, rlt_ns now, rlt__envoy_result *res)
{
    rlt__envoy_req r;
    char err[300];
    int st = rlt__envoy_parse(body, strlen(body), &r, err, sizeof err);
    rlt__session ss;
    rlt__session_init(s, &ss);
    rlt__scratch *sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    if (st == RLT_OK) st = sc ? rlt__envoy_decide(s, &r, &ss, sc, now, res, err, sizeof err) : -1;
    if (sc && rlt__scratch_mark(sc) != 0) st = -2; /* the keys are given back */
    rlt__scratch_free(sc);
    rlt__envoy_free(&r);
    return st;
}

TEST(an_upstream_style_config_with_week_month_and_year_loads)
{
    rlt__srv *s = open_with(upstream);
    if (s == NULL) RLT_FAIL_("%s", err_);
    rlt__srv_close(s);
    rlt__config *c = NULL;
    const char *bad = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, "
                      "requests_per_unit: 1}\n";
    ASSERT_EQ(rlt__config_parse(bad, strlen(bad), "t.yaml", &c, err_, sizeof err_), RLT_EPARSE);
    ASSERT(strstr(err_, "second, minute, hour, day, week, month or year") != NULL);
}

TEST(long_units_count_in_envoyproxy_ratelimits_epoch_windows)
{
    /* Before rlt__clock_start the daemon's origin is 0: `now` is Unix time. */
    rlt__srv *s = open_with(upstream);
    ASSERT(s != NULL);
    static rlt__envoy_result res;
    const rlt_ns day = 86400 * RLT_NS_PER_S;
    /* 1970-01-04 00:00:10 (a Sunday): weeks start on Thursdays, as Unix time / 604800 does. */
    rlt_ns now = 3 * day + 10 * RLT_NS_PER_S;
    const char *w = "{\"domain\":\"mongo_cps\",\"descriptors\":[{\"entries\":[{\"key\":"
                    "\"generic_key\",\"value\":\"weekly\"}]},{\"entries\":[{\"key\":"
                    "\"generic_key\",\"value\":\"monthly\"}]},{\"entries\":[{\"key\":"
                    "\"generic_key\",\"value\":\"yearly\"}]}]}";
    ASSERT_EQ(decide(s, w, now, &res), RLT_OK);
    ASSERT_EQ(res.st[0].unit, RLT__UNIT_WEEK);
    ASSERT_EQ(res.st[0].reset_s, 4 * 86400 - 10);
    ASSERT_EQ(res.st[0].remaining, 6);
    ASSERT_EQ(res.st[1].unit, RLT__UNIT_MONTH);
    ASSERT_EQ(res.st[1].reset_s, 27 * 86400 - 10);
    ASSERT_EQ(res.st[2].unit, RLT__UNIT_YEAR);
    ASSERT_EQ(res.st[2].reset_s, 362 * 86400 - 10);
    /* The window ends where envoy's does: a new week at day 7 (Thursday 1970-01-08). */
    for (int i = 0; i < 7; i++)
        ASSERT_EQ(decide(s, w, now, &res), RLT_OK);
    ASSERT(res.over && res.st[0].code == RLT__CODE_OVER_LIMIT);
    ASSERT_EQ(decide(s, w, 7 * day, &res), RLT_OK);
    ASSERT_EQ(res.st[0].code, RLT__CODE_OK);
    ASSERT_EQ(res.st[0].remaining, 6);
    ASSERT_EQ(res.st[0].reset_s, 7 * 86400);
    rlt__srv_close(s);
}

TEST(a_blocked_rules_json_answer_omits_zero_fields)
{
    rlt__srv *s = open_with(upstream);
    ASSERT(s != NULL);
    rlt__envoy_req r;
    char err[300];
    const char *b = "{\"domain\":\"mongo_cps\",\"descriptors\":[{\"entries\":[{\"key\":"
                    "\"source_cluster\",\"value\":\"proxy\"},{\"key\":\"destination_cluster\","
                    "\"value\":\"bad_service\"}]}]}";
    ASSERT_EQ(rlt__envoy_parse(b, strlen(b), &r, err, sizeof err), RLT_OK);
    rlt__session ss;
    rlt__session_init(s, &ss);
    rlt__obuf o = {0};
    int code = 0;
    rlt__scratch *sc = rlt__scratch_new(RLT__SCRATCH_CAP);
    ASSERT(sc != NULL);
    ASSERT_EQ(rlt__envoy_decide_json(s, &r, &ss, sc, 30 * RLT_NS_PER_S, &o, &code, err, sizeof err),
              RLT_OK);
    ASSERT_EQ(rlt__scratch_mark(sc), 0);
    rlt__scratch_free(sc);
    rlt__envoy_free(&r);
    rlt__obuf_put(&o, "", 1);
    ASSERT_EQ(code, 429);
    ASSERT_STR_EQ(o.data, "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{\"code\":\"OVER_LIMIT\","
                          "\"currentLimit\":{\"unit\":\"MINUTE\"},\"durationUntilReset\":\"30s\"}]}");
    rlt__obuf_free(&o);
    rlt__srv_close(s);
}

static int dec(const char *bytes, size_t n)
{
    static rlt__envoy_req r;
    char err[200];
    return rlt__pb_decode_rls((const uint8_t *)bytes, n, &r, err, sizeof err);
}

TEST(hostile_protobuf_is_malformed_never_read_out_of_bounds)
{
    ASSERT_EQ(dec("\x0a\x01" "d\x12\x04\x0a\x02\x0a\x00", 9), RLT__PB_OK);
    ASSERT_EQ(dec("\x0a\xff\xff\xff\xff\x0f", 6), RLT__PB_MALFORMED);       /* huge length */
    ASSERT_EQ(dec("\x0a\x01" "d\x12\x05\x0a\x03\x0a\x01", 9), RLT__PB_MALFORMED); /* truncated */
    ASSERT_EQ(dec("\x08\x01", 2), RLT__PB_MALFORMED);                      /* wrong wire type */
    ASSERT_EQ(dec("\x0a\x01" "d\x1b\x1c", 5), RLT__PB_MALFORMED);           /* a group */
    ASSERT_EQ(dec("\x0a\x01" "d\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 15),
              RLT__PB_MALFORMED);                                          /* 11-byte varint */
    ASSERT_EQ(dec("\x0a\x01" "d\x18\x80\x80\x80\x80\x10", 9), RLT__PB_MALFORMED); /* > uint32 */
    ASSERT_EQ(dec("\x00", 1), RLT__PB_MALFORMED);                          /* field 0 */
    ASSERT_EQ(dec("\x0a\x02" "d\x00\x12\x00", 6), RLT__PB_MALFORMED);       /* NUL in a string */
    ASSERT_EQ(dec("", 0), RLT__PB_EMPTY);
    ASSERT_EQ(dec("\x0a\x01" "d", 3), RLT__PB_EMPTY);
    /* Unknown fields of every wire type are skipped. */
    ASSERT_EQ(dec("\x0a\x01" "d\x12\x00\x78\x05\x79\x01\x02\x03\x04\x05\x06\x07\x08\x7d\x01\x02"
                  "\x03\x04",
                  21),
              RLT__PB_OK);
    /* 33 descriptors, 17 entries. */
    char many[3 + 33 * 2];
    memcpy(many, "\x0a\x01" "d", 3);
    for (int i = 0; i < 33; i++)
        memcpy(many + 3 + 2 * i, "\x12\x00", 2);
    ASSERT_EQ(dec(many, 3 + 32 * 2), RLT__PB_OK);
    ASSERT_EQ(dec(many, sizeof many), RLT__PB_TOO_MANY);
    char ents[5 + 17 * 2] = "\x0a\x01" "d\x12\x22";
    for (int i = 0; i < 17; i++)
        memcpy(ents + 5 + 2 * i, "\x0a\x00", 2);
    ASSERT_EQ(dec(ents, sizeof ents), RLT__PB_TOO_MANY);
}

TEST(descriptor_fields_decode_with_the_upstream_numbers)
{
    static rlt__envoy_req r;
    char err[200];
    /* domain "d"; descriptor {entries {key "k" value "v"}, limit {rpu 5, unit WEEK},
     * hits_addend {value 0}}; hits_addend 7 */
    const char m[] = "\x0a\x01" "d"
                     "\x12\x10" "\x0a\x06\x0a\x01k\x12\x01v" "\x12\x04\x08\x05\x10\x07"
                     "\x1a\x00"
                     "\x18\x07";
    ASSERT_EQ(rlt__pb_decode_rls((const uint8_t *)m, sizeof m - 1, &r, err, sizeof err),
              RLT__PB_OK);
    ASSERT_EQ(r.ndesc, 1);
    ASSERT_EQ(r.hits_addend, 7);
    ASSERT_EQ(r.desc[0].nentries, 1);
    ASSERT(r.desc[0].entries[0].klen == 1 && r.desc[0].entries[0].key[0] == 'k');
    ASSERT(r.desc[0].entries[0].vlen == 1 && r.desc[0].entries[0].value[0] == 'v');
    ASSERT_EQ(r.desc[0].limit_rpu, 5);
    ASSERT_EQ(r.desc[0].limit_unit, RLT__UNIT_WEEK);
    ASSERT_EQ(r.desc[0].hits_addend, 0); /* set, and 0: check only */
}

TEST(responses_encode_with_the_upstream_numbers)
{
    rlt__envoy_result res = {.over = true, .n = 2};
    res.st[0] = (rlt__envoy_status){.code = RLT__CODE_OVER_LIMIT, .has_limit = true,
                                    .requests_per_unit = 3, .unit = RLT__UNIT_MINUTE,
                                    .name = "n", .remaining = 0, .reset_s = 9};
    res.st[1] = (rlt__envoy_status){.code = RLT__CODE_OK, .name = ""};
    rlt__pb_header h[] = {{"retry-after", "9"}};
    rlt__obuf o = {0};
    rlt__pb_encode_rls(&res, h, 1, &o);
    /* overall_code 2; status {code 2, current_limit {rpu 3, unit 2, name "n"}, duration {9}};
     * status {code 1}; header {key, value} */
    const char want[] = "\x08\x02"
                        "\x12\x0f\x08\x02\x12\x07\x08\x03\x10\x02\x1a\x01n\x22\x02\x08\x09"
                        "\x12\x02\x08\x01"
                        "\x1a\x10\x0a\x0bretry-after\x12\x01" "9";
    ASSERT_EQ(o.len, sizeof want - 1);
    ASSERT(memcmp(o.data, want, o.len) == 0);
    rlt__obuf_free(&o);
}

TEST(json_descriptors_take_hits_addend_and_limit_as_grpc_does)
{
    rlt__srv *s = open_with(upstream);
    ASSERT(s != NULL);
    static rlt__envoy_result res;
    const char *b = "{\"domain\":\"mongo_cps\",\"descriptors\":[{\"entries\":[{\"key\":"
                    "\"database\",\"value\":\"users\"}],\"hits_addend\":\"0\"},{\"entries\":"
                    "[{\"key\":\"x\",\"value\":\"y\"}],\"limit\":{\"requestsPerUnit\":2,\"unit\":"
                    "\"HOUR\"},\"hitsAddend\":2}]}";
    ASSERT_EQ(decide(s, b, RLT_NS_PER_S, &res), RLT_OK);
    ASSERT_EQ(res.st[0].remaining, 500); /* only looked */
    ASSERT_EQ(res.st[1].requests_per_unit, 2);
    ASSERT_EQ(res.st[1].unit, RLT__UNIT_HOUR);
    ASSERT_EQ(res.st[1].remaining, 0);
    ASSERT(!res.over);
    const char *bad = "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"a\"}],"
                      "\"limit\":{\"requests_per_unit\":1,\"unit\":\"FORTNIGHT\"}}]}";
    ASSERT(decide(s, bad, RLT_NS_PER_S, &res) != RLT_OK);
    rlt__srv_close(s);
}
