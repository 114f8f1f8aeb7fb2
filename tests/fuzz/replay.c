/*
 * Replays inputs through a fuzz target without libFuzzer (make check):
 *   replay_TARGET FILE_OR_DIR...
 * calls LLVMFuzzerTestOneInput once per file (folders: every file inside, in
 * name order) and prints how many ran. A crash ends the process (and the
 * check); the target's own output goes to /dev/null unless FUZZ_VERBOSE is set.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_common.h"

static int quiet_fd[2] = {-1, -1};

static void quiet(int on)
{
    if (getenv("FUZZ_VERBOSE"))
        return;
    fflush(stdout), fflush(stderr);
    if (on) {
        int null = open("/dev/null", O_WRONLY);
        quiet_fd[0] = dup(1), quiet_fd[1] = dup(2);
        dup2(null, 1), dup2(null, 2);
        close(null);
    } else {
        dup2(quiet_fd[0], 1), dup2(quiet_fd[1], 2);
        close(quiet_fd[0]), close(quiet_fd[1]);
    }
}

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap)
            buf = realloc(buf, cap *= 2);
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    /* an exact-size copy, so a read past the end is past the allocation */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
    quiet(1);
    LLVMFuzzerTestOneInput(exact, n);
    quiet(0);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay(const char *path, int *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        ++*count;
        return replay_file(path);
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            names = realloc(names, (n + 1) * sizeof *names);
            names[n++] = strdup(e->d_name);
        }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, names[k]);
        if (!rc)
            rc = replay(sub, count);
        free(names[k]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int count = 0;
    for (int k = 1; k < argc; k++)
        if (replay(argv[k], &count))
            return 1;
    printf("%s: %d input%s replayed, no crash\n", argv[0], count, count == 1 ? "" : "s");
    return 0;
}
