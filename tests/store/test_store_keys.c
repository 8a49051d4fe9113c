/* Store basics: the hash and checksum against reference vectors, key and name validation,
 * policies and their changes (keep / reset / scale), tiers, multi-limit answers, stats. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>

#include "store/aeshash.h"
#include "store/crc32c.h"
#include "store/siphash.h"
#include "store/store.h"
#include "store/table.h"
#include "store_test_util.h"

TEST(siphash24_matches_reference_vectors)
{
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    ASSERT_EQ(rlt__siphash24(key, msg, 0), 0x726fdb47dd0e0e31ULL);
    ASSERT_EQ(rlt__siphash24(key, msg, 8), 0x93f5f5799a932462ULL);
    ASSERT_EQ(rlt__siphash24(key, msg, 15), 0xa129ca6149be45e5ULL);
}

TEST(siphash13_depends_on_every_byte_and_the_secret)
{
    uint8_t k1[16] = {1}, k2[16] = {2}, msg[40] = {0};
    uint64_t base = rlt__siphash13(k1, msg, sizeof msg);
    ASSERT_NE(base, rlt__siphash13(k2, msg, sizeof msg));
    for (size_t i = 0; i < sizeof msg; i++) {
        msg[i] ^= 1;
        ASSERT_NE(base, rlt__siphash13(k1, msg, sizeof msg));
        msg[i] ^= 1;
    }
    ASSERT_NE(rlt__siphash13(k1, msg, 39), rlt__siphash13(k1, msg, 40));
}

/* SipHash written the plain way (byte-wise message words, no expanded key), to check the
 * store's inline rounds and their overlapping tail loads at every length around the 8-byte
 * blocks. */
