# batchgen build. `make` builds build/batchgen (CPU backend always; the CUDA backend too
# when nvcc is found, or with CUDA=1; CUDA=0 leaves it out). `make test` runs the suite
# twice: as built, and built with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-san/. See README.md.

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

CPPFLAGS += -I. -D_GNU_SOURCE -DBG_VERSION='"$(VERSION)"' -DBG_COMMIT='"$(GIT_COMMIT)"'
CFLAGS += -std=c11 -Wall -Wextra -Werror -g -MMD -MP -pthread
LDLIBS += -lcjson -lpcre2-8 -lm -pthread
ifeq ($(SAN),1)
CFLAGS += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
else
CFLAGS += -O2
endif

CORE_SRC := $(wildcard core/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)

ifeq ($(CUDA),1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
GPU_C_SRC := $(filter-out gpu/cuda_absent.c,$(wildcard gpu/*.c))
GPU_CU_SRC := $(wildcard gpu/*.cu)
CPPFLAGS += -DBG_HAVE_CUDA -I$(CUDA_HOME)/include
LDFLAGS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64
LDLIBS += -lcublas -lcudart -lstdc++
else
GPU_C_SRC := gpu/cuda_absent.c
GPU_CU_SRC :=
endif

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
GPU_OBJ := $(GPU_C_SRC:%.c=$(BUILD)/%.o) $(GPU_CU_SRC:%.cu=$(BUILD)/%.cu.o)
LIB := $(BUILD)/libbatchgen.a
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test test-gpu check-one format install clean
all: $(BUILD)/batchgen $(TEST_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(CUDA_ARCH) -I. -DBG_HAVE_CUDA -Xcompiler -Wall,-Wextra -MMD -MP -c $< -o $@

$(LIB): $(CORE_OBJ) $(GPU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/batchgen: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $(CFLAGS) $(CLI_OBJ) $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

# The whole suite, plain and sanitized. The last line is the combined count.
test:
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory all BUILD=build-san SAN=1 CUDA=0
	@set -o pipefail; \
	tests/run.sh $(BUILD) plain | tee $(BUILD)/test-plain.txt; \
	tests/run.sh build-san sanitized | tee build-san/test-san.txt; \
	p=0; f=0; for l in $$(grep -hE '^(plain|sanitized): ' $(BUILD)/test-plain.txt build-san/test-san.txt | sed -E 's/^[a-z]+: ([0-9]+) passed, ([0-9]+) failed.*/\1:\2/'); do \
		p=$$((p + $${l%%:*})); f=$$((f + $${l##*:})); done; \
	echo "$$p passed, $$f failed"; test $$f -eq 0

# GPU tests (need a GPU): the kernels and the whole model against the CPU reference.
test-gpu: all
	@tests/run_gpu.sh $(BUILD)

format:
	clang-format -i $(CORE_SRC) $(CLI_SRC) $(wildcard core/*.h cli/*.h gpu/*.h gpu/*.c gpu/*.cu tests/*.c tests/*.h)

install: $(BUILD)/batchgen
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BUILD)/batchgen $(DESTDIR)$(PREFIX)/bin/batchgen
	install -m 644 man/batchgen.1 $(DESTDIR)$(PREFIX)/share/man/man1/batchgen.1

clean:
	rm -rf build build-san

-include $(wildcard $(BUILD)/*/*.d $(BUILD)/*.d)
