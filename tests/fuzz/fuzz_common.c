#define _XOPEN_SOURCE 700   /* mkdtemp, nftw */
#include "fuzz_common.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attngraph.h"

static char dir[256];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag;
    if (ftw->level > 0)   /* keep the folder itself */
        remove(path);
    return 0;
}

void fuzz_clear(void)
{
    if (dir[0])
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void remove_dir(void)
{
    fuzz_clear();
    remove(dir);
}

const char *fuzz_dir(void)
{
    if (!dir[0]) {
        /* TMPDIR, else /dev/shm (memory: a file per input on a disk made
           /tmp 40x slower here), else /tmp */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/attngraph-fuzz-XXXXXX", tmp);
        if (!mkdtemp(dir)) {
            perror("attngraph fuzz: mkdtemp");
            abort();
        }
        atexit(remove_dir);
    }
    return dir;
}

const char *fuzz_path(const char *name)
{
    static char buf[4][512];
    static int next;
    char *b = buf[next++ & 3];
    snprintf(b, sizeof buf[0], "%s/%s", fuzz_dir(), name);
    return b;
}

int fuzz_write(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t put = size ? fwrite(data, 1, size, f) : 0;
    return fclose(f) == 0 && put == size ? 0 : -1;
}

void fuzz_setup(void)
{
    setenv("GOMP_SPINCOUNT", "10000", 0);   /* else the tool's main restarts itself */
    igraph_set_attribute_table(&igraph_cattribute_table);
    ag_set_threads(1);
    fuzz_dir();
}

uint8_t fuzz_u8(fuzz_bytes_t *b)
{
    if (!b->n)
        return 0;
    b->n--;
    return *b->p++;
}

uint16_t fuzz_u16(fuzz_bytes_t *b)
{
    uint16_t lo = fuzz_u8(b);
    return (uint16_t)(lo | fuzz_u8(b) << 8);
}
