/* The shared helpers of core/text.h: the one strict integer parser (every part's integer
 * arguments go through it) and the civil-date conversion, each against a simple model. */
#include "core_util.h"

#include "core/text.h"

#include <errno.h>
#include <time.h>

TEST(integer_arguments_refuse_every_numeric_trap)
{
    int64_t v = 0;
    ASSERT(rlt__parse_i64("0", 1, &v) && v == 0);
    ASSERT(rlt__parse_i64("-5", 2, &v) && v == -5);
    ASSERT(rlt__parse_i64("9223372036854775807", 19, &v) && v == INT64_MAX);
    ASSERT(rlt__parse_i64("-9223372036854775808", 20, &v) && v == INT64_MIN);
    const char *bad[] = {"",    "-",     "-0",  "00",  "01",
                         "+1",  "1e3",   "1e309", "0x10", " 1",
                         "1 ",  "1.5",   "abc", "9223372036854775808",
                         "-9223372036854775809", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        ASSERT(!rlt__parse_i64(bad[i], strlen(bad[i]), &v));
        ASSERT_EQ(v, 7); /* a refused text leaves the output alone */
    }
    ASSERT(!rlt__parse_i64(NULL, 0, &v));
}

/* Model: strtoll over a NUL-terminated copy, plus the strictness rules stated in text.h. */
static bool model_parse(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 20) return false;
    size_t i = s[0] == '-';
    if (i == n) return false;
    for (size_t k = i; k < n; k++)
        if (s[k] < '0' || s[k] > '9') return false;
    if (s[i] == '0' && (n - i > 1 || i == 1)) return false;
    char buf[32];
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) return false;
    *out = v;
    return true;
}

TEST(integer_parser_agrees_with_a_strtoll_model_on_random_text)
{
    static const char alphabet[] = "0123456789-+ .x";
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (int t = 0; t < 200000; t++) {
        char s[24];
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t n = (size_t)(seed >> 59) % 23;
        for (size_t k = 0; k < n; k++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            /* mostly digits, so that long numbers near the int64 edges occur */
            unsigned r = (unsigned)(seed >> 33);
            s[k] = r % 8 ? (char)('0' + r / 8 % 10) : alphabet[r / 8 % (sizeof alphabet - 1)];
        }
        int64_t a = 0, b = 0;
        bool ra = rlt__parse_i64(s, n, &a), rb = model_parse(s, n, &b);
        ASSERT_EQ(ra, rb);
        if (ra) ASSERT_EQ(a, b);
    }
}

TEST(days_from_civil_agrees_with_timegm)
{
    for (int64_t y = 1601; y <= 2400; y += 7)
        for (int m = 1; m <= 12; m++)
            for (int d = 1; d <= 28; d += 9) {
                struct tm tm = {0};
                tm.tm_year = (int)(y - 1900);
                tm.tm_mon = m - 1;
                tm.tm_mday = d;
                ASSERT_EQ(rlt__days_from_civil(y, m, d), (int64_t)timegm(&tm) / 86400);
            }
    ASSERT_EQ(rlt__days_from_civil(1970, 1, 1), 0);
    ASSERT_EQ(rlt__days_from_civil(1969, 12, 31), -1);
    ASSERT_EQ(rlt__days_from_civil(2000, 3, 1), 11017);
}
