#!/bin/sh
# The man page as installed: src/cli/attngraph.1 with its "@HELP@" line
# replaced by every command's --help, as the tool prints it from its option
# tables (src/cli/cli.h: opt_def_t). So the page's lists of each command's
# options are the tool's own, never copied by hand (make builds
# build/attngraph.1 with this; make check-man checks the result).
# Usage: man_help.sh CLI TEMPLATE > PAGE
#        man_help.sh --commands   the commands and kinds it writes, one a line
set -eu

# The commands and kinds with a help of their own ('draw graph' shares 'draw
# heatmap''s; 'lm --help' is lm train's and lm sample's). check_man.sh reads
# this list, and checks it against the commands 'attngraph --help' names.
commands="run pattern inspect bench compare grad train plan
draw_heatmap draw_rounds draw_train lm_train lm_sample"
if [ "${1:-}" = --commands ]; then
    echo "$commands" | tr ' ' '\n' | tr _ ' '
    exit 0
fi
cli=$1 template=$2

# One help as an example block (no filling, a fixed-width font): backslashes
# and hyphens escaped (a man page's hyphen is \-, which copies as '-'), and a
# line starting with . or ' kept as text, not read as a request.
help_block() {
    words=$(echo "$1" | tr _ ' ')
    # shellcheck disable=SC2086
    text=$("$cli" $words --help </dev/null) || {
        echo "man_help.sh: '$cli $words --help' failed" >&2
        exit 1
    }
    printf '.SS "attngraph %s \\-\\-help"\n.EX\n' "$words"
    printf '%s\n' "$text" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
    printf '.EE\n'
}

grep -q '^\.\\" @HELP@' "$template" || {
    echo "man_help.sh: $template has no @HELP@ line" >&2
    exit 1
}
while IFS= read -r line; do
    case $line in
    '.\" @HELP@'*)
        for c in $commands; do
            help_block "$c"
        done
        ;;
    *) printf '%s\n' "$line" ;;
    esac
done < "$template"
