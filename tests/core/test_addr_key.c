/* rlt_addr_key: the key made from a client address, against examples and against a model
 * built on libc's inet_pton/inet_ntop (masking the 16 bytes by hand), on random addresses in
 * random spellings. */
#include "core_util.h"

#include <arpa/inet.h>
#include <stdio.h>

static const char *key(const char *a, int prefix, char *buf)
{
    int n = rlt_addr_key(a, strlen(a), prefix, buf, RLT_ADDR_KEY_MAX);
    return n < 0 ? "(refused)" : buf;
}

TEST(ipv4_is_its_own_key_and_mapped_forms_fold_to_it)
{
    char b[RLT_ADDR_KEY_MAX];
    ASSERT_STR_EQ(key("203.0.113.7", 0, b), "203.0.113.7");
    ASSERT_STR_EQ(key("::ffff:203.0.113.7", 0, b), "203.0.113.7");
    ASSERT_STR_EQ(key("::FFFF:cb00:7107", 0, b), "203.0.113.7");
    ASSERT_STR_EQ(key("0:0:0:0:0:ffff:203.0.113.7", 64, b), "203.0.113.7");
    ASSERT_STR_EQ(key("::203.0.113.7", 0, b), "203.0.113.7"); /* IPv4-compatible */
    ASSERT_STR_EQ(key("::1", 128, b), "::1/128");             /* loopback stays IPv6 */
    ASSERT_STR_EQ(key("::", 0, b), "::/56");
    ASSERT_STR_EQ(key("0.0.0.0", 0, b), "0.0.0.0");
    ASSERT_STR_EQ(key("255.255.255.255", 0, b), "255.255.255.255");
}

TEST(ipv6_is_masked_to_the_prefix_in_canonical_form)
{
    char b[RLT_ADDR_KEY_MAX];
    ASSERT_STR_EQ(key("2001:db8:1234:5678:9abc::1", 0, b), "2001:db8:1234:5600::/56");
    ASSERT_STR_EQ(key("2001:DB8:1234:56ff:ffff:ffff:ffff:ffff", 56, b), "2001:db8:1234:5600::/56");
    ASSERT_STR_EQ(key("2001:db8:1234:5678:9abc::1", 64, b), "2001:db8:1234:5678::/64");
    ASSERT_STR_EQ(key("2001:db8:1234:5678:9abc::1", 48, b), "2001:db8:1234::/48");
    ASSERT_STR_EQ(key("2001:db8:1234:5678:9abc::1", 32, b), "2001:db8::/32");
    ASSERT_STR_EQ(key("2001:0db8:0000:0000:0001:0000:0000:0001", 128, b), "2001:db8::1:0:0:1/128");
    ASSERT_STR_EQ(key("2001:db8:1234:5678:9abc::1", 57, b), "2001:db8:1234:5600::/57");
    ASSERT_STR_EQ(key("2001:db8:1234:56ff::", 57, b), "2001:db8:1234:5680::/57");
    ASSERT_STR_EQ(key("fe80::1:2:3:4", 100, b), "fe80::1:2:0:0/100");
}

TEST(a_malformed_address_or_prefix_is_refused)
{
    const char *bad[] = {"",
                         "1.2.3",
                         "1.2.3.4.5",
                         "01.2.3.4",
                         "256.1.1.1",
                         "1.2.3.4 ",
                         " 1.2.3.4",
                         "1..2.3",
                         "1.2.3.-4",
                         "user:42",
                         ":::",
                         "1:2:3:4:5:6:7:8:9",
                         "1::2::3",
                         "12345::",
                         "::g",
                         "1:2:3:4:5:6:7",
                         ":1::",
                         "1::2:",
                         "[::1]",
                         "fe80::1%eth0",
                         "::1.2.3",
                         "1:2:3:4:5:6:7:1.2.3.4",
                         "::ffff:1.2.3.4:5",
                         "1.2.3.4::",
                         "2001:db8::/56",
                         "localhost",
                         "1:2:3:4:5:6:7:8::",
                         "::1:2:3:4:5:6:7:8"};
    char b[RLT_ADDR_KEY_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n = rlt_addr_key(bad[i], strlen(bad[i]), 0, b, sizeof b);
        if (n != RLT_EPARSE) printf("  accepted %s\n", bad[i]);
        ASSERT_EQ(n, RLT_EPARSE);
    }
    ASSERT_EQ(rlt_addr_key("::1", 3, 31, b, sizeof b), RLT_EINVAL);
    ASSERT_EQ(rlt_addr_key("::1", 3, 129, b, sizeof b), RLT_EINVAL);
    ASSERT_EQ(rlt_addr_key(NULL, 0, 0, b, sizeof b), RLT_EINVAL);
    ASSERT_EQ(rlt_addr_key("::1", 3, 0, b, RLT_ADDR_KEY_MAX - 1), RLT_ENOSPC);
}

