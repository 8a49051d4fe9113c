/* The page's side of `ratelimit sim`'s engine (web/wasm/sim_export.c), built natively so that
 * the ASan and UBSan builds run it too: a row's own policy (named by its algorithm, tiers told
 * apart, a refused text that row's error only), --block against a row's own block=, the clock
 * before the last request, the page's cap, a trace in memory, and arguments it refuses.  The
 * command's own output is web_sim_vs_cli's and cli_golden's. */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

/* The exports under test (declared with their contracts in web/wasm/sim_export.c). */
typedef struct page_sim page_sim;
page_sim *rlt_wasm_sim_open(char *args, int32_t len, char *trace, int32_t tlen);
int32_t rlt_wasm_sim_status(void);
int32_t rlt_wasm_sim_run(page_sim *h, int64_t T, int32_t upto);
void rlt_wasm_sim_states(page_sim *h, int64_t T);
int64_t rlt_wasm_sim_num(const page_sim *h, int32_t field);
int64_t rlt_wasm_sim_row(const page_sim *h, int32_t row, int32_t field);
const char *rlt_wasm_sim_row_text(page_sim *h, int32_t row, int32_t field);
const char *rlt_wasm_sim_cell(const page_sim *h, int32_t row, int32_t col);
void rlt_wasm_sim_close(page_sim *h);

#define S INT64_C(1000000000)

/* What the engine writes on stderr meanwhile, kept in `err`. */
static char err[4096];
static int saved = -1;
static FILE *cap;

static void capture(void)
{
    fflush(stderr);
    saved = dup(2);
    cap = tmpfile();
    dup2(fileno(cap), 2);
}

static void release(void)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(cap);
    size_t n = fread(err, 1, sizeof err - 1, cap);
    err[n] = '\0';
    fclose(cap);
}

/* rlt_wasm_sim_open over `len` bytes of NUL-separated arguments (copied, as the page hands
 * them over), with the trace text `trace` or NULL; its stderr in `err`. */
static page_sim *open_sim(const char *args, size_t len, const char *trace)
{
    char *a = malloc(len ? len : 1), *t = trace ? strdup(trace) : NULL;
    memcpy(a, args, len);
    capture();
    page_sim *h = rlt_wasm_sim_open(a, (int32_t)len, t, trace ? (int32_t)strlen(trace) : 0);
    release();
    return h;
}
#define OPEN(lit, trace) open_sim(lit, sizeof lit - 1, trace)

TEST(rows_of_their_own_are_named_by_their_algorithm_and_tiers_told_apart)
{
    page_sim *h = OPEN("--row4\0token_bucket:2/10s\0--row5\0token_bucket:8/10s\0", NULL);
    ASSERT(h != NULL);
    ASSERT_EQ(rlt_wasm_sim_run(h, 13 * S, 0), 0);
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 0, 0), "Fixed window");
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 3, 0), "Token bucket 2/10s");
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 4, 0), "Token bucket 8/10s");
    ASSERT_STR_EQ(rlt_wasm_sim_cell(h, 0, 0), "algorithm");
    ASSERT_STR_EQ(rlt_wasm_sim_cell(h, 4, 0), "Token bucket 2/10s");
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 3, 4), "token_bucket:2/10s");
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 3, 5), "token_bucket:4/10s");
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 5, 4), "leaky_bucket:4/10s,queue=4");
    ASSERT_EQ(rlt_wasm_sim_row(h, 3, 7), 1);
    ASSERT_EQ(rlt_wasm_sim_row(h, 4, 2), 8); /* burst 8: all eight of the boundary pattern */
    ASSERT_EQ(rlt_wasm_sim_row(h, 3, 0), 3); /* burst 2 at 0.2 a tick: 6, 7 and 11 */
    rlt_wasm_sim_close(h);
}

TEST(a_refused_row_policy_is_that_rows_error_and_the_others_run)
{
    page_sim *h = OPEN("--row1\0fixed_window:4/10x\0", NULL);
    ASSERT(h != NULL);
    ASSERT_EQ(rlt_wasm_sim_run(h, 13 * S, 0), 0);
    ASSERT(strstr(rlt_wasm_sim_row_text(h, 0, 3), "10x") != NULL);
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 0, 0), "Fixed window");
    ASSERT_EQ(rlt_wasm_sim_row(h, 0, 0), 0);
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 1, 3), "");
    ASSERT_EQ(rlt_wasm_sim_row(h, 1, 0), 4); /* the sliding log: 4 of the 8 */
    rlt_wasm_sim_close(h);
}

