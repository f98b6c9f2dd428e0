# HiNIC build, test and release checks. GNU make.
#
#   make test           system packages (scripts/deps.sh), go vet, go test -race, full-size traffic
#                       tests, the fault-injection suite at 100,000 operations, every fuzz target
#   make demo           the embedded rack (HiSwitch + three RDMA engines) through the e2e gate
#   make e2e            QEMU guests (TCG): Soft-RoCE rack and HiNIC rack (our .debs in the image) on
#                       HiSwitch, the SSH gate on each, the packages' life cycle, both side by side
#   make fuzz           every Go fuzz target for FUZZTIME (default 5s) each; make test runs it too
#   make lint           gofmt and go vet
#   make bench          Go benchmarks of internal/...
#   make release-check  goreleaser check, with goreleaser installed in .cache/bin
#   make docs-img       redraw the docs' pictures (docs/img) with hinic deploy graph
#   make abi            regenerate the Go mirrors of kernel/hicain_abi.h and higpu_abi.h (cgo -godefs)
#   make strings        regenerate the engine's enum String methods (stringer, a tool in go.mod)
#   make build | clean | deps

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

# Go from PATH, else from the standard install location (a fresh shell on
# Debian may not have /usr/local/go/bin on PATH yet).
GO ?= $(shell command -v go 2>/dev/null || { test -x /usr/local/go/bin/go && echo /usr/local/go/bin/go; } || echo go)
GO_MIN_MINOR := 26

BIN := bin/hinic
CLI_PKG := github.com/PacketFive/hinic/internal/cli

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's date keeps rebuilds of one commit identical; outside a
# checkout (or before the first commit) fall back to now.
DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null | grep . || TZ=UTC date +%Y-%m-%dT%H:%M:%SZ)

LDFLAGS := -s -w \
	-X $(CLI_PKG).version=$(VERSION) \
	-X $(CLI_PKG).commit=$(COMMIT) \
	-X $(CLI_PKG).date=$(DATE)

GORELEASER_VERSION := v2.15.1
GORELEASER_DIR := $(CURDIR)/.cache/bin
GORELEASER := $(GORELEASER_DIR)/goreleaser

.PHONY: build test lint bench demo e2e release-check clean deps check-go fuzz docs-img abi strings

