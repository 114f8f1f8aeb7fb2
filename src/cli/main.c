/* attngraph: attention as message passing on graphs — command-line entry. */
#include <errno.h>
#include <stdio.h>
#include <string.h>


#include "cli/cli.h"
#include "cli/lm.h"

static const char usage[] =
    "usage: attngraph COMMAND [options]\n"
    "\n"
    "Attention as message passing on graphs: nodes are tokens, an edge u -> v lets\n"
    "v attend to u.\n"
    "\n"
    "commands:\n"
    "  run GRAPH [options]   run attention message rounds on a graph file\n"
    "  run --pattern SPEC    ... or on a connectivity pattern (no graph file needed)\n"
    "  pattern SPEC          write a connectivity pattern as a graph file\n"
    "  inspect GRAPH --who A [--to B] | --top K\n"
    "                        what a run's attention says about nodes and edges\n"
    "  bench GRAPH | --pattern SPEC | --csr ...\n"
    "                        time the attention computation alone\n"
    "  compare --pattern A --pattern B ...\n"
    "                        run the same inputs under several connectivities and\n"
    "                        compare what changes\n"
    "  grad GRAPH --q Q --k K --v V --dout DM --out DIR\n"
    "  grad GRAPH --features X --weights W --dout DX --out DIR\n"
    "                        gradients of attention, or of rounds and their weights\n"
    "  train GRAPH --features X (--labels L | --targets Y) [--pattern A --pattern B ...]\n"
    "                        train a model of rounds (and a readout); compare what it\n"
    "                        learns under several connectivities\n"
    "  draw heatmap|graph|rounds|train ... --out FILE.svg\n"
    "                        pictures of attention, graphs, rounds and training\n"
    "  plan --ranks P (GRAPH | --csr ... | --pattern SPEC --nodes N)\n"
    "                        plan a run over P processes: parts, halos, bytes, time\n"
    "  lm train --text FILE [--pattern SPEC ...]\n"
    "                        train a character-level GPT (nanoGPT's) under a mask\n"
    "  lm sample --model DIR\n"
    "                        text from a saved GPT, a token at a time (a cache of keys and values)\n"
    "\n"
    "  attngraph COMMAND --help   options of a command (also -h, or attngraph help COMMAND)\n"
    "  attngraph --version        versions of attngraph and igraph, the kernels, the threads\n";

/* The library guards its own igraph calls; this handler makes sure no other
   igraph call in the tool can abort the process either. */
static void igraph_error_quiet(const char *reason, const char *file, int line,
                               igraph_error_t code)
{
    (void)reason, (void)file, (void)line, (void)code;
    IGRAPH_FINALLY_FREE();
}

/* A command's status, unless its report could not be written (a full disk, a
   closed terminal): then that is said, and the run fails. */
static int reported(int status)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    fprintf(stderr, "attngraph: cannot write the report to standard output: %s\n",
            strerror(errno));
    return status ? status : EXIT_BAD_INPUT;
}

int main(int argc, char **argv)
{
    ag_error_t err;
    /* each returns only if no restart was needed, or it failed */
    if (cli_short_waits(argv, &err))   /* returns only if no restart was needed, or it failed */
        fprintf(stderr, "attngraph: warning: %s\n", err.msg);
    if (ag_simd_env_check(&err)) {
        fprintf(stderr, "attngraph: %s\n", err.msg);
        return EXIT_USAGE;
    }
    igraph_set_error_handler(igraph_error_quiet);
    igraph_set_warning_handler(igraph_warning_handler_ignore);
    if (argc < 2) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    const int asks_help = !strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h");
    /* the commands with kinds of their own: attngraph help draw heatmap */
    const int with_kind = asks_help && argc >= 4 && (!strcmp(argv[2], "draw") ||
                                                     !strcmp(argv[2], "lm"));
    if ((asks_help && argc > 3 + with_kind) || (!strcmp(cmd, "--version") && argc > 2)) {
        fprintf(stderr, "attngraph: unexpected argument '%s' after '%s'\nsee 'attngraph "
                "--help'\n", argv[asks_help ? 3 + with_kind : 2], cmd);
        return EXIT_USAGE;
    }
    if (asks_help && argc >= 3) {   /* attngraph help run = attngraph run -h */
        static char help_opt[] = "--help";
        static char *help_argv[5];
        help_argv[0] = argv[0], help_argv[1] = argv[2];
        help_argv[2] = with_kind ? argv[3] : help_opt;
        help_argv[3] = with_kind ? help_opt : NULL;
        argc = 3 + with_kind;
        argv = help_argv;
        cmd = argv[1];
    } else if (asks_help) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("attngraph %s (igraph %s)\n", AG_VERSION, IGRAPH_VERSION);
        printf("kernels and products: %s\n", ag_simd_isa());
        const int threads = ag_set_threads(0);
        printf("threads: %d, %s; waits: %s\n", threads,
               getenv("OMP_NUM_THREADS") ? "as OMP_NUM_THREADS says"
               : !ag_i_threads_adapt()   ? "all of them (AG_THREADS_FIXED)"
                                         : "fewer while other programs keep the cores busy",
               cli_waits());
        return 0;
    }
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } commands[] = {{"run", cmd_run}, {"pattern", cmd_pattern}, {"compare", cmd_compare},
                    {"inspect", cmd_inspect}, {"bench", cmd_bench},
                    {"grad", cmd_grad}, {"train", cmd_train}, {"draw", cmd_draw},
                    {"plan", cmd_plan}, {"lm", cmd_lm}};
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (strcmp(cmd, commands[k].name) == 0)
            return reported(commands[k].run(argc - 1, argv + 1));
    fprintf(stderr, "attngraph: unknown command '%s'\nsee 'attngraph --help'\n", cmd);
    return EXIT_USAGE;
}
