# attngraph — one Makefile, readable top to bottom.
#   make run     install missing packages, build, run the shipped example
#   make check   install missing packages, build, run every test
#   make install     the tool, headers, libraries, attngraph.pc and man page under
#                    PREFIX (/usr/local; LIBDIR, DESTDIR honoured), and the MPI layer
#                    where mpicc is (NO_MPI=1: not); make uninstall
#   make check-install   install into a stage under build/, build and run the examples
#                        through pkg-config, uninstall (part of check)
#   make check-man   the man page renders cleanly and matches --help (part of check)
#   make check-includes   every #include in src/ keeps to src/README.md's walls (part of check)
#   make check-layers     the tool's files call one way, in no circle (part of check)
#   make check-registers  the AVX2 and AVX-512 micro-kernels' loops keep their vectors
#                         in registers: no spill, no operand from the stack (objdump;
#                         part of check on x86-64)
#   make bench   time the kernels (1 and 2 threads), every variant the CPU runs
#                (AVX-512, AVX2, baseline) against its own FMA peak; `bench_kernel
#                smoke` (part of check) runs each variant once against the reference
#   make bench-share  runs that share the cores: 2 and 3 copies at once, beside a busy
#                loop and beside PyTorch, each against the quiet run
#   make bench-patterns  ns per edge and head of each mask of the study beside causal's,
#                forward and backward, N 2,048 and 32,768, d 32 and 64, every variant
#   make bench-lm   the GPT's steps a second on nanoGPT's shakespeare_char recipe
#                (LM_TEXT=input.txt; NANOGPT=DIR times nanoGPT's train.py beside it),
#                then a step at 1,024 and 4,096 tokens under causal, window:128 and
#                bigbird beside the same GPT in PyTorch with dense masked attention
#                (tools/gpt_torch.py), with both peak memories; then the token-id path:
#                MQAR at 256 tokens with a vocabulary of 8,192 against the same model
#                in PyTorch (a few minutes)
#   make check-sanitize   every test under AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-noomp      every test built without OpenMP
#   make check-clang      every test built with clang (without OpenMP: clang's runtime is
#                         libomp), the MPI programs built but their cases not run
#   make check-valgrind   the command-line tests with the tool under valgrind memcheck
#   make fuzz             build the libFuzzer targets (clang) and run each for FUZZ_SECONDS
#   make fuzz-smoke       the same, 20 s each
#   make fuzz-replay      replay the committed fuzz corpora and past crashes (part of check)
#   make mpi     the MPI layer: build/libattngraph_mpi.a/.so and build/attngraph-mpi
#   make check-mpi        the MPI tests (part of check): 1-4 processes against one
#   make check-python     the Python package's tests (python/tests, Debian's /usr/bin/python3)
#   make check-pip        pip install ./python into a virtualenv, offline (part of check)
#   make pictures         redraw the pictures of docs/pictures.md (graphs/pictures/) from the examples
#   make check-pictures   draw them twice into the build folder: the same bytes (part of check)
#   NO_OMP=1     build without OpenMP (kernels then run on one thread)
#   NO_METIS=1   build without METIS (--partition metis then refuses)

# libglpk-dev, libarpack2-dev, libplfit-dev: igraph.pc names -lglpk -larpack
# -lplfit for static links (pkg-config --static, make check-install), but
# Debian's libigraph-dev depends on none of them.
# groff-base: make check-man renders the man page. libopenblas-dev: make bench's
# yardstick (the bench's smoke run is part of make check); the library does not link it.
# python3-venv, python3-wheel: make check-pip's virtualenv and the wheel pip builds.
# librsvg2-bin (rsvg-convert) renders the pictures in the tests; zlib1g-dev
# decodes the PNGs there.
PACKAGES := libigraph-dev libxml2-dev check libopenblas-dev pkg-config libmetis-dev \
            python3-numpy python3-pytest python3-torch python3-igraph python3-venv python3-wheel libglpk-dev libarpack2-dev libplfit-dev groff-base \
            librsvg2-bin zlib1g-dev openmpi-bin libopenmpi-dev
# Debian's interpreter, which has python3-numpy, -torch, -igraph: a python3 found
# first on PATH (a virtualenv, conda, pyenv) may lack them.
# Every core builds, unless the command line says otherwise (make -j1): a fresh
# clone's plain `make` took 67 s on one core of a 2-core AMD EPYC Milan. Set at
# the top only: the recipes' sub-makes share its jobs. Not with `clean` among the
# goals (`make clean all` would clean while it builds).
ifeq ($(MAKELEVEL)$(filter clean,$(MAKECMDGOALS)),0)
MAKEFLAGS += -j$(shell nproc)
endif
PYTHON  ?= /usr/bin/python3
# check-sanitize sets it to 0: an ASan library cannot load into an uninstrumented Python
CHECK_PYTHON ?= 1
# check-clang sets CHECK_MPI to 0: the MPI programs are built, their cases not run
# (make check, check-sanitize and the fresh machine run them)
CHECK_MPI ?= 1
# The micro-kernels' registers are checked in the build the README's commands
# make (gcc, -O2 or -O3, x86-64); check-sanitize and check-clang set it to 0
CHECK_REGISTERS ?= $(if $(and $(filter x86_64,$(shell uname -m)),$(filter -O2 -O3,$(CFLAGS)),\
                      $(if $(CC_IS_CLANG),,gcc)),1,0)

