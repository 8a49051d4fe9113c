/* The daemon's log (log.c): one line per event on stderr, written with one write so that the
 * lines of several threads never interleave.  Under systemd (JOURNAL_STREAM names stderr) each
 * line starts with its syslog priority, "<3>" for an error ... "<6>" for information, which
 * journald turns into the entry's severity (sd-daemon(3)); elsewhere lines are plain. */
#ifndef RLT_SERVER_BASE_LOG_H
#define RLT_SERVER_BASE_LOG_H

/* Syslog priorities. */
typedef enum rlt__log_level {
    RLT__LOG_ERR = 3,
    RLT__LOG_WARN = 4,
    RLT__LOG_NOTICE = 5,
    RLT__LOG_INFO = 6,
} rlt__log_level;

/* Writes "ratelimitd: <message>\n" (with the priority prefix under systemd). */
void rlt__log(rlt__log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Tells systemd's service manager a state ("READY=1", "STOPPING=1", "RELOADING=1") over
 * $NOTIFY_SOCKET, for Type=notify units; a no-op when the variable is not set. */
void rlt__log_notify(const char *state);

#endif