TEST(a_bad_block_is_one_message_before_any_rows_own_block)
{
    page_sim *h = OPEN("--row1\0fixed_window:4/10s,block=2s\0--block\0xyz\0", NULL);
    ASSERT(h != NULL);
    capture();
    int rc = rlt_wasm_sim_run(h, 13 * S, 0);
    release();
    ASSERT_EQ(rc, 2);
    ASSERT(strstr(err, "--block 'xyz': expected DURATION") != NULL);
    ASSERT(strstr(err, "twice") == NULL);
    rlt_wasm_sim_close(h);
}

TEST(a_rows_own_block_with_block_is_given_twice_in_that_row)
{
    page_sim *h = OPEN("--row1\0fixed_window:4/10s,block=2s\0--block\0004s\0", NULL);
    ASSERT(h != NULL);
    ASSERT_EQ(rlt_wasm_sim_run(h, 13 * S, 0), 0);
    ASSERT(strstr(rlt_wasm_sim_row_text(h, 0, 3), "twice") != NULL);
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 1, 3), "");
    rlt_wasm_sim_close(h);
}

TEST(the_clock_runs_only_the_requests_at_or_before_it)
{
    page_sim *h = OPEN("", NULL); /* boundary: 6, 7, 8, 9, 10, 11, 12, 13 */
    ASSERT(h != NULL);
    ASSERT_EQ(rlt_wasm_sim_num(h, 1), 8);
    ASSERT_EQ(rlt_wasm_sim_run(h, 8 * S + S / 2, 1), 0);
    ASSERT_EQ(rlt_wasm_sim_num(h, 0), 3);
    ASSERT_EQ(rlt_wasm_sim_row(h, 0, 0), 3);
    ASSERT_STR_EQ(rlt_wasm_sim_cell(h, 0, 1), "state at t = 8.5");
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 0, 1), "window [0, 10): count 3/4");
    rlt_wasm_sim_states(h, 10 * S);
    ASSERT_STR_EQ(rlt_wasm_sim_row_text(h, 0, 1), "window [10, 20): count 0/4");
    ASSERT_STR_EQ(rlt_wasm_sim_cell(h, 1, 1), "window [10, 20): count 0/4");
    ASSERT_EQ(rlt_wasm_sim_run(h, 0, 0), 0); /* every request again */
    ASSERT_EQ(rlt_wasm_sim_num(h, 0), 8);
    rlt_wasm_sim_close(h);
}

TEST(the_pages_cap_on_requests_says_why)
{
    ASSERT(OPEN("--pattern\0steady\0--rate\0001000\0--duration\0001000\0", NULL) == NULL);
    ASSERT_EQ(rlt_wasm_sim_status(), 1);
    ASSERT(strstr(err, "more than 200000 requests") != NULL);
    ASSERT(strstr(err, "ratelimit sim takes up to 5000000") != NULL);
}

TEST(a_trace_in_memory_is_read_as_the_commands_and_names_its_lines)
{
    page_sim *h = OPEN("--trace\0trace\0", "0 a\n1.5 b 2\n\n# c\n3\n");
    ASSERT(h != NULL);
    ASSERT_EQ(rlt_wasm_sim_num(h, 1), 3);
    rlt_wasm_sim_close(h);
    ASSERT(OPEN("--trace\0trace\0", "1 a\n2 b x\n") == NULL);
    ASSERT(strstr(err, "ratelimit sim: trace:2: bad COST 'x'") != NULL);
    ASSERT(OPEN("--trace\0trace\0", "") == NULL);
    ASSERT(strstr(err, "no requests to simulate") != NULL);
}

TEST(arguments_the_page_cannot_take_are_refused_with_a_message)
{
    ASSERT(open_sim("--limit\0003", 9, NULL) == NULL); /* not NUL-terminated */
    ASSERT_EQ(rlt_wasm_sim_status(), 2);
    ASSERT(strstr(err, "NUL-terminated") != NULL);
    ASSERT(OPEN("--help\0", NULL) == NULL);
    ASSERT_EQ(rlt_wasm_sim_status(), 2);
    ASSERT(OPEN("--svg\0x.svg\0", NULL) == NULL);
    ASSERT_EQ(rlt_wasm_sim_status(), 2);
    ASSERT(OPEN("--limit\0--row1\0", NULL) == NULL); /* a value is never a row */
    ASSERT(strstr(err, "--limit '--row1'") != NULL);
}