static uint64_t rotl_ref(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t siphash_ref(const uint8_t k[16], const uint8_t *m, size_t len, int c, int d)
{
    uint64_t k0 = 0, k1 = 0;
    for (int i = 7; i >= 0; i--) {
        k0 = k0 << 8 | k[i];
        k1 = k1 << 8 | k[8 + i];
    }
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
                     k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
    for (size_t off = 0; off <= len; off += 8) {
        uint64_t w = 0;
        int last = off + 8 > len;
        for (size_t i = 0; i < 8 && off + i < len; i++)
            w |= (uint64_t)m[off + i] << (8 * i);
        if (last) w |= (uint64_t)(len & 0xff) << 56;
        v[3] ^= w;
        for (int r = 0; r < c; r++) {
            v[0] += v[1], v[1] = rotl_ref(v[1], 13), v[1] ^= v[0], v[0] = rotl_ref(v[0], 32);
            v[2] += v[3], v[3] = rotl_ref(v[3], 16), v[3] ^= v[2];
            v[0] += v[3], v[3] = rotl_ref(v[3], 21), v[3] ^= v[0];
            v[2] += v[1], v[1] = rotl_ref(v[1], 17), v[1] ^= v[2], v[2] = rotl_ref(v[2], 32);
        }
        v[0] ^= w;
        if (last) break;
    }
    v[2] ^= 0xff;
    for (int r = 0; r < d; r++) {
        v[0] += v[1], v[1] = rotl_ref(v[1], 13), v[1] ^= v[0], v[0] = rotl_ref(v[0], 32);
        v[2] += v[3], v[3] = rotl_ref(v[3], 16), v[3] ^= v[2];
        v[0] += v[3], v[3] = rotl_ref(v[3], 21), v[3] ^= v[0];
        v[2] += v[1], v[1] = rotl_ref(v[1], 17), v[1] ^= v[2], v[2] = rotl_ref(v[2], 32);
    }
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

TEST(inline_siphash_matches_a_bytewise_reference_at_every_length)
{
    uint8_t key[16], buf[80];
    uint64_t rng = 7;
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)tu_rand(&rng);
    for (int i = 0; i < 80; i++)
        buf[i] = (uint8_t)tu_rand(&rng);
    for (size_t len = 0; len <= 64; len++) {
        /* From an odd offset too, so the overlapping loads are unaligned. */
        for (size_t off = 0; off < 2; off++) {
            ASSERT_EQ(rlt__siphash13(key, buf + off, len), siphash_ref(key, buf + off, len, 1, 3));
            ASSERT_EQ(rlt__siphash24(key, buf + off, len), siphash_ref(key, buf + off, len, 2, 4));
        }
    }
    /* The reference itself against the paper's vector (key 00..0f, message 00..0e). */
    uint8_t k[16], m[15];
    for (int i = 0; i < 16; i++)
        k[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        m[i] = (uint8_t)i;
    ASSERT_EQ(siphash_ref(k, m, 15, 2, 4), 0xa129ca6149be45e5ULL);
}

/* The AES hash (src/store/aeshash.c).  Where the CPU has no AES-NI these return at once: the
 * store then runs SipHash, which the tests above and the *_siphash executables cover. */
TEST(aeshash_depends_on_every_bit_the_length_and_the_secret)
{
    if (!rlt__aeshash_supported()) return;
    uint8_t s1[16], s2[16], msg[81];
    for (int i = 0; i < 16; i++)
        s1[i] = s2[i] = (uint8_t)(i * 13 + 5);
    s2[15] ^= 0x80;
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 31 + 7);
    rlt__aeskey k1, k2;
    rlt__aeskey_init(&k1, s1);
    rlt__aeskey_init(&k2, s2);
    for (size_t len = 0; len <= 80; len++) {
        const uint64_t base = rlt__aeshash(&k1, msg, len);
        ASSERT_NE(base, rlt__aeshash(&k2, msg, len));
        ASSERT_NE(base, rlt__aeshash(&k1, msg, len + 1));
        uint8_t save = msg[len];
        msg[len] = 0; /* a zero byte more is another key */
        ASSERT_NE(base, rlt__aeshash(&k1, msg, len + 1));
        msg[len] = save;
        for (size_t i = 0; i < len; i++) {
            for (int b = 0; b < 8; b++) {
                msg[i] ^= (uint8_t)(1u << b);
                ASSERT_NE(base, rlt__aeshash(&k1, msg, len));
                msg[i] ^= (uint8_t)(1u << b);
            }
        }
    }
}

TEST(aeshash_reads_only_the_key_bytes_at_any_alignment)
{
    if (!rlt__aeshash_supported()) return;
    uint8_t secret[16] = {9, 8, 7};
    rlt__aeskey k;
    rlt__aeskey_init(&k, secret);
    uint8_t big[128];
    for (size_t len = 1; len <= 80; len++) {
        /* Exactly len bytes on the heap: ASan reports any read past them. */
        uint8_t *m = malloc(len);
        ASSERT(m != NULL);
        for (size_t i = 0; i < len; i++)
            m[i] = (uint8_t)(len * 3 + i);
        const uint64_t h = rlt__aeshash(&k, m, len);
        for (size_t off = 1; off < 16; off++) {
            memset(big, 0xa5, sizeof big);
            memcpy(big + off, m, len);
            ASSERT_EQ(rlt__aeshash(&k, big + off, len), h);
        }
        free(m);
    }
}

#if RLT__AESHASH_X86
static RLT__AESHASH_TARGET uint64_t aeshash_8to16(const rlt__aeskey *k, const void *m, size_t len)
{
    return rlt__aeshash_8to16(k, m, len);
}
#endif

/* The single call's entry hashes keys of 8..16 bytes with rlt__aeshash_8to16: it must give
 * rlt__aeshash's value for every such key and secret (a different one would put the key in
 * another slot than the batch, reserve and snapshot paths do), and read only the key's bytes. */
TEST(aeshash_of_8_to_16_bytes_is_the_general_hash)
{
#if RLT__AESHASH_X86
    if (!rlt__aeshash_supported()) return;
    uint64_t r = 0x243F6A8885A308D3u;
    for (int round = 0; round < 2000; round++) {
        uint8_t secret[16];
        for (int i = 0; i < 16; i++)
            secret[i] = (uint8_t)((r = r * 6364136223846793005u + 1442695040888963407u) >> 56);
        rlt__aeskey k;
        rlt__aeskey_init(&k, secret);
        const size_t len = 8 + (size_t)(round % 9);
        uint8_t *m = malloc(len); /* exactly len bytes: ASan reports a read past them */
        ASSERT(m != NULL);
        for (size_t i = 0; i < len; i++)
            m[i] = (uint8_t)((r = r * 6364136223846793005u + 1442695040888963407u) >> 56);
        ASSERT_EQ(aeshash_8to16(&k, m, len), rlt__aeshash(&k, m, len));
        free(m);
    }
#endif
}

TEST(aeshash_spreads_similar_keys_evenly_over_shards_and_tags)
{
    if (!rlt__aeshash_supported()) return;
    uint8_t secret[16] = {1, 2, 3, 4};
    rlt__aeskey k;
    rlt__aeskey_init(&k, secret);
    /* 65,536 keys "user:<n>" into 1,024 shards (the low bits, the default shard count) and 64
     * tag ranges (the top bits): 64 expected per shard (standard deviation 8; a shard outside
     * 28..104 is a flaw at 4.5 deviations) and 1,024 per tag range (deviation 32; 800..1,250). */
    enum { N = 65536 };
    unsigned lo[1024] = {0}, hi[64] = {0};
    for (unsigned n = 0; n < N; n++) {
        char key[32];
        int len = snprintf(key, sizeof key, "user:%u", n);
        uint64_t h = rlt__aeshash(&k, key, (size_t)len);
        lo[h & 1023]++;
        hi[h >> 58]++;
    }
    for (int i = 0; i < 1024; i++)
        ASSERT(lo[i] >= 28 && lo[i] <= 104);
    for (int i = 0; i < 64; i++)
        ASSERT(hi[i] >= 800 && hi[i] <= 1250);
}

TEST(store_hashes_with_aes_where_the_cpu_has_it_and_both_hashes_decide_alike)
{
    rlt_store_options o;
    memset(&o, 0, sizeof o);
    rlt_store *a = NULL, *b = NULL, *c = NULL;
    ASSERT_EQ(rlt_store_open(&a, &o), RLT_OK);
    ASSERT_EQ(a->use_aes, rlt__aeshash_supported());
    ASSERT_EQ(rlt__store_open_hash(&b, &o, RLT__HASH_SIP), RLT_OK);
    ASSERT(!b->use_aes);
    ASSERT_EQ(rlt__store_open_hash(&c, &o, RLT__HASH_AES),
              rlt__aeshash_supported() ? RLT_OK : RLT_EINVAL);
    ASSERT_EQ(c != NULL, rlt__aeshash_supported());
    rlt_store_close(c);
    ASSERT_EQ(rlt__store_open_hash(&c, &o, 7), RLT_EINVAL);
    ASSERT(c == NULL);
    int ia = tu_add(a, "g", "gcra:5/1s,burst=3"), ib = tu_add(b, "g", "gcra:5/1s,burst=3");
    ASSERT(ia >= 0 && ib >= 0);
    uint64_t x = 42;
    for (int i = 0; i < 20000; i++) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%u", (unsigned)tu_below(&x, 300));
        rlt_ns now = (rlt_ns)i * 1000000;
        rlt_decision da, db;
        ASSERT_EQ(rlt_store_decide(a, ia, key, (size_t)len, now, 1, &da), RLT_OK);
        ASSERT_EQ(rlt_store_decide(b, ib, key, (size_t)len, now, 1, &db), RLT_OK);
        ASSERT_EQ(da.allowed, db.allowed);
        ASSERT_EQ(da.remaining, db.remaining);
        ASSERT_EQ(da.retry_after, db.retry_after);
        ASSERT_EQ(da.reset_after, db.reset_after);
    }
    rlt_store_close(a);
    rlt_store_close(b);
}

