/* Tests of the strict sans-I/O HTTP/1.1 request parser: every RFC 9112 rule both ways (accepted,
 * and refused with its status), the request-smuggling vectors, every bound at and one past
 * it, pipelining, and the "consumed / partial / error" contract at every split point. */
#include "test.h"

#include "server/http/http1.h"

#include <stdbool.h>

static char work_[1 << 18];
static rlt__http_req req_;
static int status_;
static const char *err_;

/* Parses len bytes of text (copied into a mutable buffer) with the given limits. */
static ssize_t parse_lim(const char *text, size_t len, const rlt__http_limits *lim)
{
    memcpy(work_, text, len);
    status_ = 0;
    err_ = NULL;
    return rlt__http_parse(work_, len, lim, &req_, &status_, &err_);
}

static ssize_t parse(const char *text)
{
    return parse_lim(text, strlen(text), NULL);
}

/* 200 when the whole text is one request, the status when it is refused, 1 when PARTIAL, 0
 * when a request was parsed but did not take all the bytes. */
static int answer_lim(const char *text, const rlt__http_limits *lim)
{
    size_t n = strlen(text);
    ssize_t r = parse_lim(text, n, lim);
    if (r == RLT__HTTP_ERROR) return status_;
    if (r == RLT__HTTP_PARTIAL) return 1;
    return (size_t)r == n ? 200 : 0;
}

static int answer(const char *text)
{
    return answer_lim(text, NULL);
}

static bool slice_is(const char *p, size_t n, const char *s)
{
    return p != NULL && n == strlen(s) && memcmp(p, s, n) == 0;
}

#define GET11(h) "GET / HTTP/1.1\r\nHost: a\r\n" h "\r\n"
#define POST11(h) "POST /json HTTP/1.1\r\nHost: a\r\n" h "\r\n"

/* The property: the prefixes 0..n of text give PARTIAL, then from some length on always the
 * result of the whole text (the same consumed count and request, or the same status and
 * message).  A request is settled exactly at its last byte. */
static void every_split_agrees(const char *text, size_t n, const rlt__http_limits *lim)
{
    static char body[1 << 17];
    ssize_t whole = parse_lim(text, n, lim);
    int status = status_;
    const char *err = err_;
    rlt__http_req full = req_;
    ASSERT(full.body_len <= sizeof body);
    if (whole > 0 && full.body_len > 0) memcpy(body, full.body, full.body_len);
    bool settled = false;
    for (size_t k = 0; k <= n; k++) {
        ssize_t r = parse_lim(text, k, lim);
        if (r == RLT__HTTP_PARTIAL) {
            ASSERT(!settled);
            continue;
        }
        if (!settled && whole > 0) ASSERT_EQ(k, whole);
        settled = true;
        ASSERT_EQ(r, whole);
        if (r == RLT__HTTP_ERROR) {
            ASSERT_EQ(status_, status);
            ASSERT_STR_EQ(err_, err);
            continue;
        }
        ASSERT_EQ(req_.method, full.method);
        ASSERT_EQ(req_.target - work_, full.target - work_);
        ASSERT_EQ(req_.target_len, full.target_len);
        ASSERT_EQ(req_.query_len, full.query_len);
        ASSERT_EQ(req_.nheaders, full.nheaders);
        ASSERT_EQ(req_.minor, full.minor);
        ASSERT_EQ(req_.keep_alive, full.keep_alive);
        ASSERT_EQ(req_.header_len, full.header_len);
        ASSERT_EQ(req_.body_len, full.body_len);
        if (full.body_len > 0) ASSERT(memcmp(req_.body, body, full.body_len) == 0);
    }
    ASSERT(settled || whole == RLT__HTTP_PARTIAL);
}

/* ---- request line ------------------------------------------------------------------- */

TEST(simple_get_is_parsed_into_slices)
{
    const char *t = "GET /v1/check?key=k1&policy=p HTTP/1.1\r\nHost: localhost:8080\r\n"
                    "User-Agent: curl/8.0\r\nAccept: */*\r\n\r\n";
    ASSERT_EQ(parse(t), strlen(t));
    ASSERT_EQ(req_.method, RLT__HTTP_GET);
    ASSERT(slice_is(req_.method_str, req_.method_len, "GET"));
    ASSERT(slice_is(req_.target, req_.target_len, "/v1/check?key=k1&policy=p"));
    ASSERT(slice_is(req_.path, req_.path_len, "/v1/check"));
    ASSERT(slice_is(req_.query, req_.query_len, "key=k1&policy=p"));
    ASSERT_EQ(req_.minor, 1);
    ASSERT_EQ(req_.nheaders, 3);
    ASSERT(slice_is(req_.headers[0].name, req_.headers[0].nlen, "Host"));
    ASSERT(slice_is(req_.headers[0].value, req_.headers[0].vlen, "localhost:8080"));
    ASSERT(slice_is(req_.headers[2].value, req_.headers[2].vlen, "*/*"));
    ASSERT(req_.keep_alive);
    ASSERT(!req_.expect_continue);
    ASSERT(!req_.chunked);
    ASSERT_EQ(req_.header_len, strlen(t));
    ASSERT(req_.body == NULL);
    ASSERT_EQ(req_.body_len, 0);
}

