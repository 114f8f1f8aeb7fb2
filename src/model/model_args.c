/*
 * model.args: what `train --save` records of a model trained without a model
 * file, one line of the command's own options ("--heads 2 --rounds 3 --score
 * additive --norm layer --self-loops on"), written by the CLI
 * (src/cli/model_args.c) and by Python (attngraph.weights.model_args).
 * ag_model_args_parse is its one reader: ag_model_load, the command line's
 * --weights DIR and Python's read_model_args all take its spec.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/model.h"

/* The options the line may hold beside --heads, --rounds and --no-residual:
   the model keys of the same name; the switches take no value. */
static const char *const model_options[] = {"score", "beta", "softcap", "slope", "sigmoid-bias",
                                            "alibi", "edge-bias", "norm", "posenc", "self-loops",
                                            "directed", "undirected"};

static int is_switch(const char *name)
{
    return !strcmp(name, "alibi") || !strcmp(name, "directed") || !strcmp(name, "undirected");
}

static int known_option(const char *name)
{
    for (size_t k = 0; k < sizeof model_options / sizeof model_options[0]; k++)
        if (!strcmp(name, model_options[k]))
            return 1;
    return 0;
}

/* --heads or --rounds: a count in 1..most. */
static int count_value(int64_t *out, const char *opt, const char *v, long long most,
                       const char *path, ag_error_t *err)
{
    char *end = NULL;
    errno = 0;
    const long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < 1 || x > most)
        return ag_fail(err, AG_EINVAL, "%s: %s '%s' is not an integer in 1..%lld", path, opt,
                       v ? v : "", most);
    *out = x;
    return AG_OK;
}

int ag_model_args_parse(ag_model_spec_t *spec, const char *text, const char *path,
                        ag_error_t *err)
{
    ag_model_spec_init(spec);
    const size_t len = strcspn(text, "\r\n");   /* one line */
    if (text[len + strspn(text + len, "\r\n")] != '\0') {
        memset(spec, 0, sizeof *spec);
        return ag_fail(err, AG_EFORMAT, "%s: a second line; expected one line of options "
                       "(as train --save writes it)", path);
    }
    char *line = ag_alloc((int64_t)len + 1, 1, err, "model.args");
    if (!line) {
        memset(spec, 0, sizeof *spec);
        return ag_alloc_status();
    }
    memcpy(line, text, len);
    line[len] = '\0';
    int64_t heads = 1, rounds = 1;
    int residual = 1, rc = AG_OK, n_seen = 0;
    const char *seen[32];   /* the options so far: each once, one direction */
    char *save = NULL;
    for (char *w = strtok_r(line, " \t", &save); w && !rc; w = strtok_r(NULL, " \t", &save)) {
        const char *name = strncmp(w, "--", 2) == 0 ? w + 2 : NULL;
        for (int k = 0; name && k < n_seen && !rc; k++)
            if (!strcmp(seen[k], name) ||
                (is_switch(name) && is_switch(seen[k]) && strcmp(name, "alibi") &&
                 strcmp(seen[k], "alibi")))
                rc = ag_fail(err, AG_EFORMAT, "%s: --%s after --%s; expected each option once",
                             path, name, seen[k]);
        if (rc)
            break;
        if (name && n_seen < 32)
            seen[n_seen++] = name;
        if (name && (!strcmp(name, "heads") || !strcmp(name, "rounds")))
            rc = count_value(name[0] == 'h' ? &heads : &rounds, w, strtok_r(NULL, " \t", &save),
                             name[0] == 'h' ? 4096 : 1000000, path, err);
        else if (name && !strcmp(name, "no-residual"))
            residual = 0;
        else if (name && known_option(name)) {
            const char *value = is_switch(name) ? NULL : strtok_r(NULL, " \t", &save);
            rc = !is_switch(name) && !value
                     ? ag_fail(err, AG_EFORMAT, "%s: %s needs a value", path, w)
                     : ag_i_model_key_set(spec, name, value, path, 1, err);
        } else
            rc = ag_fail(err, AG_EFORMAT, "%s: '%s' is not one of the model's options "
                         "(--heads, --rounds, --score, --beta, --softcap, --slope, "
                         "--sigmoid-bias, --alibi, --edge-bias, --no-residual, --norm, "
                         "--posenc, --self-loops, --directed, --undirected)", path, w);
    }
    free(line);
    if (!rc && (strncmp(text, "--heads", 7) != 0 || (text[7] != ' ' && text[7] != '\t')))
        rc = ag_fail(err, AG_EFORMAT, "%s: expected one line of options starting with "
                     "--heads (as train --save writes it)", path);
    if (rc) {
        memset(spec, 0, sizeof *spec);   /* as every out-parameter on failure */
        return rc;
    }
    spec->n_layers = 1;
    spec->rounds = (int)rounds;
    ag_layer_spec_t *L = &spec->layers[0];
    ag_layer_spec_init(L);
    L->heads = heads, L->residual = residual;
    return AG_OK;
}

int ag_model_args_read(ag_model_spec_t *spec, const char *dir, ag_error_t *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.args", dir);
    char *text;
    size_t n;
    int rc = ag_i_read_text(path, &text, &n, err);
    if (rc)
        return rc;
    rc = strlen(text) != n ? ag_fail(err, AG_EFORMAT, "%s: a NUL byte at offset %zu; expected "
                                     "a text", path, strlen(text))
                           : ag_model_args_parse(spec, text, path, err);
    free(text);
    return rc;
}