TEST(crc32c_matches_check_value)
{
    ASSERT_EQ(rlt__crc32c(0, "123456789", 9), 0xE3069283u);
    uint32_t c = rlt__crc32c(0, "1234", 4);
    ASSERT_EQ(rlt__crc32c(c, "56789", 5), 0xE3069283u);
}

TEST(empty_and_too_long_keys_are_refused_with_ekeylen)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "gcra:10/s");
    ASSERT_EQ(id, 0);
    uint8_t big[RLT_KEY_MAX + 1];
    memset(big, 'k', sizeof big);
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, id, "", 0, 0, 1, &d), RLT_EKEYLEN);
    ASSERT_EQ(rlt_store_decide(s, id, big, sizeof big, 0, 1, &d), RLT_EKEYLEN);
    ASSERT_EQ(rlt_store_decide(s, id, big, RLT_KEY_MAX, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_store_decide(s, id, NULL, 3, 0, 1, &d), RLT_EINVAL);
    ASSERT_EQ(rlt_store_reset(s, id, big, sizeof big), RLT_EKEYLEN);
    ASSERT_EQ(rlt_store_assign_tier(s, "", 0, "x"), RLT_EKEYLEN);
    ASSERT_EQ(rlt_store_decide(s, id, "a", 1, 0, -1, &d), RLT_EINVAL);
    rlt_store_close(s);
}