TEST(a_target_without_question_mark_has_no_query_and_an_empty_query_is_empty)
{
    ASSERT_EQ(answer("GET /healthz HTTP/1.0\r\n\r\n"), 200);
    ASSERT(slice_is(req_.path, req_.path_len, "/healthz"));
    ASSERT(req_.query == NULL);
    ASSERT_EQ(req_.query_len, 0);
    ASSERT_EQ(answer("GET /a? HTTP/1.0\r\n\r\n"), 200);
    ASSERT(slice_is(req_.path, req_.path_len, "/a"));
    ASSERT(req_.query != NULL);
    ASSERT_EQ(req_.query_len, 0);
    ASSERT_EQ(answer("GET /a?b?c HTTP/1.0\r\n\r\n"), 200);
    ASSERT(slice_is(req_.query, req_.query_len, "b?c"));
}

TEST(get_head_and_post_are_known_and_other_tokens_are_other)
{
    ASSERT_EQ(answer("HEAD / HTTP/1.0\r\n\r\n"), 200);
    ASSERT_EQ(req_.method, RLT__HTTP_HEAD);
    ASSERT_EQ(answer("POST / HTTP/1.0\r\n\r\n"), 200);
    ASSERT_EQ(req_.method, RLT__HTTP_POST);
    const char *other[] = {"PUT", "DELETE", "OPTIONS", "get", "Post", "GETX", "M-SEARCH", "X~!"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char t[64];
        snprintf(t, sizeof t, "%s / HTTP/1.0\r\n\r\n", other[i]);
        ASSERT_EQ(answer(t), 200);
        ASSERT_EQ(req_.method, RLT__HTTP_OTHER);
        ASSERT(slice_is(req_.method_str, req_.method_len, other[i]));
    }
}

