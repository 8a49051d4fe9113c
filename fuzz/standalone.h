/* A main for every fuzz target when it is built without libFuzzer
 * (-DRLT_FUZZ_STANDALONE): every argument is a file or a directory of files, each fed once to
 * LLVMFuzzerTestOneInput, so a checked-in corpus replays as a plain CTest regression test.
 * A target signals a violated invariant by aborting. */
#ifndef RLT_FUZZ_STANDALONE_H
#define RLT_FUZZ_STANDALONE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int rlt_fuzz_run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0, n;
    uint8_t *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) return -1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            failed++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed += rlt_fuzz_run_file(argv[i]) != 0;
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            failed += rlt_fuzz_run_file(path) != 0;
            files++;
        }
        if (d) closedir(d);
    }
    printf("%d passed, %d failed\n", files - failed, failed);
    return failed != 0 || files == 0;
}
#endif
