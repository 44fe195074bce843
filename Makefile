# trainbpf: CO-RE BPF programs (bpf/) + user space (user/), one binary.
# Generated files live in $(OUTPUT), never beside the sources.

OUTPUT ?= build
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= gcc
ARCH := x86
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
PREFIX ?= /usr/local
VERSION := 0.1.0

INCLUDES := -Iinclude -Ivmlinux -I$(OUTPUT) -I/usr/include/$(MULTIARCH)
CFLAGS ?= -O2 -g
CFLAGS += -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -std=gnu11 -D_GNU_SOURCE -DTB_VERSION='"$(VERSION)"'
LDLIBS := -lbpf -lelf -lz -lm -lsqlite3
STATIC_LDLIBS := -l:libbpf.a -l:libelf.a -l:libz.a -l:libzstd.a -l:libsqlite3.a -lm

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_HDRS := $(wildcard bpf/*.bpf.h) $(wildcard include/*.h)
SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))
USER_SRCS := $(wildcard user/*.c)
USER_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(USER_SRCS))
LIB_OBJS := $(filter-out $(OUTPUT)/user/trainbpf.o,$(USER_OBJS))

.PHONY: all static check unit integration golden workloads demo install clean vmlinux fuzz
# Keep the BPF object and skeleton: they are outputs, not scratch.
.SECONDARY:
all: $(OUTPUT)/trainbpf

$(OUTPUT) $(OUTPUT)/user $(OUTPUT)/tests:
	mkdir -p $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUTPUT)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) $(INCLUDES) -c $< -o $@
	$(BPFTOOL) gen object $@.linked $@ && mv $@.linked $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

$(OUTPUT)/user/%.o: user/%.c $(SKELS) $(wildcard user/*.h) $(wildcard include/*.h) | $(OUTPUT)/user
	$(CC) $(CFLAGS) $(INCLUDES) -Iuser -c $< -o $@

$(OUTPUT)/trainbpf: $(USER_OBJS)
	$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# A self-contained binary to carry to machines without libbpf (the GPU box).
static: $(USER_OBJS)
	$(CC) $(CFLAGS) -static $^ $(STATIC_LDLIBS) -o $(OUTPUT)/trainbpf-static

# Unit tests (check framework) link the user-space objects except main().
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(UNIT_SRCS))
$(OUTPUT)/tests/%: tests/unit/%.c $(LIB_OBJS) | $(OUTPUT)/tests
	$(CC) $(CFLAGS) $(INCLUDES) -Iuser $< $(LIB_OBJS) $(LDLIBS) $(shell pkg-config --libs check) -o $@

# tests/golden: a fixed model through every live output (outputs.py).
$(OUTPUT)/tests/render: tests/golden/render.c $(LIB_OBJS) | $(OUTPUT)/tests
	$(CC) $(CFLAGS) $(INCLUDES) -Iuser $< $(LIB_OBJS) $(LDLIBS) -o $@

unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do echo "== $$t"; $$t || exit 1; done

workloads:
	$(MAKE) -C tests/workloads

# The bpftrace cross-check runs on its own, first: after the rest of the
# suite, bpftrace (its clang include-path probe) was seen not to start.
integration: all workloads
	/usr/bin/python3 -m pytest -v tests/integration/test_reference.py
	/usr/bin/python3 -m pytest -v tests/integration --ignore=tests/integration/test_reference.py

# Every output against tests/golden/expected: report/trace/diff on fixed
# recordings and a fixed model byte for byte, live runs by their shape.
golden: all workloads $(OUTPUT)/tests/render
	/usr/bin/python3 tests/golden/outputs.py check

check: unit golden integration

# The recording reader under libFuzzer and ASan: every user object rebuilt
# with clang's instrumentation; new inputs go to the build directory, the
# seeds (tests/fuzz/make_corpus.py) stay as they are.
FUZZ_TIME ?= 60
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address -std=gnu11 -D_GNU_SOURCE -DTB_VERSION='"$(VERSION)"'
FUZZ_OBJS := $(patsubst $(OUTPUT)/user/%.o,$(OUTPUT)/fuzz/%.o,$(LIB_OBJS))
$(OUTPUT)/fuzz $(OUTPUT)/fuzz-corpus:
	mkdir -p $@
$(OUTPUT)/fuzz/%.o: user/%.c $(SKELS) $(wildcard user/*.h) $(wildcard include/*.h) | $(OUTPUT)/fuzz
	$(CLANG) $(FUZZ_CFLAGS) $(INCLUDES) -Iuser -c $< -o $@
$(OUTPUT)/fuzz_recording: tests/fuzz/fuzz_recording.c $(FUZZ_OBJS)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(INCLUDES) -Iuser $^ $(LDLIBS) -o $@

fuzz: $(OUTPUT)/fuzz_recording | $(OUTPUT)/fuzz-corpus
	$< -max_total_time=$(FUZZ_TIME) -timeout=10 $(OUTPUT)/fuzz-corpus tests/fuzz/corpus

demo: all
	./scripts/demo.sh

install: all
	install -D -m 0755 $(OUTPUT)/trainbpf $(DESTDIR)$(PREFIX)/sbin/trainbpf

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > vmlinux/vmlinux.h

clean:
	rm -rf $(OUTPUT)
	$(MAKE) -C tests/workloads clean
