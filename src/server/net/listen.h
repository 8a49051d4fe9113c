/* Listening sockets and bind addresses (listen.c). */
#ifndef RLT_SERVER_NET_LISTEN_H
#define RLT_SERVER_NET_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

/* True when `addr` can be bound: a numeric IPv4/IPv6 address or a name that resolves. */
bool rlt__bind_valid(const char *addr);
/* True when `addr` is a loopback address (127.0.0.0/8, ::1, localhost). */
bool rlt__is_loopback(const char *addr);
/* A non-blocking listening socket on addr:port with SO_REUSEPORT, so that the daemon's other
 * workers can bind the same port.  With `first`, the port must be free: a probe bind without
 * SO_REUSEPORT fails when any other socket (another daemon's) holds it, and that is an error
 * naming the port, never a silently shared port.  Returns RLT_OK and *fd, or RLT_EINVAL (the
 * address does not resolve) or RLT_EIO (the port is taken, or the socket calls failed) with a
 * message in err. */
int rlt__listen_on(const char *addr, int port, bool first, int *fd, char *err, size_t errlen);
/* The port a socket is bound to, or -1. */
int rlt__bound_port(int fd);

#endif
