#!/usr/bin/env bash
# scripts/test.sh: what `make test` runs. Vet, then the tests in four runs
# of go test, against a real PostgreSQL and a real browser wherever they are
# installed; it says in one line what it skips where they are not.
#
# Why three runs (and a fourth). modernc's SQLite is C translated to Go, so the race
# detector instruments the whole database engine and makes a lesson about
# fifteen times slower (the registry tests took 22.5 s without it, 328 s
# with it). The lab's own goroutines (workers, barrier, broker and heartbeat
# loops, pipes to child processes, the store's ledgers) live in the packages
# of run 1, whose tests all run under -race. The three packages whose tests
# run whole lessons (scenarios, explore, cmd) run once without it (run 3),
# and under it only the tests RACE_TESTS names (run 2): one lesson per kind
# of application instance (TestRaceOneLessonPerInstanceKind, which
# TestRaceRunsCoverEveryInstanceKind keeps complete), the CLI's signal
# handling, its output-folder checks and grade's parallel graders.
#
# The relay challenges' runs on PostgreSQL (run 4) are the same lab
# goroutines as their SQLite runs, which run 1 puts under -race; each
# waits mostly on the server making and dropping its role and database,
# so they run without the detector, beside each other.
#
# Where the tests write. Each run's temporary folders go to a fresh folder
# on /dev/shm (memory) where it is writable, removed at the end: a lesson's
# SQLite files and WAL are the same there, and no test measures the disk.
# The throwaway PostgreSQL cluster likewise runs without fsync.
#
# Four parallel tests per package, not one per core: most of them wait on
# child processes, busy timeouts and the scenario clock, not on the CPU
# (eight were no faster here). Every wait inside a test is bounded, so a
# hang fails in seconds; -timeout is the last resort.
#
# Environment: OUTBOXLAB_TEST_DATABASE_URL runs the PostgreSQL tests against
# that server instead of a throwaway cluster; GO is the go command.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"

RACE_TESTS='^(TestRace|TestSignalsStopTheRun|TestStopWithoutSignal|TestCheckOutConcurrently|TestGradeExamples|TestGradeInterrupted)'
FLAGS=(-count=1 -parallel 4 -timeout 10m)
LESSON_PACKAGES=(./scenarios/... ./explore/... ./cmd/...)

pgdir=""
testtmp=""
cleanup() {
  if [ -n "$pgdir" ]; then scripts/postgres.sh stop "$pgdir" || true; fi
  if [ -n "$testtmp" ]; then rm -rf -- "${testtmp:?}"; fi
}
trap cleanup EXIT

"$GO" vet ./...

if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  testtmp="$(mktemp -d /dev/shm/outboxlab-test.XXXXXX)"
  export TMPDIR="$testtmp"
fi

if ! command -v chromium >/dev/null 2>&1 && [ -z "${OUTBOXLAB_CHROMIUM:-}" ]; then
  echo "make test: SKIPPING the browser test of the HTML pages (TestHTMLInBrowser): no chromium on PATH (apt-get install chromium to run it)"
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "make test: SKIPPING the Python reference relay's challenge tests (TestPythonRelay...): no python3 on PATH (apt-get install python3 to run them)"
fi
if [ -n "${OUTBOXLAB_TEST_DATABASE_URL:-}" ]; then
  echo "make test: PostgreSQL tests run against $OUTBOXLAB_TEST_DATABASE_URL"
elif ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  # The cluster's folder stays on disk: the postgres user must reach it.
  pgdir="$(mktemp -d /tmp/outboxlab-test-pg.XXXXXX)"
  OUTBOXLAB_TEST_DATABASE_URL="$(scripts/postgres.sh start "$pgdir")"
  export OUTBOXLAB_TEST_DATABASE_URL
  echo "make test: PostgreSQL tests run against a throwaway cluster in $pgdir"
else
  echo "make test: SKIPPING the PostgreSQL tests: PostgreSQL is not installed (apt-get install postgresql, or set OUTBOXLAB_TEST_DATABASE_URL)"
fi

mapfile -t race_packages < <("$GO" list ./... | grep -v -e /scenarios -e /explore -e /cmd/)
echo "make test: 1/4 under -race: every package whose tests run no whole lesson"
"$GO" test -race "${FLAGS[@]}" "${race_packages[@]}"
echo "make test: 2/4 under -race: one lesson per kind of instance, and the CLI's own goroutines"
"$GO" test -race "${FLAGS[@]}" -run "$RACE_TESTS" ./scenarios ./cmd/outboxlab
echo "make test: 3/4 without -race: every test of the packages that run whole lessons"
"$GO" test "${FLAGS[@]}" "${LESSON_PACKAGES[@]}"
if [ -n "${OUTBOXLAB_TEST_DATABASE_URL:-}" ]; then
  echo "make test: 4/4 without -race: the reference relays and their answer key on PostgreSQL"
  "$GO" test "${FLAGS[@]}" -run '^(TestAnswerKey|TestReferenceRelaysPassEverySequence)$/^postgres/' ./challenge
else
  echo "make test: 4/4 SKIPPED: the relay challenges on PostgreSQL need a server"
fi
