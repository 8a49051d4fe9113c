/* Replays fuzz inputs as a plain regression test when not built with libFuzzer: the shared
 * standalone main (fuzz/standalone.h), for the server targets, which are compiled apart from
 * it. */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#include "../standalone.h"