CC      ?= cc
CC_IS_CLANG := $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1))
BUILD   ?= build
# How the tests start the tool (check-valgrind puts valgrind in front).
AG_CLI  ?= $(BUILD)/attngraph
PKGS    := igraph libxml-2.0 zlib
# OpenBLAS is make bench's yardstick (its sgemm beside the library's own
# products); the library, the tools and the tests do not link it.
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
# CFLAGS and LDFLAGS are yours to set (e.g. sanitizers); the rest is required.
CFLAGS  ?= -O2 -g
# -ffp-contract=fast: ISO C mode would otherwise forbid fusing a*b + c into one FMA,
# which the kernels are built on (and which rounds once instead of twice).
# -fvisibility=hidden: the shared library exports only what include/attngraph/*.h
# declares (the header marks its declarations visible). -MMD -MP: each object
# depends on the headers it includes.
AG_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wshadow -fPIC -Iinclude -Isrc \
             -ffp-contract=fast -Wno-psabi -fvisibility=hidden -MMD -MP \
             -DAG_CLI_PATH='"$(AG_CLI)"' $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
# METIS (Debian's libmetis-dev has no .pc file) for ag_partition_metis, in
# src/partition/partition_metis.c alone; NO_METIS=1 builds without it (that call then fails).
ifndef NO_METIS
LDLIBS  += -lmetis
else
AG_CFLAGS += -DAG_NO_METIS
endif
ifndef NO_OMP
AG_CFLAGS += -fopenmp
AG_LDFLAGS := -fopenmp
else
# one thread, but "omp simd" still vectorises the reductions
AG_CFLAGS += -fopenmp-simd -Wno-unknown-pragmas
endif

