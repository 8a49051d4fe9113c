/* The test harness: ASSERT_* macros that print both values, TEST() registration, and a main
 * that runs every test (or those named on the command line) and ends with the closing line
 * "N passed, N failed" that CI reads.  One executable per test file, as in yyjson. */
#ifndef RLT_TEST_H
#define RLT_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*rlt_test_fn)(void);
struct rlt_test_case {
    const char *name;
    rlt_test_fn fn;
};

#define RLT_TEST_MAX 512
extern struct rlt_test_case rlt_test_cases[RLT_TEST_MAX];
extern int rlt_test_count;
extern int rlt_test_failed_now;

/* TEST(name) { ... } defines and registers a test (constructor attribute: gcc and clang). */
#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void)                                 \
    {                                                                                              \
        if (rlt_test_count >= RLT_TEST_MAX) {                                                      \
            fprintf(stderr, "test.h: more than %d tests in one file\n", RLT_TEST_MAX);             \
            abort();                                                                               \
        }                                                                                          \
        rlt_test_cases[rlt_test_count++] = (struct rlt_test_case){#name, test_##name};             \
    }                                                                                              \
    static void test_##name(void)

#define RLT_FAIL_(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        rlt_test_failed_now = 1;                                                                   \
        return;                                                                                    \
    } while (0)

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) RLT_FAIL_("assertion failed: %s", #cond);                                     \
    } while (0)

#define ASSERT_EQ(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) RLT_FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_);                         \
    } while (0)
#define ASSERT_NE(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ == b_) RLT_FAIL_("%s != %s: both %lld", #a, #b, a_);                                \
    } while (0)
#define ASSERT_LE(a, b)                                                                            \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (!(a_ <= b_)) RLT_FAIL_("%s <= %s: %lld > %lld", #a, #b, a_, b_);                       \
    } while (0)
#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) != 0) RLT_FAIL_("%s == %s:\n  \"%s\"\n  \"%s\"", #a, #b, a_, b_);       \
    } while (0)

/* Runs every registered test; prints the closing line; returns the process exit code. */
int rlt_test_main(int argc, char **argv);

#ifdef RLT_TEST_MAIN
struct rlt_test_case rlt_test_cases[RLT_TEST_MAX];
int rlt_test_count;
int rlt_test_failed_now;
int rlt_test_main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (int i = 0; i < rlt_test_count; i++) {
        int wanted = argc < 2;
        for (int j = 1; j < argc; j++)
            if (strcmp(argv[j], rlt_test_cases[i].name) == 0) wanted = 1;
        if (!wanted) continue;
        rlt_test_failed_now = 0;
        rlt_test_cases[i].fn();
        if (rlt_test_failed_now) {
            failed++;
            printf("FAIL %s\n", rlt_test_cases[i].name);
        } else {
            passed++;
            printf("ok   %s\n", rlt_test_cases[i].name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
int main(int argc, char **argv)
{
    return rlt_test_main(argc, argv);
}
#endif
#endif
