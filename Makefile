# outboxlab: the two commands a newcomer needs are `make run` and `make test`.

GO          ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
OUT         ?= run-reports
BIN         := bin/outboxlab

.PHONY: run run-all build test lint tidy-check bench check-figures clean

## run: run both Day 15 scenarios (the race and the fix) and print where the reports are
run: build
	./$(BIN) run session-15-competing-workers-no-claim session-15-outbox-leasing --out $(OUT)

## run-all: run every scenario of the course
run-all: build
	./$(BIN) run --all --out $(OUT)

build:
	$(GO) build -o $(BIN) ./cmd/outboxlab

## test: vet, then every test under the race detector; the PostgreSQL tests
## run against $$OUTBOXLAB_TEST_DATABASE_URL, else a throwaway cluster that
## scripts/postgres.sh starts when PostgreSQL is installed (and always stops).
## Four parallel tests per package, not one per core: most of them wait on
## child processes (run --processes) and disk syncs, not on the CPU. A package
## may take 25 minutes, not go test's default 10: on a loaded two-core machine
## the scenarios package alone took 16 (every wait inside a test is bounded).
TESTFLAGS := -race -count=1 -parallel 4 -timeout 25m
test:
	$(GO) vet ./...
	@command -v chromium >/dev/null 2>&1 || [ -n "$$OUTBOXLAB_CHROMIUM" ] || echo "make test: SKIPPING the browser test of the HTML pages (TestHTMLInBrowser): no chromium on PATH (apt-get install chromium to run it)"
	@set -e; \
	if [ -n "$$OUTBOXLAB_TEST_DATABASE_URL" ]; then \
	  echo "make test: PostgreSQL tests run against $$OUTBOXLAB_TEST_DATABASE_URL"; \
	  $(GO) test $(TESTFLAGS) ./...; \
	elif ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  pgdir="$$(mktemp -d "$${TMPDIR:-/tmp}/outboxlab-test-pg.XXXXXX")"; \
	  trap 'scripts/postgres.sh stop "$$pgdir"' EXIT; \
	  OUTBOXLAB_TEST_DATABASE_URL="$$(scripts/postgres.sh start "$$pgdir")"; \
	  export OUTBOXLAB_TEST_DATABASE_URL; \
	  echo "make test: PostgreSQL tests run against a throwaway cluster in $$pgdir"; \
	  $(GO) test $(TESTFLAGS) ./...; \
	else \
	  echo "make test: SKIPPING the PostgreSQL tests: PostgreSQL is not installed (apt-get install postgresql, or set OUTBOXLAB_TEST_DATABASE_URL)"; \
	  $(GO) test $(TESTFLAGS) ./...; \
	fi

## lint: staticcheck, fetched through the Go module proxy
lint:
	$(GO) run $(STATICCHECK) ./...

## tidy-check: fail when go.mod/go.sum are not tidy or a file is not gofmt-clean
tidy-check:
	$(GO) mod tidy -diff
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

## bench: the Go benchmarks of the claim paths
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./store/

## check-figures: compare every scenario's JSON metrics with LESSONS.md
check-figures: build
	../shared/tools/check-figures ./$(BIN)

clean:
	rm -rf bin $(OUT)
