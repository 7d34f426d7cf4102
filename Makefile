# gradtrace: one Makefile for the agent, the daemon, the CLI, tests, fuzzers,
# benchmarks and the CUDA workloads.
#
#   make [all]        libgradtrace.so(.1), gradtraced, gradtrace (+ kernels/ with nvcc)
#   make test         installs missing deps, builds, runs unit + fuzz corpus + e2e
#   make demo         profiles the bundled example and prints where the output is
#   make bench        builds and runs tests/bench/, printing figures
#   make fuzz         builds libFuzzer targets (clang)
#   make tsan         the agent's rings and streamer under ThreadSanitizer
#   make analyze      cppcheck over the project's code (must be clean)
#   make soak         the long reliability loops (1000 daemon kills, ...)
#   make install      PREFIX=/usr/local; DESTDIR honoured
#   make SANITIZER=address|undefined|thread|address,undefined ...
#
# Sources are found by wildcard, so adding a file needs no edit here:
#   common/*.c               codec and utilities, shared     -> libgtcommon.a
#   agent/*.c                the injected agent              -> libgradtrace.so.1
#   daemon/convert/*.c       the converter library           -> libgtconvert.a
#   daemon/control/*.c       the control protocol            -> libgtcontrol.a
#   daemon/server/*.c        gradtraced (main.c: its main)   -> libgtserver.a
#   daemon/cli/*.c           gradtrace (main.c: its main)    -> libgtcli.a
#   tests/unit/test_*.c      one Criterion binary
#   tests/e2e/t_*.sh         end-to-end scripts (tests/e2e/run.sh)
#   tests/fuzz/fuzz_*.c      libFuzzer targets + corpus replay in make test
#   tests/bench/bench_*.c    benchmarks
#   tests/progs/*.c          helper programs for e2e tests and benches

CC ?= cc
CLANG ?= clang
PYTHON ?= /usr/bin/python3
PREFIX ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wformat=2 -Wvla -Wpointer-arith -Wcast-align
ifdef CI
WARN += -Werror
endif

OPT ?= -O2
CFLAGS_BASE := -std=c11 $(OPT) -g $(WARN) -fno-strict-aliasing
CPPFLAGS_BASE := -D_GNU_SOURCE -Iinclude -I. -MMD -MP

ifdef SANITIZER
SAN_FLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
BUILD ?= build-$(subst $(comma),-,$(SANITIZER))
else
SAN_FLAGS :=
BUILD ?= build
endif
comma := ,

CFLAGS := $(CFLAGS_BASE) $(SAN_FLAGS) $(EXTRA_CFLAGS)
CPPFLAGS := $(CPPFLAGS_BASE) $(EXTRA_CPPFLAGS)
LDFLAGS := $(SAN_FLAGS) $(EXTRA_LDFLAGS)

PKGS := libuv libcjson libzstd
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -luv -lcjson -lzstd)
CLI_LIBS = $(shell pkg-config --libs libcjson libzstd 2>/dev/null || echo -lcjson -lzstd)

