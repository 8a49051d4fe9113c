/* bench_mreserve PORT [ROUNDS] [N] [DEPTH]: a multi-limit reservation (RL.MRESERVE over 3
 * limits) and its settle (RL.MSETTLE) against a single RL.RESERVE / RL.SETTLE, through a
 * running ratelimitd on 127.0.0.1:PORT, one connection pipelined DEPTH deep (default 32), N
 * reservations then their N settles per timed phase (default 20000), ROUNDS rounds (default 7)
 * alternating single and multi so that the machine's noise hits both alike.  Prints the median
 * reserves/s and settles/s of each and the ratios (multi time / single time). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A named policy (bench/server/mreserve.sh's config), as a gateway would configure its limits;
 * POL=text in the environment of the script runs an inline policy text instead. */
static const char *POL = "tokens";

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Formats one command into *out (redisFormatCommand's buffer, freed by the caller). */
static int format(char **out, int multi, int settle, int k, const char *id)
{
    char user[32], org[32];
    snprintf(user, sizeof user, "user:%d", k % 10000);
    snprintf(org, sizeof org, "org:%d", k % 100);
    if (!multi && !settle) return redisFormatCommand(out, "RL.RESERVE %s %s 100", user, POL);
    if (!multi) return redisFormatCommand(out, "RL.SETTLE %s %s %s 80", user, POL, id);
    if (!settle)
        return redisFormatCommand(
            out, "RL.MRESERVE in=50,out=50 %s %s in+out %s %s in*3+out*15 model:m %s out", user,
            POL, org, POL, POL);
    return redisFormatCommand(out, "RL.MSETTLE %s in=50,out=30 %s %s %s %s model:m %s", id, user,
                              POL, org, POL, POL);
}

/* The reply reader: a buffer over the socket and a RESP skipper that allocates nothing, so that
 * the client's own parsing (20 values a multi-limit reply against 6) weighs as little as it
 * can on the ratio. */
static char rbuf[1 << 20], wbuf[1 << 20];
static size_t rlen, rpos;

static void fill(int fd)
{
    if (rpos > 0) {
        memmove(rbuf, rbuf + rpos, rlen - rpos);
        rlen -= rpos;
        rpos = 0;
    }
    ssize_t k = read(fd, rbuf + rlen, sizeof rbuf - rlen);
    if (k <= 0) {
        fprintf(stderr, "connection closed\n");
        exit(1);
    }
    rlen += (size_t)k;
}

/* A line starting at rpos (waiting for it); returns its start, rpos past its CRLF. */
static const char *line(int fd)
{
    for (;;) {
        char *e = memchr(rbuf + rpos, '\n', rlen - rpos);
        if (e) {
            const char *l = rbuf + rpos;
            rpos = (size_t)(e - rbuf) + 1;
            return l;
        }
        fill(fd);
    }
}

/* Skips one value; copies the first 16-byte bulk string into id (when not NULL and unset). */
static void skip(int fd, char *id, int *got)
{
    const char *l = line(fd);
    if (l[0] == '-') {
        fprintf(stderr, "error reply: %.*s\n", 200, l);
        exit(1);
    }
    if (l[0] == '*') {
        long n = atol(l + 1);
        for (long i = 0; i < n; i++)
            skip(fd, id, got);
    } else if (l[0] == '$') {
        long n = atol(l + 1);
        if (n < 0) return;
        while (rlen - rpos < (size_t)n + 2)
            fill(fd);
        if (id && !*got && n == 16) {
            memcpy(id, rbuf + rpos, 16);
            id[16] = 0;
            *got = 1;
        }
        rpos += (size_t)n + 2;
    }
}

/* One phase: n commands pipelined `depth` deep; ids[] in (settle) or out (reserve).  The
 * commands are formatted before the clock starts, so that the client's formatting (longer for
 * the multi-limit ones) is not counted as the daemon's time; reading the replies is. */
static double phase(int fd, int multi, int settle, int n, int depth, char (*ids)[17])
{
    char **cmd = calloc((size_t)n, sizeof *cmd);
    int *len = calloc((size_t)n, sizeof *len);
    for (int i = 0; i < n; i++)
        len[i] = format(&cmd[i], multi, settle, i, ids[i]);
    double t0 = now_s();
    for (int i = 0; i < n; i += depth) {
        int m = n - i < depth ? n - i : depth;
        size_t w = 0;
        for (int j = 0; j < m; j++) { /* one write per batch, as a pipelining client sends */
            memcpy(wbuf + w, cmd[i + j], (size_t)len[i + j]);
            w += (size_t)len[i + j];
        }
        if (write(fd, wbuf, w) != (ssize_t)w) {
            fprintf(stderr, "write failed\n");
            exit(1);
        }
        for (int j = 0; j < m; j++) {
            int got = 0;
            skip(fd, settle ? NULL : ids[i + j], &got);
            if (!settle && !got) {
                fprintf(stderr, "denied: the budget ran out\n");
                exit(1);
            }
        }
    }
    double t = now_s() - t0;
    for (int i = 0; i < n; i++)
        redisFreeCommand(cmd[i]);
    free(cmd);
    free(len);
    return t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_mreserve PORT [ROUNDS] [N] [DEPTH]\n");
        return 2;
    }
    int port = atoi(argv[1]), rounds = argc > 2 ? atoi(argv[2]) : 7,
        n = argc > 3 ? atoi(argv[3]) : 20000, depth = argc > 4 ? atoi(argv[4]) : 32;
    if (getenv("POL")) POL = getenv("POL");
    redisContext *c = redisConnect("127.0.0.1", port); /* the socket; hiredis only formats */
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to 127.0.0.1:%d\n", port);
        return 1;
    }
    char(*ids)[17] = calloc((size_t)n, 17);
    double *t[2][2];
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++)
            t[m][s] = calloc((size_t)rounds, sizeof(double));
    phase(c->fd, 0, 0, n, depth, ids); /* warm up: keys made, code paged in */
    phase(c->fd, 0, 1, n, depth, ids);
    phase(c->fd, 1, 0, n, depth, ids);
    phase(c->fd, 1, 1, n, depth, ids);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int m = (r + k) % 2; /* alternate which goes first */
            t[m][0][r] = phase(c->fd, m, 0, n, depth, ids);
            t[m][1][r] = phase(c->fd, m, 1, n, depth, ids);
        }
    }
    double med[2][2];
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++) {
            qsort(t[m][s], (size_t)rounds, sizeof(double), cmp);
            med[m][s] = t[m][s][rounds / 2];
        }
    printf("%d rounds of %d, pipeline %d, medians\n", rounds, n, depth);
    printf("RL.RESERVE (1 limit)   %9.0f /s   RL.SETTLE  %9.0f /s\n", n / med[0][0], n / med[0][1]);
    printf("RL.MRESERVE (3 limits) %9.0f /s   RL.MSETTLE %9.0f /s\n", n / med[1][0], n / med[1][1]);
    printf("cost ratio multi/single: reserve %.2fx, settle %.2fx\n", med[1][0] / med[0][0],
           med[1][1] / med[0][1]);
    redisFree(c);
    return 0;
}
