/* Unit tests of the command's line parsers: request traces "TIME KEY [COST]" and nginx/Apache
 * combined access logs, including the locale-free date arithmetic. */
#include "cli/cliutil.h"
#include "test.h"

static int trace(const char *line, int64_t unit, rlt__trace_line *out, char *err)
{
    err[0] = '\0';
    return rlt__trace_parse(line, strlen(line), unit, 0, out, err, 200);
}

TEST(trace_line_with_key_and_cost)
{
    rlt__trace_line t;
    char err[200];
    ASSERT_EQ(trace("9.5 alice 3", RLT_NS_PER_S, &t, err), 1);
    ASSERT_EQ(t.time, INT64_C(9500000000));
    ASSERT_EQ(t.klen, 5);
    ASSERT(memcmp(t.key, "alice", 5) == 0);
    ASSERT_EQ(t.cost, 3);
}

TEST(trace_line_cost_defaults_to_one_and_blanks_are_tabs_or_spaces)
{
    rlt__trace_line t;
    char err[200];
    ASSERT_EQ(trace("  250\t  k1  \r", RLT_NS_PER_MS, &t, err), 1);
    ASSERT_EQ(t.time, 250 * RLT_NS_PER_MS);
    ASSERT_EQ(t.klen, 2);
    ASSERT_EQ(t.cost, 1);
    ASSERT_EQ(trace("-3 k 0", RLT_NS_PER_S, &t, err), 1);
    ASSERT_EQ(t.time, -3 * RLT_NS_PER_S);
    ASSERT_EQ(t.cost, 0);
    ASSERT_EQ(trace("1 k 2.0", RLT_NS_PER_S, &t, err), 1);
    ASSERT_EQ(t.cost, 2);
}

TEST(trace_blank_and_comment_lines_are_skipped)
{
    rlt__trace_line t;
    char err[200];
    ASSERT_EQ(trace("", RLT_NS_PER_S, &t, err), 0);
    ASSERT_EQ(trace("   \t ", RLT_NS_PER_S, &t, err), 0);
    ASSERT_EQ(trace("# 1 a 1", RLT_NS_PER_S, &t, err), 0);
    ASSERT_EQ(trace("  #x", RLT_NS_PER_S, &t, err), 0);
}

TEST(trace_malformed_lines_say_what_is_wrong)
{
    rlt__trace_line t;
    char err[200];
    ASSERT_EQ(trace("not-a-time a 1", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "bad TIME 'not-a-time'") != NULL);
    ASSERT_EQ(trace("1", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "missing KEY") != NULL);
    ASSERT_EQ(trace("1 a b", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "bad COST 'b'") != NULL);
    ASSERT_EQ(trace("1 a 1.5", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "not a whole number") != NULL);
    ASSERT_EQ(trace("1 a -1", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "negative") != NULL);
    ASSERT_EQ(trace("1 a 1 x", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "too many fields") != NULL);
    ASSERT_EQ(trace("0.0000000001 a", RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "more precise than 1 ns") != NULL);
    ASSERT_EQ(trace("1.5 a", 1, &t, err), -1); /* --unit ns */
    char longkey[RLT_KEY_MAX + 8];
    memcpy(longkey, "1 ", 2);
    memset(longkey + 2, 'k', RLT_KEY_MAX + 1);
    longkey[RLT_KEY_MAX + 3] = '\0';
    ASSERT_EQ(trace(longkey, RLT_NS_PER_S, &t, err), -1);
    ASSERT(strstr(err, "longer than") != NULL);
    ASSERT_EQ(rlt__trace_parse("1 a\0b", 5, RLT_NS_PER_S, 0, &t, err, 200), -1);
}

