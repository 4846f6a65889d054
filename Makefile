# tech-log-backend: one Makefile for every module of the workspace.
# `go test ./...` does not cross go.work modules, so every target loops over
# the module directories that `go list -m` reports.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# go.work and every go.mod carry a toolchain line (go1.26.11: the stdlib fixes
# govulncheck asks for); GOTOOLCHAIN=local (set in this machine's go.env) would
# ignore it, so make lets the go command switch to it unless told otherwise.
GOTOOLCHAIN ?= auto
export GOTOOLCHAIN

MODULES := $(shell go list -m -f '{{.Dir}}')
# ensure.sh installs missing programs with apt-get when run as root, else stops
# in one line naming what to install (tools/prereq).
PREREQ := tools/prereq/ensure.sh
TEST_PROGRAMS := redis-server redis-cli redis-sentinel gcc
GO_TEST_FLAGS ?= -race -count=1
FUZZTIME ?= 10s
FUZZBATCH ?= 20000x
# Build tags of test lanes that make test does not build (the partition lane
# runs only where network namespaces work); make lint vets them everywhere.
VET_TAGS ?= partitions

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: test
test: test-prereq arch-check docs-check ## unit tests + Redis service lane (real redis-server) + boundary check, race detector on; then the unit tests once more per module with GOWORK=off; installs redis-server/redis-sentinel first when missing (root + apt-get)
	@for m in $(MODULES); do \
		echo "== go test $$m"; \
		(cd $$m && REDIS_REQUIRED=1 go test $(GO_TEST_FLAGS) ./...) || exit 1; \
	done
	@$(MAKE) --no-print-directory request-path
	@$(MAKE) --no-print-directory alloc-budget
	@$(MAKE) --no-print-directory gowork-same-build

.PHONY: alloc-budget
alloc-budget: ## the provider's allocation budget on a real redis-server, without the race detector (under it sync.Pool drops items at random); fails unless the test ran and passed
	@echo "== allocation budget (no race detector)"
	@cd adapter-outbound-cache-redis && \
	out=$$(REDIS_REQUIRED=1 go test -count=1 -run '^TestServiceEvaluateAllocationBudget$$' -v ./redisrate/ 2>&1); rc=$$?; \
	echo "$$out" | grep -E -- '--- |allocs per call|^(ok|FAIL)'; \
	[ $$rc -eq 0 ] && echo "$$out" | grep -q -- '--- PASS: TestServiceEvaluateAllocationBudget'

.PHONY: request-path
request-path: ## the Go files one admitted request runs in, measured with coverage (app-bootstrap/cmd/requestpath); fails unless docs/architecture.md marks exactly those
	@$(PREREQ) "make request-path" redis-server
	@echo "== request path (docs/architecture.md)"
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	(cd app-bootstrap && go build -cover -covermode=atomic -coverpkg=github.com/tech-log/tech-log-backend/... -o "$$d/requestpath" ./cmd/requestpath) && \
	GOCOVERDIR="$$d" "$$d/requestpath" -root . -doc docs/architecture.md

.PHONY: test-prereq
test-prereq: ## the programs make test needs (redis-server, redis-cli, redis-sentinel): installed when missing (root + apt-get), else one line naming them
	@$(PREREQ) "make test" $(TEST_PROGRAMS)

