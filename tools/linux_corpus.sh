#!/bin/sh
# The masking study's corpus (issue 42): C source of the Linux kernel, the text of
# Karpathy's char-rnn experiments, where a token's context reaches far back (a
# function's variables, a file's includes and macros). Debian ships the source in
# linux-source-VERSION; this takes it from the installed tarball, or downloads the
# package (apt-get download: nothing is installed) into a scratch folder, and writes
# the .c and .h files under DIRS (default: kernel mm), in path order, into OUT.
# LINUX_SOURCE names the package (default linux-source-6.1: the README's study,
# bookworm's 6.1.192-3 gave 16,694,212 bytes).
# The kernel is GPL-2.0 (its COPYING); the corpus is made here and never committed.
#
#   tools/linux_corpus.sh OUT [DIR ...]      e.g. tools/linux_corpus.sh /tmp/linux.txt
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OUT [DIR ...]  (default DIRs: kernel mm)" >&2; exit 2; }
out=$1
shift
[ $# -gt 0 ] || set -- kernel mm
scratch=$(mktemp -d "${TMPDIR:-/tmp}/linux-corpus.XXXXXX")
trap 'rm -rf "$scratch"' EXIT INT TERM

package=${LINUX_SOURCE:-linux-source-6.1}
tarball=/usr/src/$package.tar.xz
if [ ! -f "$tarball" ]; then
    (cd "$scratch" && apt-get download "$package" >/dev/null 2>&1) ||
        { echo "$0: apt-get download $package failed (apt-get update? LINUX_SOURCE?)" >&2; exit 1; }
    dpkg-deb --fsys-tarfile "$scratch"/"$package"_*.deb | tar -x -C "$scratch" --wildcards './usr/src/*.tar.xz'
    tarball=$(find "$scratch/usr/src" -name 'linux-source-*.tar.xz' | head -n 1)
fi
top=$(basename "$tarball" .tar.xz)
patterns=""
for d in "$@"; do
    patterns="$patterns $top/$d/"
done
# shellcheck disable=SC2086
xz -dc "$tarball" | tar -x -C "$scratch" $patterns
# shellcheck disable=SC2086
files=$(cd "$scratch" && find $patterns -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
[ -n "$files" ] || { echo "$0: no .c or .h files under $*" >&2; exit 1; }
(cd "$scratch" && echo "$files" | while read -r f; do cat "$f"; done) >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out: $(echo "$files" | wc -l) files of $top ($*), $(wc -c <"$out") bytes"