TEST(a_method_that_is_not_a_token_is_a_400)
{
    ASSERT_EQ(answer("G(T / HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("G\"T / HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer(" / HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer(" GET / HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET\t/ HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("G\x80T / HTTP/1.0\r\n\r\n"), 400);
}

TEST(only_origin_form_targets_are_accepted)
{
    ASSERT_EQ(answer("GET /a/b;c=d?x=%20&y=@:!$'()*+,~ HTTP/1.0\r\n\r\n"), 200);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\n\r\n"), 200);
    ASSERT_EQ(answer("GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    ASSERT_EQ(answer("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    ASSERT_EQ(answer("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET a HTTP/1.0\r\n\r\n"), 400);
}

TEST(a_target_with_a_control_character_space_fragment_or_high_byte_is_a_400)
{
    ASSERT_EQ(answer("GET /a\x01 HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /a\tb HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /a\x7f HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /a\xc3\xa9 HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /a#f HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /a b HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET  / HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /  HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET /\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / \r\n\r\n"), 400);
}

TEST(http_1_0_and_1_1_are_the_only_versions_and_other_versions_are_a_505)
{
    ASSERT_EQ(answer("GET / HTTP/1.0\r\n\r\n"), 200);
    ASSERT_EQ(req_.minor, 0);
    ASSERT_EQ(answer(GET11("")), 200);
    ASSERT_EQ(req_.minor, 1);
    ASSERT_EQ(answer("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
    ASSERT_EQ(answer("GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 505);
    ASSERT_EQ(answer("GET / HTTP/0.9\r\nHost: a\r\n\r\n"), 505);
    ASSERT_EQ(answer("GET / HTTP/9.9\r\n\r\n"), 505);
}

TEST(a_malformed_version_is_a_400)
{
    const char *bad[] = {"http/1.1",  "HTTP/1.10", "HTTP/1",   "HTTP/11",  "HTTP/1.x", "HTTP 1.1",
                         "HTTP/1.1 ", "HTTPS/1.1", "HTTP/a.1", "HTTP/1,1", "HTTP/+.1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[64];
        snprintf(t, sizeof t, "GET / %s\r\nHost: a\r\n\r\n", bad[i]);
        ASSERT_EQ(answer(t), 400);
    }
}

/* ---- line endings ------------------------------------------------------------------- */

TEST(leading_empty_lines_are_skipped_and_counted_as_consumed)
{
    const char *t = "\r\n\r\nGET / HTTP/1.0\r\n\r\n";
    ASSERT_EQ(parse(t), strlen(t));
    ASSERT_EQ(req_.header_len, strlen(t));
    ASSERT(slice_is(req_.target, req_.target_len, "/"));
    ASSERT_EQ(parse("\r\n\r\n"), RLT__HTTP_PARTIAL);
    ASSERT_EQ(answer("\n\nGET / HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer("\rGET / HTTP/1.0\r\n\r\n"), 400);
}

TEST(a_bare_lf_is_refused_everywhere)
{
    ASSERT_EQ(answer("GET / HTTP/1.0\n\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\r\n\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\r\nX: 1\nContent-Length: 5\r\n\r\nhello"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "1\nx\r\n0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "1\r\nx\n0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "1\r\nx\r\n0\n\r\n"), 400);
}

TEST(a_bare_cr_is_a_400)
{
    ASSERT_EQ(answer("GET / HTTP/1.0\rX\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\r\n\rX"), 400);
    ASSERT_EQ(answer("GET /a\rb HTTP/1.0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "1\rx\r\n0\r\n\r\n"), 400);
}

/* ---- header fields ------------------------------------------------------------------ */

TEST(header_values_lose_their_surrounding_whitespace_only)
{
    ASSERT_EQ(answer(GET11("X-A: \t a  b \t \r\nX-B:c\r\nX-C:\r\nX-D:   \r\n")), 200);
    ASSERT_EQ(req_.nheaders, 5);
    ASSERT(slice_is(req_.headers[1].value, req_.headers[1].vlen, "a  b"));
    ASSERT(slice_is(req_.headers[2].value, req_.headers[2].vlen, "c"));
    ASSERT_EQ(req_.headers[3].vlen, 0);
    ASSERT_EQ(req_.headers[4].vlen, 0);
}

TEST(header_values_may_hold_htab_and_obs_text)
{
    ASSERT_EQ(answer(GET11("X-A: a\tb\xc3\xa9\xff~\r\n")), 200);
    ASSERT(slice_is(req_.headers[1].value, req_.headers[1].vlen, "a\tb\xc3\xa9\xff~"));
}

TEST(a_control_character_in_a_header_value_is_a_400)
{
    const char *ctl[] = {"\x01", "\x08", "\x0b", "\x0c", "\x1f", "\x7f", "\x1b[1m"};
    for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, GET11("X-A: a%sb\r\n"), ctl[i]);
        ASSERT_EQ(answer(t), 400);
    }
    const char nul[] = "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\0b\r\n\r\n";
    ASSERT_EQ(parse_lim(nul, sizeof nul - 1, NULL), RLT__HTTP_ERROR);
    ASSERT_EQ(status_, 400);
}

TEST(header_names_are_tokens_with_the_colon_right_after)
{
    ASSERT_EQ(answer(GET11("X-Weird!#$%&'*+.^_`|~0: v\r\n")), 200);
    ASSERT_EQ(answer(GET11("X-A : v\r\n")), 400);
    ASSERT_EQ(answer(GET11("X-A\t: v\r\n")), 400);
    ASSERT_EQ(answer(GET11(": v\r\n")), 400);
    ASSERT_EQ(answer(GET11("X A: v\r\n")), 400);
    ASSERT_EQ(answer(GET11("X@A: v\r\n")), 400);
    ASSERT_EQ(answer(GET11("X\"A: v\r\n")), 400);
    ASSERT_EQ(answer(GET11("no colon\r\n")), 400);
    ASSERT_EQ(answer(GET11("nocolon\r\n")), 400);
    ASSERT_EQ(answer(GET11("X\x80: v\r\n")), 400);
}

TEST(obs_fold_and_a_first_header_line_starting_with_whitespace_are_a_400)
{
    ASSERT_EQ(answer(GET11("X-A: a\r\n b\r\n")), 400);
    ASSERT_EQ(answer(GET11("X-A: a\r\n\tb\r\n")), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\n\tHost: a\r\n\r\n"), 400);
}

TEST(http_1_1_needs_exactly_one_host_and_http_1_0_none)
{
    ASSERT_EQ(answer("GET / HTTP/1.1\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nX-Host: a\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHOST: a\r\n\r\n"), 200);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nhost:\r\n\r\n"), 200);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"), 400);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\n\r\n"), 200);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
}

TEST(a_host_that_is_not_a_host_is_a_400)
{
    const char *good[] = {"localhost",
                          "127.0.0.1:8080",
                          "[::1]:8080",
                          "xn--bcher-kva.example",
                          "a_b.example",
                          "h%41st",
                          ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
        ASSERT_EQ(answer(t), 200);
    }
    const char *bad[] = {"a b",   "a/b",         "user@a", "a?b",  "a#b",
                         "\"a\"", "caf\xc3\xa9", "a\tb",   "a\\b", "<a>"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
        ASSERT_EQ(answer(t), 400);
        snprintf(t, sizeof t, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", bad[i]);
        ASSERT_EQ(answer(t), 400);
    }
}

TEST(find_looks_a_header_up_ignoring_case_and_returns_the_first)
{
    ASSERT_EQ(answer(GET11("Authorization: Bearer t\r\nX-A: 1\r\nx-a: 2\r\n")), 200);
    const rlt__http_header *h = rlt__http_find(&req_, "authorization");
    ASSERT(h != NULL);
    ASSERT(slice_is(h->value, h->vlen, "Bearer t"));
    h = rlt__http_find(&req_, "X-A");
    ASSERT(h != NULL);
    ASSERT(slice_is(h->value, h->vlen, "1"));
    ASSERT(rlt__http_find(&req_, "X-B") == NULL);
    ASSERT(rlt__http_find(&req_, "X-") == NULL);
    ASSERT(rlt__http_find(&req_, "") == NULL);
}

/* ---- Content-Length ----------------------------------------------------------------- */

TEST(a_content_length_body_is_a_slice_of_exactly_that_length)
{
    const char *t = POST11("Content-Length: 5\r\n") "helloGET";
    ASSERT_EQ(parse(t), strlen(t) - 3);
    ASSERT(slice_is(req_.body, req_.body_len, "hello"));
    ASSERT_EQ(req_.header_len, strlen(t) - 8);
    ASSERT_EQ(answer(POST11("Content-Length: 0\r\n")), 200);
    ASSERT(req_.body == NULL);
    ASSERT_EQ(answer(POST11("Content-Length: 005\r\n") "hello"), 200);
    ASSERT_EQ(req_.body_len, 5);
    ASSERT_EQ(answer(POST11("content-length:\t5 \r\n") "hello"), 200);
    ASSERT_EQ(answer(POST11("Content-Length: 5\r\n") "hell"), 1);
}

TEST(get_and_head_with_a_body_are_framed_by_their_content_length)
{
    const char *t = "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nGET HEAD";
    ASSERT_EQ(parse(t), strlen(t) - 4);
    ASSERT(slice_is(req_.body, req_.body_len, "GET "));
    ASSERT_EQ(answer("HEAD / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab"), 200);
    ASSERT(slice_is(req_.body, req_.body_len, "ab"));
}

TEST(a_content_length_that_is_not_digits_only_is_a_400)
{
    const char *bad[] = {"+6",  "-6", "6 6", "6,6", "6, 6", "0x6", "6.0",
                         "6e0", "",   "six", "\t",  "6;",   "1_0", "\xd9\xa6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, POST11("Content-Length: %s\r\n") "hello!", bad[i]);
        ASSERT_EQ(answer(t), 400);
    }
}

TEST(two_content_lengths_are_a_400_even_when_equal)
{
    ASSERT_EQ(answer(POST11("Content-Length: 6\r\nContent-Length: 6\r\n") "hello!"), 400);
    ASSERT_EQ(answer(POST11("Content-Length: 6\r\ncontent-length: 0\r\n") "hello!"), 400);
    ASSERT_EQ(answer(POST11("Content-Length: 0\r\nContent-Length: 6\r\n") "hello!"), 400);
}

TEST(a_content_length_that_overflows_is_a_400_and_one_above_max_body_a_413)
{
    ASSERT_EQ(answer(POST11("Content-Length: 18446744073709551616\r\n")), 400);
    ASSERT_EQ(answer(POST11("Content-Length: 99999999999999999999999999\r\n")), 400);
    ASSERT_EQ(answer(POST11("Content-Length: 18446744073709551615\r\n")), 413);
    rlt__http_limits lim = {.max_body = 10};
    ASSERT_EQ(answer_lim(POST11("Content-Length: 10\r\n") "0123456789", &lim), 200);
    ASSERT_EQ(answer_lim(POST11("Content-Length: 11\r\n") "0123456789a", &lim), 413);
    char t[128];
    snprintf(t, sizeof t, POST11("Content-Length: %d\r\n"), RLT__HTTP_MAX_BODY_DEFAULT);
    ASSERT_EQ(answer(t), 1);
    snprintf(t, sizeof t, POST11("Content-Length: %d\r\n"), RLT__HTTP_MAX_BODY_DEFAULT + 1);
    ASSERT_EQ(answer(t), 413);
}

/* ---- Transfer-Encoding -------------------------------------------------------------- */

TEST(a_chunked_body_is_decoded_in_place)
{
    const char *t = POST11("Transfer-Encoding: chunked\r\n") "4\r\nWiki\r\n5\r\npedia\r\n"
                                                             "E\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n";
    ASSERT_EQ(parse(t), strlen(t));
    ASSERT(req_.chunked);
    ASSERT(slice_is(req_.body, req_.body_len, "Wikipedia in\r\n\r\nchunks."));
    ASSERT(req_.body == work_ + req_.header_len);
}

TEST(transfer_encoding_chunked_is_matched_ignoring_case)
{
    ASSERT_EQ(answer(POST11("transfer-encoding: ChUnKeD\r\n") "1\r\nx\r\n0\r\n\r\n"), 200);
    ASSERT(slice_is(req_.body, req_.body_len, "x"));
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "0\r\n\r\n"), 200);
    ASSERT(req_.body == NULL);
    ASSERT_EQ(req_.body_len, 0);
}

TEST(a_transfer_coding_other_than_chunked_is_a_501)
{
    const char *te[] = {
        "gzip", "gzip, chunked", "chunked, chunked", "chunked;q=1", "identity", "chunkedx",
        "",     "chunked ,"};
    for (size_t i = 0; i < sizeof te / sizeof te[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, POST11("Transfer-Encoding: %s\r\n") "0\r\n\r\n", te[i]);
        ASSERT_EQ(answer(t), 501);
    }
}

TEST(transfer_encoding_with_content_length_is_a_400_in_either_order)
{
    ASSERT_EQ(answer(POST11("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") "0\r\n\r\n"),
              400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n") "0\r\n\r\n"),
              400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: gzip\r\nContent-Length: 5\r\n") "hello"), 400);
}

TEST(transfer_encoding_in_http_1_0_or_twice_is_a_400)
{
    ASSERT_EQ(answer("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
    ASSERT_EQ(
        answer(POST11("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n") "0\r\n\r\n"),
        400);
}

TEST(chunk_extensions_are_allowed_and_ignored)
{
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3;a=b\r\nabc\r\n"
                                                              "2 ; x ; y=\"q;\\\"z\"\r\nde\r\n"
                                                              "0;last\r\n\r\n"),
              200);
    ASSERT(slice_is(req_.body, req_.body_len, "abcde"));
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3\t;a\r\nabc\r\n0\r\n\r\n"), 200);
}

TEST(a_chunk_extension_with_a_control_character_or_without_semicolon_is_a_400)
{
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3;a\x01\r\nabc\r\n0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3 \r\nabc\r\n0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3 a\r\nabc\r\n0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3x\r\nabc\r\n0\r\n\r\n"), 400);
}

TEST(chunk_sizes_are_hex_digits_only)
{
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "A\r\n0123456789\r\n"
                                                              "a\r\n0123456789\r\n0\r\n\r\n"),
              200);
    ASSERT_EQ(req_.body_len, 20);
    const char *bad[] = {"", "g", "+1", "-1", " 1", "0x1", "\t1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, POST11("Transfer-Encoding: chunked\r\n") "%s\r\nx\r\n0\r\n\r\n",
                 bad[i]);
        ASSERT_EQ(answer(t), 400);
    }
}

TEST(chunk_sizes_have_at_most_sixteen_digits)
{
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "0000000000000001\r\nx\r\n"
                                                              "0000000000000000\r\n\r\n"),
              200);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "00000000000000001\r\nx\r\n"
                                                              "0\r\n\r\n"),
              400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "FFFFFFFFFFFFFFFFF\r\n"), 413);
}

TEST(chunk_data_must_be_followed_by_crlf)
{
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3\r\nabcd\r\n0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3\r\nabc0\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "3\r\nab\r\n0\r\n\r\n"), 400);
}

