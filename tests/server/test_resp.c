/* Tests of the sans-I/O RESP parser and reply encoders: every request form, every bound, and
 * the "consumed / partial / error" contract at every split point. */
#include "test.h"

#include "server/resp/resp.h"

#include <stdint.h>

static rlt__resp_arg argv_[RLT__RESP_DEFAULT_MAX_ARGS];
static size_t argc_;
static const char *err_;
static char work_[1 << 17];

/* Parses text (copied into a mutable buffer) with the given limits. */
static ssize_t parse_lim(const char *text, size_t len, const rlt__resp_limits *lim)
{
    memcpy(work_, text, len);
    err_ = NULL;
    return rlt__resp_parse(work_, len, lim, argv_, &argc_, &err_);
}

static ssize_t parse(const char *text)
{
    return parse_lim(text, strlen(text), NULL);
}

static int arg_is(size_t i, const char *s)
{
    return i < argc_ && argv_[i].len == strlen(s) && memcmp(argv_[i].ptr, s, argv_[i].len) == 0;
}

TEST(multibulk_command_is_parsed_into_slices)
{
    const char *t = "*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nkey\r\n$0\r\n\r\n";
    ASSERT_EQ(parse(t), strlen(t));
    ASSERT_EQ(argc_, 3);
    ASSERT(arg_is(0, "CL.THROTTLE"));
    ASSERT(arg_is(1, "key"));
    ASSERT(arg_is(2, ""));
}

TEST(bulk_strings_are_binary_safe)
{
    const char t[] = "*1\r\n$5\r\na\0\r\nb\r\n";
    ASSERT_EQ(parse_lim(t, sizeof t - 1, NULL), sizeof t - 1);
    ASSERT_EQ(argc_, 1);
    ASSERT_EQ(argv_[0].len, 5);
    ASSERT(memcmp(argv_[0].ptr, "a\0\r\nb", 5) == 0);
}

TEST(every_proper_prefix_is_partial_and_the_whole_is_consumed)
{
    const char *cmds[] = {"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", "PING hello \"a b\"\r\n", "*0\r\n",
                          "\r\n"};
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        size_t n = strlen(cmds[c]);
        for (size_t k = 0; k < n; k++)
            ASSERT_EQ(parse_lim(cmds[c], k, NULL), RLT__RESP_PARTIAL);
        ASSERT_EQ(parse_lim(cmds[c], n, NULL), n);
    }
}

TEST(pipelined_commands_are_parsed_one_at_a_time)
{
    const char *t = "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\nPING\r\n";
    size_t off = 0, total = strlen(t);
    int cmds = 0;
    memcpy(work_, t, total);
    while (off < total) {
        ssize_t r = rlt__resp_parse(work_ + off, total - off, NULL, argv_, &argc_, &err_);
        ASSERT(r > 0);
        ASSERT(arg_is(0, "PING"));
        off += (size_t)r;
        cmds++;
    }
    ASSERT_EQ(cmds, 3);
}

TEST(empty_array_and_null_array_are_empty_commands)
{
    ASSERT_EQ(parse("*0\r\n"), 4);
    ASSERT_EQ(argc_, 0);
    ASSERT_EQ(parse("*-1\r\n"), 5);
    ASSERT_EQ(argc_, 0);
}

