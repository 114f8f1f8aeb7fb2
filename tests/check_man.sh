#!/bin/sh
# The man page against the tool (make check-man, part of make check): the page
# make builds (TEMPLATE with every command's --help, tools/man_help.sh)
# renders without a single groff warning, carries the library's version and
# holds each help; and TEMPLATE, the words written by hand, has a section
# "attngraph CMD" for exactly the commands `attngraph --help` lists and names
# every option that some `attngraph CMD --help` lists. So a command or an
# option added to the tool fails here until the man page describes it.
# Usage: check_man.sh CLI MANPAGE TEMPLATE VERSION
set -eu
cli=$1 page=$2 template=$3 version=$4
fail() {
    echo "check-man: $page: $*" >&2
    exit 1
}
command -v groff >/dev/null || fail "groff is missing (Debian package groff-base)"

# -ww: every warning; -z: no output. A warning is a failure, for the
# terminal (what man shows) and for print.
for dev in utf8 ps; do
    warnings=$(groff -man -ww -z -T$dev "$page" 2>&1) || fail "groff -T$dev failed: $warnings"
    [ -z "$warnings" ] || fail "groff -T$dev warns: $warnings"
done

grep -q "^\.TH ATTNGRAPH 1 [0-9-]* \"attngraph $version\"" "$page" ||
    fail ".TH does not say attngraph $version (AG_VERSION)"
# Each help, as the page holds it (its example block, unescaped), against the
# tool's own; the list is man_help.sh's, checked against --help's commands below.
helps=$(sh "$(dirname "$0")/../tools/man_help.sh" --commands)
newline='
'
ifs=$IFS
IFS=$newline
for cmd in $helps; do
    IFS=$ifs
    # shellcheck disable=SC2086
    want=$("$cli" $cmd --help </dev/null)
    got=$(HEAD=".SS \"attngraph $cmd \\-\\-help\"" awk '
        $0 == ENVIRON["HEAD"] { found = 1; next }
        found && $0 == ".EX" { inside = 1; next }
        inside && $0 == ".EE" { exit }
        inside { print }' "$page" | sed -e 's/^\\&//' -e 's/\\-/-/g' -e 's/\\e/\\/g')
    [ -n "$got" ] || fail "no 'attngraph $cmd --help' in it"
    [ "$got" = "$want" ] || fail "its 'attngraph $cmd --help' is not the tool's"
done
IFS=$ifs

# The commands of `attngraph --help`: the first word of each line indented by
# two spaces, from "commands:" to the first blank line.
commands=$("$cli" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z]*\)\( .*\)*$/\1/p' | sort -u)
[ -n "$commands" ] || fail "no commands found in '$cli --help'"
sections=$(sed -n 's/^\.SS "attngraph \([a-z]*\)"$/\1/p' "$template" | grep -vx help | sort -u)
[ "$commands" = "$sections" ] ||
    fail "sections \"attngraph CMD\" ($(echo $sections)) differ from the commands of --help ($(echo $commands))"
[ "$commands" = "$(echo "$helps" | cut -d' ' -f1 | sort -u)" ] ||
    fail "tools/man_help.sh --commands ($(echo $helps)) does not cover the commands of --help"

# Every long option of every command's help, in the rendered text (no
# hyphenation, one paragraph a line, no bold or underline).
text=$(groff -man -Tascii -P-cbou -rLL=1000n -rHY=0 "$template")
missing=""
for cmd in $commands; do
    for opt in $("$cli" "$cmd" --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
        printf '%s\n' "$text" | grep -Eq -- "(^|[^a-z0-9-])$opt([^a-z0-9-]|\$)" ||
            missing="$missing $cmd:$opt"
    done
done
[ -z "$missing" ] || fail "options of --help not in the man page:$missing"
echo "check-man: $page renders without warnings and describes the" \
    "$(echo "$commands" | wc -l) commands of --help and all their options"