TEST(trailers_are_allowed_checked_and_ignored)
{
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "1\r\nx\r\n0\r\nX-Sum: 1\r\n"
                                                              "Content-Length: 9\r\n\r\n"),
              200);
    ASSERT(slice_is(req_.body, req_.body_len, "x"));
    ASSERT_EQ(req_.nheaders, 2);
    ASSERT(rlt__http_find(&req_, "X-Sum") == NULL);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "0\r\nX Sum: 1\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "0\r\nX: a\r\n b\r\n\r\n"), 400);
    ASSERT_EQ(answer(POST11("Transfer-Encoding: chunked\r\n") "0\r\nX: \x01\r\n\r\n"), 400);
}

TEST(a_partial_chunked_body_leaves_the_buffer_unchanged)
{
    const char *t = POST11("Transfer-Encoding: chunked\r\n") "4\r\nWiki\r\n5\r\npedia\r\n0\r\n";
    size_t n = strlen(t);
    ASSERT_EQ(parse(t), RLT__HTTP_PARTIAL);
    ASSERT(memcmp(work_, t, n) == 0);
    ASSERT_EQ(req_.header_len, strlen(POST11("Transfer-Encoding: chunked\r\n")));
}

TEST(a_chunked_body_over_max_body_is_a_413_and_exactly_max_body_is_accepted)
{
    rlt__http_limits lim = {.max_body = 10};
    ASSERT_EQ(answer_lim(POST11("Transfer-Encoding: chunked\r\n") "5\r\n01234\r\n5\r\n56789\r\n"
                                                                  "0\r\n\r\n",
                         &lim),
              200);
    ASSERT_EQ(answer_lim(POST11("Transfer-Encoding: chunked\r\n") "5\r\n01234\r\n6\r\n56789a\r\n"
                                                                  "0\r\n\r\n",
                         &lim),
              413);
    ASSERT_EQ(answer_lim(POST11("Transfer-Encoding: chunked\r\n") "B\r\n", &lim), 413);
    ASSERT_EQ(answer_lim(POST11("Transfer-Encoding: chunked\r\n") "A\r\n", &lim), 1);
}

