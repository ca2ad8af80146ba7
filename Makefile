# trestle: `make demo` shows the switch at work, `make test` runs every test,
# `make check` the everyday ones (no namespace tests). They install the Debian
# packages they lack (scripts/deps.sh) and need root for the namespace and
# datapath tests.

# The go to build with: go on PATH when it is 1.21 or later (it fetches the
# toolchain go.mod names by itself), else the one scripts/deps.sh fetched into
# the module cache with Debian's Go 1.19. Asked once, on first use in a recipe:
# by then `make demo` and `make test` have run deps, and `make clean` never asks.
# With no go, deps.sh says what to run and make stops there (an empty GO
# would run "build" as a command).
GO      ?= $(eval GO := $(shell scripts/deps.sh which-go))$(if $(and $(filter 0,$(.SHELLSTATUS)),$(GO)),$(GO),$(error no go to build with: run make deps (as root), or put a Go 1.21 or later on PATH))
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN     := bin/trestle
# The man pages (trestle(8), one per command, trestle.toml(5)) and the shell
# completions, written by the binary from its command tree and the config's
# key table (cmd/trestle/man.go, completion.go) at build time.
MAN_DIR     := bin/man
MAN_STAMP   := $(MAN_DIR)/trestle.8
COMPLETIONS := bin/completion/trestle.bash bin/completion/_trestle bin/completion/trestle.fish
# The CNI plugin of type "trestle" (cmd/trestle-cni), a program of its own
# so that it carries no lab; make install puts it in CNI_BINDIR.
CNI_BIN := bin/cni/trestle
# What the end-to-end tests run beside trestle (cnitool, the host-local IPAM
# plugin), installed by make deps (scripts/deps.sh tools) at pinned versions.
TOOLS   := $(CURDIR)/bin/tools
BPF_SRC := $(wildcard bpf/*.c bpf/*.h bpf/lib/*.h bpf/lab/*.c bpf/lab/*.h bpf/include/bpf/*.h)

# A recipe that fails leaves no target behind that a later make would take
# as built (a man page or completion half written).
.DELETE_ON_ERROR:

.PHONY: all build deps deps-build generate check-generate ready check test test-unit vet demo clean install fuzz fuzz-short deb

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, its man pages
# (naming the documents where this installs them, PREFIX/share/doc/trestle)
# and those documents, its shell completions, the systemd unit (pointing at
# it), an example config, which never replaces one there, the QEMU/libvirt
# ifup scripts in PREFIX/libexec/trestle, and the CNI plugin in CNI_BINDIR,
# where container runtimes look by default.
PREFIX  ?= /usr/local
UNITDIR ?= /lib/systemd/system
CNI_BINDIR ?= /opt/cni/bin

all: build

deps:
	@scripts/deps.sh

# What make check needs: deps without the test tools (cnitool, host-local),
# which only the namespace tests run.
deps-build:
	@scripts/deps.sh build

build: $(BIN) $(CNI_BIN) $(MAN_STAMP) $(COMPLETIONS)

$(BIN): $(shell find cmd internal -name '*.go' -not -name '*_test.go') internal/bpf/trestle_bpfel.o $(wildcard internal/lab/bpf/*_bpfel.o) go.mod go.sum
	$(GO) build -trimpath -buildmode=pie -ldflags "-X main.version=$(VERSION)" -o $@ ./cmd/trestle

$(MAN_STAMP): $(BIN) cmd/trestle/trestle.toml.5.in
	@rm -rf $(MAN_DIR) && $(BIN) man $(MAN_DIR) >/dev/null

bin/completion/trestle.bash: $(BIN)
	@mkdir -p $(@D) && $(BIN) completion bash >$@
bin/completion/_trestle: $(BIN)
	@mkdir -p $(@D) && $(BIN) completion zsh >$@
bin/completion/trestle.fish: $(BIN)
	@mkdir -p $(@D) && $(BIN) completion fish >$@

# The plugin is a process a container runtime starts for each ADD and DEL,
# and its start is on the way of both: built static and not PIE, as the
# containernetworking project builds its own plugins, it starts 1.2 ms
# sooner: a PIE took 4.2 ms to print its version, 1.2 of them the dynamic
# loader's (the C library, and the binary's relocations with the page
# faults they make; docs/performance.md "Pod churn"). The daemon, which
# starts once, stays PIE.
$(CNI_BIN): $(shell find cmd/trestle-cni internal -name '*.go' -not -name '*_test.go') go.mod go.sum
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.buildVersion=$(VERSION)" -o $@ ./cmd/trestle-cni

# Regenerate the eBPF objects and their Go bindings after changing bpf/: the
# switch's (bpf/ into internal/bpf) and the lab's (bpf/lab/ into internal/lab/bpf).
BPF_GEN := internal/bpf internal/lab/bpf
generate:
	@for d in $(BPF_GEN); do (cd $$d && $(GO) generate .) || exit 1; done

# The bindings in the tree must be what the C in the tree produces (CI runs
# on a clean checkout, so there this means the committed ones). They are
# made again in a copy of the sources (so that vet, beside it, reads the
# tree's as they are), both directories at once, and compared; stale ones
# are copied into the tree, to be committed. A generate that fails (no
# clang) is a failure, not bindings found fresh.
check-generate:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && cp go.mod go.sum $$tmp/ && cp -r bpf $$tmp/ && \
	for d in $(BPF_GEN); do mkdir -p $$tmp/$$d && cp $$d/*.go $$d/*_bpfel.o $$tmp/$$d/ || exit 1; done && \
	for d in $(BPF_GEN); do (cd $$tmp/$$d && $(GO) generate . >$$tmp/$$(echo $$d | tr / _).log 2>&1; echo $$? >$$tmp/$$(echo $$d | tr / _).rc) & done; wait; \
	for d in $(BPF_GEN); do n=$$tmp/$$(echo $$d | tr / _); if [ "$$(cat $$n.rc)" != 0 ]; then cat $$n.log >&2; \
		echo "check-generate: go generate in $$d failed (its messages are above; the bindings are as they were): run make deps, then make generate" >&2; exit 1; fi; done; \
	stale=; for d in $(BPF_GEN); do for f in $$d/*_bpfel.go $$d/*_bpfel.o; do cmp -s $$f $$tmp/$$f || { stale="$$stale $$f"; cp $$tmp/$$f $$f; }; done; done; \
	if [ -n "$$stale" ]; then echo "the bindings were stale (now regenerated):$$stale: commit the result" >&2; exit 1; fi

# check-generate and vet side by side: the first is one clang of the
# switch program on one core (20 s of CPU), the second is Go's, on the
# others.
ready:
	@$(MAKE) --no-print-directory -j2 --output-sync=target check-generate vet

# gofmt is the one beside $(GO): another version may format otherwise
# (Debian's, on PATH once deps.sh installed it, is Go 1.19). One that is
# missing or fails is a failure, not a clean tree.
vet:
	$(GO) vet ./...
	@goroot=$$($(GO) env GOROOT) && gofmt=$$goroot/bin/gofmt && test -x "$$gofmt" || \
		{ echo "vet: no gofmt beside $(GO) (in $$goroot/bin): run make deps, or install that Go again" >&2; exit 1; }; \
	unformatted=$$($$gofmt -l cmd internal scripts tests) || { echo "vet: $$gofmt -l failed (its messages are above)" >&2; exit 1; }; \
	test -z "$$unformatted" || { echo "$$unformatted"; echo "vet: gofmt needed: run $$gofmt -w on the files above" >&2; exit 1; }

# make test: every test, in two phases.
#
# First every test but those of TEST_TIMED: TEST_PACKAGES packages at a
# time (-p, 4 by default: most packages mostly wait, and a run of this phase
# with four at a time passed beside other work), the slowest first
# (TEST_FIRST: the lab's real runs, the datapath's table tests, 1024 ports,
# the Debian package), so that no long package starts last and leaves a
# core idle; inside the end-to-end packages
# (tests/) up to TEST_PARALLEL tests run side by side (t.Parallel): each
# makes namespaces, a socket and pins of its own, and mostly waits, for a
# daemon, a capture or a timer. The lab's real runs are there: on short
# trials they assert that each figure is there and nothing is left behind,
# not what a figure is; one package's tests run one at a time, so the lab
# takes one of the places for most of the phase and the others take the
# rest.
#
# Then the tests of TEST_TIMED, one package at a time and beside nothing:
# those whose figures are times or rates (the generator's pacing and loss,
# a restart streamed through without loss, 1000 clients each answered
# within the dial's 3 s, storm control's one limit for two CPUs held to
# its rate), and the lab's runs through Open vSwitch, whose userspace
# datapath loses most frames on a busy machine. The first phase skips them
# by name (-skip), so a test that comes to assert a time or a rate is named
# in TEST_TIMED; the second runs them in TEST_ALONE, the packages that
# define one (found by name, so it is never out of step with TEST_TIMED).
# Only those: every package named is a test binary linked (a few seconds
# of one core each, as -p 1 links one at a time) whether a test in it runs
# or not, and the lab's kinds alone were twenty with nothing to run.
#
# The end-to-end tests and the lab run bin/trestle (TRESTLE_TEST_BIN),
# built once. Beside the first phase, which leaves the CPUs half idle,
# each fuzz target fuzzes briefly (fuzz-short), beyond its seeds; its
# output is printed when the phase ends, and a failure of either fails
# make test before the second phase.
TEST_FIRST    := ./internal/lab ./internal/datapath ./tests/scale ./tests/package ./tests/persist ./tests/overlay ./internal/lab/kinds/overlay
TEST_TIMED    := TestStormControlAcrossCPUs|TestLoopDetect|TestOverlayFRRRestart|TestGenSinkNoLoss|TestGenRate|TestGenBehind|TestGenSinkInterrupt|TestRestartScenario|TestFaultsUnderLoad|TestExecuteOVS|TestExecutePatch|TestExecuteVLANOVS|TestExecuteMirrorOVS
TEST_ALONE     = $(sort $(patsubst %/,./%,$(dir $(shell grep -rlE '^func ($(TEST_TIMED))\b' --include='*_test.go' cmd internal tests))))
TEST_PARALLEL ?= 4
TEST_PACKAGES ?= 4
# -vet=off: make vet has just run every analyzer on every package and its
# tests; go test's own vet (a subset of them) again on each package took
# 20 s of CPU in a fresh clone, and the first phase has no core to spare.
GOTEST         = TRESTLE_TEST_BIN=$(CURDIR)/$(BIN) TRESTLE_TEST_CNI=$(CURDIR)/$(CNI_BIN) TRESTLE_TEST_TOOLS=$(TOOLS) $(GO) test -count=1 -vet=off -timeout 30m

test: deps ready build
	@first="$$($(GO) list $(TEST_FIRST))" && all="$$($(GO) list ./...)" || exit 1; \
	fuzz=$$(mktemp -d) && trap 'rm -rf "$$fuzz"' EXIT || exit 1; \
	{ $(MAKE) --no-print-directory fuzz-short >$$fuzz/out 2>&1; echo $$? >$$fuzz/rc; } & \
	echo "$(GOTEST) -p $(TEST_PACKAGES) -parallel $(TEST_PARALLEL) -skip '^($(TEST_TIMED))$$' ... (and make fuzz-short beside it)"; \
	$(GOTEST) -p $(TEST_PACKAGES) -parallel $(TEST_PARALLEL) -skip '^($(TEST_TIMED))$$' $$first $$(echo "$$all" | grep -vxF "$$first"); rc=$$?; \
	wait; cat $$fuzz/out; test $$rc = 0 && test "$$(cat $$fuzz/rc)" = 0
	$(GOTEST) -p 1 -run '^($(TEST_TIMED))$$' $(TEST_ALONE)

# make check: the everyday tests, in under 3 minutes: vet, the bindings, and
# every test that makes no namespace to run a daemon or traffic in (-short:
# testutil.RequireNetns skips those): unit tests, the daemon against its
# fakes, and the datapath's BPF_PROG_TEST_RUN table tests. The end-to-end
# packages (tests/) are all namespace tests and are left out. The datapath's
# tests, most of the time, go first: the rest pass beside them.
check: deps-build ready
	all="$$($(GO) list ./...)" && pkgs="$$(echo "$$all" | grep -v '/tests/')" && \
	$(GO) test -count=1 -short -p 2 $$(echo "$$pkgs" | grep -x '.*/internal/datapath') $$(echo "$$pkgs" | grep -vx '.*/internal/datapath')

# The fuzz targets (docs/reliability.md) as package:target: go test -fuzz
# takes one of each a run. make fuzz runs each for FUZZTIME, make test for
# FUZZTIME_SHORT; one worker each (the pipeline's loads the datapath in a
# namespace of its own), and a new input found interesting is minimized for
# FUZZMIN at most, so that the time goes to fuzzing. A crasher is written to
# the package's testdata/fuzz/TARGET/: fix the bug and commit it there, and
# every go test runs it from then on.
FUZZ_TARGETS   := internal/datapath:FuzzPipeline internal/config:FuzzParse internal/ctl:FuzzServer internal/daemon:FuzzHandle
FUZZTIME       ?= 3m
FUZZMIN        ?= 10s
# make test's short runs are counts of executions (a few seconds each here),
# not durations: Go 1.26's fuzz coordinator can fail a target with "context
# deadline exceeded" at the end of a -fuzztime duration when its worker is
# mid-input (go.dev/issue/75804, fixed in Go 1.27), which the pipeline's
# slow inputs made likely. A count has no deadline to race.
FUZZ_SHORT     := internal/daemon:FuzzHandle:3000x internal/datapath:FuzzPipeline:100x internal/config:FuzzParse:10000x internal/ctl:FuzzServer:10000x

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=./$${t%%:*} name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMIN) -parallel 1 $$pkg || exit 1; \
	done

