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
# The container image (deploy/container/Dockerfile) the DaemonSet runs.
IMAGE ?= trainbpf:$(VERSION)

BPF_INCLUDES := -Iinclude -Ivmlinux -I/usr/include/$(MULTIARCH)
CFLAGS ?= -O2 -g
CFLAGS += -Wall -Wextra -Werror=implicit-function-declaration -Werror=incompatible-pointer-types -Werror=int-conversion -Wno-unused-parameter -Wno-missing-field-initializers -std=gnu11 -D_GNU_SOURCE -DTB_VERSION='"$(VERSION)"'
LDLIBS := -lbpf -lelf -lz -lm -lsqlite3 -lmicrohttpd -lgnutls -lyaml -lcrypt -lpthread
STATIC_LDLIBS := -l:libbpf.a -l:libelf.a -l:libz.a -l:libzstd.a -l:libsqlite3.a -l:libyaml.a \
		 -l:libcrypt.a -lpthread -lm

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_HDRS := $(wildcard bpf/*.bpf.h) $(wildcard include/*.h)
SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))

# user/ in layers (docs/architecture.md). A folder sees the headers of the
# layers below it and its own, no others: a dependency that points up is a
# compile error. Acquisition and recordings sit side by side, apart.
LAYERS := util model acquire record report app
INC_util := -Iinclude -Iuser/util
INC_model := $(INC_util) -Iuser/model
INC_acquire := $(INC_model) -Iuser/acquire -I$(OUTPUT)
INC_record := $(INC_model) -Iuser/record
INC_report := $(INC_record) -Iuser/report
INC_app := $(INC_report) -Iuser/acquire -I$(OUTPUT) -Iuser/app
USER_SRCS := $(wildcard $(addsuffix /*.c,$(addprefix user/,$(LAYERS))))
USER_OBJS := $(patsubst user/%.c,$(OUTPUT)/user/%.o,$(USER_SRCS))
LIB_OBJS := $(filter-out $(OUTPUT)/user/app/trainbpf.o,$(USER_OBJS))

.PHONY: all static check bpf-stack unit integration golden layers workloads demo install image clean vmlinux fuzz
# Keep the BPF object and skeleton: they are outputs, not scratch.
.SECONDARY:
all: $(OUTPUT)/trainbpf

$(OUTPUT) $(OUTPUT)/tests $(addprefix $(OUTPUT)/user/,$(LAYERS)):
	mkdir -p $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUTPUT)
	$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) $(BPF_INCLUDES) -c $< -o $@
	$(BPFTOOL) gen object $@.linked $@ && mv $@.linked $@

# Through a temporary: a failed generation must not leave an empty header.
$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# Header dependencies come from the compiler (-MMD -MP, the .d files).
define layer_rule
$(OUTPUT)/user/$(1)/%.o: user/$(1)/%.c | $(SKELS) $(OUTPUT)/user/$(1)
	$$(CC) $$(CFLAGS) -MMD -MP $$(INC_$(1)) -c $$< -o $$@
endef
$(foreach l,$(LAYERS),$(eval $(call layer_rule,$(l))))
-include $(USER_OBJS:.o=.d)

$(OUTPUT)/trainbpf: $(USER_OBJS)
	$(CC) $(CFLAGS) $^ $(LDLIBS) -o $@

# A self-contained binary to carry to machines without libbpf (the GPU box).
# Without serve's HTTP side: libmicrohttpd needs GnuTLS, whose p11-kit and
# libunistring Debian ships no static libraries of.
$(OUTPUT)/user/app/exporter_nohttp.o: user/app/exporter.c | $(OUTPUT)/user/app
	$(CC) $(CFLAGS) -DTB_NO_HTTP $(INC_app) -c $< -o $@

static: $(filter-out %/exporter.o,$(USER_OBJS)) $(OUTPUT)/user/app/exporter_nohttp.o
	$(CC) $(CFLAGS) -static $^ $(STATIC_LDLIBS) -o $(OUTPUT)/trainbpf-static

# Unit tests (check framework) link the user-space objects except main().
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(OUTPUT)/tests/%,$(UNIT_SRCS))
$(OUTPUT)/tests/%: tests/unit/%.c $(LIB_OBJS) | $(OUTPUT)/tests
	$(CC) $(CFLAGS) $(INC_app) $< $(LIB_OBJS) $(LDLIBS) $(shell pkg-config --libs check) -o $@

# tests/golden: a fixed model through every live output (outputs.py).
$(OUTPUT)/tests/render: tests/golden/render.c $(LIB_OBJS) | $(OUTPUT)/tests
	$(CC) $(CFLAGS) $(INC_app) $< $(LIB_OBJS) $(LDLIBS) -o $@

unit: $(UNIT_BINS)
	@for t in $(UNIT_BINS); do echo "== $$t"; $$t || exit 1; done

workloads:
	$(MAKE) -C tests/workloads

# The bpftrace cross-check runs on its own, first: after the rest of the
# suite, bpftrace (its clang include-path probe) was seen not to start.
integration: all workloads $(OUTPUT)/tests/render
	/usr/bin/python3 -m pytest -v tests/integration/test_reference.py
	/usr/bin/python3 -m pytest -v --durations=30 tests/integration --ignore=tests/integration/test_reference.py

# Every output against tests/golden/expected: report/trace/diff on fixed
# recordings and a fixed model byte for byte, live runs by their shape.
golden: all workloads $(OUTPUT)/tests/render
	/usr/bin/python3 tests/golden/outputs.py check

# No file uses another in a cycle, and every use points down the layers.
layers: all
	/usr/bin/python3 scripts/check_layers.py $(OUTPUT)/user

# Every program's deepest call chain within the verifier's 512 bytes of
# stack, frames counted as the strictest kernels count them (32 bytes).
bpf-stack: $(OUTPUT)/trainbpf.bpf.o
	/usr/bin/python3 scripts/check_bpf_stack.py $<

check: bpf-stack unit layers golden integration

# The recording reader under libFuzzer and ASan: every user object rebuilt
# with clang's instrumentation; new inputs go to the build directory, the
# seeds (tests/fuzz/make_corpus.py) stay as they are.
FUZZ_TIME ?= 60
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address -Werror=implicit-function-declaration -Werror=incompatible-pointer-types -Werror=int-conversion -std=gnu11 -D_GNU_SOURCE -DTB_VERSION='"$(VERSION)"'
FUZZ_OBJS := $(patsubst $(OUTPUT)/user/%.o,$(OUTPUT)/fuzz/%.o,$(LIB_OBJS))
$(OUTPUT)/fuzz-corpus $(addprefix $(OUTPUT)/fuzz/,$(LAYERS)):
	mkdir -p $@
define fuzz_rule
$(OUTPUT)/fuzz/$(1)/%.o: user/$(1)/%.c | $(SKELS) $(OUTPUT)/fuzz/$(1)
	$$(CLANG) $$(FUZZ_CFLAGS) -MMD -MP $$(INC_$(1)) -c $$< -o $$@
endef
$(foreach l,$(LAYERS),$(eval $(call fuzz_rule,$(l))))
-include $(FUZZ_OBJS:.o=.d)
$(OUTPUT)/fuzz_recording: tests/fuzz/fuzz_recording.c $(FUZZ_OBJS)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(INC_app) $^ $(LDLIBS) -o $@

fuzz: $(OUTPUT)/fuzz_recording | $(OUTPUT)/fuzz-corpus
	$< -max_total_time=$(FUZZ_TIME) -timeout=10 $(OUTPUT)/fuzz-corpus tests/fuzz/corpus

demo: all
	./scripts/demo.sh

install: all
	install -D -m 0755 $(OUTPUT)/trainbpf $(DESTDIR)$(PREFIX)/sbin/trainbpf

# Debian 12 with the libraries build/trainbpf links, the binary where install
# puts it (deploy/container/Dockerfile; tests/integration/test_deploy.py).
image: all
	docker build -f deploy/container/Dockerfile -t $(IMAGE) .

vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > vmlinux/vmlinux.h

clean:
	rm -rf $(OUTPUT)
	$(MAKE) -C tests/workloads clean