# Each module must build and pass on its own go.mod (require + replace for
# its siblings): go.work would hide a missing require. The unit tests (-short,
# no Redis, no race detector) are enough to compile and run every package.
# make test runs gowork-same-build instead, which proves the same in seconds:
# with GOWORK=off every package of the module and of its tests resolves
# (go list fails on a missing require or go.sum line), and it resolves to
# the same modules at the same versions, siblings to the same directories,
# as in the workspace, so the tests make test has just run are the tests of
# that build.
.PHONY: gowork-same-build
gowork-same-build: ## every module's packages and test dependencies resolve with GOWORK=off, to the same module versions (siblings: the same directories) as in the workspace
	@fmt='{{with .Module}}{{.Path}} {{if .Replace}}{{.Replace.Dir}}{{else if .Version}}{{.Version}}{{else}}{{.Dir}}{{end}}{{end}}'; \
	for m in $(MODULES); do \
		ws=$$(cd $$m && go list -deps -test -f "$$fmt" ./... | sort -u) || exit 1; \
		off=$$(cd $$m && GOWORK=off go list -deps -test -f "$$fmt" ./... | sort -u) || { echo "gowork-same-build: $${m#$(CURDIR)/} does not resolve with GOWORK=off"; exit 1; }; \
		if [ "$$ws" != "$$off" ]; then \
			echo "gowork-same-build: $${m#$(CURDIR)/} builds other modules with GOWORK=off (<: workspace, >: its own go.mod):"; \
			diff <(echo "$$ws") <(echo "$$off"); exit 1; \
		fi; \
		echo "== gowork-same-build $${m#$(CURDIR)/}: $$(echo "$$ws" | wc -l) modules, the same with GOWORK=off"; \
	done

.PHONY: test-gowork-off
test-gowork-off: ## unit tests of every module with GOWORK=off (its own go.mod only)
	@for m in $(MODULES); do \
		echo "== GOWORK=off go test -short $$m"; \
		(cd $$m && GOWORK=off go test -short -count=1 ./...) || exit 1; \
	done

.PHONY: test-unit
test-unit: ## unit tests only (-short: no Redis needed)
	@for m in $(MODULES); do \
		echo "== go test -short $$m"; \
		(cd $$m && go test -short $(GO_TEST_FLAGS) ./...) || exit 1; \
	done

.PHONY: arch-check
arch-check: ## fail on any import edge outside the module table of tools/internal/archrules (docs/architecture.md)
	@cd tools && go run ./cmd/archcheck -root ..

.PHONY: docs-check
docs-check: ## fail when a tracked file cites a document or a path outside the repository (tools/internal/standalone); cite docs/contract.md instead
	@cd tools && go test -count=1 -run '^TestRepositoryStandsAlone$$' ./internal/standalone/

.PHONY: lint
lint: ## gofmt, go vet (workspace, with the VET_TAGS lanes, and GOWORK=off per module), golangci-lint (.golangci.yml), govulncheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do \
		echo "== go vet $$m"; \
		(cd $$m && go vet ./... && go vet -tags '$(VET_TAGS)' ./... && GOWORK=off go vet ./...) || exit 1; \
	done
	@$(MAKE) golangci
	@$(MAKE) vuln

# golangci-lint, pinned and built from the module proxy with go install (no
# prebuilt download); the binary is kept in LINT_CACHE. One run per module
# with the repository's .golangci.yml; a run waits for another one on the
# machine (--allow-serial-runners) instead of failing.
LINT_VERSION ?= v2.15.0
LINT_CACHE ?= $(HOME)/.cache/tlb-lint

.PHONY: golangci
golangci: ## golangci-lint $(LINT_VERSION) on every module (govet, staticcheck, unused, errcheck, ineffassign, exhaustive)
	@bin="$(LINT_CACHE)/golangci-lint-$(LINT_VERSION)"; \
		[ -x "$$bin/golangci-lint" ] || (cd / && GOBIN="$$bin" GOFLAGS=-mod=mod go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(LINT_VERSION)); \
		for m in $(MODULES); do \
			echo "== golangci-lint $${m#$(CURDIR)/}"; \
			(cd $$m && "$$bin/golangci-lint" run --allow-serial-runners --config $(CURDIR)/.golangci.yml ./...) || exit 1; \
		done

# govulncheck, offline. The golang.org/x/vulndb module (served by the module
# proxy, pinned below) ships the OSV entries as flat files in data/osv, and
# govulncheck accepts such a directory as its -db (it builds the index in
# memory, ~1 s), so neither vuln.go.dev nor vulndb's indexdb is needed. The
# module cache keeps the snapshot; the binary is kept in VULN_CACHE.
GOVULNCHECK_VERSION ?= v1.9.0
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULN_CACHE ?= $(HOME)/.cache/tlb-vulndb

