# goldminer — plain Makefile. All outputs go under build/ (or $(B)).
#   make            library (build/libgoldminer.a/.so) and CLI (build/goldminer)
#   make test       every cmocka binary (+ python tests), one closing line
#   make sanitize   the same tests under ASan+UBSan (build-san/)
#   make test-torch-suite  PyTorch's own test_dataloader.py against goldminer's DataLoader
#   make test-torchvision-train  torchvision's reference train.py plain and under goldminer run
#   make tsan       the ring/loader/node/elastic/chaos tests under TSan (build-tsan/)
#   make format-check  clang-format would change nothing (make format: apply it)
#   make lint       cppcheck over the C code, shellcheck over the scripts, pyflakes
#                   over the Python
#   make bench      benchmarks in tests/bench/ (PHOTOS=dir for the real-photo set)
#   make demo       synthetic dataset + the pipeline on it, images/s
#   make plots      gnuplot figures from sim output
#   make deps       install missing Debian packages
#   make CUDA=0     build without the CUDA runtime (pinning skipped; no GPU decode kernels)
#   make CUDA_KERNELS=0  no libgoldminer-cuda.so (the GPU decode's kernels, built where
#                   nvcc is): gpu_decode then finishes on the host
#   make UCX=0      build without UCX (no remote-workers plugin; the UCX tests skip)
#   make clean      remove every build folder (build, build-san, build-tsan, ...)
#   make WERROR=1   warnings are errors (CI)
# Objects depend on $(B)/build-flags, which records the flags they are built with:
# a change of CC, CFLAGS, LDFLAGS, CUDA, UCX or a library's flags rebuilds them.

B ?= build
# The sub-makes that build for make test, sanitize, tsan and demo use every core
# unless the caller chose (-jN): on CI's two cores a serial build was minutes.
JOBS := $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
# What the objects in $(B) are built with (see the flags stamp at the end).
FLAGS_STAMP := $(B)/build-flags
# The release: the library's version, its SONAME major (libgoldminer.so.0) and
# what `goldminer --version` and goldminer.pc say.
VERSION := 0.1.0
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
CC ?= cc
# CFLAGS from the environment is exported to sub-makes (make test's, test_build.sh's)
# with the flags below already added: they would add them again and build with other
# flags than the caller's. So the caller's own value travels beside it, and a sub-make
# that sees exactly what its parent exported starts from that instead.
ifeq ($(origin CFLAGS)/$(CFLAGS),environment/$(GM_PARENT_CFLAGS))
CFLAGS := $(GM_CALLER_CFLAGS)
endif
CFLAGS ?= -O2 -g
GM_CALLER_CFLAGS := $(CFLAGS)
export GM_CALLER_CFLAGS
override CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Iinclude -MMD -MP -fPIC -pthread -DGM_VERSION='"$(VERSION)"'
# WERROR=1 (CI sets it on make test's line): warnings are errors.
ifeq ($(WERROR),1)
override CFLAGS += -Werror
endif
PKG_CONFIG ?= pkg-config
PKGS := liburing libjpeg
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null || echo -luring -ljpeg)
override CFLAGS += $(PKG_CFLAGS)
LDLIBS := $(PKG_LIBS) -lm -pthread
# libmicrohttpd serves `goldminer node --metrics`: the binary links it, the
# library (what Python loads) does not.
MHD_CFLAGS := $(shell $(PKG_CONFIG) --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)

# CUDA: on when the toolkit is found, unless CUDA=0.
CUDA_HOME ?= /usr/local/cuda
ifeq ($(CUDA),)
CUDA := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),1,0)
endif
ifeq ($(CUDA),1)
override CFLAGS += -DGM_HAVE_CUDA=1 -isystem $(CUDA_HOME)/include
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
endif
# The GPU decode's kernels (core/coef_kernels.cu) are the plugin
# libgoldminer-cuda.so, built with CUDA on where nvcc is (CUDA_KERNELS=0: not built);
# libgoldminer.so loads it only when a device is there (core/coef_device.c), so a
# build without nvcc, or a machine without a device, runs as before.
NVCC ?= $(CUDA_HOME)/bin/nvcc
CUDA_PLUGIN :=
ifeq ($(CUDA),1)
ifneq ($(CUDA_KERNELS),0)
CUDA_PLUGIN := $(if $(shell command -v $(NVCC) 2>/dev/null),$(B)/libgoldminer-cuda.so)
endif
endif
# What this make exports as CFLAGS (the global value, now final): see the top.
GM_PARENT_CFLAGS := $(CFLAGS)
export GM_PARENT_CFLAGS

# UCX (the remote workers' transport): on when pkg-config finds it, unless UCX=0.
# It is NOT in libgoldminer: loading UCX installs its memory hooks (libucm
# patches mmap/madvise process-wide), which a trainer that only consumes batches
# must not get (they also crash TSan builds). The remote workers are a plugin
# (libgoldminer-remote.so, below); tests/ucx/ucx.c, RMA puts into a peer's
# memory, is a test-support archive ($(B)/tests/libgmucx.a) for test_ucx,
# ucx_bench and mh_peer, not a part of the product.
ifeq ($(UCX),)
UCX := $(shell $(PKG_CONFIG) --exists ucx 2>/dev/null && echo 1 || echo 0)
endif
UCX_CFLAGS :=
UCX_LIBS :=
UCX_LIB :=
ifeq ($(UCX),1)
UCX_CFLAGS := -DGM_HAVE_UCX=1 $(shell $(PKG_CONFIG) --cflags ucx)
UCX_LIBS := $(shell $(PKG_CONFIG) --libs ucx || echo -lucp -luct -lucs)
UCX_LIB := $(B)/tests/libgmucx.a
REMOTE_PLUGIN := $(B)/libgoldminer-remote.so
endif
CRYPTO_CFLAGS := $(shell $(PKG_CONFIG) --cflags libssl libcrypto 2>/dev/null)
CRYPTO_LIBS := $(shell $(PKG_CONFIG) --libs libssl libcrypto 2>/dev/null || echo -lssl -lcrypto)

