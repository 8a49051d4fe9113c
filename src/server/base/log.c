/* One-line log records on stderr, with journald priorities under systemd, and the service
 * manager's readiness protocol (a datagram to $NOTIFY_SOCKET), without libsystemd. */
#include "server/base/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void rlt__log(rlt__log_level level, const char *fmt, ...)
{
    char line[1024];
    size_t n = 0;
    if (getenv("JOURNAL_STREAM") != NULL) n = (size_t)snprintf(line, sizeof line, "<%d>", (int)level);
    n += (size_t)snprintf(line + n, sizeof line - n, "ratelimitd: ");
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    n = k < 0 ? n : n + (size_t)k;
    if (n > sizeof line - 2) n = sizeof line - 2;
    line[n++] = '\n';
    /* One write: whole lines, whatever the other threads write. */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

void rlt__log_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0') return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path) return;
    memcpy(sa.sun_path, path, len);
    if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0'; /* an abstract socket */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    ssize_t w = sendto(fd, state, strlen(state), 0, (struct sockaddr *)&sa,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    (void)w;
    close(fd);
}
