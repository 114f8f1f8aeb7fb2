/*
 * A folder of files written whole or not at all (a saved model, grad --out
 * DIR, train --save DIR): every file is written to a temporary beside it
 * (base/whole_file.c) and all are renamed into place only when every one of
 * them was written. Folders the write had to create are removed again when it
 * fails, so a failed write leaves the disk as it found it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

int ag_i_folder_check(const char *dir, const char *option, ag_error_t *err)
{
    char who[4200];
    if (!dir || !*dir)
        return ag_fail(err, AG_EINVAL, "%s%sthe folder name is empty", option ? option : "",
                       option ? ": " : "");
    if (strcmp(dir, "-") == 0)
        return ag_fail(err, AG_EINVAL, "%s names a folder; standard output (-) cannot hold "
                       "several files", option ? option : "-");
    ag_i_file_named(who, sizeof who, option, dir);
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return ag_fail(err, AG_EIO, "%s: exists and is not a folder", who);
        if (access(dir, W_OK) != 0)
            return ag_fail(err, AG_EIO, "%s: cannot write: %s", who, strerror(errno));
        return AG_OK;
    }
    if (errno != ENOENT)
        return ag_fail(err, AG_EIO, "%s: %s", who, strerror(errno));
    /* not there yet: its parent must be a folder we can write */
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    size_t len = strlen(parent);
    while (len > 1 && parent[len - 1] == '/')
        parent[--len] = '\0';
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else
        slash[slash == parent] = '\0';
    if (stat(parent, &st) != 0)
        return ag_fail(err, AG_EIO, "%s: cannot create it: %s does not exist", who, parent);
    if (!S_ISDIR(st.st_mode))
        return ag_fail(err, AG_EIO, "%s: cannot create it: %s is not a folder", who, parent);
    if (access(parent, W_OK) != 0)
        return ag_fail(err, AG_EIO, "%s: cannot create it in %s: %s", who, parent,
                       strerror(errno));
    return AG_OK;
}

/* Folders created by this write, to remove again if it fails. */
typedef struct {
    char **path;
    int n;
} made_t;

static int make_dir(made_t *made, const char *path, const char *option, ag_error_t *err)
{
    if (mkdir(path, 0777) == 0) {
        char **grown = realloc(made->path, (size_t)(made->n + 1) * sizeof *grown);
        if (grown && (grown[made->n] = strdup(path)))
            made->n++;
        if (grown)
            made->path = grown;
        return AG_OK;
    }
    struct stat st;
    if (errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return AG_OK;
    return ag_fail(err, AG_EIO, "%s%scannot create the folder %s: %s", option ? option : "",
                   option ? ": " : "", path,
                   errno == EEXIST ? "a file has that name" : strerror(errno));
}

/* Makes dir and every subfolder an item's name has ("round-2/dwq.npy"). */
static int make_dirs(made_t *made, const char *dir, const char *option,
                     const ag_i_folder_item_t *items, int n, ag_error_t *err)
{
    int rc = make_dir(made, dir, option, err);
    for (int k = 0; k < n && !rc; k++) {
        const char *slash = strchr(items[k].name, '/');
        if (!slash)
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%.*s", dir, (int)(slash - items[k].name), items[k].name);
        rc = make_dir(made, sub, option, err);
    }
    return rc;
}

static int write_text(const char *path, const char *text, ag_error_t *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ag_fail(err, AG_EIO, "%s: cannot write", path);
    const size_t n = strlen(text);   /* ending in a newline, whether text has one or not */
    const int bad = fprintf(f, "%s%s", text, n && text[n - 1] == '\n' ? "" : "\n") < 0;
    if (fclose(f) != 0 || bad)
        return ag_fail(err, AG_EIO, "%s: write failed", path);
    return AG_OK;
}

static int write_item(const char *path, const ag_i_folder_item_t *it, ag_error_t *err)
{
    if (it->text)
        return write_text(path, it->text, err);
    if (it->i64)   /* [shape[0]], or of ndim dimensions where ndim is given */
        return ag_npy_write_i64_nd(path, it->i64, it->ndim ? it->ndim : 1, it->shape, err);
    return ag_npy_write_f32_nd(path, it->f32, it->ndim, it->shape, err);
}

int ag_i_folder_write(const char *dir, const char *option, const ag_i_folder_item_t *items,
                      int n, ag_error_t *err)
{
    ag_i_file_t *files = calloc((size_t)(n > 0 ? n : 1), sizeof *files);
    char (*paths)[4096] = calloc((size_t)(n > 0 ? n : 1), sizeof *paths);
    made_t made = {NULL, 0};
    if (!files || !paths) {
        free(files), free(paths);
        return ag_fail(err, AG_ENOMEM, "%s: out of memory", option ? option : dir);
    }
    for (int k = 0; k < n; k++) {
        files[k].fd = -1;
        snprintf(paths[k], sizeof paths[k], "%s%s%s", dir,
                 dir[strlen(dir) - 1] == '/' ? "" : "/", items[k].name);
    }
    int rc = make_dirs(&made, dir, option, items, n, err);
    for (int k = 0; k < n && !rc; k++) {
        if ((rc = ag_i_file_resolve(&files[k], paths[k], option, err)))
            break;
        for (int j = 0; j < k && !rc; j++)   /* links in the folder to one file */
            if (files[j].have_id && files[k].have_id
                    ? files[j].dev == files[k].dev && files[j].ino == files[k].ino
                    : strcmp(files[j].final, files[k].final) == 0)
                rc = ag_fail(err, AG_EIO, "%s and %s are the same file (%s); each file of a "
                             "folder must be its own", paths[j], paths[k], files[k].final);
    }
    for (int k = 0; k < n && !rc; k++)
        rc = ag_i_file_create(&files[k], option, paths[k], err);
    for (int k = 0; k < n && !rc; k++)
        rc = write_item(files[k].path, &items[k], err);
    for (int k = 0; k < n && !rc; k++)   /* what can fail while nothing is replaced yet */
        rc = ag_i_file_set_mode(&files[k], paths[k], err);
    for (int k = 0; k < n && !rc; k++)
        rc = ag_i_file_place(&files[k], paths[k], err);
    if (rc) {
        for (int k = 0; k < n; k++) {
            ag_i_file_name_in_message(err, files[k].path, paths[k]);
            ag_i_file_abort(&files[k]);
        }
        for (int k = made.n - 1; k >= 0; k--)   /* only folders this write made, if empty */
            rmdir(made.path[k]);
    }
    for (int k = 0; k < made.n; k++)
        free(made.path[k]);
    free(made.path);
    free(files), free(paths);
    return rc;
}
