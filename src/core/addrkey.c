/* Keys made from client addresses (rlt_addr_key): one rule for every door, so that an IPv6
 * client holding a /64 or a /48 gets one key, not 2^64.  The address is parsed here, strictly
 * and without libc's resolver functions (the core also runs as WebAssembly), into 16 bytes;
 * IPv4 and its mapped/compatible IPv6 forms come out as dotted quads, the rest masked to the
 * prefix and written in RFC 5952's canonical form, so two spellings of one network are one
 * key. */
#include "ratelimit/ratelimit.h"

#include <string.h>

/* Reads a dotted quad of p[0..n): four decimal parts 0..255, no leading zeros. */
static bool parse_v4(const char *p, size_t n, unsigned char out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= n || p[i] != '.') return false;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9' && i - start < 3) {
            v = v * 10 + (unsigned)(p[i] - '0');
            i++;
        }
        if (i == start || v > 255 || (i - start > 1 && p[start] == '0')) return false;
        out[part] = (unsigned char)v;
    }
    return i == n;
}

/* A hex digit's value plus one; 0 for any other byte. */
static const unsigned char hex1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,
    ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14,
    ['e'] = 15, ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15,
    ['F'] = 16};

/* Reads IPv6 text p[0..n) into 8 groups (RFC 4291 section 2.2): groups of 1..4 hex digits,
 * at most one "::", an optional dotted-quad tail standing for the last two groups.  One pass:
 * a group's digits are read until a byte that is not one; a '.' there makes the group the
 * start of the dotted quad. */
static bool parse_v6(const char *p, size_t n, uint16_t g[8])
{
    uint16_t head[8], tail[8];
    int nh = 0, nt = 0;
    bool gap = false;
    size_t i = 0;
    if (n >= 2 && p[0] == ':' && p[1] == ':') {
        gap = true;
        i = 2;
        if (i == n) goto done;
    } else if (n > 0 && p[0] == ':') {
        return false;
    }
    for (;;) {
        if (nh + nt >= 8) return false;
        size_t k = i;
        unsigned v = 0, h;
        while (k < n && k - i < 5 && (h = hex1[(unsigned char)p[k]]) != 0) {
            v = v << 4 | (h - 1);
            k++;
        }
        if (k < n && p[k] == '.') {
            /* An IPv4 tail: the rest. */
            unsigned char q[4];
            if (nh + nt > 6 || !parse_v4(p + i, n - i, q)) return false;
            uint16_t *dst = gap ? tail : head;
            int *cnt = gap ? &nt : &nh;
            dst[(*cnt)++] = (uint16_t)(q[0] << 8 | q[1]);
            dst[(*cnt)++] = (uint16_t)(q[2] << 8 | q[3]);
            break;
        }
        if (k == i || k - i > 4) return false;
        if (gap)
            tail[nt++] = (uint16_t)v;
        else
            head[nh++] = (uint16_t)v;
        i = k;
        if (i == n) break;
        if (p[i] != ':') return false;
        i++;
        if (i < n && p[i] == ':') {
            if (gap) return false;
            gap = true;
            i++;
            if (i == n) break;
        } else if (i == n) {
            return false; /* a single trailing ':' */
        }
    }
done:
    if (gap ? nh + nt > 7 : nh != 8) return false;
    memset(g, 0, 8 * sizeof g[0]);
    memcpy(g, head, (size_t)nh * sizeof g[0]);
    memcpy(g + 8 - nt, tail, (size_t)nt * sizeof g[0]);
    return true;
}

static size_t put_v4(char *out, const uint16_t hi, const uint16_t lo)
{
    unsigned q[4] = {hi >> 8u, hi & 255u, lo >> 8u, lo & 255u};
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        if (i) out[n++] = '.';
        char d[3];
        int k = 0;
        unsigned v = q[i];
        do {
            d[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (k)
            out[n++] = d[--k];
    }
    out[n] = '\0';
    return n;
}

/* RFC 5952: lowercase, no leading zeros, the longest run (the first of equals) of two or more
 * zero groups as "::". */
static size_t put_v6(char *out, const uint16_t g[8], int prefix)
{
    int best = -1, blen = 1;
    for (int i = 0; i < 8;) {
        int j = i;
        while (j < 8 && g[j] == 0)
            j++;
        if (j - i > blen) {
            best = i;
            blen = j - i;
        }
        i = j > i ? j : i + 1;
    }
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (int i = 0; i < 8; i++) {
        if (i == best) {
            out[n++] = ':';
            if (i == 0) out[n++] = ':';
            i += blen - 1;
            continue;
        }
        unsigned v = g[i]; /* no leading zeros */
        if (v >= 0x1000) out[n++] = hex[v >> 12];
        if (v >= 0x100) out[n++] = hex[v >> 8 & 15u];
        if (v >= 0x10) out[n++] = hex[v >> 4 & 15u];
        out[n++] = hex[v & 15u];
        if (i < 7) out[n++] = ':';
    }
    out[n++] = '/';
    if (prefix >= 100) out[n++] = (char)('0' + prefix / 100);
    out[n++] = (char)('0' + prefix / 10 % 10);
    out[n++] = (char)('0' + prefix % 10);
    out[n] = '\0';
    return n;
}

int rlt_addr_key(const char *addr, size_t len, int v6_prefix, char *out, size_t cap)
{
    if (addr == NULL || out == NULL) return RLT_EINVAL;
    if (v6_prefix == 0) v6_prefix = RLT_ADDR_V6_PREFIX;
    if (v6_prefix < 32 || v6_prefix > 128) return RLT_EINVAL;
    if (cap < RLT_ADDR_KEY_MAX) return RLT_ENOSPC;
    unsigned char q[4];
    if (memchr(addr, ':', len) == NULL) {
        if (!parse_v4(addr, len, q)) return RLT_EPARSE;
        return (int)put_v4(out, (uint16_t)(q[0] << 8 | q[1]), (uint16_t)(q[2] << 8 | q[3]));
    }
    uint16_t g[8];
    if (len > 45 || !parse_v6(addr, len, g)) return RLT_EPARSE;
    bool zero5 = !g[0] && !g[1] && !g[2] && !g[3] && !g[4];
    if (zero5 && g[5] == 0xffff) return (int)put_v4(out, g[6], g[7]); /* ::ffff:a.b.c.d */
    if (zero5 && g[5] == 0 && (g[6] != 0 || g[7] > 1))
        return (int)put_v4(out, g[6], g[7]); /* ::a.b.c.d, not :: or ::1 */
    for (int i = 0; i < 8; i++) {
        int keep = v6_prefix - 16 * i; /* bits of group i inside the prefix */
        if (keep <= 0)
            g[i] = 0;
        else if (keep < 16)
            g[i] = (uint16_t)(g[i] & ~(0xffffu >> keep));
    }
    return (int)put_v6(out, g, v6_prefix);
}
