#!/bin/sh
# The installed library as its users meet it (make check-install, part of make
# check): `make install` into a stage under the build folder, then build, link
# and run the examples through pkg-config with no other flag, then `make
# uninstall` and check that nothing of ours is left. Needs no root and touches
# nothing outside the build folder.
# Environment (from the Makefile): MAKE, CC, LDFLAGS (a sanitizer build's link
# flags; empty in a plain build), BUILD, VERSION, ABI (the SONAME's: 0.2); HAVE_MPI (1: the MPI layer
# installs too), MPICC, and CHECK_MPI (0: the MPI example is built, not run).
set -eu
: "${MAKE:=make}" "${CC:=cc}" "${LDFLAGS:=}" "${BUILD:=build}" "${VERSION:?}" "${ABI:?}" "${HAVE_MPI:=}"
: "${MPICC:=mpicc}" "${CHECK_MPI:=1}"

root=$(pwd)
stage=$root/$BUILD/stage
out=$root/$BUILD/stage-programs
prefix=/usr/local
lib=$stage$prefix/lib
fail() {
    echo "check-install: $*" >&2
    exit 1
}
# make install / uninstall with every folder named, so a PREFIX or LIBDIR
# given to `make check` cannot move the stage's layout.
stage_make() { # TARGET DESTDIR PREFIX LIBDIR
    $MAKE --no-print-directory -s "$1" DESTDIR="$2" PREFIX="$3" LIBDIR="$4" \
        BINDIR="$3/bin" INCLUDEDIR="$3/include" MANDIR="$3/share/man" PCDIR="$4/pkgconfig" \
        >"$out/make-$1.log" 2>&1 || { cat "$out/make-$1.log" >&2; fail "make $1 failed"; }
}
# Every file and link under a folder (not the folders), relative, sorted.
files_in() { (cd "$1" && find . ! -type d | sed 's|^\./||' | LC_ALL=C sort); }

rm -rf "$stage" "$stage-libdir" "$out"
mkdir -p "$out"