check-go:
	@if ! command -v "$(GO)" >/dev/null 2>&1; then \
		echo "make: Go not found. HiNIC needs Go 1.$(GO_MIN_MINOR) or newer:" >&2; \
		echo "  download it from https://go.dev/dl/, unpack it into /usr/local" >&2; \
		echo "  (tar -C /usr/local -xzf go1.$(GO_MIN_MINOR).*.linux-amd64.tar.gz)" >&2; \
		echo "  and add /usr/local/go/bin to PATH." >&2; \
		exit 1; \
	fi
	@minor=$$("$(GO)" env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p'); \
	if [ -n "$$minor" ] && [ "$$minor" -lt $(GO_MIN_MINOR) ]; then \
		echo "make: $$("$(GO)" env GOVERSION) is too old; HiNIC needs Go 1.$(GO_MIN_MINOR) or newer (https://go.dev/dl/)." >&2; \
		exit 1; \
	fi

deps:
	@./scripts/deps.sh

# The docs' rack drawings (docs/graph.md), from the specs in testdata/racks;
# the list is in internal/cli/deploy/graph/docs_gen.go, whose test checks
# that the committed pictures are current.
docs-img: check-go
	$(GO) generate ./internal/cli/deploy/graph

# The Go mirrors of the device ABI headers (docs/device-abi.md), whose
# TestABIGenerated checks that the committed zabi.go files are current.
abi: check-go
	$(GO) generate ./internal/device ./internal/gpu

# The engine's enum String methods (internal/rdma/zstring.go), made by
# stringer (the tool directive of go.mod), whose TestStringerGenerated
# checks that the committed file is current.
strings: check-go
	$(GO) generate ./internal/rdma

build: check-go
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hinic

test: deps check-go
	$(GO) vet ./...
	@# internal/device/integration runs its QEMU guests under the race detector: about
	@# 5 minutes on a quiet 2-core machine, more under load, so the
	@# default 10-minute limit per package is too tight.
	$(GO) test -race -count=1 -timeout 30m ./...
	@# The race detector scales the long traffic tests down; run them at
	@# full size (10,000 random messages each) without it too.
	$(GO) test -count=1 -run 'RandomTraffic' ./internal/rack ./internal/rdma
	@# The fault-injection suite (docs/verify.md) at full size, two and
	@# four engines: about a minute on a 2-core machine.
	$(GO) test -count=1 -run 'TestFaultSuite$$' ./internal/faultsuite -faultsuite.ops=100000
	@# The same at full size across three fabric restarts, over socket
	@# and over shm ports: about 35 s on a 2-core machine.
	$(GO) test -count=1 -run 'TestFaultSuiteRestart$$' ./internal/faultsuite -faultsuite.ops=100000
	@# Every fuzz target for a short fixed budget (scripts/fuzz.sh).
	GO=$(GO) ./scripts/fuzz.sh

fuzz: check-go
	GO=$(GO) ./scripts/fuzz.sh

lint: check-go
	@unformatted=$$("$$("$(GO)" env GOROOT)/bin/gofmt" -l .); \
	if [ -n "$$unformatted" ]; then \
		echo "make lint: these files need gofmt -w:" >&2; \
		echo "$$unformatted" >&2; \
		exit 1; \
	fi
	$(GO) vet ./...

bench: check-go
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

DEMO_DIR := $(CURDIR)/.cache/demo

# The embedded rack: HiSwitch and three emulated hosts in one process, put
# through the e2e gate, on RoCEv2 and then on native InfiniBand; then the
# fabric's captures of a port of each run, decoded, with every ICRC (and
# VCRC) checked.
demo: build
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	./$(BIN) verify e2e --pcap $(DEMO_DIR) --junit $(DEMO_DIR)/gate.xml
	@echo
	@echo "The first frames on host1's switch port, from $(DEMO_DIR)/sw0-port1.pcap:"
	./$(BIN) proto decode --count 8 $(DEMO_DIR)/sw0-port1.pcap
	./$(BIN) proto decode --check-icrc -o json $(DEMO_DIR)/sw0-port1.pcap > /dev/null
	@echo
	@echo "The InfiniBand run: the first packets on host2's switch port (subnet manager's SMPs, then data):"
	./$(BIN) proto decode --count 8 $(DEMO_DIR)/ib/sw0-port2.pcap
	./$(BIN) proto decode --check-icrc -o json $(DEMO_DIR)/ib/sw0-port2.pcap > /dev/null

$(GORELEASER): | check-go
	@echo "Installing goreleaser $(GORELEASER_VERSION) into $(GORELEASER_DIR) (about 5 minutes, once)"
	GOBIN=$(GORELEASER_DIR) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

release-check: $(GORELEASER)
	$(GORELEASER) check

clean:
	rm -rf bin dist .cache/demo

# The QEMU end-to-end run (docs/deploy.md): guest image (cached in
# .cache/images while its spec is unchanged), a two-guest Soft-RoCE rack on
# HiSwitch, the SSH gate with the fabric capture's ICRCs checked, rack down;
# then HiNIC's packages, an image with them, a two-guest HiNIC rack, the
# same gate, the packages removed and installed again in a guest, rack
# down; then both gates side by side (hinic verify compare); and the mixed
# rack placed through a libvirtd the test starts (TestLibvirtRack). Needs
# root and the tools `hinic doctor` lists; runs under TCG.
e2e: build
	HINIC=./$(BIN) GO=$(GO) ./scripts/e2e.sh
