#!/bin/sh
# Builds igraph from Debian's source package (the version the library links,
# 0.10.2+ds) with clang's fuzzer coverage, ASan and UBSan, as a static library
# under $1 (default build/fuzz/igraph), so that `make fuzz FUZZ_IGRAPH=1` sees
# and guards igraph's own readers, not only ours. Needs root (apt-get) and a
# few minutes on 2 cores. Leaves the machine's apt sources as they were.
set -eu
out=$(realpath -m "${1:-build/fuzz/igraph}")
if [ -f "$out/lib/libigraph.a" ]; then echo "$out/lib/libigraph.a is built"; exit 0; fi
work=$(mktemp -d)
src_list=/etc/apt/sources.list.d/attngraph-src.sources
trap 'rm -rf "$work" "$src_list"' EXIT
# the source package: a deb-src entry for the duration of the download
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$src_list"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev cmake bison flex clang libclang-rt-14-dev \
  libarpack2-dev libgmp-dev liblapack-dev libplfit-dev libxml2-dev libopenblas-dev >/dev/null
cd "$work"
apt-get source -qq --download-only igraph=0.10.2+ds-2 2>/dev/null
dpkg-source -x --no-check igraph_0.10.2+ds-2.dsc igraph >/dev/null   # applies Debian's patches
san="-O1 -g -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S igraph -B igraph/build -DCMAKE_BUILD_TYPE=None -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DIGRAPH_GLPK_SUPPORT=OFF -DIGRAPH_GRAPHML_SUPPORT=ON -DIGRAPH_OPENMP_SUPPORT=OFF \
  -DIGRAPH_USE_INTERNAL_BLAS=OFF -DIGRAPH_USE_INTERNAL_LAPACK=OFF -DIGRAPH_USE_INTERNAL_ARPACK=OFF \
  -DIGRAPH_USE_INTERNAL_GMP=OFF -DIGRAPH_USE_INTERNAL_PLFIT=OFF -DIGRAPH_ENABLE_TLS=OFF \
  -DIGRAPH_WARNINGS_AS_ERRORS=OFF \
  -DCMAKE_INSTALL_PREFIX="$out" >/dev/null
make -C igraph/build -j"$(nproc)" igraph >/dev/null
make -C igraph/build install >/dev/null
echo "built $out/lib/libigraph.a"