# ---- 1. the files install puts there, and nothing else
stage_make install "$stage" $prefix $prefix/lib
{
    echo usr/local/bin/attngraph
    echo usr/local/include/attngraph.h
    for h in include/attngraph/*.h; do   # the MPI layer's with the MPI layer
        [ "$h" = include/attngraph/mpi.h ] && [ -z "$HAVE_MPI" ] || echo "usr/local/$h"
    done
    for f in libattngraph.a libattngraph.so "libattngraph.so.$ABI" "libattngraph.so.$VERSION" \
        pkgconfig/attngraph.pc; do echo "usr/local/lib/$f"; done
    echo usr/local/share/man/man1/attngraph.1
    if [ -n "$HAVE_MPI" ]; then
        echo usr/local/bin/attngraph-mpi
        for f in libattngraph_mpi.a libattngraph_mpi.so "libattngraph_mpi.so.$ABI" \
            "libattngraph_mpi.so.$VERSION" pkgconfig/attngraph-mpi.pc; do
            echo "usr/local/lib/$f"
        done
    fi
} | LC_ALL=C sort >"$out/expected.txt"
files_in "$stage" >"$out/installed.txt"
diff -u "$out/expected.txt" "$out/installed.txt" >&2 || fail "installed files differ from the list above"
for h in include/attngraph.h include/attngraph/*.h; do
    [ "$h" = include/attngraph/mpi.h ] && [ -z "$HAVE_MPI" ] && continue
    cmp -s "$h" "$stage$prefix/$h" || fail "$stage$prefix/$h differs from $h"
done
[ "$(readlink "$lib/libattngraph.so")" = "libattngraph.so.$ABI" ] &&
    [ "$(readlink "$lib/libattngraph.so.$ABI")" = "libattngraph.so.$VERSION" ] ||
    fail "the links libattngraph.so -> .so.$ABI -> .so.$VERSION are wrong"
readelf -d "$lib/libattngraph.so.$VERSION" | grep -qF "Library soname: [libattngraph.so.$ABI]" ||
    fail "the installed library's SONAME is not libattngraph.so.$ABI"
[ -x "$stage$prefix/bin/attngraph" ] || fail "bin/attngraph is not executable"
"$stage$prefix/bin/attngraph" --version | grep -q "^attngraph $VERSION " ||
    fail "the installed attngraph --version does not say $VERSION"

# ---- 2. pkg-config finds the staged attngraph.pc. PKG_CONFIG_SYSROOT_DIR
# puts the stage in front of every -I and -L, igraph's and libxml2's too:
# the stage gets links to those folders, as a cross-compiling sysroot has them.
# (Only for these calls: the Makefile's own pkg-config calls must not see it.)
pkg_config() { PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config "$@"; }
for dir in $(pkg-config --static --cflags --libs igraph libxml-2.0 |
    tr ' ' '\n' | sed -n 's/^-[IL]//p' | sed 's|/$||' | LC_ALL=C sort -u); do
    [ -e "$stage$dir" ] && continue   # a parent folder is linked already
    mkdir -p "$(dirname "$stage$dir")"
    ln -s "$dir" "$stage$dir"
    echo "$stage$dir" >>"$out/sysroot-links.txt"
done
[ "$(pkg_config --modversion attngraph)" = "$VERSION" ] || fail "pkg-config --modversion is not $VERSION"
pkg_config --validate attngraph || fail "pkg-config --validate attngraph failed"

# ---- 3. the embedding example: cc prog.c $(pkg-config --cflags --libs attngraph),
# run with the staged library (LD_LIBRARY_PATH: a stage is not in ld.so's path);
# it prints what the build tree's copy prints.
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
$CC tools/example_embed.c $(pkg_config --cflags --libs attngraph) $LDFLAGS -o "$out/example_embed" ||
    fail "cc tools/example_embed.c \$(pkg-config --cflags --libs attngraph) failed"
LD_LIBRARY_PATH="$lib" ldd "$out/example_embed" | grep -qF "libattngraph.so.$ABI => $lib/" ||
    fail "example_embed does not load the staged libattngraph.so.$ABI"
LD_LIBRARY_PATH="$lib" "$out/example_embed" graphs/sentence.gml >"$out/embed.txt" ||
    fail "the installed example_embed failed"
"$BUILD/example_embed" graphs/sentence.gml >"$out/embed-build-tree.txt"
grep -q '^edge 0: ' "$out/embed.txt" && cmp -s "$out/embed.txt" "$out/embed-build-tree.txt" ||
    fail "example_embed prints other weights installed than in the build tree ($out/embed.txt)"

# ---- 3b. the MPI layer: mpicc prog.c $(pkg-config --cflags --libs attngraph-mpi),
# run on 2 processes with the staged libraries; it checks its own results
# against the one-process library and exits 1 on any difference.
if [ -n "$HAVE_MPI" ]; then
    pkg_config --validate attngraph-mpi || fail "pkg-config --validate attngraph-mpi failed"
    # shellcheck disable=SC2046
    OMPI_CC=$CC $MPICC tools/example_mpi.c $(pkg_config --cflags --libs attngraph-mpi) $LDFLAGS \
        -o "$out/example_mpi" ||
        fail "mpicc tools/example_mpi.c \$(pkg-config --cflags --libs attngraph-mpi) failed"
    LD_LIBRARY_PATH="$lib" ldd "$out/example_mpi" | grep -qF "libattngraph_mpi.so.$ABI => $lib/" ||
        fail "example_mpi does not load the staged libattngraph_mpi.so.$ABI"
    # Open MPI's own leaks lie in plugins no suppression can name (tests/mpi/check.sh)
    [ "$CHECK_MPI" = 0 ] || OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        LD_LIBRARY_PATH="$lib" ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
        timeout 120 mpirun --oversubscribe -x LD_LIBRARY_PATH -x ASAN_OPTIONS -np 2 \
        "$out/example_mpi" causal 3000 >"$out/mpi.txt" 2>&1 ||
        fail "the installed example_mpi failed on 2 processes: $(head -n 3 "$out/mpi.txt")"
    "$stage$prefix/bin/attngraph-mpi" --version | grep -q "^attngraph-mpi $VERSION " ||
        fail "the installed attngraph-mpi --version does not say $VERSION"
fi

# ---- 4. CSR arrays alone: <attngraph/core.h> with the stage's include folder
# and nothing else, so no igraph header can be reached; the program checks its
# weights against its own hand-worked values.
$CC -I"$stage$prefix/include" tools/example_csr.c $(pkg_config --libs attngraph) $LDFLAGS \
    -o "$out/example_csr" || fail "example_csr.c does not build without igraph's headers"
LD_LIBRARY_PATH="$lib" "$out/example_csr" >"$out/csr.txt" || {
    cat "$out/csr.txt" >&2
    fail "example_csr found wrong weights"
}
[ "$(grep -c ' ok$' "$out/csr.txt")" = 5 ] || fail "example_csr printed other than five checks ($out/csr.txt)"
# Each installed header compiles on its own: all but attngraph/igraph.h (and
# the umbrella) with the stage's include folder alone.
for h in "$stage$prefix"/include/attngraph/*.h; do
    name=attngraph/$(basename "$h")
    cc=$CC
    if [ "$name" = attngraph/igraph.h ]; then
        flags=$(pkg_config --cflags attngraph)
    else
        flags=-I$stage$prefix/include
    fi
    [ "$name" = attngraph/mpi.h ] && cc="env OMPI_CC=$CC $MPICC"   # MPI's <mpi.h>
    # shellcheck disable=SC2086
    printf '#include <%s>\nint main(void) { return 0; }\n' "$name" |
        $cc -std=c11 -Wall -Wextra -Werror $flags -x c -c - -o "$out/header.o" ||
        fail "<$name> does not compile on its own (with $flags)"
done
# ... while the umbrella header does need them (else the above proves nothing).
if $CC -I"$stage$prefix/include" -c tools/example_embed.c -o "$out/umbrella.o" 2>"$out/umbrella.err"; then
    echo "check-install: note: igraph.h is on the compiler's default path here, so the" \
        "build without igraph's headers proves less" >&2
else
    grep -q 'igraph.h' "$out/umbrella.err" || fail "example_embed.c failed to build for another reason"
fi

# ---- 5. a static link of libattngraph.a (the system's libraries stay shared):
# pkg-config --static adds Requires.private and Libs.private; -l:libattngraph.a
# takes the archive where -lattngraph would take the .so. It runs with no
# LD_LIBRARY_PATH and prints the same.
static_libs=$(pkg_config --static --libs attngraph | sed 's/-lattngraph\b/-l:libattngraph.a/')
$CC tools/example_embed.c $(pkg_config --cflags attngraph) $static_libs $LDFLAGS \
    -o "$out/example_static" || fail "the static link with pkg-config --static --libs failed"
! readelf -d "$out/example_static" | grep -q 'NEEDED.*libattngraph' ||
    fail "example_static still needs libattngraph.so"
"$out/example_static" graphs/sentence.gml >"$out/embed-static.txt" &&
    cmp -s "$out/embed-static.txt" "$out/embed.txt" || fail "the static example prints otherwise"
# without the private part the archive's references stay undefined
if $CC tools/example_embed.c $(pkg_config --cflags attngraph) \
    $(pkg_config --libs attngraph | sed 's/-lattngraph\b/-l:libattngraph.a/') $LDFLAGS \
    -o "$out/example_static_short" 2>/dev/null; then
    fail "a static link without pkg-config --static worked: is --static tested at all?"
fi

# ---- 6. uninstall leaves none of our files (and no include/attngraph/)
stage_make uninstall "$stage" $prefix $prefix/lib
while read -r link; do rm "$link"; done <"$out/sysroot-links.txt"
left=$(files_in "$stage")
[ -z "$left" ] || fail "make uninstall left: $left"
[ ! -e "$stage$prefix/include/attngraph" ] || fail "make uninstall left include/attngraph/"

# ---- 7. another layout: PREFIX=/opt/attngraph LIBDIR=.../lib64
stage_make install "$stage-libdir" /opt/attngraph /opt/attngraph/lib64
pc=$stage-libdir/opt/attngraph/lib64/pkgconfig/attngraph.pc
[ -f "$stage-libdir/opt/attngraph/lib64/libattngraph.so.$VERSION" ] && [ -f "$pc" ] ||
    fail "LIBDIR=/opt/attngraph/lib64 did not put the library and attngraph.pc there"
grep -qx 'libdir=${prefix}/lib64' "$pc" && grep -qx 'prefix=/opt/attngraph' "$pc" ||
    fail "attngraph.pc names the wrong folders for LIBDIR=/opt/attngraph/lib64"
stage_make uninstall "$stage-libdir" /opt/attngraph /opt/attngraph/lib64
[ -z "$(files_in "$stage-libdir")" ] || fail "make uninstall left files in $stage-libdir"

rm -rf "$stage" "$stage-libdir"
echo "check-install: make install/uninstall into a stage; example_embed built with pkg-config" \
    "(shared and static)$([ -n "$HAVE_MPI" ] && echo ", example_mpi with attngraph-mpi.pc")" \
    "and example_csr with <attngraph/core.h> alone: ok"
