/* Listening sockets: addresses checked before binding, SO_REUSEPORT among our own sockets
 * only, and a port held by another process refused by name. */
#include "server/net/listen.h"

#include "ratelimit/ratelimit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool rlt__is_loopback(const char *a)
{
    if (strcmp(a, "localhost") == 0 || strcmp(a, "::1") == 0) return true;
    struct in_addr v4;
    if (inet_pton(AF_INET, a, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    return false;
}

bool rlt__bind_valid(const char *a)
{
    if (a[0] == '\0') return false;
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, a, buf) == 1 || inet_pton(AF_INET6, a, buf) == 1) return true;
    /* Only digits and dots, or a colon: meant as a numeric address, and not one. */
    if (strspn(a, "0123456789.") == strlen(a) || strchr(a, ':') != NULL) return false;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    if (getaddrinfo(a, NULL, &hints, &res) != 0) return false;
    freeaddrinfo(res);
    return true;
}

/* Whether addr:port is held by another socket: a bind without SO_REUSEPORT tells. */
static bool port_taken(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* TIME_WAIT is not "held" */
    bool taken = bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno == EADDRINUSE;
    close(fd);
    return taken;
}

int rlt__listen_on(const char *addr, int port, bool first, int *out, char *err, size_t errlen)
{
    *out = -1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(addr, ps, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "bind address %s: %s", addr, gai_strerror(gai));
        return RLT_EINVAL;
    }
    if (first && port != 0 && port_taken(res)) {
        snprintf(err, errlen, "listen on %s:%d: Address already in use (another process holds it)",
                 addr, port);
        freeaddrinfo(res);
        return RLT_EIO;
    }
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 511) < 0) {
        snprintf(err, errlen, "listen on %s:%d: %s", addr, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return RLT_EIO;
    }
    freeaddrinfo(res);
    *out = fd;
    return RLT_OK;
}

int rlt__bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) return -1;
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}