/* Bad arguments on every entry of the single call (the AES entry's fast path for keys of
 * 8..16 bytes, its general path for other lengths, SipHash; small and big stores): a negative
 * cost, a NULL decision or key is refused with RLT_EINVAL and changes nothing: no key is
 * stored, no decision counted, and the next good call decides as in a store that never saw the
 * bad ones. */
TEST(bad_arguments_are_refused_on_every_entry_and_change_nothing)
{
    static const char *const pols[] = {"gcra:10/s", "fixed_window:3/m"};
    static const size_t lens[] = {5, 8, 12, 16, 20};
    const uint8_t key[20] = "0123456789abcdefghij", other[20] = "ABCDEFGHIJKLMNOPQRST";
    for (int mode = 0; mode < 3; mode++) {
        for (size_t pi = 0; pi < 2; pi++) {
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                rlt_store *st[2];
                for (int k = 0; k < 2; k++) {
                    rlt_store_options o;
                    memset(&o, 0, sizeof o);
                    ASSERT_EQ(rlt__store_open_hash(&st[k], &o,
                                                   mode == 2 ? RLT__HASH_SIP : RLT__HASH_AUTO),
                              RLT_OK);
                    if (mode == 1) rlt__store_force_big(st[k]);
                    ASSERT_EQ(tu_add(st[k], "p", pols[pi]), 0);
                }
                const size_t len = lens[li];
                rlt_decision a, b;
                const int64_t t0 = 5 * RLT_NS_PER_S;
                ASSERT_EQ(rlt_store_decide(st[0], 0, key, len, t0, 1, &a), RLT_OK);
                ASSERT_EQ(rlt_store_decide(st[1], 0, key, len, t0, 1, &b), RLT_OK);
                rlt_store_stats before, after;
                rlt_store_stats_get(st[0], &before);
                /* Only st[0] sees the bad calls, on the stored key and on a new one. */
                memset(&a, 0x5a, sizeof a);
                ASSERT_EQ(rlt_store_decide(st[0], 0, key, len, t0 + 1, -1, &a), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], 0, other, len, t0 + 1, -1, &a), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], 0, key, len, t0 + 1, INT64_MIN, &a), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], 0, key, len, t0 + 1, 1, NULL), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], 0, other, len, t0 + 1, 1, NULL), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], 0, NULL, len, t0 + 1, 1, &a), RLT_EINVAL);
                /* With an unknown policy as well, the bad cost is what is reported. */
                ASSERT_EQ(rlt_store_decide(st[0], 7, key, len, t0 + 1, -1, &a), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], -1, key, len, t0 + 1, -1, &a), RLT_EINVAL);
                ASSERT_EQ(rlt_store_decide(st[0], 7, key, len, t0 + 1, 1, &a), RLT_ENOENT);
                rlt_store_stats_get(st[0], &after);
                ASSERT_EQ(after.keys, before.keys);
                ASSERT_EQ(after.allowed, before.allowed);
                ASSERT_EQ(after.denied, before.denied);
                for (int step = 1; step <= 4; step++) {
                    ASSERT_EQ(rlt_store_decide(st[0], 0, key, len, t0 + step, 1, &a), RLT_OK);
                    ASSERT_EQ(rlt_store_decide(st[1], 0, key, len, t0 + step, 1, &b), RLT_OK);
                    ASSERT_EQ(memcmp(&a, &b, sizeof a), 0);
                }
                rlt_store_close(st[0]);
                rlt_store_close(st[1]);
            }
        }
    }
}

