/*
 * A labels file, as `attngraph run --pattern SPEC --labels-file F` reads it:
 * the CLI's source_open on a pattern with the file (labels_from_file, then the
 * pattern compiled on one node per label), and the same text as --tokens.
 * Byte 0 picks the pattern and the self-loop mode; the rest is the file.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

static const char *const patterns[] = {"causal", "window:2", "complete", "docs:2,3",
                                       "cross:2,3", "random:2"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    const char *path = fuzz_path("labels.txt");
    if (fuzz_write(path, data + 1, size - 1))
        return 0;
    source_opts_t o;
    memset(&o, 0, sizeof o);
    o.pattern = patterns[data[0] % 6];
    o.labels_file = path;
    o.self = (ag_self_loops_t)((data[0] >> 3) % 3);
    o.max_nodes = 2000;
    source_t s;
    int usage;
    ag_error_t err;
    source_open(&s, &o, &usage, &err);
    source_close(&s);

    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    ag_labels_t labels;
    labels_from_tokens(&labels, text, &err);
    ag_labels_destroy(&labels);
    free(text);
    return 0;
}