.PHONY: vuln
vuln: ## govulncheck (symbols, tests included) of every module, workspace and GOWORK=off, offline against the pinned vulndb snapshot; fails on any finding
	@bin="$(VULN_CACHE)/govulncheck-$(GOVULNCHECK_VERSION)"; \
		GOBIN="$$bin" go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION); \
		db=$$(cd / && go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
		if [ ! -d "$$db/data/osv" ]; then echo "vuln: no data/osv in golang.org/x/vulndb@$(VULNDB_VERSION) ($$db)"; exit 1; fi; \
		echo "== govulncheck $(GOVULNCHECK_VERSION), golang.org/x/vulndb@$(VULNDB_VERSION) ($$(ls "$$db/data/osv" | wc -l) entries), $$(go env GOVERSION)"; \
		for m in $(MODULES); do \
			for w in "" off; do \
				echo "== govulncheck $${m#$(CURDIR)/}$${w:+ (GOWORK=off)}"; \
				out=$$(cd $$m && env $${w:+GOWORK=off} "$$bin/govulncheck" -test -db "file://$$db/data/osv" ./... 2>&1) || \
					{ echo "$$out"; echo "vuln: govulncheck failed in $$m$${w:+ (GOWORK=off)}"; exit 1; }; \
				echo "$$out" | grep -v -e '^$$' -e '^===' -e "^Use '-show verbose'" || true; \
			done; \
		done

.PHONY: fuzz
fuzz: ## run every Fuzz* target of every module for about FUZZTIME each (default 10s) in batches of FUZZBATCH executions
# A count budget (-fuzztime=Nx) has no wall-clock deadline, so Go 1.26's fuzz
# coordinator race (go.dev/issue/75804: a bare "context deadline exceeded"
# when a duration -fuzztime expires mid-exec, no failing input) cannot occur;
# batches repeat until FUZZTIME has passed, and every failure fails the target.
	@budget=$$(echo '$(FUZZTIME)' | sed -n 's/^\([0-9][0-9]*\)s$$/\1/p'); \
	[ -n "$$budget" ] || { echo "FUZZTIME=$(FUZZTIME): want whole seconds such as 10s"; exit 2; }; \
	for m in $(MODULES); do \
		for d in $$(cd $$m && go list -f '{{.Dir}}' ./...); do \
			grep -qs '^func Fuzz' $$d/*_test.go || continue; \
			for f in $$(cd $$d && go test -list '^Fuzz' . | grep '^Fuzz'); do \
				echo "== fuzz $$f ($${d#$(CURDIR)/}, $(FUZZTIME) in batches of $(FUZZBATCH))"; \
				end=$$(( $$(date +%s) + budget )); n=0; \
				while [ $$n -lt 1000 ]; do \
					out=$$(cd $$d && go test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZBATCH) . 2>&1) || { echo "$$out" | tail -40; exit 1; }; \
					n=$$((n + 1)); [ $$(date +%s) -lt $$end ] || break; \
				done; \
				echo "ok $$f: $$n batches"; \
			done; \
		done; \
	done

.PHONY: tidy
tidy: ## go mod tidy in every module
	@for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy) || exit 1; done

.PHONY: bench
bench: ## side-by-side benchmarks vs bare EvalSha, redis_rate, ulule, redis-benchmark -> bench/results.json, docs/performance.md (not part of make test); BENCH_SMOKE=1: a quick shape check
	@$(PREREQ) "make bench" redis-server redis-cli redis-benchmark
	@cd tools && go run ./cmd/bench -root .. $(if $(filter-out 0,$(BENCH_SMOKE)),-smoke)
	@$(MAKE) --no-print-directory bench-rls

CEILING_REPS ?= 15

.PHONY: bench-ceiling
bench-ceiling: ## one caller: a floor script (TIME, GET, SET, the 7-integer reply, no logic), bare EvalSha of the bound programs and the provider, each vs redis_rate in the same repetition (CEILING_REPS, default 15); prints a table, writes nothing
	@$(PREREQ) "make bench-ceiling" redis-server
	@cd tools && go run ./cmd/bench -root .. -ceiling $(CEILING_REPS)

LEASE_REPS ?= 9

.PHONY: bench-lease
bench-lease: ## the lease phase alone (issue 37): a hot leased subject vs the unleased provider vs redis_rate at c=1/16/64, a nearly spent budget leased vs unleased, and a concurrency limit's acquire + release vs one decision at c=1/16/64, LEASE_REPS repetitions (default 9) -> bench/results.json (of an earlier make bench) and docs/performance.md's targets and lease sections; BENCH_SMOKE=1: a quick shape check that writes nothing
	@$(PREREQ) "make bench-lease" redis-server
	@cd tools && go run ./cmd/bench -root .. -lease $(LEASE_REPS) $(if $(filter-out 0,$(BENCH_SMOKE)),-smoke)

DURATION ?= 30m

.PHONY: soak
soak: ## the lease history checkers for DURATION (a Go duration, default 30m, under 23h): three leasing instances of a hot subject of each leased algorithm (fixed window, token bucket, GCRA, sliding log, sliding window counter) on a private redis-server, random demand, and at random an instance killed holding leases, one cut off from Redis, or Redis restarted (append-only file); fails on any window or interval over the algorithm's bound (ADR 0042)
	@$(PREREQ) "make soak" redis-server
	@cd adapter-outbound-cache-redis && REDIS_REQUIRED=1 SOAK_DURATION=$(DURATION) go test -count=1 -run '^TestSoak$$' -timeout 24h -v ./ratelease/

RUN_ADDR ?= 127.0.0.1:8080
RUN_ADMIN_ADDR ?= 127.0.0.1:9090

.PHONY: run
run: ## build and start the service on the embedded defaults (no Redis needed) with a verified API key; RUN_ADDR=host:port (public), RUN_ADMIN_ADDR=host:port (/metrics, detailed /readyz)
	@mkdir -p bin
	@cd app-bootstrap && go build -o ../bin/tech-log-backend ./cmd/tech-log-backend
	@key=$$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n'); \
	printf '# SHA-256 digests of the accepted X-API-Key values, one per line (make run)\n%s\n' \
		"$$(printf %s "$$key" | sha256sum | cut -d' ' -f1)" > bin/api-keys; \
	echo "tech-log-backend on http://$(RUN_ADDR) (public: /api/, /healthz, /readyz ready or not)"; \
	echo "  admin listener on http://$(RUN_ADMIN_ADDR) (APP_WEB_ADMIN_ADDR: /metrics, the detailed /readyz, /healthz)"; \
	echo "APP_WEB_IDENTITY=api-key, keys in bin/api-keys (digests only; SIGHUP reloads),"; \
	echo "local limiter 10 req/s, burst 20 per client IP, in front of the key check (Ctrl-C stops it). Your key for this run: $$key"; \
	echo "  curl -i -H 'X-API-Key: $$key' http://$(RUN_ADDR)/api/v1/ping                      # 200"; \
	echo "  curl -s -o /dev/null -w '%{http_code} ' -H 'X-API-Key: $$key' 'http://$(RUN_ADDR)/api/v1/ping?n=[1-30]'; echo   # a limited client: up to 20 x 200, then 429s"; \
	echo "  curl -i -H 'X-API-Key: invented-key' http://$(RUN_ADDR)/api/v1/ping               # 401 (429 once this address's local budget is spent)"; \
	echo "  curl -s http://$(RUN_ADDR)/healthz; curl -s http://$(RUN_ADDR)/readyz; curl -s http://$(RUN_ADMIN_ADDR)/readyz; curl -s http://$(RUN_ADMIN_ADDR)/metrics | grep ^tlb_"; \
	APP_WEB_IDENTITY=api-key APP_WEB_API_KEYS_FILE=$(CURDIR)/bin/api-keys APP_WEB_ADMIN_ADDR=$(RUN_ADMIN_ADDR) exec ./bin/tech-log-backend -addr $(RUN_ADDR)

.PHONY: demo
demo: ## two instances + private redis-server + bounded load: the global limit across instances, then fail-closed without Redis
	@$(PREREQ) "make demo" redis-server
	@cd tools && go run ./cmd/demo -root ..

.PHONY: test-partitions
test-partitions: ## partition lane (root, iproute2): each Redis node and sentinel in its own network namespace the test creates; a primary cut off with a minority while the limiter still reaches it; lost acknowledged admissions measured with and without REPLICATION_ACKS; then the Sentinel failover acks matrix (TLB_FAILOVER_MATRIX=1)
	@$(PREREQ) "make test-partitions" redis-server redis-sentinel
	@cd adapter-outbound-cache-redis && go test -tags partitions -count=1 -race -run 'TestPartition' -v ./reliability/
	@cd adapter-outbound-cache-redis && TLB_FAILOVER_MATRIX=1 REDIS_REQUIRED=1 go test -count=1 -race -run 'TestSentinelFailoverUnderLoad' -v ./redisrate/

.PHONY: demo-fallback
demo-fallback: ## the two-instance demo with the demo policy "local-fallback" (30s windows): with Redis down each instance decides locally on half the limit; Redis back and both instances at once: nothing admitted beyond max(L, U + A), pending charges back to 0
	@$(PREREQ) "make demo-fallback" redis-server
	@cd tools && go run ./cmd/demo -root .. -fallback -window 30s

.PHONY: demo-cluster
demo-cluster: ## the two-instance demo against a private 3-primary Redis Cluster: the global limit holds and the keys spread over the primaries
	@$(PREREQ) "make demo-cluster" redis-server
	@cd tools && go run ./cmd/demo -root .. -cluster -clients 12

.PHONY: redis-image
redis-image: ## build the local Redis test image (FROM scratch, host redis-server); REDIS_TEST_IMAGE names it
	@$(PREREQ) "make redis-image" redis-server
	@tools/redis-image/build.sh "$${REDIS_TEST_IMAGE:-tech-log/redis-test:local}"

IMAGE ?= tech-log/tech-log-backend:local

.PHONY: image
image: ## build the service image (Dockerfile: static CGO_ENABLED=0 binary FROM scratch, non-root, HEALTHCHECK via -healthcheck; no registry) and check it becomes healthy; IMAGE names it
	@deploy/image/build.sh "$(IMAGE)"

.PHONY: compose-demo
compose-demo: image redis-image ## deploy/compose.yaml: two instances + the local Redis image; global limit across both, fail closed without Redis; always torn down
	@TLB_IMAGE="$(IMAGE)" REDIS_TEST_IMAGE="$${REDIS_TEST_IMAGE:-tech-log/redis-test:local}" deploy/compose-demo.sh

.PHONY: test-containers
# The container lane runs every package of the Redis adapter but programs
# (and programs/luasrc): their tests check what the Lua programs compute, on
# a redis-server that is the same binary in the image (make redis-image
# copies the host's) and in the process lane of make test, so the container
# adds nothing to them; what the container changes (docker networking, stop,
# kill, pause) is the other packages' subject.
test-containers: redis-image ## the Redis adapter's tests through testcontainers (container lane), race detector on; every package but programs (the same redis-server binary as make test's process lane)
	@cd adapter-outbound-cache-redis && \
		pkgs=$$(go list ./... | grep -v -e '/programs$$' -e '/programs/') && \
		REDIS_TEST_LANE=container REDIS_REQUIRED=1 \
		REDIS_TEST_IMAGE="$${REDIS_TEST_IMAGE:-tech-log/redis-test:local}" \
		go test -race -count=1 $$pkgs

# The reference: envoyproxy/ratelimit, the module proxy's pseudo-version of
# its main branch (it tags no release module versions). Pinned here only;
# make envoy-rls-bin installs its service_cmd and client_cmd into
# ENVOY_RLS_BIN with go install (never a copy of its code in this
# repository) and records the version there, so a change of the pin
# reinstalls.
ENVOY_RLS_VERSION ?= v1.4.1-0.20260122083618-3fb702589d36
ENVOY_RLS_BIN ?= $(CURDIR)/bin/envoy-rls
export ENVOY_RLS_BIN

.PHONY: envoy-rls-bin
envoy-rls-bin: ## install the reference envoyproxy/ratelimit@$(ENVOY_RLS_VERSION) service_cmd and client_cmd into bin/envoy-rls (go install from the module proxy)
	@if [ -x "$(ENVOY_RLS_BIN)/service_cmd" ] && [ -x "$(ENVOY_RLS_BIN)/client_cmd" ] && \
		[ "$$(cat "$(ENVOY_RLS_BIN)/VERSION" 2>/dev/null)" = "$(ENVOY_RLS_VERSION)" ]; then \
		echo "== envoyproxy/ratelimit $(ENVOY_RLS_VERSION) in $(ENVOY_RLS_BIN)"; \
	else \
		echo "== go install envoyproxy/ratelimit $(ENVOY_RLS_VERSION) service_cmd client_cmd -> $(ENVOY_RLS_BIN)"; \
		mkdir -p "$(ENVOY_RLS_BIN)" && rm -f "$(ENVOY_RLS_BIN)/VERSION" && \
		(cd / && GOWORK=off GOBIN="$(ENVOY_RLS_BIN)" GOFLAGS=-mod=mod go install \
			github.com/envoyproxy/ratelimit/src/service_cmd@$(ENVOY_RLS_VERSION) \
			github.com/envoyproxy/ratelimit/src/client_cmd@$(ENVOY_RLS_VERSION)) && \
		echo "$(ENVOY_RLS_VERSION)" > "$(ENVOY_RLS_BIN)/VERSION"; \
	fi

RLS_BENCH_REPS ?= 5
RLS_BENCH_DURATION ?= 2s

.PHONY: demo-rls
demo-rls: envoy-rls-bin ## our service's Envoy RLS server over a YAML (5 per user per minute, an unlimited key): requests through envoyproxy/ratelimit's client_cmd and POST /json; exits non-zero when the limits do not hold
	@$(PREREQ) "make demo-rls" redis-server
	@cd tools && go run ./cmd/rlsdemo -root ..

.PHONY: bench-rls
bench-rls: envoy-rls-bin ## our Envoy RLS server vs envoyproxy/ratelimit on one private redis-server: throughput and p99 at c=1/16/64 (1 and 3 descriptors), a flood of one denied descriptor vs its local cache, Redis memory per value; interleaved repetitions (RLS_BENCH_REPS, default 5) -> docs/performance.md; BENCH_SMOKE=1: a quick shape check that writes nothing
	@$(PREREQ) "make bench-rls" redis-server
	@cd tools && go run ./cmd/rlsbench -root .. -reps $(RLS_BENCH_REPS) -duration $(RLS_BENCH_DURATION) $(if $(filter-out 0,$(BENCH_SMOKE)),-smoke)

.PHONY: test-rls-diff
test-rls-diff: envoy-rls-bin ## the differential test: the same fixed-window YAML and requests (client_cmd and a Go gRPC client) to envoyproxy/ratelimit and to our service, codes equal; the reference binaries and redis-server required
	@$(PREREQ) "make test-rls-diff" redis-server
	@cd tools && ENVOY_RLS_REQUIRED=1 REDIS_REQUIRED=1 go test -count=1 -race -v ./internal/envoyrls/ ./cmd/rlsbench/ ./cmd/rlsdemo/