TEST(binary_keys_with_nul_bytes_are_distinct)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "fixed_window:1/m");
    rlt_decision d;
    const char a[] = {'x', 0, 'y'}, b[] = {'x', 0, 'z'};
    ASSERT_EQ(rlt_store_decide(s, id, a, 3, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_store_decide(s, id, b, 3, 0, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_store_decide(s, id, a, 1, 0, 1, &d), RLT_OK); /* "x" alone: a third key */
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_store_decide(s, id, a, 3, 0, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 3);
    rlt_store_close(s);
}

TEST(policy_names_are_validated_and_ids_are_stable)
{
    rlt_store *s = tu_store(0, false, 0);
    rlt_policy p = tu_policy("gcra:5/s");
    int id = -1;
    ASSERT_EQ(rlt_store_set_policy(s, "", &p, RLT_CHANGE_RESET, &id), RLT_EINVAL);
    ASSERT_EQ(rlt_store_set_policy(s, "has space", &p, RLT_CHANGE_RESET, &id), RLT_EINVAL);
    char longname[RLT_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname);
    longname[RLT_NAME_MAX + 1] = 0;
    ASSERT_EQ(rlt_store_set_policy(s, longname, &p, RLT_CHANGE_RESET, &id), RLT_EINVAL);
    longname[RLT_NAME_MAX] = 0;
    ASSERT_EQ(rlt_store_set_policy(s, longname, &p, RLT_CHANGE_RESET, &id), RLT_OK);
    ASSERT_EQ(id, 0);
    ASSERT_EQ(rlt_store_set_policy(s, "api", &p, RLT_CHANGE_RESET, &id), RLT_OK);
    ASSERT_EQ(id, 1);
    rlt_policy q = tu_policy("gcra:50/s");
    ASSERT_EQ(rlt_store_set_policy(s, "api", &q, RLT_CHANGE_KEEP, &id), RLT_OK);
    ASSERT_EQ(id, 1);
    ASSERT_EQ(rlt_store_policy_id(s, "api"), 1);
    ASSERT_EQ(rlt_store_policy_id(s, "nope"), RLT_ENOENT);
    rlt_policy got;
    ASSERT_EQ(rlt_store_get_policy(s, 1, &got), RLT_OK);
    ASSERT_EQ(got.limit, 50);
    ASSERT_EQ(rlt_store_get_policy(s, 7, &got), RLT_ENOENT);
    rlt_policy bad = p;
    bad.limit = 0;
    ASSERT_EQ(rlt_store_set_policy(s, "bad", &bad, RLT_CHANGE_RESET, &id), RLT_EINVAL);
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, 9, "k", 1, 0, 1, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_store_decide(s, -1, "k", 1, 0, 1, &d), RLT_ENOENT);
    rlt_store_close(s);
}

/* Uses `n` of a 100-per-minute token bucket on key "k", changes the policy, and returns the
 * remaining reported by a peek. */
static int64_t remaining_after_change(const char *to, rlt_change how, int n)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "token_bucket:100/m");
    rlt_decision d;
    for (int i = 0; i < n; i++)
        rlt_store_decide(s, id, "k", 1, RLT_NS_PER_S, 1, &d);
    rlt_policy q = tu_policy(to);
    rlt_store_set_policy(s, "p", &q, how, NULL);
    rlt_store_decide(s, id, "k", 1, RLT_NS_PER_S, 0, &d);
    rlt_store_close(s);
    return d.remaining;
}

TEST(policy_change_keep_reset_scale)
{
    ASSERT_EQ(remaining_after_change("token_bucket:200/m", RLT_CHANGE_KEEP, 30), 170);
    ASSERT_EQ(remaining_after_change("token_bucket:200/m", RLT_CHANGE_SCALE, 30), 140);
    ASSERT_EQ(remaining_after_change("token_bucket:200/m", RLT_CHANGE_RESET, 30), 200);
    /* Another algorithm cannot carry state: KEEP falls back to RESET. */
    ASSERT_EQ(remaining_after_change("gcra:200/m", RLT_CHANGE_KEEP, 30), 200);
    /* Keep never leaves more used than the new capacity. */
    ASSERT_EQ(remaining_after_change("token_bucket:10/m", RLT_CHANGE_KEEP, 30), 0);
}

TEST(policy_change_touches_only_that_policy)
{
    rlt_store *s = tu_store(0, false, 0);
    int a = tu_add(s, "a", "fixed_window:5/m"), b = tu_add(s, "b", "fixed_window:5/m");
    rlt_decision d;
    for (int i = 0; i < 3; i++) {
        rlt_store_decide(s, a, "k", 1, 0, 1, &d);
        rlt_store_decide(s, b, "k", 1, 0, 1, &d);
    }
    rlt_policy q = tu_policy("fixed_window:5/m");
    ASSERT_EQ(rlt_store_set_policy(s, "a", &q, RLT_CHANGE_RESET, NULL), RLT_OK);
    rlt_store_decide(s, a, "k", 1, 0, 0, &d);
    ASSERT_EQ(d.remaining, 5);
    rlt_store_decide(s, b, "k", 1, 0, 0, &d);
    ASSERT_EQ(d.remaining, 2);
    rlt_store_close(s);
}