TEST(a_chunk_size_line_is_at_most_max_chunk_line_bytes)
{
    static char t[4096];
    size_t h = (size_t)snprintf(t, sizeof t, POST11("Transfer-Encoding: chunked\r\n"));
    /* "1;" + filler + CRLF = exactly RLT__HTTP_MAX_CHUNK_LINE bytes. */
    size_t fill = RLT__HTTP_MAX_CHUNK_LINE - 4;
    memcpy(t + h, "1;", 2);
    memset(t + h + 2, 'e', fill);
    strcpy(t + h + 2 + fill, "\r\nx\r\n0\r\n\r\n");
    ASSERT_EQ(answer(t), 200);
    memmove(t + h + 3, t + h + 2, strlen(t + h + 2) + 1);
    t[h + 2] = 'e';
    ASSERT_EQ(answer(t), 400);
}

TEST(chunked_framing_beyond_max_header_bytes_plus_max_body_is_a_413)
{
    /* 1-byte chunks: 6 bytes of framing each ("1\r\n" + "\r\n" ... ), body limit 1000. */
    rlt__http_limits lim = {.max_header_bytes = 100, .max_body = 1000};
    static char t[16384];
    size_t n = (size_t)snprintf(t, sizeof t, POST11("Transfer-Encoding: chunked\r\n"));
    size_t h = n;
    for (int i = 0; i < 300; i++) {
        memcpy(t + n, "1;ext\r\nx\r\n", 10);
        n += 10;
    }
    memcpy(t + n, "0\r\n\r\n", 6);
    /* 300 * 9 framing bytes = 2700 > 1100. */
    ASSERT_EQ(answer_lim(t, &lim), 413);
    ASSERT_STR_EQ(err_, "chunked framing larger than the limit");
    /* 100 chunks: 900 bytes + the last chunk 3 = 903 <= 1100. */
    memcpy(t + h + 1000, "0\r\n\r\n", 6);
    ASSERT_EQ(answer_lim(t, &lim), 200);
    ASSERT_EQ(req_.body_len, 100);
}

