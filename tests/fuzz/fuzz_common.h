/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_*.c). Each target defines
 * LLVMFuzzerTestOneInput and drives the public API (or the CLI) as the tool
 * does. The same sources build two ways:
 *   - with clang -fsanitize=fuzzer,address,undefined (make fuzz): libFuzzer's main;
 *   - with the normal compiler and tests/fuzz/replay.c's main (make check), which
 *     replays the committed corpora and past crash inputs.
 * Readers take paths, so inputs are written to files in a private temporary
 * folder (made once per process under TMPDIR or /dev/shm, removed at exit).
 */
#ifndef AG_FUZZ_COMMON_H
#define AG_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's temporary folder (made on first use, removed at exit). */
const char *fuzz_dir(void);
/* fuzz_dir()/name, in a static buffer (one of 4 in rotation). */
const char *fuzz_path(const char *name);
/* Writes data[0..size) to path; returns 0, or -1 (then the input is skipped). */
int fuzz_write(const char *path, const uint8_t *data, size_t size);
/* Removes everything inside fuzz_dir() (the folder itself stays). */
void fuzz_clear(void);
/* Common setup: igraph's attribute table, no restart (GOMP_SPINCOUNT set),
   one thread. Called by each target's LLVMFuzzerInitialize. */
void fuzz_setup(void);

/* Reads inputs byte by byte; past the end every read gives 0. */
typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_bytes_t;
uint8_t fuzz_u8(fuzz_bytes_t *b);
uint16_t fuzz_u16(fuzz_bytes_t *b);

#endif