TEST(tiers_pick_the_policy_per_key_with_a_default)
{
    rlt_store *s = tu_store(0, false, 0);
    int free_id = tu_add(s, "free", "fixed_window:2/m");
    int pro_id = tu_add(s, "pro", "fixed_window:5/m");
    ASSERT_EQ(rlt_store_set_tier(s, "free", free_id), RLT_OK);
    ASSERT_EQ(rlt_store_set_tier(s, "pro", pro_id), RLT_OK);
    ASSERT_EQ(rlt_store_set_tier(s, "gold", 99), RLT_ENOENT);
    ASSERT_EQ(rlt_store_assign_tier(s, "alice", 5, "pro"), RLT_OK);
    ASSERT_EQ(rlt_store_assign_tier(s, "bob", 3, "platinum"), RLT_ENOENT);
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide_tier(s, "free", "alice", 5, 0, 1, &d), RLT_OK);
    ASSERT_EQ(d.limit, 5);
    ASSERT_EQ(rlt_store_decide_tier(s, "free", "bob", 3, 0, 1, &d), RLT_OK);
    ASSERT_EQ(d.limit, 2);
    ASSERT_EQ(rlt_store_decide_tier(s, NULL, "bob", 3, 0, 1, &d), RLT_ENOENT);
    ASSERT_EQ(rlt_store_decide_tier(s, "nosuch", "bob", 3, 0, 1, &d), RLT_ENOENT);
    /* Reassigning changes the policy used from then on. */
    ASSERT_EQ(rlt_store_assign_tier(s, "alice", 5, "free"), RLT_OK);
    ASSERT_EQ(rlt_store_decide_tier(s, "pro", "alice", 5, 0, 1, &d), RLT_OK);
    ASSERT_EQ(d.limit, 2);
    /* Remapping a tier moves every key of it. */
    ASSERT_EQ(rlt_store_set_tier(s, "free", pro_id), RLT_OK);
    ASSERT_EQ(rlt_store_decide_tier(s, "pro", "alice", 5, 0, 1, &d), RLT_OK);
    ASSERT_EQ(d.limit, 5);
    rlt_store_close(s);
}

TEST(multi_is_all_or_nothing_and_reports_the_refusing_limit)
{
    rlt_store *s = tu_store(0, false, 0);
    int sec = tu_add(s, "sec", "fixed_window:3/s"), min = tu_add(s, "min", "fixed_window:10/m");
    rlt_check c[2] = {{sec, "u", 1, 1}, {min, "u", 1, 1}};
    rlt_decision d;
    int refused = 99;
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(rlt_store_decide_multi(s, c, 2, 0, &d, &refused), RLT_OK);
        ASSERT(d.allowed);
        ASSERT_EQ(refused, -1);
    }
    ASSERT_EQ(d.remaining, 0); /* the per-second limit is the most restrictive */
    ASSERT_EQ(d.limit, 3);
    ASSERT_EQ(rlt_store_decide_multi(s, c, 2, 0, &d, &refused), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, 0);
    ASSERT(d.retry_after > 0);
    /* The refused check consumed nothing from the per-minute limit: 7 are left. */
    rlt_decision one;
    ASSERT_EQ(rlt_store_decide(s, min, "u", 1, 0, 0, &one), RLT_OK);
    ASSERT_EQ(one.remaining, 7);
    /* A limit that can never fit: retry_after -1. */
    rlt_check big[2] = {{sec, "v", 1, 1}, {min, "v", 1, 11}};
    ASSERT_EQ(rlt_store_decide_multi(s, big, 2, 0, &d, &refused), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, 1);
    ASSERT_EQ(d.retry_after, -1);
    ASSERT_EQ(rlt_store_decide(s, sec, "v", 1, 0, 0, &one), RLT_OK);
    ASSERT_EQ(one.remaining, 3);
    rlt_store_close(s);
}