# Without the libraries the build needs, plain make stops here, before any
# compiler error, naming the Debian packages that make deps installs (one shell,
# one pkg-config --exists per library: milliseconds). Goals that run deps first
# (test, demo, sanitize, ...) or compile nothing are not checked. DEPS_CHECK=0
# skips it (libraries installed without their .pc files).
DEPS_PC := liburing:liburing-dev libjpeg:libjpeg62-turbo-dev libmicrohttpd:libmicrohttpd-dev \
	$(if $(filter 1,$(UCX)),libcrypto:libssl-dev) \
	$(if $(filter test-run $(B)/tests/%,$(MAKECMDGOALS)),cmocka:libcmocka-dev)
NO_DEPS_GOALS := deps profile-deps lint-deps lint format format-check clean uninstall test sanitize tsan demo \
	fuzz gpu-bundle traces plots
ifneq ($(DEPS_CHECK),0)
ifneq ($(if $(MAKECMDGOALS),$(filter-out $(NO_DEPS_GOALS),$(MAKECMDGOALS)),all),)
DEPS_MISSING := $(shell command -v $(PKG_CONFIG) >/dev/null 2>&1 || echo pkg-config; \
	$(foreach d,$(DEPS_PC),$(PKG_CONFIG) --exists $(firstword $(subst :, ,$(d))) 2>/dev/null || \
	echo $(lastword $(subst :, ,$(d)));))
ifneq ($(DEPS_MISSING),)
$(error goldminer: missing build dependencies: $(strip $(DEPS_MISSING)) (run: make deps))
endif
endif
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

