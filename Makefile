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

## test: vet, then every test: the packages with the lab's goroutines under
## the race detector, the packages that run whole lessons once without it
## (and their goroutine tests under it), against a real PostgreSQL and a
## real browser where installed. scripts/test.sh says why, and what it skips.
test:
	GO=$(GO) scripts/test.sh

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

## check-figures: prove every figure the course fixes (each lesson's Figures) against a run of
## the lesson: TestCourseFigures on SQLite, and on PostgreSQL where OUTBOXLAB_TEST_DATABASE_URL
## names a server; then, only where ../shared/tools/check-figures is beside this repository,
## that tool on the built binary too (on the same server where one is named)
check-figures: build
	@if [ -n "$${OUTBOXLAB_TEST_DATABASE_URL:-}" ]; then echo "make check-figures: on SQLite and on PostgreSQL (OUTBOXLAB_TEST_DATABASE_URL)"; \
	else echo "make check-figures: on SQLite only (set OUTBOXLAB_TEST_DATABASE_URL, or see scripts/postgres.sh, for PostgreSQL too)"; fi
	$(GO) test -count=1 -run 'TestCourseFigures|TestFigureDiffs' ./scenarios
	@if [ -x ../shared/tools/check-figures ]; then \
		echo "../shared/tools/check-figures ./$(BIN)"; ../shared/tools/check-figures ./$(BIN) || exit 1; \
		if [ -n "$${OUTBOXLAB_TEST_DATABASE_URL:-}" ]; then \
			echo "../shared/tools/check-figures ./$(BIN) --db (OUTBOXLAB_TEST_DATABASE_URL)"; \
			../shared/tools/check-figures ./$(BIN) --db "$$OUTBOXLAB_TEST_DATABASE_URL" || exit 1; \
		fi; \
	else echo "make check-figures: no ../shared/tools/check-figures beside this repository: TestCourseFigures alone proves the figures"; fi

clean:
	rm -rf bin $(OUT)
