/* rlt_store_fork_prepare / _parent / _child: a process forked while other threads decide on
 * the store gets a child whose store works (no lock left held by a thread it does not have),
 * with the parent's states at the fork; without the handlers the child spins for good. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#include "store_test_util.h"

#define NT 3
#define FORKS 200

typedef struct hammer {
    rlt_store *s;
    int id;
    int stop;
    uint64_t calls;
} hammer;

static void *decide_until_stopped(void *p)
{
    hammer *h = p;
    rlt_decision d;
    char key[8] = "k";
    for (uint64_t i = 0; !__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE); i++) {
        key[1] = (char)('a' + i % 26);
        rlt_store_decide(h->s, h->id, key, 2, (rlt_ns)i, 1, &d);
        __atomic_store_n(&h->calls, i, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Forks FORKS times while NT threads decide on a store of `shards` shards; each child makes
 * one decision under alarm(): a child that hangs dies of SIGALRM.  Returns the children that
 * did not exit 0. */
static int forks_while_threads_decide(unsigned shards, bool handlers)
{
    rlt_store *s = tu_store(0, false, shards);
    int id = tu_add(s, "p", "gcra:1000000/1s");
    hammer h = {.s = s, .id = id};
    pthread_t t[NT];
    for (int i = 0; i < NT; i++)
        if (pthread_create(&t[i], NULL, decide_until_stopped, &h)) return -1;
    int bad = 0;
    for (int f = 0; f < FORKS && bad == 0; f++) {
        if (handlers) rlt_store_fork_prepare(s);
        pid_t pid = fork();
        if (pid == 0) {
            if (handlers) rlt_store_fork_child(s);
            alarm(30); /* a bound on a hang, not a timing assumption: a healthy child takes us */
            rlt_decision d;
            int rc = rlt_store_decide(s, id, "child", 5, 0, 1, &d);
            _exit(rc == RLT_OK && d.allowed ? 0 : 1);
        }
        if (handlers) rlt_store_fork_parent(s);
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            bad++;
    }
    __atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    rlt_store_close(s);
    return bad;
}

TEST(fork_handlers_give_the_child_free_locks_while_threads_decide)
{
    ASSERT_EQ(forks_while_threads_decide(1, true), 0);
    ASSERT_EQ(forks_while_threads_decide(0, true), 0);
}

TEST(child_keeps_the_parents_states_and_both_go_on_apart)
{
    rlt_store *s = tu_store(0, false, 0);
    int id = tu_add(s, "p", "fixed_window:3/1h");
    rlt_decision d;
    ASSERT_EQ(rlt_store_decide(s, id, "k", 1, 0, 1, &d), RLT_OK);
    rlt_store_fork_prepare(s);
    pid_t pid = fork();
    if (pid == 0) {
        rlt_store_fork_child(s);
        int ok =
            rlt_store_decide(s, id, "k", 1, 0, 2, &d) == RLT_OK && d.allowed && d.remaining == 0;
        ok = ok && rlt_store_decide(s, id, "k", 1, 0, 1, &d) == RLT_OK && !d.allowed;
        _exit(ok ? 0 : 1);
    }
    rlt_store_fork_parent(s);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_EQ(rlt_store_decide(s, id, "k", 1, 0, 1, &d), RLT_OK);
    ASSERT_EQ(d.remaining, 1); /* the child's decisions were its own */
    rlt_store_fork_child(NULL);
    rlt_store_fork_prepare(NULL);
    rlt_store_fork_parent(NULL);
    rlt_store_close(s);
}
