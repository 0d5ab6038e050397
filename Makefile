# The two commands of the README: `make run` and `make test`. Both do their
# own set-up on a fresh Debian machine with Go (design.md §9).

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: run demo build check test vet fuzz vulncheck bench clean

# As the build target's command (deploy/ checks that one against the Dockerfile).
GOBUILD = CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)"

# The first build on a machine compiles the standard library and every
# dependency, about 360 packages: measured 100 s on 2 busy cores with the
# modules already downloaded (65 s of CPU), up to 6 minutes on a loaded
# machine; later builds reuse Go's build cache and take seconds.
# scripts/build-progress.sh runs go build with -v and prints the count of
# packages compiled every 5 s, or the one go build line looks like a hang.
BUILD_NOTE := a first build compiles ~360 packages (1 to 6 minutes on 2 cores; progress every 5 s); later builds take seconds
PROGRESS = sh scripts/build-progress.sh

build:
	@echo "make: building ./mcpgate; $(BUILD_NOTE)"
	@$(PROGRESS) CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o mcpgate ./cmd/mcpgate

# ensure-postgres.sh (which may apt-get install postgresql) runs while Go
# compiles; its exit status is checked before serving.
PREPARE = pg=; if [ -z "$$DATABASE_URL" ]; then sh scripts/ensure-postgres.sh & pg=$$!; fi; \
	echo "make: building $(1); $(BUILD_NOTE)"; \
	if ! $(PROGRESS) $(GOBUILD) -o . $(2); then [ -z "$$pg" ] || wait $$pg; exit 1; fi; \
	if [ -n "$$pg" ] && ! wait $$pg; then exit 1; fi

# Serve on http://localhost:8080 with the embedded PostgreSQL under ./data
# (installs Debian's postgresql server package when it is missing).
run:
	@$(call PREPARE,./mcpgate,./cmd/mcpgate); \
	echo "make: starting mcpgate serve; open http://localhost:8080 when it logs \"mcpgate serving\" (Ctrl-C stops it)"; \
	LOG_FORMAT=$${LOG_FORMAT:-text} ./mcpgate serve

# As run, plus the local E2B simulator on 127.0.0.1:3001: any key shaped like
# e2b_<hex> works in the dashboard. Both binaries come from one go build.
demo:
	@$(call PREPARE,./mcpgate and ./e2bsim,./cmd/mcpgate ./cmd/e2bsim); \
	echo "make: starting the E2B simulator on 127.0.0.1:3001 and mcpgate serve on http://localhost:8080 (demo: any e2b_<hex> key works; Ctrl-C stops both)"; \
	./e2bsim --listen 127.0.0.1:3001 & sim=$$!; trap "kill $$sim 2>/dev/null" EXIT INT TERM; \
	E2B_API_URL=http://127.0.0.1:3001 E2B_DASHBOARD_API_URL=http://127.0.0.1:3001 \
	LOG_FORMAT=$${LOG_FORMAT:-text} ./mcpgate serve

# go vet, staticcheck (fetched from the module proxy at a pinned version) and gofmt.
vet:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The fast tier, for while editing: vet, then every test that needs no
# PostgreSQL, Chromium or Node.js, without -race. Under -short those tests
# skip themselves (internal/testutil.SkipIfShort, which storetest, npmtest,
# the embedded clusters and the browser helper call); without -short, as in
# make test, a missing prerequisite fails them.
check: vet
	$(GO) test -short ./...

# Every test: unit, real-Postgres integration, MCP end to end and browser.
# The database comes from TEST_DATABASE_URL, else a server on 127.0.0.1:5432,
# else the embedded PostgreSQL (scripts/test-db.sh).
test: vet
	sh scripts/ensure-postgres.sh
	@if [ -f scripts/ensure-chromium.sh ]; then sh scripts/ensure-chromium.sh; fi
	sh scripts/ensure-node.sh
	TEST_DATABASE_URL="$$(sh scripts/test-db.sh)" $(GO) test -race -count=1 -timeout 20m ./...

# Longer fuzzing of every fuzz target (make test runs their seeds only).
# FUZZTIME per target (default 30s); some targets need the test database.
fuzz:
	sh scripts/ensure-postgres.sh
	@export TEST_DATABASE_URL="$${TEST_DATABASE_URL:-$$(sh scripts/test-db.sh)}"; \
	for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-30s} $$pkg || exit 1; \
	  done; \
	done

# Known vulnerabilities in the dependencies and the standard library. Not part
# of make test: govulncheck downloads its database from vuln.go.dev, which
# offline machines cannot reach (the module proxy serves the tool, not the
# database). Set GOVULNDB=file:///path/to/vulndb to use a local copy.
vulncheck:
	$(GO) run golang.org/x/vuln/cmd/govulncheck@v1.9.0 $${GOVULNDB:+-db $$GOVULNDB} ./...

# Load benchmark (design.md §10): e2bsim, the gateway and a fresh database
# on this machine, MCP clients against direct E2B calls; prints one table.
bench:
	@sh scripts/ensure-postgres.sh
	@TEST_DATABASE_URL="$$(sh scripts/test-db.sh)" $(GO) run ./bench $(BENCH_FLAGS)

clean:
	rm -f mcpgate e2bsim
