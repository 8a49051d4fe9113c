/* Typed costs (include/ratelimit/usage.h): the usage and weighting texts, refused inputs, and
 * the exact cost against 128-bit arithmetic on random weightings and usages. */
#include <string.h>

#include "ratelimit/ratelimit.h"
#include "ratelimit/usage.h"
#include "test.h"

static int parse_u(const char *t, rlt_usage *u)
{
    return rlt_usage_parse(t, strlen(t), u);
}
static int parse_w(const char *t, rlt_weights *w)
{
    return rlt_weights_parse(t, strlen(t), w);
}

TEST(a_weighting_prices_input_output_and_cached_tokens_apart)
{
    rlt_weights w;
    rlt_usage u;
    int64_t c = -1;
    ASSERT_EQ(parse_w("in*3+out*15+cached*1", &w), RLT_OK);
    ASSERT_EQ(parse_u("in=1000,out=200,cached=500", &u), RLT_OK);
    ASSERT_EQ(rlt_weights_cost(&w, &u, &c), RLT_OK);
    ASSERT_EQ(c, 3 * 1000 + 15 * 200 + 500);
    ASSERT_EQ(parse_w("1", &w), RLT_OK); /* a request counter: the constant term */
    ASSERT_EQ(rlt_weights_cost(&w, &u, &c), RLT_OK);
    ASSERT_EQ(c, 1);
    ASSERT_EQ(parse_w("2*out+in+5", &w), RLT_OK);
    ASSERT_EQ(rlt_weights_cost(&w, &u, &c), RLT_OK);
    ASSERT_EQ(c, 400 + 1000 + 5);
    char buf[128];
    ASSERT(rlt_weights_format(&w, buf, sizeof buf) > 0);
    ASSERT_STR_EQ(buf, "out*2+in*1+5");
}

TEST(bad_usage_and_weighting_texts_are_refused)
{
    rlt_usage u;
    rlt_weights w;
    const char *bad_u[] = {"",
                           "in",
                           "in=",
                           "=3",
                           "in=-1",
                           "in=1,in=2",
                           "In=1",
                           "in=1,",
                           ",in=1",
                           "in=1,,out=2",
                           "in=01",
                           "1in=1",
                           "in=1x",
                           "a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1",
                           "averyveryverylongname=1"};
    for (size_t i = 0; i < sizeof bad_u / sizeof *bad_u; i++)
        ASSERT_EQ(parse_u(bad_u[i], &u), RLT_EINVAL);
    ASSERT_EQ(parse_u("in=1099511627776", &u), RLT_ERANGE); /* 2^40 */
    ASSERT_EQ(parse_u("in=99999999999999999999999", &u), RLT_ERANGE);
    const char *bad_w[] = {"",      "+",      "in+",   "in++out", "in*",  "*3",
                           "in*-3", "in*3*4", "in+in", "IN*3",    "in*x", "3*4"};
    for (size_t i = 0; i < sizeof bad_w / sizeof *bad_w; i++)
        ASSERT(parse_w(bad_w[i], &w) != RLT_OK);
    ASSERT_EQ(parse_w("in*1099511627776", &w), RLT_ERANGE);
}

TEST(a_cost_that_leaves_int64_is_refused_exactly)
{
    rlt_weights w;
    rlt_usage u;
    int64_t c = 7;
    ASSERT_EQ(parse_w("a*1099511627775+b*1099511627775+c*1099511627775+d*1099511627775+"
                      "e*1099511627775+f*1099511627775+g*1099511627775+h*1099511627775",
                      &w),
              RLT_OK);
    ASSERT_EQ(parse_u("a=1099511627775,b=1099511627775,c=1099511627775,d=1099511627775", &u),
              RLT_OK);
    ASSERT_EQ(rlt_weights_cost(&w, &u, &c), RLT_ERANGE);
    ASSERT_EQ(c, 7);
    /* Random weightings and usages against 128-bit arithmetic. */
    uint64_t x = 0x75a9e;
    for (int t = 0; t < 20000; t++) {
        memset(&w, 0, sizeof w);
        memset(&u, 0, sizeof u);
        __int128 want = 0;
        static const char *names[] = {"in", "out", "cached"};
        for (int j = 0; j < 3; j++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int64_t wt = (int64_t)((x >> 20) & ((1ull << (x % 41)) - 1));
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int64_t ct = (int64_t)((x >> 20) & ((1ull << (x % 41)) - 1));
            strcpy(w.term[j].name, names[j]);
            w.term[j].weight = wt;
            strcpy(u.item[j].name, names[j]);
            u.item[j].count = ct;
            want += (__int128)wt * ct;
        }
        w.n = u.n = 3;
        int rc = rlt_weights_cost(&w, &u, &c);
        if (want > INT64_MAX) {
            ASSERT_EQ(rc, RLT_ERANGE);
        } else {
            ASSERT_EQ(rc, RLT_OK);
            ASSERT(c == (int64_t)want);
        }
    }
}
