# ttkit: every workflow is a target. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets with a line about each.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every Go package, and the queued and tt-device-queue binaries into bin/.
	$(GO) build ./...
	scripts/build-queued.sh $(BIN) $(GO)
	$(GO) build -o $(BIN)/ ./queued/cmd/tt-device-smoke

.PHONY: test
test: ## Run every unit and integration test with the race detector (the CI test command).
	$(GO) test -race -count=1 ./...
	@# The runner's suite once more with every job started through
	@# queued-exec's C build (start.c), so both helpers pass it.
	CGO_ENABLED=1 $(GO) build -o $(BIN)/queued-exec ./queued/cmd/queued-exec
	QUEUED_TEST_EXEC_HELPER=$(BIN)/queued-exec $(GO) test -race -count=1 ./queued/runner

.PHONY: lint
lint: ## Check formatting (gofmt), go vet, stale generated code and that every relative Markdown link resolves.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/...
	$(GO) vet -tags stress,chromium,demo,slurm ./test/... ./queued/...
	@bash -n scripts/*.sh .ci/run
	@python3 scripts/checklinks.py
	@$(MAKE) --no-print-directory generate >/dev/null
	@stale=$$(git status --porcelain -- receiver docs/operations.md); if [ -n "$$stale" ]; then \
		echo "generated files are stale; run make generate and commit:"; echo "$$stale"; exit 1; fi

.PHONY: peer-test
peer-test: ## Run the Python tt-device-queue's own HTTP server tests against queued (from ../shared/peers; skipped without it unless CI is set).
	GO=$(GO) bash scripts/peer-test.sh

.PHONY: bench
bench: ## Run every benchmark, print floor ratios and queued against tsp and nq (QUICK=1: short mode).
	GO=$(GO) QUICK=$(QUICK) bash scripts/bench.sh

.PHONY: stress
stress: ## Run the stress, crash and full-disk suites against the real queued (as root; minutes).
	$(GO) test -tags stress -count=1 -timeout 30m -v ./test/stress/

.PHONY: cgroup-vm
cgroup-vm: ## Run the job-cgroup and OOM tests in a throwaway VM whose cgroup v2 has the memory controller (about a minute).
	GO=$(GO) bash queued/jobcgroup/vmtest.sh

.PHONY: security-browser
security-browser: ## Real headless Chromium: another loopback page cannot submit a job; the live status page works.
	$(GO) test -tags chromium -count=1 -v -run Chromium ./test/security/ ./test/browser/

.PHONY: screenshot
screenshot: ## Run the status page's browser test and keep its screenshot as docs/img/status-page.png.
	STATUS_PAGE_SCREENSHOT=$(CURDIR)/docs/img/status-page.png $(GO) test -tags chromium -count=1 -run 'ChromiumStatusPage$$' ./test/browser/

.PHONY: demo
demo: ## Build everything and run the whole of ttkit on two simulated cards (no hardware needed).
	GO=$(GO) bash scripts/demo.sh

.PHONY: install
install: ## Test, then install queued, tt-device-queue and the health check with a systemd user unit.
	GO=$(GO) bash scripts/install.sh

.PHONY: install-system
install-system: ## As root: install queued in system mode for every user of the host (SOCKET_GROUP=name limits who may submit; ENFORCE=1 fences each card to its running job's user).
	GO=$(GO) bash scripts/install-system.sh

SMOKE_CARD ?= 0

.PHONY: smoke
smoke: ## On a real host, after `tt-device-queue doctor`: reset idle card SMOKE_CARD (default 0) through the installed queued, run a job on it and check otelcol-tt names it.
	$(GO) build -o $(BIN)/ ./queued/cmd/tt-device-smoke
	SMOKE_CARD=$(SMOKE_CARD) $(BIN)/tt-device-smoke

OCB := $(GO) run go.opentelemetry.io/collector/cmd/builder@v0.165.0
RECEIVER_SOURCES := $(shell find receiver internal -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum

.PHONY: otelcol-tt
otelcol-tt: $(BIN)/otelcol-tt ## Build the otelcol-tt collector distribution with ocb into bin/otelcol-tt.

$(BIN)/otelcol-tt: builder-config.yaml $(RECEIVER_SOURCES) $(wildcard deploy/otelcol-tt/stubs/*/*)
	@mkdir -p $(BIN) build
	$(OCB) --config builder-config.yaml
	cp build/otelcol-tt/otelcol-tt $@

.PHONY: e2e
e2e: $(BIN)/otelcol-tt chart-test ## Run otelcol-tt against a real Prometheus server and render the Helm chart.
	$(GO) test -tags e2e -count=1 -v ./test/e2e/

.PHONY: slurm-e2e
slurm-e2e: $(BIN)/otelcol-tt ## As root: queued under a real Slurm on this host (Debian's slurm-wlm and munge): holds against sbatch jobs both ways, the Epilog's reset, a killed slurmd, the slurm_job label.
	$(GO) test -tags slurm -count=1 -timeout 10m -v ./test/slurm/

HELM_VERSION := v4.3.2

$(BIN)/helm:
	GOBIN=$(BIN) $(GO) install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

.PHONY: mcp-test
mcp-test: ## Drive tt-device-queue mcp over stdio with the official TypeScript MCP SDK (npm ci in test/mcp) against a real queued on fake cards.
	scripts/build-queued.sh $(BIN) $(GO)
	cd test/mcp && npm ci --no-audit --no-fund && node mcp-test.mjs $(BIN)

.PHONY: chart-test
chart-test: $(BIN)/helm ## Lint and render the Helm chart with helm v4 (built from source) and check the manifests (and, once bin/otelcol-tt is built, that it validates the configs).
	deploy/helm/test-chart.sh $(BIN)/helm $$([ -x $(BIN)/otelcol-tt ] && echo $(BIN)/otelcol-tt)

FUZZTIME ?= 20s

.PHONY: fuzz
fuzz: ## Run every native fuzz test for FUZZTIME each (default 20s); fails on a failing input.
	GO=$(GO) bash scripts/fuzz.sh $(FUZZTIME)

.PHONY: generate
generate: ## Regenerate generated code (mdatagen) from metadata.yaml, and docs/operations.md's settings table from queued/config.
	$(GO) generate ./...
