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

/* A named policy (bench/server/mreserve.sh's config), as a gateway would configure its limits;
 * POL=text in the environment of the script runs an inline policy text instead. */
static const char *POL = "tokens";

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void append(redisContext *c, int multi, int settle, int k, const char *id)
{
    char user[32], org[32];
    snprintf(user, sizeof user, "user:%d", k % 10000);
    snprintf(org, sizeof org, "org:%d", k % 100);
    if (!multi && !settle)
        redisAppendCommand(c, "RL.RESERVE %s %s 100", user, POL);
    else if (!multi)
        redisAppendCommand(c, "RL.SETTLE %s %s %s 80", user, POL, id);
    else if (!settle)
        redisAppendCommand(c,
                           "RL.MRESERVE in=50,out=50 %s %s in+out %s %s in*3+out*15 model:m %s out",
                           user, POL, org, POL, POL);
    else
        redisAppendCommand(c, "RL.MSETTLE %s in=50,out=30 %s %s %s %s model:m %s", id, user, POL,
                           org, POL, POL);
}

/* One phase: n commands pipelined `depth` deep; ids[] in (settle) or out (reserve). */
static double phase(redisContext *c, int multi, int settle, int n, int depth, char (*ids)[17])
{
    double t0 = now_s();
    for (int i = 0; i < n; i += depth) {
        int m = n - i < depth ? n - i : depth;
        for (int j = 0; j < m; j++)
            append(c, multi, settle, i + j, ids[i + j]);
        for (int j = 0; j < m; j++) {
            redisReply *r;
            if (redisGetReply(c, (void **)&r) != REDIS_OK) {
                fprintf(stderr, "connection error: %s\n", c->errstr);
                exit(1);
            }
            if (r->type == REDIS_REPLY_ERROR) {
                fprintf(stderr, "error reply: %s\n", r->str);
                exit(1);
            }
            if (!settle) {
                redisReply *id = r->element[5];
                if (id->type != REDIS_REPLY_STRING) {
                    fprintf(stderr, "denied: the budget ran out\n");
                    exit(1);
                }
                memcpy(ids[i + j], id->str, 17);
            }
            freeReplyObject(r);
        }
    }
    return now_s() - t0;
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
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to 127.0.0.1:%d\n", port);
        return 1;
    }
    char(*ids)[17] = calloc((size_t)n, 17);
    double *t[2][2];
    for (int m = 0; m < 2; m++)
        for (int s = 0; s < 2; s++)
            t[m][s] = calloc((size_t)rounds, sizeof(double));
    phase(c, 0, 0, n, depth, ids); /* warm up: keys made, code paged in */
    phase(c, 0, 1, n, depth, ids);
    phase(c, 1, 0, n, depth, ids);
    phase(c, 1, 1, n, depth, ids);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int m = (r + k) % 2; /* alternate which goes first */
            t[m][0][r] = phase(c, m, 0, n, depth, ids);
            t[m][1][r] = phase(c, m, 1, n, depth, ids);
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