TEST(negative_or_garbage_counts_are_errors)
{
    ASSERT_EQ(parse("*-2\r\n"), RLT__RESP_ERROR);
    ASSERT(err_ != NULL && strstr(err_, "multibulk length") != NULL);
    ASSERT_EQ(parse("*abc\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*+1\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*01\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*-0\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*1\rX"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*99999999999999999999\r\n"), RLT__RESP_ERROR);
}

TEST(count_line_without_crlf_is_refused_early)
{
    /* 30 digits and no CR: garbage, refused now rather than waiting forever. */
    ASSERT_EQ(parse("*111111111111111111111111111111"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*1111"), RLT__RESP_PARTIAL);
}

TEST(too_many_arguments_are_refused)
{
    rlt__resp_limits lim = {.max_args = 3};
    const char *ok = "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n";
    ASSERT_EQ(parse_lim(ok, strlen(ok), &lim), strlen(ok));
    const char *bad = "*4\r\n";
    ASSERT_EQ(parse_lim(bad, strlen(bad), &lim), RLT__RESP_ERROR);
    ASSERT(strstr(err_, "too many arguments") != NULL);
    const char *inl = "a b c d\r\n";
    ASSERT_EQ(parse_lim(inl, strlen(inl), &lim), RLT__RESP_ERROR);
    const char *inl_ok = "a b c\r\n";
    ASSERT_EQ(parse_lim(inl_ok, strlen(inl_ok), &lim), strlen(inl_ok));
}

TEST(bulk_length_bounds_both_ways)
{
    rlt__resp_limits lim = {.max_bulk = 4};
    const char *ok = "*1\r\n$4\r\nabcd\r\n";
    ASSERT_EQ(parse_lim(ok, strlen(ok), &lim), strlen(ok));
    const char *big = "*1\r\n$5\r\n";
    ASSERT_EQ(parse_lim(big, strlen(big), &lim), RLT__RESP_ERROR);
    ASSERT(strstr(err_, "bulk length") != NULL);
    ASSERT_EQ(parse("*1\r\n$-1\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*1\r\n$9223372036854775807\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("*1\r\n$x\r\n"), RLT__RESP_ERROR);
}

TEST(garbage_after_bulk_data_is_an_error)
{
    ASSERT_EQ(parse("*1\r\n$4\r\nPINGxx\r\n"), RLT__RESP_ERROR);
    ASSERT(strstr(err_, "CRLF") != NULL);
    ASSERT_EQ(parse("*1\r\n:4\r\n"), RLT__RESP_ERROR);
    ASSERT(strstr(err_, "'$'") != NULL);
}

TEST(inline_commands_split_on_blanks_and_honour_quotes)
{
    const char *t = "  CL.THROTTLE   k 1\t2 3\n";
    ASSERT_EQ(parse(t), strlen(t));
    ASSERT_EQ(argc_, 5);
    ASSERT(arg_is(0, "CL.THROTTLE"));
    ASSERT(arg_is(4, "3"));
    ASSERT(parse("SET \"a b\" 'c d' \"x\\ny\" \"\\x41\\x42\" 'it\\'s'\r\n") > 0);
    ASSERT_EQ(argc_, 6);
    ASSERT(arg_is(1, "a b"));
    ASSERT(arg_is(2, "c d"));
    ASSERT(arg_is(3, "x\ny"));
    ASSERT(arg_is(4, "AB"));
    ASSERT(arg_is(5, "it's"));
}

TEST(unbalanced_quotes_are_an_error)
{
    ASSERT_EQ(parse("GET \"abc\r\n"), RLT__RESP_ERROR);
    ASSERT(strstr(err_, "unbalanced") != NULL);
    ASSERT_EQ(parse("GET 'abc\r\n"), RLT__RESP_ERROR);
    ASSERT_EQ(parse("GET \"abc\"def\r\n"), RLT__RESP_ERROR);
}

TEST(empty_inline_line_is_an_empty_command)
{
    ASSERT_EQ(parse("\r\n"), 2);
    ASSERT_EQ(argc_, 0);
    ASSERT_EQ(parse("   \n"), 4);
    ASSERT_EQ(argc_, 0);
}

TEST(inline_line_longer_than_the_limit_is_refused)
{
    rlt__resp_limits lim = {.max_inline = 8};
    ASSERT_EQ(parse_lim("PING 123\n", 9, &lim), 9);
    ASSERT_EQ(parse_lim("PING 1234", 9, &lim), RLT__RESP_ERROR);
    ASSERT(strstr(err_, "inline") != NULL);
    ASSERT_EQ(parse_lim("PING 123", 8, &lim), RLT__RESP_PARTIAL);
}

TEST(reply_encoders_write_resp2)
{
    rlt__obuf b = {0};
    rlt__resp_array(&b, 2);
    rlt__resp_int(&b, -42);
    rlt__resp_int(&b, INT64_MIN);
    rlt__resp_simple(&b, "OK");
    rlt__resp_bulk(&b, "ab", 2);
    rlt__resp_null(&b);
    rlt__resp_error(&b, "ERR bad\r\nthing");
    rlt__obuf_put(&b, "", 1);
    ASSERT_STR_EQ(b.data, "*2\r\n:-42\r\n:-9223372036854775808\r\n+OK\r\n$2\r\nab\r\n$-1\r\n"
                          "-ERR bad  thing\r\n");
    rlt__obuf_free(&b);
}

TEST(output_buffer_cap_drops_and_flags_overflow)
{
    rlt__obuf b = {.max = 8};
    rlt__obuf_put(&b, "12345", 5);
    ASSERT_EQ(b.len, 5);
    ASSERT(!b.overflow);
    rlt__obuf_put(&b, "6789", 4);
    ASSERT(b.overflow);
    ASSERT_EQ(b.len, 5);
    rlt__obuf_consume(&b, 2);
    ASSERT_EQ(b.len, 3);
    ASSERT(memcmp(b.data, "345", 3) == 0);
    rlt__obuf_free(&b);
}
