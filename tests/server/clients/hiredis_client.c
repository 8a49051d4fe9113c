/* A hiredis program as an application would write one: connect, CL.THROTTLE and RL.CHECK one at
 * a time and pipelined (redisAppendCommand / redisGetReply), INFO parsed line by line.  Prints
 * one line per reply ("ints 0 16 15 -1 2", "info connected_clients=1"); clients.py compares
 * them with the daemon's contract.  Usage: hiredis_client PORT. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_reply(const redisReply *r)
{
    if (r == NULL) return -1;
    if (r->type == REDIS_REPLY_ARRAY) {
        printf("ints");
        for (size_t i = 0; i < r->elements; i++) {
            if (r->element[i]->type != REDIS_REPLY_INTEGER) return -1;
            printf(" %lld", r->element[i]->integer);
        }
        printf("\n");
        return 0;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        printf("error %s\n", r->str);
        return 0;
    }
    if (r->type == REDIS_REPLY_STATUS) {
        printf("status %s\n", r->str);
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    redisContext *c = redisConnect("127.0.0.1", atoi(argv[1]));
    if (c == NULL || c->err) {
        fprintf(stderr, "connect: %s\n", c ? c->errstr : "out of memory");
        return 1;
    }
    int bad = 0;
    redisReply *r = redisCommand(c, "CL.THROTTLE %s 15 30 60 1", "user:42");
    bad |= print_reply(r);
    freeReplyObject(r);
    r = redisCommand(c, "RL.CHECK %s %s %d", "user:43", "gcra:2/1s", 1);
    bad |= print_reply(r);
    freeReplyObject(r);
    /* A pipeline of 5 on one key of limit 3. */
    for (int i = 0; i < 5; i++)
        redisAppendCommand(c, "RL.CHECK %s %s", "burst", "fixed_window:3/1h");
    for (int i = 0; i < 5; i++) {
        if (redisGetReply(c, (void **)&r) != REDIS_OK) return 1;
        bad |= print_reply(r);
        freeReplyObject(r);
    }
    r = redisCommand(c, "RL.CHECK %s %s", "x", "nosuch");
    bad |= print_reply(r);
    freeReplyObject(r);
    r = redisCommand(c, "INFO clients");
    if (r == NULL || r->type != REDIS_REPLY_STRING) return 1;
    for (char *line = strtok(r->str, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        char *colon = strchr(line, ':');
        if (line[0] != '#' && colon) printf("info %.*s=%s\n", (int)(colon - line), line, colon + 1);
    }
    freeReplyObject(r);
    redisFree(c);
    return bad ? 1 : 0;
}