# The library is core/ and sim/ but the remote-workers plugin's sources; the
# commands of the goldminer binary (cmd/) are its clients and are not in libgoldminer.
REMOTE_SRCS := $(sort $(wildcard core/remote/*.c))
REMOTE_OBJS := $(REMOTE_SRCS:%.c=$(B)/%.o)
LIB_SRCS := $(sort $(filter-out $(REMOTE_SRCS),$(wildcard core/*.c)) $(wildcard sim/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(B)/%.o)
CLI_SRCS := $(sort $(wildcard cmd/*.c))
CLI_OBJS := $(CLI_SRCS:%.c=$(B)/%.o)
# The commands without main(), for tests that call a command in-process.
CMD_LIB := $(B)/libgoldminer-cmd.a
# cmd/accept_guard.c's accept, accept4 and hook, seen by the UCX the plugin loads
ACCEPT_EXPORTS := -Wl,--export-dynamic-symbol=accept -Wl,--export-dynamic-symbol=accept4 \
	-Wl,--export-dynamic-symbol=gm_accept_hook
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_BINS := $(TEST_SRCS:tests/%.c=$(B)/tests/%)
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(B)/bench/%)
# Fuzz targets: replayed over their corpus by make test, explored by make fuzz.
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_NAMES := $(FUZZ_SRCS:tests/fuzz/%.c=%)
# The targets that reach into the remote plugin link its objects: fuzz_peermsg
# its pure message checks (no UCX), fuzz_ctl the control port's handshake with a
# fake UCX (tests/fuzz/ucx_stub.c; UCX's headers, so UCX=1 only) and libcrypto.
FUZZ_OBJS_fuzz_peermsg := core/remote/check.o core/remote/lendroot.o
FUZZ_OBJS_fuzz_ctl := core/remote/ctl.o core/remote/conn.o core/remote/auth.o core/remote/check.o \
	core/remote/tls.o core/remote/ratelog.o
FUZZ_SRCS_fuzz_ctl := tests/fuzz/ucx_stub.c
FUZZ_FLAGS_fuzz_ctl = $(UCX_CFLAGS) $(CRYPTO_CFLAGS)
FUZZ_LIBS_fuzz_ctl = $(CRYPTO_LIBS)
ifneq ($(UCX),1)
FUZZ_NAMES := $(filter-out fuzz_ctl,$(FUZZ_NAMES))
endif
FUZZ_BINS := $(FUZZ_NAMES:%=$(B)/fuzz/%)

.PHONY: install uninstall traces all test test-run test-torch-suite test-torchvision-train sanitize bench demo plots clean deps profile-deps check-deps sim-experiments format \
	fuzz fuzz-build fuzz-seeds gpu-bundle coef-cuda tsan format-check lint lint-deps
all: $(B)/libgoldminer.a $(B)/libgoldminer.so $(B)/goldminer $(REMOTE_PLUGIN) $(CUDA_PLUGIN)

$(B)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c -o $@ $<

$(B)/libgoldminer.a: $(LIB_OBJS) $(FLAGS_STAMP)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $(filter %.o,$^)

$(B)/libgoldminer.so: $(LIB_OBJS) $(FLAGS_STAMP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -shared -Wl,-soname,libgoldminer.so.$(SOMAJOR) -o $@ $(filter %.o,$^) \
		$(LDFLAGS) $(LDLIBS)
	$(Q)ln -sf libgoldminer.so $(B)/libgoldminer.so.$(SOMAJOR) # what programs linked here load

$(CMD_LIB): $(filter-out $(B)/cmd/main.o,$(CLI_OBJS)) $(FLAGS_STAMP)
	$(Q)rm -f $@ && ar rcs $@ $(filter %.o,$^)

$(B)/cmd/%.o: override CFLAGS += $(MHD_CFLAGS)

# core/huff.c's Huffman decoder works inside libjpeg-turbo through its private
# structs (jpegint.h): core/probe/huff.c asserts, at compile time, what it relies
# on. Its verdict, $(HUFF_PROBE) (GM_OWN_HUFFMAN 1 or 0), is forced into huff.c,
# jpeg.c and the tests that include huff.h. When it fails the build prints one
# line (what huff.c expects, what was found) and goes on with libjpeg's own
# decoder (huff.c compiled out). The probe (a syntax check, a tenth of a second)
# runs again only when the flags (the stamp: HUFF_PROBE_FAIL is in it), the probe
# or libjpeg's headers change, each of which rebuilds huff.o and jpeg.o anyway.
# HUFF_PROBE_FAIL=1 fails it on purpose (tests/test_huff_fallback.sh).
HUFF_PROBE := $(B)/core/huff_probe.h
HUFF_PROBE_CFLAGS = $(filter-out -MMD -MP,$(CFLAGS)) $(if $(filter 1,$(HUFF_PROBE_FAIL)),-DGM_HUFF_PROBE_FAIL)
JPEG_HDRS := $(wildcard $(foreach d,$(patsubst -I%,%,$(filter -I%,$(PKG_CFLAGS))) /usr/local/include \
	/usr/include /usr/include/$(shell $(CC) -print-multiarch 2>/dev/null),$(addprefix $(d)/,\
	jpeglib.h jpegint.h jconfig.h jmorecfg.h jerror.h)))
$(HUFF_PROBE): core/probe/huff.c $(JPEG_HDRS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(Q)v=1; if ! $(CC) $(HUFF_PROBE_CFLAGS) -fsyntax-only core/probe/huff.c 2>$@.log; then v=0; \
		why=$$(awk '/error:/ { if (match($$0, /"[^"]*"$$/)) print "expects " \
			substr($$0, RSTART + 1, RLENGTH - 2); else { sub(/.*error: /, ""); \
			print "does not compile here (" $$0 ")" } exit }' $@.log); \
		found=$$($(CC) $(HUFF_PROBE_CFLAGS) -DGM_HUFF_PROBE_FOUND -E -P core/probe/huff.c \
			-o $@.found 2>/dev/null && sed -n \
			-e 's/^gm_huff_probe_found none \(.*\)$$/libjpeg API \1, not libjpeg-turbo/p' -e t \
			-e 's/^gm_huff_probe_found \(.*\) \(.*\)$$/libjpeg-turbo \1 (libjpeg API \2)/p' \
			$@.found); \
		echo "goldminer build: core/huff.c $$why, found $${found:-no usable jpeglib.h}:" \
			"goldminer falls back to libjpeg's Huffman decoder (same pixels, slower decode)" >&2; \
	fi; \
	printf '%s\n' '/* $(HUFF_PROBE): core/probe/huff.c passed (1) or not (0); see the Makefile */' \
		"#define GM_OWN_HUFFMAN $$v" >$@.tmp; \
	cmp -s $@.tmp $@ || $(if $(Q),echo "  PROBE   core/probe/huff.c: GM_OWN_HUFFMAN $$v";) :; \
	mv $@.tmp $@
HUFF_USERS := $(B)/core/huff.o $(B)/core/jpeg.o $(B)/tests/test_jpeg $(B)/tests/test_huff \
	$(B)/fuzz/fuzz_huff
$(HUFF_USERS): $(HUFF_PROBE)
$(HUFF_USERS): private override CFLAGS += -include $(HUFF_PROBE)

# The command links the shared library, so that the process holds one copy of it
# (one set of its globals) that the remote-workers plugin it may dlopen() shares.
# Found through the run path: beside the binary in the build tree, ../lib from it
# once installed (LIBDIR itself when LIBDIR is not PREFIX/lib).
BIN_RPATH = -Wl,-rpath,'$$ORIGIN:$(if $(filter $(PREFIX)/lib,$(LIBDIR)),$$ORIGIN/../lib,$(LIBDIR))'
$(B)/goldminer: $(CLI_OBJS) $(B)/libgoldminer.so $(FLAGS_STAMP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(CLI_OBJS) $(B)/libgoldminer.so $(BIN_RPATH) $(LDFLAGS) \
		$(LDLIBS) $(MHD_LIBS) $(ACCEPT_EXPORTS)

# Tests may declare extra link flags in a comment line: "// LDFLAGS: -Wl,--wrap=..."
$(B)/tests/%: tests/%.c $(CMD_LIB) $(B)/libgoldminer.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) -Icmd -o $@ $< $(shell sed -n 's#^// LDFLAGS: ##p' $<) \
		$(EXTRA_LIBS) $(CMD_LIB) $(B)/libgoldminer.a $(LDFLAGS) $(LDLIBS) $(MHD_LIBS) -lcmocka

$(B)/bench/%: tests/bench/%.c $(B)/libgoldminer.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(EXTRA_LIBS) $(B)/libgoldminer.a $(LDFLAGS) $(LDLIBS)

# The UCX test-support library (tests/ucx/, see UCX above) and the programs that
# use it (mh_peer is the multi-host harness's two ends, tests/multihost.sh).
$(B)/tests/ucx/ucx.o: override CFLAGS += $(UCX_CFLAGS)
$(B)/tests/libgmucx.a: $(B)/tests/ucx/ucx.o
	$(Q)rm -f $@ && ar rcs $@ $^
# test_ctl (the control port) links the plugin's connection objects (UCX=1; it
# skips otherwise).
ifeq ($(UCX),1)
CTL_TEST_OBJS := $(B)/core/remote/ctl.o $(B)/core/remote/conn.o $(B)/core/remote/auth.o \
	$(B)/core/remote/check.o $(B)/core/remote/tls.o $(B)/core/remote/ratelog.o
$(B)/tests/test_ctl: override CFLAGS += $(UCX_CFLAGS) $(CRYPTO_CFLAGS)
$(B)/tests/test_ctl: EXTRA_LIBS = $(CTL_TEST_OBJS) $(UCX_LIBS) $(CRYPTO_LIBS)
$(B)/tests/test_ctl: $(CTL_TEST_OBJS)
endif
$(B)/tests/test_ucx $(B)/bench/ucx_bench $(B)/bench/mh_peer: override CFLAGS += $(UCX_CFLAGS) -Itests
$(B)/tests/test_ucx $(B)/bench/ucx_bench $(B)/bench/mh_peer: EXTRA_LIBS = $(UCX_LIB) $(UCX_LIBS)
$(B)/tests/test_ucx $(B)/bench/ucx_bench $(B)/bench/mh_peer: $(UCX_LIB)

# Remote workers (REMOTE_SRCS: core/remote/, with core/remote/auth.c and tls.c, the
# control port's TLS 1.3 with pre-shared keys, OpenSSL's libssl and libcrypto): a plugin the node agent dlopen()s
# only when --listen/--peers is given, so that UCX and libcrypto never load into
# a trainer or an agent that does not use it. It links libgoldminer.so (its
# DT_NEEDED), which the agent has loaded already: its gm_* calls resolve to the
# agent's own copy of the library. Run path $$ORIGIN: the library sits beside it,
# in the build tree and installed. The version script exports only
# gm_remote_plugin. test_auth, test_lendroot and test_ratelog link their .o themselves, so they run
# with UCX=0 too.
$(REMOTE_OBJS): override CFLAGS += $(UCX_CFLAGS) $(CRYPTO_CFLAGS)
$(B)/libgoldminer-remote.so: $(REMOTE_OBJS) $(B)/libgoldminer.so core/remote/remote.map $(FLAGS_STAMP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -shared -Wl,--version-script=core/remote/remote.map -Wl,-rpath,'$$ORIGIN' \
		-o $@ $(REMOTE_OBJS) $(B)/libgoldminer.so $(LDFLAGS) $(UCX_LIBS) $(CRYPTO_LIBS) \
		$(LDLIBS)
$(B)/tests/test_auth: EXTRA_LIBS = $(B)/core/remote/auth.o $(CRYPTO_LIBS)
$(B)/tests/test_auth: $(B)/core/remote/auth.o
$(B)/tests/test_lendroot: EXTRA_LIBS = $(B)/core/remote/lendroot.o
$(B)/tests/test_lendroot: $(B)/core/remote/lendroot.o
# The limiter of the log lines a remote party causes (ratelog.c) is pure too.
$(B)/tests/test_ratelog: EXTRA_LIBS = $(B)/core/remote/ratelog.o
$(B)/tests/test_ratelog: $(B)/core/remote/ratelog.o

# The same plugin with remote workers that misbehave on request (worker.c and
# pywork.c built with -DGM_REMOTE_TESTING), for tests/test_remote.sh and
# tests/test_remote_py.sh; never installed.
REMOTE_TEST_PLUGIN := $(if $(REMOTE_PLUGIN),$(B)/tests/libgoldminer-remote-test.so)
REMOTE_MIS_OBJS := $(B)/tests/remote/worker.o $(B)/tests/remote/pywork.o
$(REMOTE_MIS_OBJS): $(B)/tests/remote/%.o: core/remote/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(UCX_CFLAGS) $(CRYPTO_CFLAGS) -DGM_REMOTE_TESTING -c -o $@ $<
$(B)/tests/libgoldminer-remote-test.so: \
		$(filter-out $(B)/core/remote/worker.o $(B)/core/remote/pywork.o,$(REMOTE_OBJS)) \
		$(REMOTE_MIS_OBJS) $(LIB_OBJS) core/remote/remote.map
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -shared -Wl,--version-script=core/remote/remote.map -o $@ \
		$(filter %.o,$^) $(LDFLAGS) $(UCX_LIBS) $(CRYPTO_LIBS) $(LDLIBS)
# The remote plugin's message rules (check.c) are pure: their test links the object.
$(B)/tests/test_remote_check: EXTRA_LIBS = $(B)/core/remote/check.o
$(B)/tests/test_remote_check: $(B)/core/remote/check.o
# So are the parsers of --peers and --peers-file (peers.c; its resolver thread too).
$(B)/tests/test_remote_peers: EXTRA_LIBS = $(B)/core/remote/peers.o
$(B)/tests/test_remote_peers: $(B)/core/remote/peers.o

# Replay build of a fuzz target: its corpus files through LLVMFuzzerTestOneInput.
$(B)/fuzz/%: tests/fuzz/%.c tests/fuzz/replay.c tests/fuzz/util.c tests/fuzz/fuzz.h \
		$(B)/libgoldminer.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(CC) $(CFLAGS) -Itests/fuzz -o $@ $< tests/fuzz/replay.c tests/fuzz/util.c \
		$(FUZZ_EXTRA) $(B)/libgoldminer.a $(LDFLAGS) $(LDLIBS)
# (a target's plugin objects, fake UCX and libraries: FUZZ_OBJS_, FUZZ_SRCS_, ... above)
define fuzz_plugin_rules
$(B)/fuzz/$(1): $(addprefix $(B)/,$(FUZZ_OBJS_$(1))) $(FUZZ_SRCS_$(1)) tests/fuzz/ucx_stub.h
$(B)/fuzz/$(1): FUZZ_EXTRA = $(FUZZ_SRCS_$(1)) $(addprefix $(B)/,$(FUZZ_OBJS_$(1))) $(FUZZ_LIBS_$(1))
$(B)/fuzz/$(1): private override CFLAGS += $(FUZZ_FLAGS_$(1))
endef
$(foreach n,$(filter fuzz_ctl fuzz_peermsg,$(FUZZ_NAMES)),$(eval $(call fuzz_plugin_rules,$(n))))
# (-MMD names the headers of the last source only: the oracle fuzz_huff shares with
# test_huff, and the header it includes, are named here; a test binary, built from
# one source, gets them from its own .d)
$(B)/fuzz/fuzz_huff: tests/fuzz/huffdiff.h core/huff.h

# Script tests (TAP on stdout): tests/*.sh and the Python suite.
SCRIPT_TESTS := $(sort $(wildcard tests/test_*.sh))
# test installs what is missing first (a sub-make, so pkg-config sees it).
test: deps
	$(Q)$(MAKE) $(JOBS) --no-print-directory test-run
test-run: all $(TEST_BINS) $(BENCH_BINS) $(FUZZ_BINS) $(REMOTE_TEST_PLUGIN)
	$(Q)B=$(B) sh tests/run.sh $(TEST_BINS) $(SCRIPT_TESTS)

# PyTorch's own test/test_dataloader.py (1.13.1, the python3-torch Debian ships)
# run against goldminer.torch.DataLoader and against torch's, per-test outcomes
# both ways and the tests torch passes that goldminer fails, by design or as
# regressions (tests/python/torch_suite.py). Minutes: not in make test, which runs
# a sample of it (tests/python/test_torch_suite.py). The file is looked for in
# TORCH_TEST_DIR (default build/torch-tests), fetched there with apt-get source
# when absent (tests/torch_tests.sh says so). TORCH_SUITE_ARGS: the runner's
# options (--only Class.test ..., --timeout S, --json FILE).
TORCH_TEST_DIR ?= $(B)/torch-tests
test-torch-suite: all
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="python3-torch python3-numpy python3-pytest"
	$(Q)dir=$$(sh tests/torch_tests.sh "$(TORCH_TEST_DIR)") && \
		GOLDMINER_LIB="$(abspath $(B))/libgoldminer.so" $(or $(GM_PYTHON),/usr/bin/python3) \
		tests/python/torch_suite.py "$$dir/test_dataloader.py" $(TORCH_SUITE_ARGS)

# torchvision's reference references/classification/train.py (the installed
# torchvision's version, from Debian's source: tests/torchvision_train.sh fetches
# it into $(B)/torchvision-ref, never into the repository) on a small ImageFolder,
# plain and under goldminer run: the same exit status and stdout lines, the C path
# for the default recipe, hybrid with --auto-augment ta_wide --random-erase 0.1.
# About a minute; not in make test (it fetches, and trains a model).
test-torchvision-train: all
	$(Q)B=$(B) sh tests/run.sh tests/torchvision_train.sh

SAN_B := build-san
# A test binary that runs past 150 s is stopped and run again, up to 2 times: the
# node agent's pools fork workers from their coordinator threads, and GCC 12's
# ASan allocator does not take its locks around fork(), so a worker forked while
# another thread allocates can wait for ever on a lock nobody will release (seen
# in test_node: the child in SizeClassAllocator64::GetFromAllocator). glibc's
# malloc, which a release build uses, resets its locks in the child. A real
# deadlock times out every time and fails. A test that fails runs again once
# (TEST_RETRY_FAIL): the time bounds of the process tests, beside the other lane
# under ASan on two cores, missed once in a while (stops 55 and 56 of CI);
# the report names the first run's failures, and one that repeats fails.
sanitize:
	$(Q)TEST_BIN_TIMEOUT=150 TEST_RETRY_TIMEOUT=2 TEST_RETRY_FAIL=1 $(MAKE) $(JOBS) --no-print-directory B=$(SAN_B) CUDA=$(CUDA) UCX=$(UCX) \
		CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		LDFLAGS="-fsanitize=address,undefined" test

# ThreadSanitizer on the tests whose threads share memory: the loader's coordinator
# thread and the consumer, the node agent's threads, workers killed under them.
# TSan ignores the memory accesses of a worker forked from a multi-threaded
# process (it cannot follow a multi-threaded fork), so what it checks is the
# parent's threads; the ring's cross-process accesses are invisible to it.
# tests/tsan.supp: the reports known to be false, one reason per entry.
# A binary takes ~20 s under TSan; after 60 s it is stopped and run again, up to 3
# times: a worker forked from the coordinator thread can deadlock inside TSan's
# runtime (a spin lock of its stack depot held by another thread at fork(); GCC
# 12's libtsan does not take those locks around fork), which stalls a 1-worker
# loader (test_loader's resume test: 1 run in 40 on a quiet machine, 1 in 2 on a
# loaded one). A real deadlock times out every time and fails.
TSAN_B := build-tsan
TSAN_TESTS := $(TSAN_B)/tests/test_ring $(TSAN_B)/tests/test_loader $(TSAN_B)/tests/test_node \
	$(TSAN_B)/tests/test_elastic $(TSAN_B)/tests/test_chaos $(TSAN_B)/tests/test_lease \
	$(TSAN_B)/tests/test_pool
tsan: deps
	$(Q)$(MAKE) $(JOBS) --no-print-directory B=$(TSAN_B) CUDA=0 \
		CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" \
		LDFLAGS="-fsanitize=thread" $(TSAN_TESTS)
	$(Q)TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1 $(TSAN_OPTIONS)" \
		B=$(TSAN_B) TEST_TIMEOUT=60 TEST_RETRY_TIMEOUT=3 sh tests/run.sh $(TSAN_TESTS)

PHOTOS ?=
bench: all $(BENCH_BINS)
	$(Q)B=$(B) PHOTOS="$(PHOTOS)" sh tests/bench/run.sh

DEMO_DATA ?= $(B)/demo-data
demo: deps
	$(Q)$(MAKE) $(JOBS) --no-print-directory all
	$(Q)[ -d "$(DEMO_DATA)" ] || $(B)/goldminer synth "$(DEMO_DATA)" --images 1000
	$(Q)$(B)/goldminer bench "$(DEMO_DATA)" --workers 2 --epochs 5

# libFuzzer (clang): every target explores for FUZZ_SECONDS from a copy of its
# committed corpus (tests/fuzz/corpus/NAME); crashes land in $(FUZZ_B)/crash-NAME/.
# Add a crash input to the corpus once fixed: make test then replays it.
FUZZ_B ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
FUZZ_PLUGIN_OBJS = $(addprefix $(FUZZ_B)/,$(sort $(foreach n,$(FUZZ_NAMES),$(FUZZ_OBJS_$(n)))))
define fuzz_link
	@echo "  FUZZ    $(FUZZ_B)/libfuzzer/$(1)"
	$(Q)clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -std=c11 -D_GNU_SOURCE -Iinclude -Itests/fuzz \
		$(FUZZ_FLAGS_$(1)) -o $(FUZZ_B)/libfuzzer/$(1) tests/fuzz/$(1).c tests/fuzz/util.c \
		$(FUZZ_SRCS_$(1)) $(addprefix $(FUZZ_B)/,$(FUZZ_OBJS_$(1))) $(FUZZ_B)/libgoldminer.a \
		$(FUZZ_LIBS_$(1)) $(LDLIBS)

endef
fuzz-build:
	$(Q)$(MAKE) --no-print-directory B=$(FUZZ_B) CUDA=0 CC=clang \
		CFLAGS="$(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link" $(FUZZ_B)/libgoldminer.a \
		$(FUZZ_PLUGIN_OBJS)
	@mkdir -p $(FUZZ_B)/libfuzzer
	$(foreach n,$(FUZZ_NAMES),$(call fuzz_link,$(n)))
fuzz: deps fuzz-build
	$(Q)rc=0; for n in $(FUZZ_NAMES); do \
		c=$${n#fuzz_}; w=$(FUZZ_B)/corpus/$$c; mkdir -p $$w $(FUZZ_B)/crash-$$c; \
		cp -n tests/fuzz/corpus/$$c/* $$w/ 2>/dev/null; \
		echo "== $$n: $(FUZZ_SECONDS) s from tests/fuzz/corpus/$$c"; \
		$(FUZZ_B)/libfuzzer/$$n -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
			-rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_B)/crash-$$c/ $$w tests/fuzz/corpus/$$c \
			2>$(FUZZ_B)/$$n.log || { rc=1; echo "!! $$n found a failure:"; \
			grep -A30 'ERROR\|==ERROR\|deadly\|SUMMARY' $(FUZZ_B)/$$n.log | head -40; }; \
		grep -E '^stat::(number_of_executed_units|new_units_added)' $(FUZZ_B)/$$n.log; \
	done; exit $$rc
fuzz-seeds: $(B)/libgoldminer.a $(addprefix $(B)/,$(sort $(foreach n,$(FUZZ_NAMES),$(FUZZ_OBJS_$(n)))))
	$(Q)$(CC) $(CFLAGS) -o $(B)/gen-jpeg-seeds tests/fuzz/gen-jpeg-seeds.c $(B)/libgoldminer.a \
		$(LDFLAGS) $(LDLIBS)
	$(Q)mkdir -p tests/fuzz/corpus/jpeg && $(B)/gen-jpeg-seeds tests/fuzz/corpus/jpeg
	$(Q)mkdir -p tests/fuzz/corpus/huff && $(B)/gen-jpeg-seeds tests/fuzz/corpus/huff huff
	$(Q)$(foreach n,$(filter fuzz_ctl fuzz_peermsg,$(FUZZ_NAMES)),\
		$(CC) $(CFLAGS) $(FUZZ_FLAGS_$(n)) -DGM_FUZZ_SEEDS -Itests/fuzz -o $(B)/seeds-$(n) \
			tests/fuzz/$(n).c tests/fuzz/util.c $(FUZZ_SRCS_$(n)) \
			$(addprefix $(B)/,$(FUZZ_OBJS_$(n))) $(B)/libgoldminer.a $(FUZZ_LIBS_$(n)) \
			$(LDFLAGS) $(LDLIBS) && mkdir -p tests/fuzz/corpus/$(n:fuzz_%=%) && \
		$(B)/seeds-$(n) tests/fuzz/corpus/$(n:fuzz_%=%) &&) :

# The GPU decode's kernels (core/coef_kernels.cu: coef_math.h's and finish_math.h's arithmetic through
# nvcc, -fmad=false: the C build's float bits), their plugin (libgoldminer-cuda.so, in
# `all` where nvcc is, see CUDA_PLUGIN) and their device check (tests/gpu/coef_check.c,
# run by tests/gpu/check.sh): `make coef-cuda` compiles the check and the plugin where
# the toolkit is (CI does), needing no device.
# Ampere and Hopper machine code, and Hopper PTX for later devices (CUDA 13 has no
# target older than Turing).
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
$(B)/cuda/coef_kernels.o: core/coef_kernels.cu core/coef_math.h core/finish_math.h \
		core/coef_cuda.h include/goldminer/coef.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) -std=c++17 -O2 -fmad=false -Iinclude -Icore -DGM_VERSION='"$(VERSION)"' \
		$(NVCC_ARCH) -Xcompiler -fPIC,-Wall $(if $(filter 1,$(WERROR)),-Werror all-warnings) \
		-c -o $@ $<
# The plugin: the kernels and their table (gm_coef_cuda_plugin, its only export),
# linking libgoldminer.so (found beside it: $$ORIGIN) for gm_coef_planes_bytes,
# as the remote plugin does.
$(B)/libgoldminer-cuda.so: $(B)/cuda/coef_kernels.o $(B)/libgoldminer.so core/coef_cuda.map \
		$(FLAGS_STAMP)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -shared -Wl,--version-script=core/coef_cuda.map -Wl,-rpath,'$$ORIGIN' \
		-o $@ $(B)/cuda/coef_kernels.o $(B)/libgoldminer.so $(LDFLAGS) -L$(CUDA_HOME)/lib64 \
		-Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
$(B)/cuda/coef_check: tests/gpu/coef_check.c $(B)/cuda/coef_kernels.o $(B)/libgoldminer.a \
		$(FLAGS_STAMP)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(B)/cuda/coef_kernels.o $(B)/libgoldminer.a $(LDFLAGS) \
		$(LDLIBS) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lstdc++
coef-cuda:
	$(Q)if [ -x "$(NVCC)" ]; then $(MAKE) --no-print-directory $(B)/cuda/coef_check \
		$(B)/libgoldminer-cuda.so; \
	else echo "coef-cuda: no nvcc at $(NVCC) (CUDA_HOME=$(CUDA_HOME)): nothing compiled"; fi

# A build for a GPU machine that has no package registry (tests/gpu/check.sh there):
# CUDA on, and the Debian shared libraries it links (liburing, libjpeg, libcudart)
# copied into $(GPU_B)/lib, found through an $$ORIGIN/lib run path (libgoldminer.so
# itself stays beside the binary, found through its $$ORIGIN).
GPU_B ?= build-gpu
gpu-bundle: deps
	$(Q)$(MAKE) --no-print-directory B=$(GPU_B) CUDA=1 LDFLAGS='-Wl,-rpath,\$$$$ORIGIN/lib' all \
		$(GPU_B)/cuda/coef_check
	$(Q)mkdir -p $(GPU_B)/lib && for f in $$(ldd $(GPU_B)/goldminer | awk '$$3 ~ /^\// && \
		$$1 !~ /^(libc|libm|libpthread|libdl|librt|libgoldminer|ld-linux[^ ]*)\.so/ {print $$3}'); do \
		cp -L "$$f" $(GPU_B)/lib/; done
	$(Q)ls $(GPU_B)/lib && readelf -d $(GPU_B)/libgoldminer.so | grep -i 'runpath\|rpath'

plots:
	$(Q)SIM_OUT=$(B)/sim-experiments sh plots/make-plots.sh

sim-experiments: all
	$(Q)[ -n "$(TRACES)" ] || [ -f traces/public/alibaba-gpu-v2023/openb_pod_list_default.csv ] || \
		$(MAKE) --no-print-directory traces
	$(Q)B=$(B) sh sim/experiments.sh

# The public traces into traces/public, verified against traces/SHA256SUMS: from a
# local mirror when one sits beside the clone (TRACES_FROM; the project's machines
# have ../shared/traces), else from the network.
TRACES_FROM ?= $(if $(wildcard ../shared/traces/SHA256SUMS),../shared/traces,)
traces:
	$(Q)sh traces/download.sh $(if $(TRACES_FROM),--from $(TRACES_FROM)) traces/public

DEB_PKGS := liburing-dev libjpeg62-turbo-dev libturbojpeg0-dev libcmocka-dev gnuplot-nox pkg-config \
	libmicrohttpd-dev libucx-dev libssl-dev openssl iproute2 strace \
	python3-venv python3-setuptools python3-wheel python3-cloudpickle
# What traces/measure-profiles.sh needs beyond make deps (goldminer profile --class
# nlp, speech, recsys, vit): NumPy, SciPy, soundfile, torchvision and the audio it
# decodes. Not in deps: make test must also pass without NumPy (.ci/run stage 1).
PROFILE_PKGS := python3-numpy python3-scipy python3-soundfile python3-torchvision \
	sound-theme-freedesktop
profile-deps:
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="$(PROFILE_PKGS)"

deps:
	$(Q)missing=""; for p in $(DEB_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then s=""; else s=sudo; fi; \
		$$s apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq $$missing >/dev/null; \
	fi

# clang-format: Debian's 14 (other versions format some constructs differently).
CLANG_FORMAT ?= $(shell command -v clang-format-14 2>/dev/null || echo clang-format)
FORMAT_SRCS = $(sort $(wildcard core/*.[ch] core/remote/*.[ch] core/probe/*.c sim/*.[ch] cmd/*.[ch] \
	include/goldminer/*.h tests/*.c tests/ucx/*.[ch]))
format:
	$(CLANG_FORMAT) -i $(FORMAT_SRCS)
# Lists every file clang-format would change, with its number of changed lines.
format-check: lint-deps
	$(Q)n=0; for f in $(FORMAT_SRCS); do \
		if ! $(CLANG_FORMAT) "$$f" | cmp -s "$$f" -; then \
			echo "  would change: $$f ($$($(CLANG_FORMAT) "$$f" | diff "$$f" - | grep -c '^<') lines)"; \
			n=$$((n + 1)); \
		fi; \
	done; \
	if [ $$n != 0 ]; then echo "format-check: $$n files would change (make format)"; exit 1; fi; \
	echo "format-check: $(words $(FORMAT_SRCS)) files, none would change"

# Lint: cppcheck over every C file (library, commands, tests, fuzz targets and
# benchmarks) in the configuration the build uses (_GNU_SOURCE), every #if branch
# of the rest; shellcheck over every script; pyflakes (Debian's pyflakes3: unused
# imports and variables, undefined names, redefinitions) over every Python file:
# the package, its tests, the benchmarks and the examples. A finding that is a
# false positive is silenced where it is, with a reason: // cppcheck-suppress ID
# (C) or # shellcheck disable=SCnnnn (scripts); pyflakes has no such comment: a
# name a module imports for others goes in its __all__. mypy (Debian's
# python3-mypy, run by /usr/bin/python3) checks the public API's type hints: the
# modules a trainer imports (MYPY_SRCS) and what they import of the package, not
# torch's or NumPy's sources (python/pyproject.toml, [tool.mypy]); its cache under
# $(B)/mypy-cache.
CPPCHECK_FLAGS := --enable=warning,performance,portability --inline-suppr --error-exitcode=1 \
	--std=c11 -D_GNU_SOURCE --force -Iinclude -Icmd -Itests -Itests/fuzz --quiet \
	--template='{file}:{line}: {severity} ({id}): {message}'
SHELL_SCRIPTS = $(sort $(shell find . -name '*.sh' -not -path './build*' -not -path './.git/*') \
	$(wildcard .ci/run))
PY_SRCS = $(sort $(shell find . -name '*.py' -not -path './build*' -not -path './.git/*'))
MYPY_SRCS = python/goldminer/loader.py python/goldminer/torch.py python/goldminer/dataloader.py
lint: lint-deps
	$(Q)rc=0; echo "  CPPCHECK core sim cmd tests"; \
	cppcheck $(CPPCHECK_FLAGS) core sim cmd tests || rc=1; \
	echo "  SHELLCHECK $(words $(SHELL_SCRIPTS)) scripts"; \
	shellcheck $(SHELL_SCRIPTS) || rc=1; \
	echo "  PYFLAKES $(words $(PY_SRCS)) Python files"; \
	pyflakes3 $(PY_SRCS) || rc=1; \
	echo "  MYPY $(words $(MYPY_SRCS)) modules"; \
	/usr/bin/python3 -m mypy --config-file python/pyproject.toml --cache-dir $(B)/mypy-cache \
		$(MYPY_SRCS) || rc=1; \
	if [ $$rc = 0 ]; then echo "lint: clean"; else echo "lint: findings above"; fi; exit $$rc

# The tools of format-check and lint (a developer/CI stage: make test does not need them).
LINT_PKGS := cppcheck shellcheck clang-format pyflakes3 python3-mypy
lint-deps:
	$(Q)$(MAKE) --no-print-directory deps DEB_PKGS="$(LINT_PKGS)"

# make install [PREFIX=/usr/local] [DESTDIR=]: the command, the shared library
# (libgoldminer.so.VERSION, SONAME libgoldminer.so.MAJOR, the dev symlink), the
# static library, the headers, goldminer.pc and the goldminer(1) man page.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PC_LIBS_PRIVATE := -lm -pthread $(if $(filter 1,$(CUDA)),-L$(CUDA_HOME)/lib64 -lcudart)
PC_REQUIRES_PRIVATE := $(PKGS)
$(B)/goldminer.pc: Makefile
	$(Q)printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
		'Name: goldminer' \
		'Description: stateless JPEG data workers feeding shared-memory rings pinned for GPU DMA' \
		'Version: $(VERSION)' 'Requires.private: $(PC_REQUIRES_PRIVATE)' \
		'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lgoldminer' \
		'Libs.private: $(PC_LIBS_PRIVATE)' 'Cflags: -I$${includedir}' >$@
# The headers installed: every public header but those whose functions
# libgoldminer.so does not export (NOINST_HDRS): remote.h, the interface between
# the agent and the remote-workers plugin (gm_remote_plugin is the plugin's,
# which a UCX=0 build has not; no program but goldminer loads or implements it).
# tests/test_install.sh checks the rule: every function an installed header
# declares is exported (nm -D), every header an installed header includes is
# installed.
NOINST_HDRS := include/goldminer/remote.h
INSTALL_HDRS := $(filter-out $(NOINST_HDRS),$(sort $(wildcard include/goldminer/*.h)))
$(B)/goldminer.1: $(B)/goldminer cmd/mkman.sh
	$(Q)sh cmd/mkman.sh $(B)/goldminer >$@
install: all $(B)/goldminer.pc $(B)/goldminer.1
	$(Q)d="$(DESTDIR)"; set -e; \
	install -d "$$d$(PREFIX)/bin" "$$d$(LIBDIR)/pkgconfig" "$$d$(INCLUDEDIR)/goldminer" \
		"$$d$(MANDIR)/man1"; \
	install -m 755 $(B)/goldminer "$$d$(PREFIX)/bin/goldminer"; \
	install -m 755 $(B)/libgoldminer.so "$$d$(LIBDIR)/libgoldminer.so.$(VERSION)"; \
	ln -sf libgoldminer.so.$(VERSION) "$$d$(LIBDIR)/libgoldminer.so.$(SOMAJOR)"; \
	ln -sf libgoldminer.so.$(SOMAJOR) "$$d$(LIBDIR)/libgoldminer.so"; \
	install -m 644 $(B)/libgoldminer.a "$$d$(LIBDIR)/libgoldminer.a"; \
	if [ -f $(B)/libgoldminer-remote.so ]; then \
		install -m 755 $(B)/libgoldminer-remote.so "$$d$(LIBDIR)/libgoldminer-remote.so"; fi; \
	if [ -f $(B)/libgoldminer-cuda.so ]; then \
		install -m 755 $(B)/libgoldminer-cuda.so "$$d$(LIBDIR)/libgoldminer-cuda.so"; fi; \
	install -m 644 $(INSTALL_HDRS) "$$d$(INCLUDEDIR)/goldminer/"; \
	install -m 644 $(B)/goldminer.pc "$$d$(LIBDIR)/pkgconfig/goldminer.pc"; \
	install -m 644 $(B)/goldminer.1 "$$d$(MANDIR)/man1/goldminer.1"; \
	install -d "$$d$(LIBDIR)/goldminer/python/goldminer"; \
	install -m 644 python/goldminer/*.py "$$d$(LIBDIR)/goldminer/python/goldminer/"; \
	install -d "$$d$(LIBDIR)/goldminer/python/goldminer/tools"; \
	install -m 644 python/goldminer/tools/*.py "$$d$(LIBDIR)/goldminer/python/goldminer/tools/"; \
	install -d "$$d$(LIBDIR)/goldminer/python/goldminer/_site"; \
	install -m 644 python/goldminer/_site/sitecustomize.py \
		"$$d$(LIBDIR)/goldminer/python/goldminer/_site/"; \
	echo "installed goldminer $(VERSION) under $$d$(PREFIX)"
uninstall:
	$(Q)d="$(DESTDIR)"; rm -f "$$d$(PREFIX)/bin/goldminer" "$$d$(LIBDIR)/libgoldminer.so" \
		"$$d$(LIBDIR)/libgoldminer.so.$(SOMAJOR)" "$$d$(LIBDIR)/libgoldminer.so.$(VERSION)" \
		"$$d$(LIBDIR)/libgoldminer.a" "$$d$(LIBDIR)/pkgconfig/goldminer.pc" \
		"$$d$(LIBDIR)/libgoldminer-remote.so" "$$d$(LIBDIR)/libgoldminer-cuda.so" \
		"$$d$(MANDIR)/man1/goldminer.1"; rm -rf "$$d$(INCLUDEDIR)/goldminer" \
		"$$d$(LIBDIR)/goldminer"

# Every build folder this Makefile makes; $(B) too, and any build* folder here,
# when a build made it (it holds build-flags: clean never removes a folder it did
# not make), such as CI's build-werror.
BUILD_DIRS := $(sort build $(SAN_B) $(TSAN_B) $(FUZZ_B) $(GPU_B) \
	$(if $(wildcard $(B)/build-flags),$(B)) $(patsubst %/build-flags,%,$(wildcard build*/build-flags)))
clean:
	rm -rf $(BUILD_DIRS)

# The flags stamp: one line recording what changes the objects and binaries (the
# compiler, the flags, CUDA, UCX, the libraries' pkg-config flags, the command's
# run path). Every object and binary depends on it; it is rewritten, and so
# everything rebuilt, only when that line changes. It is compared here and written
# by its rule, so that make -q/-n report a change without writing it. It stays last,
# below every variable it records. A sanitizer build has its own B and CFLAGS. A
# change to UCX=0 also removes the plugin an earlier build left (it would be
# installed and loaded, stale).
FLAGS_NOW := CC=$(CC) CFLAGS=$(CFLAGS) LDFLAGS=$(LDFLAGS) LDLIBS=$(LDLIBS) CUDA=$(CUDA) \
	UCX=$(UCX) UCX_CFLAGS=$(UCX_CFLAGS) UCX_LIBS=$(UCX_LIBS) MHD_CFLAGS=$(MHD_CFLAGS) \
	MHD_LIBS=$(MHD_LIBS) CRYPTO_CFLAGS=$(CRYPTO_CFLAGS) CRYPTO_LIBS=$(CRYPTO_LIBS) \
	BIN_RPATH=$(BIN_RPATH) HUFF_PROBE_FAIL=$(HUFF_PROBE_FAIL) CUDA_PLUGIN=$(CUDA_PLUGIN)
ifneq ($(strip $(file <$(FLAGS_STAMP))),$(strip $(FLAGS_NOW)))
$(FLAGS_STAMP): flags-changed
endif
.PHONY: flags-changed
$(FLAGS_STAMP):
	@mkdir -p $(@D)
	@printf '%s\n' '$(subst ','\'',$(strip $(FLAGS_NOW)))' >$@
	$(if $(REMOTE_PLUGIN),,@rm -f $(B)/libgoldminer-remote.so)
	$(if $(CUDA_PLUGIN),,@rm -f $(B)/libgoldminer-cuda.so)

-include $(LIB_OBJS:.o=.d) $(REMOTE_OBJS:.o=.d) $(B)/tests/ucx/ucx.d $(REMOTE_MIS_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_BINS:=.d) $(BENCH_BINS:=.d) $(FUZZ_BINS:=.d)
