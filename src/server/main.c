/* ratelimitd: placeholder entry point while the server loop is being written. */
#include <stdio.h>

int main(void)
{
    fputs("ratelimitd: not yet implemented\n", stderr);
    return 1;
}
