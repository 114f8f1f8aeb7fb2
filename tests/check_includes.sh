#!/bin/sh
# The walls between the folders of src/: every `#include "..."` of a file in
# src/ against the table of src/README.md (which folder may include which).
# A folder's own headers are open to it; another folder's only through the
# header named after it (graph/graph.h), and only where the table says so.
# Usage: sh tests/check_includes.sh [SRC_DIR]   (from the repository root)
src=${1:-src}
table=$src/README.md
[ -r "$table" ] || { echo "check_includes: cannot read $table" >&2; exit 2; }

find "$src" -name '*.[ch]' | LC_ALL=C sort | while read -r f; do
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed "s|^|$f:|"
done | LC_ALL=C awk -v src="$src" -v table="$table" '
BEGIN {
    # | `folder` | what | may include |
    while ((getline line < table) > 0) {
        if (line !~ /^\| `[a-z_\/]+` \|/) continue
        n = split(line, cell, "|")
        folder = cell[2]; gsub(/[ `]/, "", folder)
        listed[folder] = 1; nlisted++
        m = split(cell[4], deps, ",")
        for (i = 1; i <= m; i++) {
            d = deps[i]; gsub(/ /, "", d)
            if (d != "") allowed[folder, d] = 1
        }
    }
    if (!nlisted) { print "check_includes: no table in " table > "/dev/stderr"; exit 2 }
}
{
    # path:line:#include "header"
    split($0, part, ":"); path = part[1]; lineno = part[2]
    header = $0; sub(/^[^"]*"/, "", header); sub(/".*$/, "", header)
    folder = path; sub("^" src "/", "", folder); sub(/\/[^\/]*$/, "", folder)
    files++
    if (!(folder in listed)) {
        bad(path, lineno, "its folder " folder "/ is not in " table)
        next
    }
    if (header == "attngraph.h" || header ~ /^attngraph\//) next
    if (header !~ /\//) {
        bad(path, lineno, "\"" header "\": name the folder (\"" folder "/" header "\")")
        next
    }
    hfolder = header; sub(/\/[^\/]*$/, "", hfolder)
    if (hfolder == folder) next
    if (!(hfolder in listed)) {
        bad(path, lineno, "\"" header "\": no folder " hfolder "/ in " table)
        next
    }
    if (allowed[folder, hfolder "/*"]) next
    last = hfolder; sub(/^.*\//, "", last)
    if (header != hfolder "/" last ".h") {
        bad(path, lineno, "\"" header "\": another folder'\''s private header (" hfolder \
            "/ is open through " hfolder "/" last ".h)")
        next
    }
    if (!allowed[folder, hfolder])
        bad(path, lineno, "\"" header "\": " folder "/ may not include " hfolder "/ (" table ")")
}
function bad(p, l, why) { print p ":" l ": " why; errors++ }
END {
    if (errors) { print "check_includes: " errors " include(s) break the walls of " table; exit 1 }
    print "includes: " files " in " src "/ keep to the walls of " table
}'