# The short runs go FUZZ_JOBS at a time: each fuzzes on one worker (and
# builds its package first), so that one at a time left a core idle for the
# half minute they take together. Each target's output is printed whole
# when it ends. No vet here (-vet=off): that is make vet's.
FUZZ_JOBS      ?= 2

fuzz-short:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	for t in $(FUZZ_SHORT); do echo "$$t"; done | xargs -P $(FUZZ_JOBS) -I{} sh -c '\
		t=$$1; pkg=./$${t%%:*} rest=$${t#*:}; name=$${rest%%:*} n=$${rest##*:}; \
		$(GO) test -vet=off -run "^\$$" -fuzz "^$$name\$$" -fuzztime $$n -fuzzminimizetime 20x -parallel 1 $$pkg >$$2/$$name 2>&1; rc=$$?; \
		echo "fuzz $$name in $$pkg for $$n executions"; cat $$2/$$name; \
		test $$rc = 0 || echo "fuzz-short: $$name in $$pkg failed" >&2; exit $$rc' sh {} "$$tmp" || \
	exit 1

test-unit: check

# make deb: bin/deb/trestle_VERSION_ARCH.deb (scripts/deb.sh says what is
# in it and how VERSION is made); tests/package installs, upgrades and purges
# it in a throwaway root and runs lintian on it.
deb: build
	@scripts/deb.sh