static uint64_t rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* A random spelling of the 8 groups: leading zeros, case, "::" at a random zero run or none. */
static void spell(const uint16_t g[8], uint64_t *s, char *out)
{
    int z0 = -1, zl = 0;
    if (rnd(s) % 2) {
        int i = (int)(rnd(s) % 8);
        if (g[i] == 0) {
            z0 = i;
            while (i + zl < 8 && g[i + zl] == 0 && (zl < 1 || rnd(s) % 4))
                zl++;
        }
    }
    size_t n = 0;
    for (int i = 0; i < 8; i++) {
        if (i == z0) {
            n += (size_t)sprintf(out + n, i == 0 ? "::" : ":");
            i += zl - 1;
            continue;
        }
        const char *fmt = rnd(s) % 3 == 0 ? "%04x" : rnd(s) % 2 ? "%X" : "%x";
        n += (size_t)sprintf(out + n, fmt, g[i]);
        if (i < 7) out[n++] = ':';
        out[n] = '\0';
    }
    out[n] = '\0';
}

TEST(random_addresses_in_random_spellings_match_the_inet_ntop_model)
{
    uint64_t seed = 0x5eed40u;
    for (int t = 0; t < 200000; t++) {
        uint16_t g[8];
        for (int i = 0; i < 8; i++)
            g[i] = rnd(&seed) % 3 ? (uint16_t)rnd(&seed) : 0;
        char text[64], b[RLT_ADDR_KEY_MAX], model[80];
        spell(g, &seed, text);
        int prefix = 32 + (int)(rnd(&seed) % 97);
        int n = rlt_addr_key(text, strlen(text), prefix, b, sizeof b);
        unsigned char bytes[16];
        ASSERT_EQ(inet_pton(AF_INET6, text, bytes), 1);
        bool zero10 = memcmp(bytes, "\0\0\0\0\0\0\0\0\0\0", 10) == 0;
        if (zero10 && (g[5] == 0xffff || (g[5] == 0 && (g[6] || g[7] > 1)))) {
            snprintf(model, sizeof model, "%u.%u.%u.%u", bytes[12], bytes[13], bytes[14],
                     bytes[15]);
        } else {
            for (int i = 0; i < 16; i++) {
                int keep = prefix - 8 * i;
                if (keep <= 0)
                    bytes[i] = 0;
                else if (keep < 8)
                    bytes[i] &= (unsigned char)(0xff << (8 - keep));
            }
            /* inet_ntop writes a dotted tail for ::/96 and ::ffff:0:0/96: no model there */
            if (memcmp(bytes, "\0\0\0\0\0\0\0\0\0\0", 10) == 0) continue;
            char a[64];
            inet_ntop(AF_INET6, bytes, a, sizeof a);
            snprintf(model, sizeof model, "%s/%d", a, prefix);
        }
        if (n < 0 || strcmp(b, model) != 0)
            printf("  %s /%d: %s, model %s\n", text, prefix, b, model);
        ASSERT_EQ(n, (int)strlen(model));
        ASSERT_STR_EQ(b, model);
    }
}

TEST(every_address_of_one_prefix_gets_one_key)
{
    /* 10^5 distinct addresses inside 2001:db8:77::/48: one /48 key, and the /56 keys are the
     * 256 subnets the rotation touches, never more. */
    uint64_t seed = 48;
    char first[RLT_ADDR_KEY_MAX], b[RLT_ADDR_KEY_MAX];
    ASSERT(rlt_addr_key("2001:db8:77::1", 14, 48, first, sizeof first) > 0);
    for (int t = 0; t < 100000; t++) {
        char a[64];
        snprintf(a, sizeof a, "2001:db8:77:%x:%x:%x:%x:%x", (unsigned)rnd(&seed) & 0xffff,
                 (unsigned)rnd(&seed) & 0xffff, (unsigned)rnd(&seed) & 0xffff,
                 (unsigned)rnd(&seed) & 0xffff, (unsigned)t & 0xffff);
        ASSERT(rlt_addr_key(a, strlen(a), 48, b, sizeof b) > 0);
        ASSERT_STR_EQ(b, first);
    }
}

TEST(random_text_is_accepted_as_ipv6_exactly_when_inet_pton_accepts_it)
{
    /* Short strings over the bytes an address is made of (and a few others): the one-pass
     * parser must agree with libc on every one, valid or not. */
    static const char alpha[] = "0123456789abcdefABCDEF::::....g ";
    uint64_t seed = 0x5eed41u;
    for (int t = 0; t < 300000; t++) {
        char text[48];
        size_t n = 1 + rnd(&seed) % 20;
        for (size_t i = 0; i < n; i++)
            text[i] = alpha[rnd(&seed) % (sizeof alpha - 1)];
        text[n] = '\0';
        if (memchr(text, ':', n) == NULL) continue; /* the IPv4 path: tested above */
        unsigned char bytes[16];
        char b[RLT_ADDR_KEY_MAX];
        bool ours = rlt_addr_key(text, n, 64, b, sizeof b) >= 0;
        bool libc = inet_pton(AF_INET6, text, bytes) == 1;
        if (ours != libc) printf("  \"%s\": ours %d, inet_pton %d\n", text, ours, libc);
        ASSERT_EQ(ours, libc);
    }
}