TEST(chunked_framing_of_exactly_the_limit_is_accepted_and_one_byte_more_is_a_413)
{
    /* max_framing = 100 + 1000; 100 chunks of 9 framing bytes, then "0;" + pad + CRLF. */
    rlt__http_limits lim = {.max_header_bytes = 100, .max_body = 1000};
    static char t[16384];
    for (size_t extra = 0; extra <= 1; extra++) {
        size_t n = (size_t)snprintf(t, sizeof t, POST11("Transfer-Encoding: chunked\r\n"));
        for (int i = 0; i < 100; i++) {
            memcpy(t + n, "1;ext\r\nx\r\n", 10);
            n += 10;
        }
        size_t pad = 1100 - 900 - 4 + extra;
        memcpy(t + n, "0;", 2);
        memset(t + n + 2, 'p', pad);
        strcpy(t + n + 2 + pad, "\r\n\r\n");
        ASSERT_EQ(answer_lim(t, &lim), extra ? 413 : 200);
    }
}

/* ---- limits ------------------------------------------------------------------------- */

/* A GET whose header section is exactly n bytes (n >= 40), with one X-Pad header. */
static const char *get_of_size(size_t n)
{
    static char t[1 << 16];
    const char *head = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: ";
    size_t h = strlen(head);
    memcpy(t, head, h);
    memset(t + h, 'p', n - h - 4);
    memcpy(t + n - 4, "\r\n\r\n", 5);
    return t;
}

TEST(a_header_section_of_exactly_max_header_bytes_is_accepted_and_one_more_is_a_431)
{
    ASSERT_EQ(strlen(get_of_size(RLT__HTTP_MAX_HEADER_BYTES_DEFAULT)),
              RLT__HTTP_MAX_HEADER_BYTES_DEFAULT);
    ASSERT_EQ(answer(get_of_size(RLT__HTTP_MAX_HEADER_BYTES_DEFAULT)), 200);
    ASSERT_EQ(answer(get_of_size(RLT__HTTP_MAX_HEADER_BYTES_DEFAULT + 1)), 431);
    rlt__http_limits lim = {.max_header_bytes = 100};
    ASSERT_EQ(answer_lim(get_of_size(100), &lim), 200);
    ASSERT_EQ(answer_lim(get_of_size(101), &lim), 431);
    /* Without the final CRLF the answer is the same once the bound is passed. */
    ASSERT_EQ(parse_lim(get_of_size(101), 100, &lim), RLT__HTTP_ERROR);
    ASSERT_EQ(status_, 431);
    ASSERT_EQ(parse_lim(get_of_size(101), 99, &lim), RLT__HTTP_PARTIAL);
}