TEST(multi_with_the_same_key_twice_counts_both)
{
    rlt_store *s = tu_store(0, false, 0);
    int p = tu_add(s, "p", "fixed_window:5/m");
    rlt_check c[2] = {{p, "k", 1, 2}, {p, "k", 1, 2}};
    rlt_decision d;
    int refused;
    ASSERT_EQ(rlt_store_decide_multi(s, c, 2, 0, &d, &refused), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(d.remaining, 1);
    ASSERT_EQ(rlt_store_decide_multi(s, c, 2, 0, &d, &refused), RLT_OK);
    ASSERT(!d.allowed);
    ASSERT_EQ(refused, 0); /* 1 left: the first cost-2 check already refuses */
    ASSERT_EQ(rlt_store_decide(s, p, "k", 1, 0, 0, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 1);
    rlt_store_close(s);
}

TEST(multi_refuses_concurrency_policies_and_bad_arguments)
{
    rlt_store *s = tu_store(0, false, 0);
    int p = tu_add(s, "p", "fixed_window:5/m"), c = tu_add(s, "c", "concurrency:2");
    rlt_check ch[2] = {{p, "k", 1, 1}, {c, "k", 1, 1}};
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide_multi(s, ch, 2, 0, &d, NULL), RLT_EINVAL);
    ASSERT_EQ(rlt_store_decide_multi(s, ch, 0, 0, &d, NULL), RLT_EINVAL);
    rlt_check bad[1] = {{7, "k", 1, 1}};
    ASSERT_EQ(rlt_store_decide_multi(s, bad, 1, 0, &d, NULL), RLT_ENOENT);
    rlt_check empty[1] = {{p, "", 0, 1}};
    ASSERT_EQ(rlt_store_decide_multi(s, empty, 1, 0, &d, NULL), RLT_EKEYLEN);
    rlt_store_decide(s, p, "k", 1, 0, 0, &d);
    ASSERT_EQ(d.remaining, 5);
    rlt_store_close(s);
}

TEST(concurrency_leases_release_through_the_store)
{
    rlt_store *s = tu_store(0, false, 0);
    int c = tu_add(s, "c", "concurrency:2/10s");
    rlt_decision d1, d2, d3;
    ASSERT_EQ(rlt_store_decide(s, c, "k", 1, 0, 1, &d1), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, c, "k", 1, 0, 1, &d2), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, c, "k", 1, 0, 1, &d3), RLT_OK);
    ASSERT(d1.allowed && d2.allowed && !d3.allowed);
    ASSERT_EQ(rlt_store_release(s, c, "k", 1, 1, d1.lease), RLT_OK);
    ASSERT_EQ(rlt_store_release(s, c, "k", 1, 1, d1.lease), RLT_ENOENT);
    ASSERT_EQ(rlt_store_decide(s, c, "k", 1, 2, 1, &d3), RLT_OK);
    ASSERT(d3.allowed);
    ASSERT_EQ(rlt_store_release(s, c, "k", 1, 3, d2.lease), RLT_OK);
    ASSERT_EQ(rlt_store_release(s, c, "k", 1, 3, d3.lease), RLT_OK);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 0); /* no lease held: fresh, dropped */
    ASSERT_EQ(rlt_store_release(s, c, "k", 1, 3, 12345), RLT_ENOENT);
    rlt_store_close(s);
}

TEST(large_states_and_long_keys_live_out_of_line)
{
    rlt_store *s = tu_store(0, false, 0);
    int p = tu_add(s, "log", "sliding_log:50/s");
    char key[300];
    memset(key, 'q', sizeof key);
    rlt_decision d;
    for (int i = 0; i < 50; i++) {
        ASSERT_EQ(rlt_store_decide(s, p, key, sizeof key, i, 1, &d), RLT_OK);
        ASSERT(d.allowed);
    }
    ASSERT_EQ(rlt_store_decide(s, p, key, sizeof key, 60, 1, &d), RLT_OK);
    ASSERT(!d.allowed);
    rlt_ns at = 0;
    ASSERT_EQ(rlt_store_when(s, p, key, sizeof key, 60, 1, &at), RLT_OK);
    ASSERT(at >= RLT_NS_PER_S && at <= RLT_NS_PER_S + 1);
    ASSERT_EQ(rlt_store_when(s, p, key, sizeof key, 60, 51, &at), RLT_ENEVER);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 1);
    ASSERT(st.bytes >= 16 + 8 * 50 + sizeof key);
    ASSERT_EQ(rlt_store_reset(s, p, key, sizeof key), RLT_OK);
    ASSERT_EQ(rlt_store_decide(s, p, key, sizeof key, 60, 1, &d), RLT_OK);
    ASSERT(d.allowed);
    rlt_store_close(s);
}

TEST(peeks_and_denials_on_new_keys_store_nothing)
{
    rlt_store *s = tu_store(0, false, 0);
    int p = tu_add(s, "p", "gcra:5/s");
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, p, "a", 1, 0, 0, &d), RLT_OK);
    ASSERT(d.allowed);
    ASSERT_EQ(rlt_store_decide(s, p, "b", 1, 0, 6, &d), RLT_OK); /* can never fit */
    ASSERT(!d.allowed);
    ASSERT_EQ(d.retry_after, -1);
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 0);
    rlt_store_close(s);
}