TEST(trace_reserve_and_settle_fields_name_a_reservation)
{
    rlt__trace_line t;
    char err[200];
    ASSERT_EQ(trace("1 alice 500 reserve:r1", RLT_NS_PER_S, &t, err), 1);
    ASSERT_EQ(t.op, RLT__TRACE_RESERVE);
    ASSERT_EQ(t.cost, 500);
    ASSERT_EQ(t.nlen, 2);
    ASSERT(memcmp(t.name, "r1", 2) == 0);
    ASSERT_EQ(trace("2 alice 0 settle:r1", RLT_NS_PER_S, &t, err), 1);
    ASSERT_EQ(t.op, RLT__TRACE_SETTLE);
    ASSERT_EQ(t.cost, 0);
    ASSERT_EQ(trace("2 alice 3", RLT_NS_PER_S, &t, err), 1);
    ASSERT_EQ(t.op, RLT__TRACE_REQUEST);
    ASSERT(t.name == NULL);
    ASSERT_EQ(trace("2 alice 3 settle:", RLT_NS_PER_S, &t, err), -1); /* no name */
    ASSERT(strstr(err, "too many fields") != NULL);
    ASSERT_EQ(trace("2 alice 3 reserve:x y", RLT_NS_PER_S, &t, err), -1);
    char lng[128] = "2 a 3 settle:";
    memset(lng + 13, 'n', RLT__TRACE_NAME_MAX + 1);
    lng[13 + RLT__TRACE_NAME_MAX + 1] = '\0';
    ASSERT_EQ(trace(lng, RLT_NS_PER_S, &t, err), -1);
    /* The simulator's traces have no fourth field. */
    ASSERT_EQ(rlt__trace_parse("1 a 1 reserve:x", 15, RLT_NS_PER_S, 1, &t, err, 200), -1);
}

TEST(trace_key_optional_for_the_simulator)
{
    rlt__trace_line t;
    char err[200];
    ASSERT_EQ(rlt__trace_parse("2.5", 3, RLT_NS_PER_S, 1, &t, err, sizeof err), 1);
    ASSERT_EQ(t.time, 2500 * RLT_NS_PER_MS);
    ASSERT(t.key == NULL);
    ASSERT_EQ(t.cost, 1);
}

TEST(civil_to_epoch_known_dates)
{
    int64_t s;
    ASSERT_EQ(rlt__civil_to_epoch(1970, 1, 1, 0, 0, 0, 0, &s), 0);
    ASSERT_EQ(s, 0);
    ASSERT_EQ(rlt__civil_to_epoch(2000, 10, 10, 13, 55, 36, -420, &s), 0);
    ASSERT_EQ(s, INT64_C(971211336)); /* date -u -d '2000-10-10 20:55:36' +%s */
    ASSERT_EQ(rlt__civil_to_epoch(2000, 2, 29, 0, 0, 0, 0, &s), 0);
    ASSERT_EQ(s, INT64_C(951782400));
    ASSERT_EQ(rlt__civil_to_epoch(1969, 12, 31, 23, 59, 59, 0, &s), 0);
    ASSERT_EQ(s, -1);
    ASSERT_EQ(rlt__civil_to_epoch(2038, 1, 19, 3, 14, 8, 0, &s), 0);
    ASSERT_EQ(s, INT64_C(2147483648));
    ASSERT_EQ(rlt__civil_to_epoch(2024, 3, 1, 1, 0, 0, 60, &s), 0); /* +0100 */
    ASSERT_EQ(s, INT64_C(1709251200));
}

TEST(civil_to_epoch_rejects_impossible_dates)
{
    int64_t s;
    ASSERT_EQ(rlt__civil_to_epoch(1900, 2, 29, 0, 0, 0, 0, &s), -1); /* not a leap year */
    ASSERT_EQ(rlt__civil_to_epoch(2001, 4, 31, 0, 0, 0, 0, &s), -1);
    ASSERT_EQ(rlt__civil_to_epoch(2001, 13, 1, 0, 0, 0, 0, &s), -1);
    ASSERT_EQ(rlt__civil_to_epoch(2001, 1, 0, 0, 0, 0, 0, &s), -1);
    ASSERT_EQ(rlt__civil_to_epoch(2001, 1, 1, 24, 0, 0, 0, &s), -1);
    ASSERT_EQ(rlt__civil_to_epoch(2001, 1, 1, 0, 60, 0, 0, &s), -1);
}