TEST(a_request_line_over_max_header_bytes_is_a_414)
{
    rlt__http_limits lim = {.max_header_bytes = 64};
    char t[256];
    /* "GET /" + 'a' * k + " HTTP/1.1\r\n": 16 + k bytes. */
    memcpy(t, "GET /", 5);
    memset(t + 5, 'a', 48);
    strcpy(t + 53, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_EQ(answer_lim(t, &lim), 431); /* the line fits exactly, the headers do not */
    memset(t + 5, 'a', 49);
    strcpy(t + 54, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_EQ(answer_lim(t, &lim), 414);
    memset(t + 5, 'a', 30);
    strcpy(t + 35, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_EQ(answer_lim(t, &lim), 200);
    /* Endless leading empty lines are bounded the same way. */
    memset(t, 0, sizeof t);
    for (int i = 0; i < 40; i++)
        memcpy(t + 2 * i, "\r\n", 2);
    ASSERT_EQ(answer_lim(t, &lim), 414);
}

TEST(max_headers_fields_are_accepted_and_one_more_is_a_431)
{
    static char t[4096];
    for (size_t max = 1; max <= RLT__HTTP_MAX_HEADERS_DEFAULT; max += 21) {
        rlt__http_limits lim = {.max_headers = max};
        for (size_t extra = 0; extra <= 1; extra++) {
            size_t n = (size_t)snprintf(t, sizeof t, "GET / HTTP/1.1\r\nHost: a\r\n");
            for (size_t i = 1; i < max + extra; i++)
                n += (size_t)snprintf(t + n, sizeof t - n, "X-%zu: v\r\n", i);
            strcpy(t + n, "\r\n");
            ASSERT_EQ(answer_lim(t, &lim), extra ? 431 : 200);
            if (!extra) ASSERT_EQ(req_.nheaders, max);
        }
    }
}

TEST(max_headers_above_the_array_is_clamped_to_it)
{
    static char t[4096];
    rlt__http_limits lim = {.max_headers = 1000};
    size_t n = (size_t)snprintf(t, sizeof t, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (size_t i = 1; i < RLT__HTTP_MAX_HEADERS_DEFAULT + 1; i++)
        n += (size_t)snprintf(t + n, sizeof t - n, "X-%zu: v\r\n", i);
    strcpy(t + n, "\r\n");
    ASSERT_EQ(answer_lim(t, &lim), 431);
    ASSERT_EQ(answer(t), 431);
}

TEST(trailers_count_in_max_header_bytes_at_and_one_past_the_bound)
{
    rlt__http_limits lim = {.max_header_bytes = 100};
    const char *head = POST11("Transfer-Encoding: chunked\r\n");
    size_t h = strlen(head);
    static char t[512];
    /* Trailer field lines of exactly 100 - h bytes, then one byte more. */
    for (size_t extra = 0; extra <= 1; extra++) {
        size_t budget = 100 - h + extra;
        size_t n = (size_t)snprintf(t, sizeof t, "%s0\r\nX: ", head);
        memset(t + n, 't', budget - 5);
        strcpy(t + n + budget - 5, "\r\n\r\n");
        ASSERT_EQ(answer_lim(t, &lim), extra ? 431 : 200);
    }
}

/* ---- connection options -------------------------------------------------------------- */

TEST(http_1_1_keeps_alive_unless_connection_close)
{
    ASSERT_EQ(answer(GET11("")), 200);
    ASSERT(req_.keep_alive);
    ASSERT_EQ(answer(GET11("Connection: keep-alive\r\n")), 200);
    ASSERT(req_.keep_alive);
    ASSERT_EQ(answer(GET11("Connection: close\r\n")), 200);
    ASSERT(!req_.keep_alive);
    ASSERT_EQ(answer(GET11("Connection: Upgrade, CLOSE\r\n")), 200);
    ASSERT(!req_.keep_alive);
    ASSERT_EQ(answer(GET11("Connection: keep-alive ,\t close \r\n")), 200);
    ASSERT(!req_.keep_alive);
    ASSERT_EQ(answer(GET11("Connection: keep-alive\r\nConnection: close\r\n")), 200);
    ASSERT(!req_.keep_alive);
    ASSERT_EQ(answer(GET11("Connection: closed, xclose\r\n")), 200);
    ASSERT(req_.keep_alive);
}

TEST(http_1_0_keeps_alive_only_with_connection_keep_alive)
{
    ASSERT_EQ(answer("GET / HTTP/1.0\r\n\r\n"), 200);
    ASSERT(!req_.keep_alive);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), 200);
    ASSERT(req_.keep_alive);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\nConnection: foo,keep-alive\r\n\r\n"), 200);
    ASSERT(req_.keep_alive);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"), 200);
    ASSERT(!req_.keep_alive);
    ASSERT_EQ(answer("GET / HTTP/1.0\r\nConnection: keep-alives\r\n\r\n"), 200);
    ASSERT(!req_.keep_alive);
}

TEST(expect_100_continue_is_seen_as_soon_as_the_header_section_is_complete)
{
    const char *head = POST11("Expect: 100-Continue\r\nContent-Length: 5\r\n");
    ASSERT_EQ(parse(head), RLT__HTTP_PARTIAL);
    ASSERT(req_.expect_continue);
    ASSERT_EQ(req_.header_len, strlen(head));
    ASSERT_EQ(req_.content_length, 5);
    ASSERT_EQ(parse_lim(head, strlen(head) - 1, NULL), RLT__HTTP_PARTIAL);
    ASSERT_EQ(req_.header_len, 0);
    ASSERT_EQ(req_.content_length, 0);
    ASSERT_EQ(answer(POST11("Expect: 100-continue\r\nContent-Length: 2\r\n") "ab"), 200);
    ASSERT(req_.expect_continue);
    ASSERT_EQ(answer("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"), 200);
    ASSERT(!req_.expect_continue);
    ASSERT_EQ(answer(POST11("Expect: 200-ok\r\n")), 200);
    ASSERT(!req_.expect_continue);
}

/* ---- framing attacks and pipelining -------------------------------------------------- */

TEST(a_smuggled_request_in_a_refused_body_is_never_reached)
{
    /* Each is ERROR: no consumed count, so the caller cannot go on to the second request. */
    const char *smuggle = "GET /admin HTTP/1.1\r\nHost: a\r\n\r\n";
    const char *heads[] = {
        POST11("Content-Length: 0\r\nContent-Length: 33\r\n"),
        POST11("Content-Length: +33\r\n"),
        POST11("Content-Length: 33\r\nTransfer-Encoding: chunked\r\n"),
        POST11("Transfer-Encoding: chunked\r\nContent-Length: 0\r\n"),
        POST11("Transfer-Encoding: xchunked\r\n"),
        POST11("Transfer-Encoding: chunked\r\n Content-Length: 0\r\n"),
        POST11("Content-Length : 0\r\n"),
        POST11("X: y\nContent-Length: 0\r\n"),
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char t[512];
        snprintf(t, sizeof t, "%s%s", heads[i], smuggle);
        ASSERT_EQ(parse(t), RLT__HTTP_ERROR);
        ASSERT(status_ == 400 || status_ == 501);
        ASSERT(err_ != NULL && strchr(err_, '\r') == NULL && strchr(err_, '\n') == NULL);
    }
}

TEST(pipelined_requests_parse_one_after_the_other)
{
    const char *reqs[] = {
        "GET /a HTTP/1.1\r\nHost: a\r\n\r\n",
        "\r\nPOST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz",
        "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
        "HEAD /d HTTP/1.0\r\n\r\n",
    };
    const char *paths[] = {"/a", "/b", "/c", "/d"};
    const char *bodies[] = {"", "xyz", "hi", ""};
    char all[1024] = "";
    for (size_t i = 0; i < 4; i++)
        strcat(all, reqs[i]);
    size_t total = strlen(all), off = 0;
    memcpy(work_, all, total);
    for (size_t i = 0; i < 4; i++) {
        ssize_t r = rlt__http_parse(work_ + off, total - off, NULL, &req_, &status_, &err_);
        ASSERT_EQ(r, strlen(reqs[i]));
        ASSERT(slice_is(req_.path, req_.path_len, paths[i]));
        ASSERT_EQ(req_.body_len, strlen(bodies[i]));
        if (req_.body_len) ASSERT(slice_is(req_.body, req_.body_len, bodies[i]));
        off += (size_t)r;
    }
    ASSERT_EQ(off, total);
    ASSERT_EQ(rlt__http_parse(work_ + off, 0, NULL, &req_, &status_, &err_), RLT__HTTP_PARTIAL);
}

TEST(every_split_point_gives_partial_then_the_whole_result)
{
    const char *cases[] = {
        "GET /v1/check?key=a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "\r\n\r\nGET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n",
        "POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloXX",
        ("POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3;e=\"x\"\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\nGET"),
        "POST /json HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz",
        /* refused ones */
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +6\r\n\r\nhello!",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX",
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX\x01: a\r\n\r\n",
        "GET /\x7f HTTP/1.1\r\n",
        "G(T / HTTP/1.1\r\n",
        "GET / HTTP/1.1\rX",
        "GET / HTTP/1.1\r\nHost: a\r\n\rX",
        /* incomplete */
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        every_split_agrees(cases[c], strlen(cases[c]), NULL);
        if (rlt_test_failed_now) {
            fprintf(stderr, "  in case %zu\n", c);
            return;
        }
    }
    /* And with tight limits, across every bound. */
    rlt__http_limits lim = {.max_header_bytes = 60, .max_headers = 2, .max_body = 8};
    const char *tight[] = {
        "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\n\r\n123456789",
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
         "4\r\n1234\r\n5\r\n56789\r\n0\r\n\r\n"),
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\r\n\r\n",
    };
    for (size_t c = 0; c < sizeof tight / sizeof tight[0]; c++) {
        every_split_agrees(tight[c], strlen(tight[c]), &lim);
        if (rlt_test_failed_now) {
            fprintf(stderr, "  in tight case %zu\n", c);
            return;
        }
    }
}

TEST(status_and_err_may_be_null)
{
    char t[] = "GET / HTTP/3.0\r\n\r\n";
    ASSERT_EQ(rlt__http_parse(t, strlen(t), NULL, &req_, NULL, NULL), RLT__HTTP_ERROR);
}

TEST(a_bad_byte_at_any_offset_of_a_long_target_or_value_is_found)
{
    /* The word-at-a-time scans: every offset of a 40-byte run, every class of byte. */
    static const char target_bad[] = {' ', '\t', '\x01', '\x7f', '#', '\x80', '\xff', '\0'};
    static const char value_bad[] = {'\x01', '\x1f', '\x7f', '\0', '\n'};
    static const char value_ok[] = {'\t', ' ', '\x80', '\xff', '~', '#'};
    char t[256];
    for (size_t off = 0; off < 40; off++) {
        for (size_t b = 0; b < sizeof target_bad; b++) {
            int n = snprintf(t, sizeof t, "GET /%040d HTTP/1.0\r\n\r\n", 0);
            t[5 + off] = target_bad[b];
            ASSERT_EQ(parse_lim(t, (size_t)n, NULL), RLT__HTTP_ERROR);
            ASSERT_EQ(status_, 400);
        }
        for (size_t b = 0; b < sizeof value_bad; b++) {
            int n = snprintf(t, sizeof t, GET11("X: a%040dz\r\n"), 0);
            t[strlen(GET11("X: a")) - 2 + off] = value_bad[b];
            ASSERT_EQ(parse_lim(t, (size_t)n, NULL), RLT__HTTP_ERROR);
            ASSERT_EQ(status_, 400);
        }
        for (size_t b = 0; b < sizeof value_ok; b++) {
            int n = snprintf(t, sizeof t, GET11("X: a%040dz\r\n"), 0);
            t[strlen(GET11("X: a")) - 2 + off] = value_ok[b];
            ASSERT_EQ(parse_lim(t, (size_t)n, NULL), n);
            ASSERT_EQ(req_.headers[1].vlen, 42);
        }
    }
}