TEST(stats_count_decisions_keys_and_idle_drops)
{
    rlt_store *s = tu_store(0, false, 0);
    int p = tu_add(s, "p", "fixed_window:1/s");
    rlt_decision d;
    rlt_store_stats st;
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 0);
    uint64_t empty_bytes = st.bytes;
    for (int k = 0; k < 10; k++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", k);
        rlt_store_decide(s, p, key, strlen(key), 0, 1, &d);
        rlt_store_decide(s, p, key, strlen(key), 0, 1, &d);
    }
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 10);
    ASSERT_EQ(st.allowed, 10);
    ASSERT_EQ(st.denied, 10);
    ASSERT(st.bytes > empty_bytes);
    ASSERT_EQ(rlt_store_sweep(s, RLT_NS_PER_S / 2, 1000000), 0);
    ASSERT_EQ(rlt_store_sweep(s, 2 * RLT_NS_PER_S, 1000000), 10);
    rlt_store_stats_get(s, &st);
    ASSERT_EQ(st.keys, 0);
    ASSERT_EQ(st.evicted_idle, 10);
    ASSERT_EQ(st.evicted_forced, 0);
    rlt_store_close(s);
}

TEST(sweep_respects_its_budget_and_resumes)
{
    rlt_store *s = tu_store(0, false, 1);
    int p = tu_add(s, "p", "fixed_window:1/s");
    rlt_decision d;
    for (int k = 0; k < 100; k++)
        rlt_store_decide(s, p, &k, sizeof k, 0, 1, &d);
    size_t total = 0;
    for (int round = 0; round < 1000 && total < 100; round++) {
        size_t n = rlt_store_sweep(s, 5 * RLT_NS_PER_S, 8);
        ASSERT_LE(n, 8);
        total += n;
    }
    ASSERT_EQ(total, 100);
    rlt_store_close(s);
}

TEST(null_store_calls_are_safe)
{
    rlt_store_close(NULL);
    rlt_store_stats st;
    rlt_store_stats_get(NULL, &st);
    ASSERT_EQ(st.keys, 0);
    ASSERT_EQ(rlt_store_sweep(NULL, 0, 10), 0);
    ASSERT_EQ(rlt_store_open(NULL, NULL), RLT_EINVAL);
    rlt_store *s;
    ASSERT_EQ(rlt_store_open(&s, NULL), RLT_OK);
    rlt_store_close(s);
}

/* The shard count: 1,024 by default; a capped store keeps 16,384 keys (1 MiB) per shard down to
 * 64 shards, so that uneven filling leaves the cap nearly usable; small caps go lower (64 keys,
 * 64 KiB per shard); an explicit count is kept unless the cap is small. */
TEST(the_default_shard_count_follows_the_caps)
{
    static const struct {
        size_t max_keys, max_bytes;
        unsigned shards, want;
    } cases[] = {
        {0, 0, 0, 1024},
        {(size_t)1 << 25, 0, 0, 1024}, /* 32M keys: 32,768 a shard */
        {(size_t)1 << 24, 0, 0, 1024}, /* 16M keys: 16,384 a shard */
        {1000000, 0, 0, 64},           /* the daemon's default max_keys */
        {100000, 0, 0, 64},
        {1000, 0, 0, 8},               /* at least 64 keys a shard */
        {0, (size_t)64 << 20, 0, 64},  /* 64 MiB: 1 MiB a shard */
        {0, (size_t)4 << 30, 0, 1024}, /* 4 GiB */
        {0, 1 << 20, 0, 16},           /* 1 MiB: at least 64 KiB a shard */
        {1000000, 0, 256, 256},        /* explicit */
        {1000, 0, 256, 8},             /* explicit, but the cap is small */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rlt_store_options o;
        memset(&o, 0, sizeof o);
        o.max_keys = cases[i].max_keys;
        o.max_bytes = cases[i].max_bytes;
        o.shards = cases[i].shards;
        rlt_store *s = NULL;
        ASSERT_EQ(rlt_store_open(&s, &o), RLT_OK);
        if (s->nshards != cases[i].want)
            RLT_FAIL_("case %zu: %u shards, want %u", i, s->nshards, cases[i].want);
        rlt_store_close(s);
    }
}
