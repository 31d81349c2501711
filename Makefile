# batchgen build. `make` builds build/batchgen (CPU backend always; the CUDA backend too
# when nvcc is found, or with CUDA=1; CUDA=0 leaves it out). `make test` runs the suite
# twice: as built, and built with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-san/. See README.md.

SHELL := /bin/bash
BUILD ?= build
SAN ?= 0
CC ?= cc
PREFIX ?= /usr/local

NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(origin CUDA), undefined)
CUDA := $(if $(and $(NVCC),$(wildcard gpu/*.cu)),1,0)
endif
# Hopper first, then Ampere and Ada; PTX for sm_90 so newer GPUs can JIT.
CUDA_ARCH ?= -gencode arch=compute_90,code=[sm_90,compute_90] \
	-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
	-gencode arch=compute_89,code=sm_89

GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
VERSION := 0.1.0

# One include root for core/ ("model/gguf.h": every include line names its room) and the
# repository root for the programs outside it ("cli/options.h", "gpu/backend_cuda.h").
CPPFLAGS += -Icore -I. -I$(BUILD)/gpu -D_GNU_SOURCE
# -ffp-contract=off: no fused multiply-adds the source did not write. gcc implies it with
# -std=c11, clang does not; bitwise results across ISA levels and backends depend on it.
CFLAGS += -std=c11 -ffp-contract=off -Wall -Wextra -Werror -g -MMD -MP -pthread
LDLIBS += -lcjson -lpcre2-8 -lm -ldl -pthread
ifeq ($(SAN),1)
CFLAGS += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
else
CFLAGS += -O2
endif

CORE_SRC := $(wildcard core/*.c core/*/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

# The CUDA backend is a shared library (gpu/plugin.h says why) that the binary loads at
# run time through gpu/cuda_loader.c; the binary itself links no CUDA library.
ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
GPU_CU_SRC := $(wildcard gpu/*.cu)
GPU_CU_OBJ := $(GPU_CU_SRC:%.cu=$(BUILD)/%.cu.o)
CUDA_PLUGIN := $(BUILD)/libbatchgen-cuda.so
CUDA_LDFLAGS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64
# nvcc warnings (device and host side) are errors, like -Werror for the C code.
NVCCFLAGS := -std=c++17 -O3 $(CUDA_ARCH) -Icore -I. -I$(BUILD)/gpu -Werror all-warnings \
	-Xcompiler -Wall,-Wextra,-Werror,-fPIC
# GPU tests (tests/gpu_test_*.c|cu) and the decode micro-benchmark: built with CUDA only,
# run by `make test-gpu` (tests/run_gpu.sh), never by `make test`.
GPU_TEST_SRC := $(wildcard tests/gpu_test_*.c tests/gpu_test_*.cu)
GPU_TEST_BIN := $(patsubst tests/%.cu,$(BUILD)/tests/%,$(patsubst tests/%.c,$(BUILD)/tests/%,$(GPU_TEST_SRC)))
GPU_BENCH_BIN := $(BUILD)/bench/gpu_decode
else
CUDA_PLUGIN :=
GPU_TEST_BIN :=
GPU_BENCH_BIN :=
endif

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
GPU_OBJ := $(BUILD)/gpu/cuda_loader.o
LIB := $(BUILD)/libbatchgen.a
# Programs take the whole library and export its symbols: the CUDA plugin calls back into
# core/ (bg_fail, gguf_row_bytes, sampler_rng_uniform, ...).
LINK_LIB := -rdynamic -Wl,--whole-archive $(LIB) -Wl,--no-whole-archive
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# Helpers that the e2e scripts run (not tests themselves): built with the build's flags.
TEST_TOOL_BIN := $(BUILD)/tests/ggml_requant
# Benchmark programs (bench/README.md); part of `all`, so that a timed run never takes a
# binary older than the library it measures (`make bench` builds only these).
BENCH_SRC := bench/cpu_decode.c bench/mem_read.c bench/qdot_matmul.c bench/engine_memory.c bench/tokenize_bench.c bench/grammar_mask.c bench/qdot_bench.c bench/host_step.c bench/lse_bench.c
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all bench test test-gpu gpu-progs format install clean FORCE
all: $(BUILD)/batchgen $(CUDA_PLUGIN) $(TEST_BIN) $(TEST_TOOL_BIN) $(BENCH_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The version and commit go into one object, rebuilt every time so they are never stale.
$(BUILD)/cli/version.o: cli/version.c FORCE
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -DBG_VERSION='"$(VERSION)"' -DBG_COMMIT='"$(GIT_COMMIT)"' $(CFLAGS) -c $< -o $@

FORCE:

# The built-in model, stories260K, is not held in the repository: it is read from ../shared
# (or BUILTIN_GGUF), checked against its sha256, copied into the build tree and assembled
# into builtin.o (.incbin, path relative to the repository root); the compiler's .d files do
# not see it, so the dependency is named here (and for the fuzz build below).
BUILTIN_GGUF ?= ../shared/models/stories260K.gguf
BUILTIN_SHA256 := 270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d
BUILTIN_COPY := $(BUILD)/stories260K.gguf
$(BUILTIN_COPY): $(BUILTIN_GGUF)
	@mkdir -p $(dir $@)
	@echo "$(BUILTIN_SHA256)  $<" | sha256sum -c --quiet - >/dev/null 2>&1 || \
		{ echo "batchgen: $< is not stories260K (sha256 $(BUILTIN_SHA256))" >&2; exit 1; }
	install -m 644 $< $@
$(BUILTIN_GGUF):
	@echo "batchgen: the built-in model $@ is missing: put ../shared beside the checkout or" \
		"set BUILTIN_GGUF to stories260K.gguf (sha256 $(BUILTIN_SHA256))" >&2; exit 1
$(BUILD)/core/model/builtin.o: $(BUILTIN_COPY)
$(BUILD)/core/model/builtin.o: CPPFLAGS += -DBG_BUILTIN_GGUF='"$(BUILTIN_COPY)"'

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xptxas -v -MMD -MP -c $< -o $@ 2>$@.ptxas || { cat $@.ptxas >&2; exit 1; }

# The layout of the structs crossing the plugin boundary, as the C compiler sees it
# (gpu/abi_layout.c says why).
ABI_LAYOUT := $(BUILD)/gpu/abi_layout.h
$(ABI_LAYOUT): gpu/abi_layout.c $(wildcard core/*.h core/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $(BUILD)/gpu/abi_layout
	$(BUILD)/gpu/abi_layout >$@.tmp && mv $@.tmp $@
$(BUILD)/gpu/backend_cuda.cu.o $(BUILD)/gpu/cuda_loader.o: $(ABI_LAYOUT)

$(LIB): $(CORE_OBJ) $(GPU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/batchgen: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $(CFLAGS) $(CLI_OBJ) $(LINK_LIB) $(LDLIBS) -o $@

$(CUDA_PLUGIN): $(GPU_CU_OBJ)
	$(CXX) -shared $^ $(CUDA_LDFLAGS) -lcublas -lcudart -o $@

$(BUILD)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LINK_LIB) $(LDLIBS) -o $@

bench: $(BENCH_BIN)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LINK_LIB) $(LDLIBS) -o $@

# The whole suite, plain and sanitized. The last line is the combined count. The GPU
# programs are built too (not run: that is test-gpu), so that a machine with nvcc and no
# GPU still catches a GPU test that no longer compiles. JOBS (default: the processor
# count) compiles and tests run at a time: the tests of both builds share one pool
# (tests/run.sh).
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test:
	@$(MAKE) --no-print-directory -j$(JOBS) gpu-progs
	@$(MAKE) --no-print-directory -j$(JOBS) all BUILD=build-san SAN=1 CUDA=0
	@set -o pipefail; \
	tests/run.sh -j $(JOBS) $(BUILD) plain build-san sanitized | tee $(BUILD)/test.txt; \
	p=0; f=0; for l in $$(grep -hE '^(plain|sanitized): ' $(BUILD)/test.txt | sed -E 's/^[a-z]+: ([0-9]+) passed, ([0-9]+) failed.*/\1:\2/'); do \
		p=$$((p + $${l%%:*})); f=$$((f + $${l##*:})); done; \
	echo "$$p passed, $$f failed"; test $$f -eq 0

# GPU tests (need a GPU): the kernels and the whole model against the CPU reference;
# without a device they print SKIP and "0 passed, 0 failed".
# The kernel test links the kernels' objects directly; the others use the plugin.
$(BUILD)/tests/gpu_test_%: tests/gpu_test_%.cu $(GPU_CU_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $< $(GPU_CU_OBJ) $(LIB) -o $@ -lcublas -lcjson -lpcre2-8 -lm -ldl

$(BUILD)/tests/gpu_test_%: tests/gpu_test_%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LINK_LIB) $(LDLIBS) -o $@

$(BUILD)/bench/gpu_decode: bench/gpu_decode.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(CUDA_HOME)/include $(CFLAGS) $(LDFLAGS) $< $(LINK_LIB) $(LDLIBS) \
		$(CUDA_LDFLAGS) -lcudart -o $@

# Everything a GPU run needs (bench/gpu_session.sh builds this on the GPU machine).
gpu-progs: all $(GPU_TEST_BIN) $(GPU_BENCH_BIN)

test-gpu: gpu-progs
	@tests/run_gpu.sh $(BUILD)

format:
	clang-format -i $(CORE_SRC) $(CLI_SRC) $(wildcard core/*.h core/*/*.h core/*/*.inc cli/*.h gpu/*.h gpu/*.c gpu/*.cu tests/*.c tests/*.h)

install: $(BUILD)/batchgen $(CUDA_PLUGIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/batchgen $(DESTDIR)$(PREFIX)/bin/batchgen
	install -m 644 man/batchgen.1 $(DESTDIR)$(PREFIX)/share/man/man1/batchgen.1
ifneq ($(CUDA_PLUGIN),)
	install -d $(DESTDIR)$(PREFIX)/lib/batchgen
	install -m 755 $(CUDA_PLUGIN) $(DESTDIR)$(PREFIX)/lib/batchgen/
endif

# ---- fuzzing (fuzz/README.md) ----
# `make fuzz` builds the libFuzzer harnesses fuzz/fuzz_*.c with clang under ASan + UBSan
# into build-fuzz/ (core/ and cli/ without main.c are compiled again with coverage
# instrumentation); fuzz/run.sh runs each for a bounded time. FUZZ_DEFS switches on the
# oracles of defects that other branches fix (fuzz/fuzz_util.h).
FUZZ_CC ?= $(shell command -v clang-19 2>/dev/null || echo clang)
FUZZ_DEFS ?=
FUZZ_BUILD := build-fuzz
$(FUZZ_BUILD)/core/model/builtin.o: $(BUILTIN_COPY)
$(FUZZ_BUILD)/core/model/builtin.o: CPPFLAGS += -DBG_BUILTIN_GGUF='"$(BUILTIN_COPY)"'
FUZZ_CFLAGS := -std=c11 -ffp-contract=off -Wall -Wextra -Werror -g -O1 -MMD -MP -pthread -fno-omit-frame-pointer \
	-fsanitize=address,undefined -fno-sanitize-recover=all $(FUZZ_DEFS)
FUZZ_LIB_SRC := $(CORE_SRC) $(filter-out cli/main.c,$(CLI_SRC)) gpu/cuda_loader.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_BIN := $(patsubst fuzz/%.c,$(FUZZ_BUILD)/%,$(wildcard fuzz/fuzz_*.c))

.PHONY: fuzz
fuzz: $(FUZZ_BIN)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_COV) -c $< -o $@

# The grammar matcher compares stack positions, hashes and offsets, never input bytes, in
# loops that run ~10^5 times per input of fuzz_grammar/regex/schema: libFuzzer's
# comparison hooks there were 60-70 % of those harnesses' time and fed its table of
# compared values nothing an input could use. Edge coverage stays. The grammar parser
# (grammar_parse.c) compares input bytes and keeps its hooks.
$(FUZZ_BUILD)/core/sample/grammar.o: FUZZ_COV := -fno-sanitize-coverage=trace-cmp

$(FUZZ_BUILD)/gpu/cuda_loader.o: $(ABI_LAYOUT)

$(FUZZ_BUILD)/libfuzz.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_BUILD)/libfuzz.a
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_BUILD)/libfuzz.a \
		$(LDLIBS) -o $@

clean:
	rm -rf build build-san $(FUZZ_BUILD)

-include $(wildcard $(BUILD)/*/*/*.d $(BUILD)/*/*.d $(BUILD)/*.d)
-include $(wildcard $(FUZZ_BUILD)/*/*/*.d $(FUZZ_BUILD)/*/*.d $(FUZZ_BUILD)/*.d)
