/* Unit tests of the command's exact decimals: parsing times into integer ns and formatting
 * durations back as trimmed decimals, with no floating point anywhere. */
#include "cli/cliutil.h"
#include "test.h"

static int64_t parse(const char *s, int64_t scale, int *rc)
{
    int64_t v = -12345;
    *rc = rlt__dec_parse(s, strlen(s), scale, &v);
    return v;
}

static const char *fmt(int64_t v, int64_t scale)
{
    static char buf[RLT__DEC_BUF];
    rlt__dec_format(buf, v, scale);
    return buf;
}

TEST(dec_parse_seconds_to_exact_ns)
{
    int rc;
    ASSERT_EQ(parse("9.5", RLT_NS_PER_S, &rc), INT64_C(9500000000));
    ASSERT_EQ(rc, RLT__DEC_OK);
    ASSERT_EQ(parse("0.000000001", RLT_NS_PER_S, &rc), 1);
    ASSERT_EQ(parse("-1.25", RLT_NS_PER_S, &rc), INT64_C(-1250000000));
    ASSERT_EQ(parse("007", 1, &rc), 7);
    ASSERT_EQ(parse("0", RLT_NS_PER_MS, &rc), 0);
    ASSERT_EQ(parse("2.5", RLT_NS_PER_MS, &rc), 2500000);
    ASSERT_EQ(parse("9223372036.854775807", RLT_NS_PER_S, &rc), INT64_MAX);
    ASSERT_EQ(rc, RLT__DEC_OK);
}

TEST(dec_parse_accepts_zeros_beyond_the_precision)
{
    int rc;
    ASSERT_EQ(parse("1.0000000000000", RLT_NS_PER_S, &rc), RLT_NS_PER_S);
    ASSERT_EQ(rc, RLT__DEC_OK);
    ASSERT_EQ(parse("2.000", 1, &rc), 2);
    ASSERT_EQ(rc, RLT__DEC_OK);
}

TEST(dec_parse_rejects_more_precision_than_the_unit)
{
    int rc;
    parse("1.0000000001", RLT_NS_PER_S, &rc);
    ASSERT_EQ(rc, RLT__DEC_PRECISION);
    parse("2.5", 1, &rc);
    ASSERT_EQ(rc, RLT__DEC_PRECISION);
    parse("0.0001", RLT_NS_PER_US, &rc); /* --unit us: 3 places */
    ASSERT_EQ(rc, RLT__DEC_PRECISION);
}

TEST(dec_parse_rejects_bad_syntax)
{
    static const char *bad[] = {"",   "-",     ".5",   "5.",  "1e3", "+1",  " 1",
                                "1 ", "1.2.3", "0x10", "--1", "1,5", "abc", "1.-2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc;
        int64_t v = parse(bad[i], RLT_NS_PER_S, &rc);
        if (rc != RLT__DEC_SYNTAX)
            RLT_FAIL_("'%s' parsed (rc %d, v %lld)", bad[i], rc, (long long)v);
    }
}

TEST(dec_parse_reports_overflow_as_range)
{
    int rc;
    parse("9223372036.854775808", RLT_NS_PER_S, &rc);
    ASSERT_EQ(rc, RLT__DEC_RANGE);
    parse("99999999999999999999999", 1, &rc);
    ASSERT_EQ(rc, RLT__DEC_RANGE);
    parse("10000000000", RLT_NS_PER_S, &rc);
    ASSERT_EQ(rc, RLT__DEC_RANGE);
}

TEST(dec_format_trims_trailing_zeros)
{
    ASSERT_STR_EQ(fmt(250000000, RLT_NS_PER_S), "0.25");
    ASSERT_STR_EQ(fmt(3 * RLT_NS_PER_S, RLT_NS_PER_S), "3");
    ASSERT_STR_EQ(fmt(500000000, RLT_NS_PER_S), "0.5");
    ASSERT_STR_EQ(fmt(1, RLT_NS_PER_S), "0.000000001");
    ASSERT_STR_EQ(fmt(0, RLT_NS_PER_S), "0");
    ASSERT_STR_EQ(fmt(-1, 1), "-1");
    ASSERT_STR_EQ(fmt(-1500000, RLT_NS_PER_MS), "-1.5");
    ASSERT_STR_EQ(fmt(1234567, RLT_NS_PER_MS), "1.234567");
    ASSERT_STR_EQ(fmt(INT64_MAX, RLT_NS_PER_S), "9223372036.854775807");
    ASSERT_STR_EQ(fmt(INT64_MIN, RLT_NS_PER_S), "-9223372036.854775808");
    ASSERT_STR_EQ(fmt(1050, 100), "10.5");
}

TEST(dec_format_then_parse_round_trips)
{
    static const int64_t scales[] = {1, RLT_NS_PER_US, RLT_NS_PER_MS, RLT_NS_PER_S};
    uint64_t x = 88172645463325252u;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int64_t v = (int64_t)(x >> (x % 60)) * ((x & 1) ? -1 : 1);
        int64_t scale = scales[i % 4], back;
        const char *t = fmt(v, scale);
        ASSERT_EQ(rlt__dec_parse(t, strlen(t), scale, &back), RLT__DEC_OK);
        ASSERT_EQ(back, v);
    }
}

TEST(frac_format_rounds_and_floors)
{
    char b[64];
    rlt__frac_format(b, sizeof b, 388, 100, 2, RLT__ROUND, 0);
    ASSERT_STR_EQ(b, "3.88");
    rlt__frac_format(b, sizeof b, 2, 3, 2, RLT__ROUND, 0);
    ASSERT_STR_EQ(b, "0.67");
    rlt__frac_format(b, sizeof b, 2, 3, 2, RLT__FLOOR, 0);
    ASSERT_STR_EQ(b, "0.66");
    rlt__frac_format(b, sizeof b, 5, 2, 0, RLT__ROUND, 0);
    ASSERT_STR_EQ(b, "3");
    rlt__frac_format(b, sizeof b, 4, 10, 2, RLT__ROUND, 0);
    ASSERT_STR_EQ(b, "0.40");
    rlt__frac_format(b, sizeof b, 4, 10, 2, RLT__ROUND, 1);
    ASSERT_STR_EQ(b, "0.4");
    rlt__frac_format(b, sizeof b, 10, 1, 3, RLT__ROUND, 1);
    ASSERT_STR_EQ(b, "10");
    rlt__frac_format(b, sizeof b, -1, 3, 2, RLT__FLOOR, 0);
    ASSERT_STR_EQ(b, "-0.34");
    rlt__frac_format(b, sizeof b, -1, 3, 2, RLT__ROUND, 0);
    ASSERT_STR_EQ(b, "-0.33");
    ASSERT_EQ(rlt__frac_format(b, 3, 12345, 1, 0, RLT__ROUND, 0), 0); /* does not fit */
}

TEST(unit_names_map_to_ns)
{
    ASSERT_EQ(rlt__dec_unit_ns("s"), RLT_NS_PER_S);
    ASSERT_EQ(rlt__dec_unit_ns("ms"), RLT_NS_PER_MS);
    ASSERT_EQ(rlt__dec_unit_ns("us"), RLT_NS_PER_US);
    ASSERT_EQ(rlt__dec_unit_ns("ns"), 1);
    ASSERT_EQ(rlt__dec_unit_ns("m"), 0);
    ASSERT_EQ(rlt__dec_unit_ns(""), 0);
}