LIB_DIRS := base io graph partition kernels model train draw
LIB_SRC := $(foreach d,$(LIB_DIRS),$(wildcard src/$(d)/*.c))
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

VERSION := $(patsubst "%",%,$(shell sed -n 's/^\#define AG_VERSION //p' include/attngraph/base.h))
# While the major version is 0 every minor release may change the ABI, so the
# SONAME carries the minor version: libattngraph.so.0.2 for 0.2.x.
ABI := $(shell echo $(VERSION) | cut -d. -f1-2)
SONAME := libattngraph.so.$(ABI)
LIB_A  := $(BUILD)/libattngraph.a
LIB_SO := $(BUILD)/libattngraph.so
LIB_SO_REAL := $(BUILD)/libattngraph.so.$(VERSION)
CLI    := $(BUILD)/attngraph
MAN    := $(BUILD)/attngraph.1
TESTS  := $(BUILD)/test_attngraph
BENCH  := $(BUILD)/bench_kernel
EXAMPLE := $(BUILD)/example_embed
# the bench's smoke run of every kernel variant (it links OpenMP's runtime)
ifndef NO_OMP
SMOKE  := $(BENCH)
endif

.PHONY: all deps run check check-python check-pip check-sanitize check-noomp check-clang check-valgrind check-exports check-includes check-layers check-registers bench bench-lm bench-share bench-patterns bench-pyg scale clean \
        fuzz fuzz-smoke fuzz-replay fuzz-deps valgrind-deps install uninstall check-install check-man \
        pictures check-pictures mpi check-mpi scale-mpi
all: $(LIB_A) $(LIB_SO) $(CLI) $(MAN)

# Installs only what is missing; does nothing when every package is present.
# Installs the Debian packages of the list $(1) that are missing (apt-get update
# first: a fresh machine's package lists are empty); nothing when all are there.
# One apt at a time: make's parallel jobs (make deps fuzz-deps) wait for the lock.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing:$$missing"; \
	  flock "$${TMPDIR:-/tmp}/attngraph-apt.lock" sh -c "$$sudo apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing"; \
	fi
endef

deps:
	$(call install_missing,$(PACKAGES))

run: deps
	@$(MAKE) --no-print-directory all
	$(CLI) run graphs/sentence.gml --dim 16 --heads 2 --rounds 2 --seed 7

check: deps
	@$(MAKE) --no-print-directory all $(TESTS) $(EXAMPLE) $(SMOKE)
	$(TESTS)
	$(EXAMPLE) >/dev/null
	$(CLI) train graphs/planted.gml --features graphs/planted/x.npy --labels graphs/planted/labels.npy \
	  --train-mask graphs/planted/train.npy --model models/gat-planted.txt --epochs 30 \
	  --save $(BUILD)/example-model --quiet
	$(EXAMPLE) graphs/planted.gml $(BUILD)/example-model graphs/planted/x.npy
ifndef NO_OMP
	$(BENCH) smoke
endif
	@$(MAKE) --no-print-directory check-exports
	@$(MAKE) --no-print-directory check-includes
	@$(MAKE) --no-print-directory check-layers
ifeq ($(CHECK_REGISTERS),1)
	@$(MAKE) --no-print-directory check-registers
endif
	@$(MAKE) --no-print-directory check-man
	@$(MAKE) --no-print-directory check-install
	@$(MAKE) --no-print-directory check-pictures
	@$(MAKE) --no-print-directory fuzz-replay
ifeq ($(CHECK_MPI),0)
	@$(MAKE) --no-print-directory $(MPI_CLI) $(BUILD)/example_mpi
else
	@$(MAKE) --no-print-directory check-mpi
endif
ifeq ($(CHECK_PYTHON),1)
	@$(MAKE) --no-print-directory check-python
	@$(MAKE) --no-print-directory check-pip
endif

# The Python package (python/attngraph) against this build's library and tool.
check-python: $(LIB_SO) $(CLI)
	ATTNGRAPH_LIB=$(abspath $(LIB_SO)) AG_CLI_PATH=$(abspath $(CLI)) PYTHONPATH=python \
	  $(PYTHON) -m pytest -q -p no:cacheprovider python/tests

# pip install ./python into a virtualenv, offline: the package loads the library
# it ships from outside the checkout, and pip uninstall removes it (tests/check_pip.sh).
check-pip: $(LIB_SO)
	@PYTHON="$(PYTHON)" BUILD="$(BUILD)" sh tests/check_pip.sh

# Every #include in src/ keeps to the walls of src/README.md's table.
check-includes:
	@sh tests/check_includes.sh src

# The files of the tool (and of the MPI tool, when built) call one way: no circles.
# (HAVE_MPI is set further down: read in the recipe, not in the prerequisites.)
check-layers: $(CLI)
	@$(if $(HAVE_MPI),$(MAKE) --no-print-directory $(MPI_CLI))
	@$(PYTHON) tests/check_layers.py src/cli $(BUILD)/src/cli \
	  $(if $(HAVE_MPI),src/mpi/cli $(BUILD)/src/mpi/cli)

# The shared library has its SONAME and exports only ag_ symbols.
check-exports: $(LIB_SO)
	@readelf -d $(LIB_SO) | grep -q 'SONAME.*\[$(SONAME)\]' || \
	  { echo "$(LIB_SO): SONAME is not $(SONAME)"; exit 1; }
	@bad=$$(nm -D --defined-only $(LIB_SO) | awk '$$3 !~ /^ag_/ && $$2 ~ /[TDBRW]/ {print $$3}'); \
	  if [ -n "$$bad" ]; then echo "$(LIB_SO) exports non-ag_ symbols:" $$bad; exit 1; fi; \
	  echo "$(LIB_SO): SONAME $(SONAME), $$(nm -D --defined-only $(LIB_SO) | grep -c ' ag_') ag_ symbols, nothing else"

# The same tests in separate build folders: sanitizers (any error fails the
# run: no recovery, no leak allowed) and a build without OpenMP.
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
             -fno-omit-frame-pointer
check-sanitize: deps
	@$(MAKE) --no-print-directory check BUILD=$(BUILD)/asan CHECK_PYTHON=0 CHECK_REGISTERS=0 CFLAGS="$(SAN_FLAGS) $(CFLAGS)" \
	  LDFLAGS="-fsanitize=address,undefined $(LDFLAGS)"
check-noomp: deps
	@$(MAKE) --no-print-directory check BUILD=$(BUILD)/noomp NO_OMP=1
# Every run of the tool by the cli suite under memcheck: an invalid access or a
# definite leak makes valgrind exit 99, which fails the test that ran it. With
# GOMP_SPINCOUNT set the tool does not start itself again (cli/waits.c): an
# execv of /proc/self/exe would leave valgrind.
CLI_SPINCOUNT := 10000
VALGRIND := valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
check-valgrind: deps valgrind-deps
	@$(MAKE) --no-print-directory all $(BUILD)/valgrind/test_attngraph BUILD=$(BUILD)/valgrind \
	  AG_CLI="$(VALGRIND) $(BUILD)/valgrind/attngraph"
	CK_RUN_SUITE=cli CK_TIMEOUT_MULTIPLIER=40 GOMP_SPINCOUNT=$(CLI_SPINCOUNT) \
	  $(BUILD)/valgrind/test_attngraph

check-clang: deps
	$(call install_missing,clang)
	@$(MAKE) --no-print-directory check BUILD=$(BUILD)/clang CC=clang NO_OMP=1 CHECK_MPI=0 \
	  CHECK_REGISTERS=0

bench: deps
	@$(MAKE) --no-print-directory $(BENCH)
	$(BENCH)

# The GPT's steps a second on nanoGPT's recipe, and nanoGPT's beside it when
# NANOGPT names a checkout of it (docs/lm.md says how to get both).
LM_TEXT ?= ../shared/data/tinyshakespeare/input.txt
bench-lm: deps
	@$(MAKE) --no-print-directory $(CLI) $(BENCH)
	$(PYTHON) tools/bench_lm.py --cli $(CLI) --text $(LM_TEXT) --bench-kernel $(BENCH) \
	  $(if $(NANOGPT),--nanogpt $(NANOGPT))

# The lm train step and a GAT epoch on 200,000 nodes alone, as 2 and 3 copies at
# once, beside a busy loop and beside PyTorch: ratios to the quiet figures
# (tools/bench_share.py; about 2 minutes on 2 cores; docs/performance.md).
bench-share: deps
	@$(MAKE) --no-print-directory $(CLI)
	$(PYTHON) tools/bench_share.py --cli $(CLI) --text $(LM_TEXT)

# PyG's own examples on PyG's layers and on attngraph's, unchanged but for the
# import (tools/bench_pyg.py; PYG names a checkout of PyG 2.4.0, PYG_BIPARTITE
# PyG 2.0's ogbn_products_gat.py; docs/python.md says how to get both).
bench-pyg: deps
	@$(MAKE) --no-print-directory $(LIB_SO)
	$(call install_missing,python3-scipy python3-tqdm python3-jinja2 python3-sklearn python3-networkx python3-psutil python3-requests python3-pyparsing)
	ATTNGRAPH_LIB=$(abspath $(LIB_SO)) $(PYTHON) tools/bench_pyg.py --pyg $(PYG) \
	  $(if $(PYG_BIPARTITE),--products-bipartite $(PYG_BIPARTITE))

bench-patterns: deps
	@$(MAKE) --no-print-directory $(CLI)
	$(PYTHON) tools/bench_patterns.py --cli $(CLI)

# A build folder remembers its compiler and flags (and libraries): objects are
# rebuilt when they change (a CFLAGS or NO_OMP change used to leave stale
# objects behind; FUZZ_IGRAPH changes the libraries).
COMPILE := $(CC) $(AG_CFLAGS) $(CFLAGS)
ifneq ($(file <$(BUILD)/.flags),$(COMPILE) $(LDLIBS))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD)/.flags,$(COMPILE) $(LDLIBS))
endif
# and again after `make clean` among the same goals (`make clean all`)
$(BUILD)/.flags:
	$(shell mkdir -p $(BUILD))$(file >$@,$(COMPILE) $(LDLIBS))

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(COMPILE) $(OBJ_FLAGS) -c $< -o $@

# The tiled kernels, compiled six times (isa.h), are most of a plain `make`:
# GCC took 54 s for tiled.c alone on an AMD EPYC Milan, 24 s of them tracking
# variables' locations for -g, and a fresh clone's serial `make` 76 s. Without
# that tracking (line tables and backtraces stay; a debugger shows fewer local
# variables there) tiled.c takes 30 s. Clang ignores the flag. The gather
# kernels and the streamed forward, compiled per instruction set too, and the
# generic path take 2-8 s each with it and half that without. RTL's global common
# subexpression pass took a third of the rest (35-40 s -> 23 s for tiled.c on a
# Milan, a fresh serial `make` 78 -> 65 s), for code of intrinsics it has nothing to
# add to: the AVX2 forward ran as fast without it, the backward (causal N=2048
# H=8, 2 threads, 3 alternating runs) 0.125 s against 0.133 s with it.
KERNEL_OBJS := $(addprefix $(BUILD)/src/kernels/,tiled.o tiled_stream.o gather.o generic.o)
# No stack traffic in the AVX2 and AVX-512 micro-kernels' loops (objdump of the
# kernels compiled per instruction set; gcc's build: clang spills in some).
ISA_OBJS := $(addprefix $(BUILD)/src/kernels/,tiled.o tiled_stream.o gather.o)
check-registers: $(ISA_OBJS)
	@$(PYTHON) tests/check_registers.py $(ISA_OBJS)
# (clang has no GCSE flag and refuses it under -Werror: GCC's only)
NO_GCSE := $(if $(CC_IS_CLANG),,-fno-gcse)
$(KERNEL_OBJS): OBJ_FLAGS := -fno-var-tracking $(NO_GCSE)
# The score rows give the same bits on every instruction set: with no product
# fused into a sum, GCC's choice of which chains to fuse (it fused three of four
# rows' dot products on AVX-512 and all four on AVX2) cannot tell them apart.
$(BUILD)/src/kernels/score_rows.o: OBJ_FLAGS := -ffp-contract=off
# GELU's loops vectorize only where comparisons may be if-converted: without
# -fno-trapping-math GCC keeps a branch per clamp (no result changes).
$(BUILD)/src/model/activation.o: OBJ_FLAGS := -fno-trapping-math
# The cross-entropy's softmax likewise (its exponentials, the largest logit).
$(BUILD)/src/train/losses.o: OBJ_FLAGS := -fno-trapping-math
# The products' bits rest on every c + x*b of a chain being one FMA on the AVX2
# and AVX-512 variants, which GCC forms at -O2 only (the sanitizers' -O1 build
# gave other bits); explicit FMA intrinsics there ran wide products 25% slower.
$(BUILD)/src/base/sgemm.o: OBJ_FLAGS := -O2
# Adam's sqrt vectorizes only where it need not set errno (v >= 0 there).
$(BUILD)/src/train/optimizers.o: OBJ_FLAGS := -fno-math-errno

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/tools/bench_kernel.d

$(LIB_A): $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# libattngraph.so -> libattngraph.so.0.Y (the SONAME) -> libattngraph.so.0.Y.Z (the file).
$(LIB_SO): $(LIB_SO_REAL)
	ln -sf $(notdir $<) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(LIB_SO_REAL): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(AG_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The man page: src/cli/attngraph.1 with every command's --help, as the tool
# prints it from its option tables, in place of its @HELP@ line.
$(MAN): src/cli/attngraph.1 tools/man_help.sh $(CLI)
	sh tools/man_help.sh $(CLI) src/cli/attngraph.1 > $@.tmp && mv $@.tmp $@

$(CLI): $(CLI_OBJ) $(LIB_A)
	$(CC) $(AG_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TESTS): $(TEST_OBJ) $(LIB_A) | $(CLI)
	$(CC) $(AG_LDFLAGS) $(LDFLAGS) -o $@ $(TEST_OBJ) $(LIB_A) $(LDLIBS) $(shell pkg-config --libs check) -lz

$(BENCH): $(BUILD)/tools/bench_kernel.o $(BUILD)/tests/reference.o \
          $(BUILD)/src/cli/timing.o $(LIB_A)
	$(CC) $(AG_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(BLAS_LIBS)
$(BUILD)/tools/bench_kernel.o: OBJ_FLAGS += $(BLAS_CFLAGS)

# ---- the MPI layer (src/mpi/, include/attngraph/mpi.h) ----
# Its own library, compiled with mpicc (told to use $(CC)); the core above has
# no MPI dependency.
MPICC   ?= mpicc
MPI_LIB_SRC := $(wildcard src/mpi/*.c)
MPI_CLI_SRC := $(wildcard src/mpi/cli/*.c)
MPI_LIB_OBJ := $(MPI_LIB_SRC:%.c=$(BUILD)/%.o)
MPI_CLI_OBJ := $(MPI_CLI_SRC:%.c=$(BUILD)/%.o)
MPI_LIB_A  := $(BUILD)/libattngraph_mpi.a
MPI_SONAME := libattngraph_mpi.so.$(ABI)
MPI_LIB_SO := $(BUILD)/libattngraph_mpi.so
MPI_CLI    := $(BUILD)/attngraph-mpi
MPI_COMPILE := OMPI_CC=$(CC) $(MPICC) $(AG_CFLAGS) $(CFLAGS)
-include $(MPI_LIB_OBJ:.o=.d) $(MPI_CLI_OBJ:.o=.d)

mpi: $(MPI_LIB_A) $(MPI_LIB_SO) $(MPI_CLI)

$(BUILD)/src/mpi/%.o: src/mpi/%.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(MPI_COMPILE) -c $< -o $@

$(MPI_LIB_A): $(MPI_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# It links libattngraph.so: what it calls beyond the public API is what the
# core marks AG_INTERNAL (src/README.md); --no-undefined fails the link on
# anything else. $ORIGIN: it finds libattngraph.so.0.Y beside itself. The
# links as the core's: .so -> SONAME -> .so.X.Y.Z.
$(MPI_LIB_SO): $(MPI_LIB_OBJ) $(LIB_SO)
	OMPI_CC=$(CC) $(MPICC) -shared -Wl,-soname,$(MPI_SONAME) -Wl,--no-undefined \
	  -Wl,-rpath,'$$ORIGIN' $(AG_LDFLAGS) $(LDFLAGS) -o $@.$(VERSION) $(MPI_LIB_OBJ) -L$(BUILD) -lattngraph $(LDLIBS)
	ln -sf $(notdir $@).$(VERSION) $(BUILD)/$(MPI_SONAME)
	ln -sf $(MPI_SONAME) $@

# the command-line tool's objects but its main
$(MPI_CLI): $(MPI_CLI_OBJ) $(filter-out %/src/cli/main.o,$(CLI_OBJ)) $(MPI_LIB_A) $(LIB_A)
	OMPI_CC=$(CC) $(MPICC) $(AG_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# An embedding program of docs/scale.md: the C API against ag_rounds_run.
$(BUILD)/example_mpi: tools/example_mpi.c $(MPI_LIB_SO) include/attngraph/mpi.h
	OMPI_CC=$(CC) $(MPICC) $(AG_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD) \
	  -Wl,-rpath,'$$ORIGIN' -lattngraph_mpi -lattngraph $(LDLIBS)

# 1, 2, 3 and 4 processes against the one-process tool, byte for byte
# (tests/mpi/check.sh; every mpirun under timeout).
check-mpi: deps
	@$(MAKE) --no-print-directory $(CLI) $(MPI_CLI) $(BUILD)/make_random_csr $(BUILD)/example_mpi
	AG_CLI="$(AG_CLI)" AG_MPI_CLI=$(MPI_CLI) AG_RANDOM_CSR=$(BUILD)/make_random_csr \
	  AG_EXAMPLE_MPI=$(BUILD)/example_mpi AG_PYTHON=$(PYTHON) sh tests/mpi/check.sh

# The MPI measurements of docs/scale.md (tools/scale_mpi.sh): about 10 minutes on 2 cores.
scale-mpi: deps
	@$(MAKE) --no-print-directory $(CLI) $(MPI_CLI) $(BUILD)/make_random_csr
	$(call install_missing,time)
	BUILD=$(BUILD) sh tools/scale_mpi.sh

# The scale runs of docs/scale.md: a causal pattern of 131,072 nodes (8.6e9 edges)
# and a random graph of 10,000,000 nodes x 16 in-edges through the CSR path,
# with time and peak memory from /usr/bin/time (Debian package "time").
SCALE_DIR ?= /tmp/attngraph-scale
scale: deps
	@$(MAKE) --no-print-directory $(CLI) $(BUILD)/make_random_csr
	$(call install_missing,time)
	mkdir -p $(SCALE_DIR)
	/usr/bin/time -f "causal 131072: %e s, peak %M KB" $(CLI) run --pattern causal \
	  --nodes 131072 --dim 64 --quiet
	/usr/bin/time -f "CSR written: %e s" $(BUILD)/make_random_csr 10000000 16 1 \
	  $(SCALE_DIR)/indptr.npy $(SCALE_DIR)/indices.npy
	/usr/bin/time -f "random 10M x 16, run: %e s, peak %M KB" $(CLI) run \
	  --csr $(SCALE_DIR)/indptr.npy,$(SCALE_DIR)/indices.npy --dim 64 --quiet
	$(CLI) bench --csr $(SCALE_DIR)/indptr.npy,$(SCALE_DIR)/indices.npy --reps 3
	rm -rf $(SCALE_DIR)

$(BUILD)/make_random_csr: tools/make_random_csr.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

# One training round (forward + backward) of causal attention, for its time and
# peak memory: /usr/bin/time -v build/train_round 65536
$(BUILD)/train_round: tools/train_round.c $(LIB_A)
	$(CC) $(AG_CFLAGS) $(CFLAGS) $(AG_LDFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The pictures of docs/pictures.md, drawn by the tool from the shipped examples (the same
# bytes every time: seeded inputs and layouts). PICTURES=DIR draws them elsewhere.
PICTURES ?= graphs/pictures
, := ,
TOKENS := "the cat sat on the mat and the dog ran after it"
pictures: all
	@mkdir -p $(PICTURES)
	$(CLI) draw heatmap graphs/karate.gml --heads 2 --out $(PICTURES)/karate-heatmap.svg
	$(CLI) draw graph graphs/karate.gml --heads 2 --out $(PICTURES)/karate-graph.svg
	$(CLI) draw heatmap graphs/en_ja_cross.graphml --heads 2 --head 1 \
	  --out $(PICTURES)/en-ja-heatmap.svg
	$(CLI) draw graph --pattern 'causal&!strided:4+global:1' --tokens $(TOKENS) --heads 2 \
	  --rounds 2 --out $(PICTURES)/sentence-arcs.svg
	$(CLI) draw heatmap --pattern 'window:64+global:2' --nodes 2000 --bins 100 \
	  --out $(PICTURES)/window-2000-binned.svg
	$(CLI) run graphs/hopfield.gml --features graphs/hopfield/x.npy --weights graphs/hopfield \
	  --score dot --beta 0.25 --no-residual --rounds 20 --until 1e-6 --quiet \
	  --trace $(PICTURES)/hopfield-rounds.svg
	$(CLI) train graphs/planted.gml --features graphs/planted/x.npy \
	  --labels graphs/planted/labels.npy --train-mask graphs/planted/train.npy \
	  --eval-mask graphs/planted/eval.npy --rounds 2 --heads 2 --epochs 200 --quiet \
	  --svg $(PICTURES)/planted-train.svg
	$(CLI) compare --pattern causal --pattern window:3 --pattern 'causal&strided:3' \
	  --pattern 'window:3+global:1' --pattern 'docs:6,6' --pattern 'causal&!strided:4+global:1' \
	  --tokens $(TOKENS) --heads 2 --rounds 2 --quiet --svg $(PICTURES)/compare.svg
	$(CLI) draw train graphs/lm-study.csv --held-out --out $(PICTURES)/lm-study.svg \
	  --title "validation loss of a GPT under nine masks"
	$(CLI) draw train graphs/lm-study-1024.csv --held-out --out $(PICTURES)/lm-study-1024.svg \
	  --title "validation loss at 1,024 tokens under ten masks"
	$(if $(filter 1,$(CHECK_PYTHON)),ATTNGRAPH_LIB=$(abspath $(LIB_SO)) $(PYTHON) \
	  tools/study_recall.py --redraw graphs/recall-256 --out $(PICTURES)/recall-256.svg \
	  --title "MQAR at 256 tokens$(,) 64 pairs$(,) a vocabulary of 4$(,)096: recall under eleven masks")
	@ls -l $(PICTURES)

# The pictures drawn twice give the same bytes (part of check).
check-pictures: all
	@rm -rf $(BUILD)/pictures-a $(BUILD)/pictures-b
	@$(MAKE) --no-print-directory pictures PICTURES=$(BUILD)/pictures-a >/dev/null
	@$(MAKE) --no-print-directory pictures PICTURES=$(BUILD)/pictures-b >/dev/null
	@diff -r $(BUILD)/pictures-a $(BUILD)/pictures-b >/dev/null || \
	  { echo "pictures: two drawings differ"; exit 1; }
	@echo "pictures: $$(ls $(BUILD)/pictures-a | wc -l) drawn twice, the same bytes"

# The embedding example of docs/c-api.md, linked against the shared library like a user would.
$(EXAMPLE): tools/example_embed.c $(LIB_SO) $(wildcard include/*.h include/attngraph/*.h)
	$(CC) $(AG_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD) -Wl,-rpath,'$$ORIGIN' -lattngraph $(LDLIBS)

# ---- installing ----
# `make install` puts the tool, the headers, the libraries, attngraph.pc and the
# man page under PREFIX; DESTDIR stages the same tree elsewhere (packages, the
# install test). `make uninstall` (same PREFIX, LIBDIR, DESTDIR) removes exactly
# those files, and include/attngraph/ if that leaves it empty.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
PCDIR      ?= $(LIBDIR)/pkgconfig
# attngraph/mpi.h goes with the MPI layer, installed (with libattngraph_mpi,
# attngraph-mpi and attngraph-mpi.pc) where the MPI compiler is there; NO_MPI=1
# leaves it out
HEADERS    := $(filter-out include/attngraph/mpi.h,$(wildcard include/attngraph/*.h))
HAVE_MPI   := $(if $(NO_MPI),,$(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1))
MPI_SO_FILES := libattngraph_mpi.so.$(VERSION) $(MPI_SONAME) libattngraph_mpi.so
# What a static link of libattngraph.a needs beyond the packages of
# attngraph.pc's Requires (the shared library records these itself): METIS
# (no .pc file), and gcc's OpenMP runtime by name, as -fopenmp would make clang
# load its libomp beside it.
PC_LIBS_PRIVATE := $(strip $(if $(NO_METIS),,-lmetis) $(if $(NO_OMP),,-lgomp) -lm)
# Paths in attngraph.pc relative to ${prefix} where they lie under it.
pc_path = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# ldconfig after a real install (or uninstall) as root: programs then find
# libattngraph.so.0.Y with no rpath. Not for a staged tree.
LDCONFIG = if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call pc_path,$(LIBDIR))|' \
	    -e 's|@INCLUDEDIR@|$(call pc_path,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|'

install: all $(if $(HAVE_MPI),mpi)
	$(PC_SED) src/attngraph.pc.in > $(BUILD)/attngraph.pc
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PCDIR) \
	  $(DESTDIR)$(INCLUDEDIR)/attngraph $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(CLI) $(DESTDIR)$(BINDIR)/attngraph
	install -m 644 include/attngraph.h $(DESTDIR)$(INCLUDEDIR)/attngraph.h
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/attngraph/
	install -m 755 $(LIB_SO_REAL) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(LIB_SO_REAL)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libattngraph.so
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/libattngraph.a
	install -m 644 $(BUILD)/attngraph.pc $(DESTDIR)$(PCDIR)/attngraph.pc
	install -m 644 $(MAN) $(DESTDIR)$(MANDIR)/man1/attngraph.1
ifdef HAVE_MPI
	$(PC_SED) src/attngraph-mpi.pc.in > $(BUILD)/attngraph-mpi.pc
	install -m 755 $(MPI_CLI) $(DESTDIR)$(BINDIR)/attngraph-mpi
	install -m 644 include/attngraph/mpi.h $(DESTDIR)$(INCLUDEDIR)/attngraph/mpi.h
	install -m 755 $(MPI_LIB_SO).$(VERSION) $(DESTDIR)$(LIBDIR)/libattngraph_mpi.so.$(VERSION)
	ln -sf libattngraph_mpi.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(MPI_SONAME)
	ln -sf $(MPI_SONAME) $(DESTDIR)$(LIBDIR)/libattngraph_mpi.so
	install -m 644 $(MPI_LIB_A) $(DESTDIR)$(LIBDIR)/libattngraph_mpi.a
	install -m 644 $(BUILD)/attngraph-mpi.pc $(DESTDIR)$(PCDIR)/attngraph-mpi.pc
endif
	@$(LDCONFIG)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/attngraph $(DESTDIR)$(INCLUDEDIR)/attngraph.h \
	  $(HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%) \
	  $(DESTDIR)$(LIBDIR)/$(notdir $(LIB_SO_REAL)) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(LIBDIR)/libattngraph.so $(DESTDIR)$(LIBDIR)/libattngraph.a \
	  $(DESTDIR)$(PCDIR)/attngraph.pc $(DESTDIR)$(MANDIR)/man1/attngraph.1 \
	  $(DESTDIR)$(BINDIR)/attngraph-mpi $(DESTDIR)$(INCLUDEDIR)/attngraph/mpi.h \
	  $(MPI_SO_FILES:%=$(DESTDIR)$(LIBDIR)/%) $(DESTDIR)$(LIBDIR)/libattngraph_mpi.a \
	  $(DESTDIR)$(PCDIR)/attngraph-mpi.pc
	if [ -d $(DESTDIR)$(INCLUDEDIR)/attngraph ]; then \
	  rmdir --ignore-fail-on-non-empty $(DESTDIR)$(INCLUDEDIR)/attngraph; fi
	@$(LDCONFIG)

# Installs into a stage under the build folder and builds, links and runs the
# examples through pkg-config as a user would (tests/check_install.sh); no root
# needed, nothing outside $(BUILD) touched.
check-install: all $(EXAMPLE)
	@MAKE="$(MAKE)" CC="$(CC)" LDFLAGS="$(LDFLAGS)" BUILD="$(BUILD)" VERSION="$(VERSION)" \
	  ABI="$(ABI)" HAVE_MPI="$(HAVE_MPI)" MPICC="$(MPICC)" CHECK_MPI="$(CHECK_MPI)" sh tests/check_install.sh
# The man page renders without a warning, holds every command's help, and its own
# words describe every command and option that the --help texts list
# (tests/check_man.sh).
check-man: $(CLI) $(MAN)
	@sh tests/check_man.sh $(CLI) $(MAN) src/cli/attngraph.1 $(VERSION)

# ---- fuzzing (tests/fuzz/) ----
# One libFuzzer target per input kind. `make fuzz` builds them with clang under
# ASan + UBSan (OpenMP off: igraph is not thread-safe and its readers are
# uninstrumented) and runs each in turn for FUZZ_SECONDS on a copy of its
# corpus under $(FUZZ_BUILD)/corpus (new finds stay there; crashes go to
# $(FUZZ_BUILD)/artifacts); the past crash inputs (tests/fuzz/crashes/) are read
# as seeds too. `make check` replays the committed corpora and
# past crash inputs through the normal build (tests/fuzz/replay.c's main).
FUZZ_TARGETS := npy graph pattern csr weights labels cli
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := $(BUILD)/fuzz
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  := -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -Wno-pass-failed
# largest input (-max_len) of each target
FUZZ_LEN_npy := 4096
FUZZ_LEN_graph := 4096
FUZZ_LEN_pattern := 256
FUZZ_LEN_csr := 1024
FUZZ_LEN_weights := 8192
FUZZ_LEN_labels := 2048
FUZZ_LEN_cli := 512
# the CLI's main, renamed so a harness can call it
FUZZ_CLI_OBJ = $(filter-out %/src/cli/main.o,$(CLI_OBJ)) $(BUILD)/tests/fuzz/cli_main.o
FUZZ_HDR := tests/fuzz/fuzz_common.h

fuzz-deps:
	$(call install_missing,clang libclang-rt-14-dev)

valgrind-deps:
	$(call install_missing,valgrind)

# FUZZ_IGRAPH=1: link the fuzzers against igraph built from Debian's source
# with the same instrumentation (tools/build_fuzz_igraph.sh), so coverage and
# the sanitizers reach into igraph's readers too.
FUZZ_IGRAPH_DIR := $(FUZZ_BUILD)/igraph
ifdef FUZZ_IGRAPH
FUZZ_LDLIBS := $(abspath $(FUZZ_IGRAPH_DIR))/lib/libigraph.a -larpack -llapack -lgmp -lplfit \
               $(shell pkg-config --libs openblas libxml-2.0) -lmetis -lstdc++ -lm
FUZZ_IGRAPH_STEP := sh tools/build_fuzz_igraph.sh $(FUZZ_IGRAPH_DIR)
else
FUZZ_LDLIBS := $(LDLIBS)
FUZZ_IGRAPH_STEP := true
endif

$(BUILD)/tests/fuzz/cli_main.o: src/cli/main.c
	@mkdir -p $(dir $@)
	$(CC) $(AG_CFLAGS) $(CFLAGS) -Dmain=attngraph_main -c $< -o $@

$(BUILD)/libattngraph_cli.a: $(FUZZ_CLI_OBJ)
	rm -f $@ && ar rcs $@ $^

# libFuzzer binaries: built by a nested make with BUILD=$(FUZZ_BUILD) CC=clang.
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.c $(FUZZ_HDR) $(LIB_A) $(BUILD)/libattngraph_cli.a $(BUILD)/.flags
	$(CC) $(AG_CFLAGS) $(CFLAGS) -Itests/fuzz -Isrc/cli -fsanitize=fuzzer $(AG_LDFLAGS) $(LDFLAGS) \
	  -o $@ $< tests/fuzz/fuzz_common.c $(BUILD)/libattngraph_cli.a $(LIB_A) $(LDLIBS)

# Replay binaries: the same harnesses with replay.c's main, in the current build.
$(BUILD)/fuzz-replay/replay_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.c tests/fuzz/replay.c \
                               $(FUZZ_HDR) $(LIB_A) $(BUILD)/libattngraph_cli.a
	@mkdir -p $(dir $@)
	$(CC) $(AG_CFLAGS) $(CFLAGS) -Itests/fuzz -Isrc/cli $(AG_LDFLAGS) $(LDFLAGS) -o $@ $< \
	  tests/fuzz/fuzz_common.c tests/fuzz/replay.c $(BUILD)/libattngraph_cli.a $(LIB_A) $(LDLIBS)

fuzz-replay: $(FUZZ_TARGETS:%=$(BUILD)/fuzz-replay/replay_%)
	@for t in $(FUZZ_TARGETS); do \
	  dirs="tests/fuzz/corpus/$$t"; [ -d tests/fuzz/crashes/$$t ] && dirs="$$dirs tests/fuzz/crashes/$$t"; \
	  $(BUILD)/fuzz-replay/replay_$$t $$dirs || { echo "fuzz replay of $$t failed"; exit 1; }; \
	done

fuzz: deps fuzz-deps
	@$(FUZZ_IGRAPH_STEP)
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) NO_OMP=1 CFLAGS="$(FUZZ_CFLAGS)" \
	  LDFLAGS="$(FUZZ_SAN)" LDLIBS="$(FUZZ_LDLIBS)" $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	@mkdir -p $(FUZZ_BUILD)/artifacts
	@for t in $(FUZZ_TARGETS); do \
	  corpus=$(abspath $(FUZZ_BUILD))/corpus/$$t; mkdir -p $$corpus $(FUZZ_BUILD)/artifacts/$$t; \
	  cp -n tests/fuzz/corpus/$$t/* $$corpus/ 2>/dev/null; \
	  dict=""; [ -f tests/fuzz/$$t.dict ] && dict="-dict=$(abspath tests/fuzz)/$$t.dict"; \
	  crashes=""; [ -d tests/fuzz/crashes/$$t ] && crashes=$(abspath tests/fuzz/crashes)/$$t; \
	  case $$t in npy) len=$(FUZZ_LEN_npy);; graph) len=$(FUZZ_LEN_graph);; \
	    pattern) len=$(FUZZ_LEN_pattern);; csr) len=$(FUZZ_LEN_csr);; weights) len=$(FUZZ_LEN_weights);; \
	    labels) len=$(FUZZ_LEN_labels);; *) len=$(FUZZ_LEN_cli);; esac; \
	  log=$(FUZZ_BUILD)/fuzz_$$t.log; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s, -max_len=$$len"; \
	  if ! $(FUZZ_BUILD)/fuzz_$$t $$corpus $$crashes $$dict -max_total_time=$(FUZZ_SECONDS) -max_len=$$len \
	       -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 \
	       -artifact_prefix=$(abspath $(FUZZ_BUILD))/artifacts/$$t/ >$$log 2>&1; then \
	    tail -n 60 $$log; echo "fuzz_$$t FAILED: input in $(FUZZ_BUILD)/artifacts/$$t/"; exit 1; \
	  fi; \
	  execs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$log); \
	  rate=$$(sed -n 's/^stat::average_exec_per_sec: *//p' $$log); \
	  cov=$$(grep -o 'cov: [0-9]* ft: [0-9]*' $$log | tail -n 1); \
	  units=$$(ls $$corpus | wc -l); \
	  echo "fuzz_$$t: $$execs execs, $$rate exec/s, $$cov, corpus $$units files"; \
	done

fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20

clean:
	rm -rf $(BUILD)