static int combined(const char *line, rlt__access_line *out, char *err)
{
    err[0] = '\0';
    return rlt__combined_parse(line, strlen(line), out, err, 200);
}

TEST(combined_line_gives_client_and_utc_seconds)
{
    rlt__access_line a;
    char err[200];
    ASSERT_EQ(combined("127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif "
                       "HTTP/1.0\" 200 2326 \"http://www.example.com/start.html\" "
                       "\"Mozilla/4.08 [en] (Win98; I ;Nav)\"",
                       &a, err),
              1);
    ASSERT_EQ(a.epoch_s, INT64_C(971211336));
    ASSERT_EQ(a.hlen, 9);
    ASSERT(memcmp(a.host, "127.0.0.1", 9) == 0);
}

TEST(common_log_format_and_escaped_quotes_are_accepted)
{
    rlt__access_line a;
    char err[200];
    ASSERT_EQ(
        combined("::1 - - [01/Jan/2024:00:00:00 +0000] \"GET /a\\\"b HTTP/1.1\" 404 -", &a, err),
        1);
    ASSERT_EQ(a.epoch_s, INT64_C(1704067200));
    ASSERT_EQ(a.hlen, 3);
    ASSERT_EQ(combined("", &a, err), 0);
}

static int field_is(const rlt__access_line *a, int k, const char *want)
{
    return k <= a->nfield && a->field[k - 1].n == strlen(want) &&
           memcmp(a->field[k - 1].p, want, strlen(want)) == 0;
}

TEST(combined_line_fields_are_numbered_and_appended_fields_kept)
{
    rlt__access_line a;
    char err[200];
    ASSERT_EQ(combined("10.0.0.1 - bob [10/Oct/2000:13:55:36 -0700] \"GET /x HTTP/1.1\" 200 77 "
                       "\"-\" \"curl/8\" \"key \\\"1\\\"\" 0.004",
                       &a, err),
              1);
    ASSERT_EQ(a.nfield, 11);
    ASSERT(field_is(&a, rlt__access_field("remote_addr"), "10.0.0.1"));
    ASSERT(field_is(&a, rlt__access_field("user"), "bob"));
    ASSERT(field_is(&a, rlt__access_field("remote_user"), "bob"));
    ASSERT(field_is(&a, rlt__access_field("time"), "10/Oct/2000:13:55:36 -0700"));
    ASSERT(field_is(&a, rlt__access_field("request"), "GET /x HTTP/1.1"));
    ASSERT(field_is(&a, rlt__access_field("status"), "200"));
    ASSERT(field_is(&a, rlt__access_field("bytes"), "77"));
    ASSERT(field_is(&a, rlt__access_field("referer"), "-"));
    ASSERT(field_is(&a, rlt__access_field("user_agent"), "curl/8"));
    ASSERT(field_is(&a, 10, "key \\\"1\\\""));
    ASSERT(field_is(&a, rlt__access_field("11"), "0.004"));
    ASSERT_EQ(rlt__access_field("host"), 0);
    ASSERT_EQ(rlt__access_field("0"), 0);
    ASSERT_EQ(rlt__access_field("17"), 0);
    ASSERT_EQ(rlt__access_field("16"), 16);
    ASSERT_EQ(rlt__access_field("99999999999"), 0);
    /* common log format: seven fields */
    ASSERT_EQ(combined("::1 - - [01/Jan/2024:00:00:00 +0000] \"GET /\" 404 -", &a, err), 1);
    ASSERT_EQ(a.nfield, 7);
    ASSERT(field_is(&a, 7, "-"));
    /* a bare token where the referer belongs is refused, after the agent it is a field */
    ASSERT_EQ(combined("::1 - - [01/Jan/2024:00:00:00 +0000] \"GET /\" 404 - bare", &a, err), -1);
}

