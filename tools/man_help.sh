#!/bin/sh
# The man page as installed: src/cli/attngraph.1 with its "@HELP@" line
# replaced by every command's --help, as the tool prints it from its option
# tables (src/cli/cli.h: opt_def_t). So the page's lists of each command's
# options are the tool's own, never copied by hand (make builds
# build/attngraph.1 with this; make check-man checks the result).
# Usage: man_help.sh CLI TEMPLATE > PAGE
set -eu
cli=$1 template=$2

# The commands and kinds with a help of their own ('draw graph' shares 'draw
# heatmap''s; 'lm --help' is lm train's and lm sample's).
commands="run pattern inspect bench compare grad train plan
draw_heatmap draw_rounds draw_train lm_train lm_sample"

# One help as no-fill text: backslashes and hyphens escaped (a man page's
# hyphen is \-, which copies as '-'), and a line starting with . or ' kept as
# text, not read as a request.
help_block() {
    words=$(echo "$1" | tr _ ' ')
    printf '.SS "attngraph %s \\-\\-help"\n.nf\n' "$words"
    # shellcheck disable=SC2086
    "$cli" $words --help | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
    printf '.fi\n'
}

grep -q '^\.\\" @HELP@' "$template" || { echo "man_help.sh: $template has no @HELP@ line" >&2; exit 1; }
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