demo: deps build
	@scripts/demo.sh $(BIN)

clean:
	rm -rf bin

install: $(BIN) $(CNI_BIN) $(MAN_STAMP) $(COMPLETIONS)
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/trestle
	install -D -m 0755 $(CNI_BIN) $(DESTDIR)$(CNI_BINDIR)/trestle
	install -d $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man5
	@rm -rf $(MAN_DIR)-install && $(BIN) man --doc-dir $(PREFIX)/share/doc/trestle $(MAN_DIR)-install >/dev/null
	install -m 0644 $(MAN_DIR)-install/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 $(MAN_DIR)-install/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -d $(DESTDIR)$(PREFIX)/share/doc/trestle
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/trestle/
	install -D -m 0644 bin/completion/trestle.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/trestle
	install -D -m 0644 bin/completion/_trestle $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_trestle
	install -D -m 0644 bin/completion/trestle.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/trestle.fish
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(PREFIX)/bin|g' dist/trestle.service > $(DESTDIR)$(UNITDIR)/trestle.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/trestle.service
	install -D -m 0644 dist/trestle.toml $(DESTDIR)$(PREFIX)/share/doc/trestle/trestle.toml.example
	install -D -m 0755 dist/qemu-ifup $(DESTDIR)$(PREFIX)/libexec/trestle/qemu-ifup
	install -D -m 0755 dist/qemu-ifdown $(DESTDIR)$(PREFIX)/libexec/trestle/qemu-ifdown
	install -D -m 0644 dist/qemu-common $(DESTDIR)$(PREFIX)/libexec/trestle/qemu-common
	install -D -m 0644 dist/qemu.conf $(DESTDIR)$(PREFIX)/share/doc/trestle/qemu.conf.example
	@if [ ! -e $(DESTDIR)/etc/trestle/trestle.toml ]; then \
		install -D -m 0644 dist/trestle.toml $(DESTDIR)/etc/trestle/trestle.toml; \
		echo "installed an example config at $(DESTDIR)/etc/trestle/trestle.toml: name your interfaces in it"; \
	fi