TEST(combined_malformed_lines_say_what_is_wrong)
{
    rlt__access_line a;
    char err[200];
    ASSERT_EQ(combined("1.2.3.4 - - 10/Oct/2000:13:55:36 -0700 \"GET /\" 200 1", &a, err), -1);
    ASSERT(strstr(err, "'['") != NULL);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Okt/2000:13:55:36 -0700] \"GET /\" 200 1", &a, err), -1);
    ASSERT(strstr(err, "bad timestamp") != NULL);
    ASSERT_EQ(combined("1.2.3.4 - - [31/Feb/2000:13:55:36 -0700] \"GET /\" 200 1", &a, err), -1);
    ASSERT(strstr(err, "bad timestamp") != NULL);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Oct/2000:13:55:36] \"GET /\" 200 1", &a, err), -1);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700 \"GET /\" 200 1", &a, err), -1);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET / 200 1", &a, err), -1);
    ASSERT(strstr(err, "REQUEST") != NULL);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /\" 2000 1", &a, err), -1);
    ASSERT(strstr(err, "STATUS") != NULL);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /\" 200", &a, err), -1);
    ASSERT(strstr(err, "BYTES") != NULL);
    ASSERT_EQ(combined("1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] \"GET /\" 200 1 ref", &a, err),
              -1);
    ASSERT_EQ(combined("1.2.3.4", &a, err), -1);
}

TEST(combined_month_names_need_exact_english_case)
{
    rlt__access_line a;
    char err[200];
    ASSERT_EQ(combined("h - - [10/oct/2000:13:55:36 -0700] \"GET /\" 200 1", &a, err), -1);
    ASSERT_EQ(combined("h - - [10/Dec/2000:13:55:36 +1400] \"GET /\" 200 1", &a, err), 1);
}

/* Random and mutated lines through every parser (under ASan in the asan build): they must
 * answer 1, 0 or -1 without reading outside the line, and a parsed trace time must round-trip. */
TEST(parsers_survive_random_and_mutated_bytes)
{
    static const char *seeds[] = {"9.5 alice 3", "-0.000000001 k 0", "# c",
                                  "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700] "
                                  "\"GET / HTTP/1.0\" 200 1 \"r\" \"a\""};
    static const char alphabet[] = "0123456789.- \t#[]/:\"\\+-abcOctJan\r";
    uint64_t x = 0x9E3779B97F4A7C15u;
    char err[200];
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        char buf[160];
        size_t len;
        if (i % 2) {
            const char *s = seeds[(x >> 8) % 4];
            len = strlen(s);
            memcpy(buf, s, len);
            for (int k = 0; k < 3; k++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf[(x >> 3) % len] = alphabet[(x >> 20) % (sizeof alphabet - 1)];
            }
            len = (x >> 40) % 2 ? len : (x >> 30) % (len + 1); /* sometimes truncated */
        } else {
            len = (x >> 50) % 64;
            for (size_t k = 0; k < len; k++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf[k] =
                    (x >> 11) % 3 ? alphabet[(x >> 20) % (sizeof alphabet - 1)] : (char)(x >> 33);
            }
        }
        /* Exact-length heap copy so ASan catches any read past the end. */
        char *line = malloc(len ? len : 1);
        ASSERT(line != NULL);
        memcpy(line, buf, len);
        rlt__trace_line t;
        int rc = rlt__trace_parse(line, len, RLT_NS_PER_S, i % 3 == 0, &t, err, sizeof err);
        ASSERT(rc >= -1 && rc <= 1);
        if (rc == 1) {
            char txt[RLT__DEC_BUF];
            int64_t back;
            rlt__dec_format(txt, t.time, RLT_NS_PER_S);
            ASSERT_EQ(rlt__dec_parse(txt, strlen(txt), RLT_NS_PER_S, &back), RLT__DEC_OK);
            ASSERT_EQ(back, t.time);
            ASSERT(t.cost >= 0);
        }
        rlt__access_line a;
        rc = rlt__combined_parse(line, len, &a, err, sizeof err);
        ASSERT(rc >= -1 && rc <= 1);
        if (rc == 1) ASSERT(a.hlen > 0 && a.host >= line && a.host + a.hlen <= line + len);
        int64_t v;
        rc = rlt__dec_parse(line, len, RLT_NS_PER_MS, &v);
        ASSERT(rc <= 0 && rc >= RLT__DEC_RANGE);
        free(line);
    }
}