COMMON_SRC := $(wildcard common/*.c)
AGENT_SRC := $(wildcard agent/*.c)
CONVERT_SRC := $(wildcard daemon/convert/*.c)
CONTROL_SRC := $(wildcard daemon/control/*.c)
SERVER_SRC := $(filter-out daemon/server/main.c,$(wildcard daemon/server/*.c))
CLI_SRC := $(filter-out daemon/cli/main.c,$(wildcard daemon/cli/*.c))
UNIT_SRC := $(wildcard tests/unit/*.c)
PROG_SRC := $(wildcard tests/progs/*.c)
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
CUDA_SRC := $(wildcard kernels/*.cu)

COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/pic/%.o)
AGENT_OBJ := $(AGENT_SRC:%.c=$(BUILD)/pic/%.o)
# The agent's constructor and injection entry points stay out of the static
# archive that tests link, so a test binary never starts a streamer.
AGENT_ENTRY := $(BUILD)/pic/agent/ctor.o
AGENT_LIB_OBJ := $(filter-out $(AGENT_ENTRY),$(AGENT_OBJ))
CONVERT_OBJ := $(CONVERT_SRC:%.c=$(BUILD)/obj/%.o)
CONTROL_OBJ := $(CONTROL_SRC:%.c=$(BUILD)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)
PROG_BIN := $(PROG_SRC:tests/progs/%.c=$(BUILD)/progs/%)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz-replay/%)
CUDA_BIN := $(if $(NVCC),$(CUDA_SRC:kernels/%.cu=$(BUILD)/kernels/%))
TORCH_PROG_BIN := $(if $(wildcard /usr/include/ATen/ATen.h),$(patsubst tests/progs/%.cpp,$(BUILD)/progs/%,$(wildcard tests/progs/*.cpp)))

LIBCOMMON := $(BUILD)/libgtcommon.a
LIBAGENT_TEST := $(BUILD)/libgtagent.a
LIBCONVERT := $(BUILD)/libgtconvert.a
LIBCONTROL := $(BUILD)/libgtcontrol.a
LIBSERVER := $(BUILD)/libgtserver.a
LIBCLI := $(BUILD)/libgtcli.a
# Every archive a test or benchmark may need, in link order.
LIBS_ALL := $(LIBSERVER) $(LIBCLI) $(LIBCONVERT) $(LIBCONTROL) $(LIBAGENT_TEST) $(LIBCOMMON)
# The agent: the real file carries the soname's major version (the API's
# GT_API_VERSION_MAJOR); AGENT_SO, the unversioned link to it, is the path
# LD_PRELOAD, the tests and `gradtrace record` use.
AGENT_SONAME := libgradtrace.so.1
AGENT_SO_REAL := $(BUILD)/$(AGENT_SONAME)
AGENT_SO := $(BUILD)/libgradtrace.so
PROGRAMS := $(BUILD)/gradtraced $(BUILD)/gradtrace
UNIT_BIN := $(BUILD)/unit-tests

.PHONY: check-layers all test unit e2e fuzz fuzz-regress bench demo deps install uninstall clean kernels \
        tsan analyze soak pyext pyunit
.DEFAULT_GOAL := all

all: $(AGENT_SO) $(PROGRAMS) $(PROG_BIN) $(CUDA_BIN) $(TORCH_PROG_BIN) pyext

# The module hooks in C (python/gradtrace/_hooks.c -> _gthooks<EXT_SUFFIX>
# beside the package), once per interpreter ABI with headers: $(PYTHON)
# (torch 1.13) and the torch 2.x venv's. Never sanitized: it loads into
# a plain python. Where it is missing the package uses its Python hooks.
TORCH2_PY ?= $(wildcard $(HOME)/.cache/gradtrace/torch2-venv/bin/python)
pyext:
	@scripts/build-pyext.sh "$(CC)" "$(CFLAGS_BASE)" $(PYTHON) $(TORCH2_PY)

# The Python package's own tests (tests/python: its rules, without the
# agent), with each interpreter the C hooks are built for.
pyunit: pyext
	@scripts/run-pyunit.sh $(PYTHON) $(TORCH2_PY)

deps:
	@scripts/install-deps.sh --quiet

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -c $< -o $@

# agent/torch.c and agent/torch_comm.c sit between C++ frames of libtorch:
# exceptions thrown by the real functions unwind through their hooks and
# must run their cleanups.
$(BUILD)/pic/agent/torch.o $(BUILD)/pic/agent/torch_comm.o: CFLAGS += -fexceptions

$(LIBCOMMON): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBAGENT_TEST): $(AGENT_LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBCONVERT): $(CONVERT_OBJ)
$(LIBCONTROL): $(CONTROL_OBJ)
$(LIBSERVER): $(SERVER_OBJ)
$(LIBCLI): $(CLI_OBJ)
$(LIBCONVERT) $(LIBCONTROL) $(LIBSERVER) $(LIBCLI):
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The agent loads into any process: everything hidden but the public API and
# the injection entry points named in the version script.
$(AGENT_SO_REAL): $(AGENT_OBJ) $(COMMON_OBJ) agent/libgradtrace.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=agent/libgradtrace.map \
	  -Wl,-z,defs -Wl,-soname,$(AGENT_SONAME) -o $@ $(AGENT_OBJ) $(COMMON_OBJ) -lzstd -ldl -lpthread

$(AGENT_SO): $(AGENT_SO_REAL)
	ln -sfn $(AGENT_SONAME) $@

# The daemon links the server, the converter and the control protocol; the
# CLI links the converter and the control protocol, never libuv.
$(BUILD)/gradtraced: $(BUILD)/obj/daemon/server/main.o $(LIBSERVER) $(LIBCONVERT) $(LIBCONTROL) $(LIBCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lpthread -lm

$(BUILD)/gradtrace: $(BUILD)/obj/daemon/cli/main.o $(LIBCLI) $(LIBCONVERT) $(LIBCONTROL) $(LIBCOMMON)
	$(CC) $(LDFLAGS) -o $@ $^ $(CLI_LIBS) -lpthread -lm

$(UNIT_BIN): $(UNIT_OBJ) $(LIBS_ALL)
	$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJ) $(LIBS_ALL) -lcriterion $(PKG_LIBS) -ldl -lpthread -lm

$(BUILD)/progs/%: tests/progs/%.c $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -Wno-missing-prototypes -o $@ $< \
	  $(LIBCOMMON) $(PKG_LIBS) -ldl -lpthread -lm

# CUDA toolkit headers/runtime for the CUDA/NVTX tests and test programs
# (tests/unit/test_cupti.c, tests/progs/cuda_*.c, tests/progs/nvtx_*.c);
# without a toolkit they build and skip themselves. The agent never uses them.
CUDA_INC := $(if $(wildcard $(CUDA_HOME)/include/cupti.h),-I$(CUDA_HOME)/include)
CUDA_RT_LIBS := $(if $(wildcard $(CUDA_HOME)/lib64/libcudart.so),-L$(CUDA_HOME)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA_HOME)/lib64 -lcudart)
$(BUILD)/obj/tests/unit/test_cupti.o $(BUILD)/obj/tests/unit/test_nvtx.o: CPPFLAGS += $(CUDA_INC)
$(BUILD)/progs/capi_layers: CPPFLAGS += $(CUDA_INC)
# Exports its stand-ins for libtorch's RecordFunction to the agent.
$(BUILD)/progs/fake_recfn: CFLAGS += -rdynamic

$(BUILD)/progs/cuda_%: tests/progs/cuda_%.c $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CUDA_INC) $(if $(CUDA_RT_LIBS),-DGT__HAVE_CUDART=1) $(PKG_CFLAGS) $(CFLAGS) \
	  -Wno-missing-prototypes -o $@ $< $(LIBCOMMON) $(PKG_LIBS) $(CUDA_RT_LIBS) -ldl -lpthread -lm

$(BUILD)/progs/nvtx_%: tests/progs/nvtx_%.c $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CUDA_INC) $(PKG_CFLAGS) $(CFLAGS) -Wno-missing-prototypes -o $@ $< \
	  $(LIBCOMMON) $(PKG_LIBS) -ldl -lpthread -lm

# libtorch C++ test programs (tests/progs/*.cpp, Debian's libtorch-dev),
# built once when its headers are there; NVTX from the toolkit's nvtx3
# headers when present (tests/progs/nvtx_client.h). Without libtorch-dev the tests using them skip
# (TORCH_PROG_BIN, above, is empty).
$(BUILD)/progs/%: tests/progs/%.cpp tests/progs/nvtx_client.h include/gradtrace/gradtrace_shim.h include/gradtrace/gradtrace.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -Wall -Wextra -D_GLIBCXX_USE_CXX11_ABI=1 $(if $(wildcard $(CUDA_HOME)/include/nvtx3),-I$(CUDA_HOME)/include) \
	  -Iinclude -I. -o $@ $< -ltorch_cpu -lc10 -ldl

$(BUILD)/bench/%: tests/bench/%.c $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -Wno-missing-prototypes -o $@ $< \
	  $(LIBS_ALL) $(PKG_LIBS) -ldl -lpthread -lm

# libFuzzer targets (clang) and the same targets linked with a replay main
# that runs the checked-in corpus in make test without libFuzzer.
# Each target compiles only the room it exercises: the control fuzzer the
# control protocol, the others the converter (which the codec targets
# leave unused); none compiles the server.
FUZZ_CFLAGS := -std=c11 -g -O1 -D_GNU_SOURCE -Iinclude -I. -fsanitize=fuzzer,address,undefined
fuzz_room = $(if $(findstring fuzz_control,$(1)),$(CONTROL_SRC),$(CONVERT_SRC))
fuzz_lib = $(if $(findstring fuzz_control,$(1)),$(LIBCONTROL),$(LIBCONVERT))
.SECONDEXPANSION:
$(BUILD)/fuzz/%: tests/fuzz/%.c $(COMMON_SRC) $$(call fuzz_room,$$*)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) $(PKG_CFLAGS) -o $@ $< $(COMMON_SRC) $(call fuzz_room,$*) $(PKG_LIBS) -lpthread -lm

$(BUILD)/fuzz-replay/%: tests/fuzz/%.c tests/fuzz/replay.c $$(call fuzz_lib,$$*) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -Wno-missing-prototypes -o $@ $< tests/fuzz/replay.c \
	  $(call fuzz_lib,$*) $(LIBCOMMON) $(PKG_LIBS) -lpthread -lm

# Static cudart (nvcc's default) so the binaries need only the driver;
# SASS for Hopper plus PTX for everything since Turing.
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75
$(BUILD)/kernels/%: kernels/%.cu $(wildcard kernels/*.h) include/gradtrace/gradtrace_shim.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 $(NVCC_ARCH) -I$(CUDA_HOME)/include -Iinclude -o $@ $< -ldl

kernels: $(CUDA_BIN)

# LeakSanitizer (SANITIZER=address) reports a few allocations of Criterion's
# own runner; tests/lsan.supp silences those and nothing else.
unit: $(UNIT_BIN)
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 $(UNIT_BIN) --jobs 2

fuzz: $(FUZZ_BIN)

fuzz-regress: $(FUZZ_REPLAY)
	@export LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0; \
	for t in $(FUZZ_REPLAY); do n=$$(basename $$t); \
	  $$t tests/fuzz/corpus/$$n || exit 1; done

e2e: all
	BUILD=$(BUILD) PYTHON=$(PYTHON) tests/e2e/run.sh

# The tree's shape: rooms include and call only what they may, no loop
# between files, no header declaring another room's functions, no function
# over 100 lines or file over 800, no prototype in a .c file
# (scripts/check-layers.py says how; it reads the objects with nm, and its
# self-test proves each rule fails on a tree that breaks it).
LAYER_OBJ := $(COMMON_OBJ) $(AGENT_OBJ) $(CONVERT_OBJ) $(CONTROL_OBJ) $(SERVER_OBJ) $(CLI_OBJ) \
  $(BUILD)/obj/daemon/server/main.o $(BUILD)/obj/daemon/cli/main.o
check-layers: $(LAYER_OBJ)
	@python3 tests/tools/test_check_layers.py
	@python3 scripts/check-layers.py --objects $(BUILD)

test: deps
	$(MAKE) all
	$(MAKE) check-layers
	$(MAKE) unit
	$(MAKE) pyunit
	$(MAKE) fuzz-regress
	$(MAKE) e2e

# ThreadSanitizer over the agent with real threads (tests/tsan/run.sh says
# why not Criterion): a TSan agent and workload, and a TSan daemon (its
# loop and conversion pool).
tsan: all
	$(MAKE) SANITIZER=thread build-thread/libgradtrace.so build-thread/progs/agent_threads \
	  build-thread/progs/agent_check build-thread/gradtraced
	TSAN_BUILD=build-thread BUILD=$(BUILD) tests/tsan/run.sh

# Static analysis of the project's code; tests/cppcheck.supp lists the
# false positives, each checked by hand.
CPPCHECK ?= cppcheck
analyze:
	$(CPPCHECK) -q --enable=warning,portability --error-exitcode=1 --inline-suppr \
	  --std=c11 -D_GNU_SOURCE -Iinclude -I. --suppress=missingIncludeSystem \
	  --suppressions-list=tests/cppcheck.supp --include=/usr/include/cjson/cJSON.h \
	  common agent daemon

# The long loops behind schema/reliability.md's figures.
soak: all
	GT_KILLS=1000 BUILD=$(BUILD) PYTHON=$(PYTHON) E2E_TIMEOUT=1800 tests/e2e/run.sh t_daemon_kill
	GT_MUTATIONS=3000 BUILD=$(BUILD) PYTHON=$(PYTHON) E2E_TIMEOUT=1800 tests/e2e/run.sh t_mutate
	GT_LOSS_ROUNDS=20 BUILD=$(BUILD) PYTHON=$(PYTHON) E2E_TIMEOUT=1800 tests/e2e/run.sh t_agent_loss
	GT_DISKFULL_LOOPS=20 GT_HOG=1 BUILD=$(BUILD) PYTHON=$(PYTHON) E2E_TIMEOUT=1800 tests/e2e/run.sh t_daemon_diskfull_paced

bench: deps all $(BENCH_BIN)
	BUILD=$(BUILD) PYTHON=$(PYTHON) tests/bench/run.sh

demo: deps all
	BUILD=$(BUILD) PYTHON=$(PYTHON) scripts/demo.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/include/gradtrace $(DESTDIR)$(PREFIX)/share/gradtrace
	install -m 0755 $(PROGRAMS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(AGENT_SO_REAL) $(DESTDIR)$(PREFIX)/lib/
	ln -sfn $(AGENT_SONAME) $(DESTDIR)$(PREFIX)/lib/libgradtrace.so
	install -m 0644 include/gradtrace/*.h $(DESTDIR)$(PREFIX)/include/gradtrace/
	if [ -d python ]; then cp -r python $(DESTDIR)$(PREFIX)/share/gradtrace/; fi
	sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/gradtrace.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/gradtrace.pc

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(PROGRAMS)))
	rm -f $(DESTDIR)$(PREFIX)/lib/libgradtrace.so $(DESTDIR)$(PREFIX)/lib/$(AGENT_SONAME) \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/gradtrace.pc
	rm -rf $(DESTDIR)$(PREFIX)/include/gradtrace $(DESTDIR)$(PREFIX)/share/gradtrace

clean:
	rm -rf build build-*
	rm -f python/gradtrace/_gthooks*.so

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
