package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/store"
)

// TestRunOnPostgres runs the Day 15 pair on the test server as a user
// would: the JSON says "postgres", the figures are SQLite's, the report
// names the server without a password and the run's schema, and the schema
// is gone afterwards (kept with --keep-db).
func TestRunOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, keep := range []bool{false, true} {
		args := []string{"run", "session-15-outbox-leasing", "session-15-competing-workers-no-claim", "--db", url, "--format", "json", "--out", t.TempDir()}
		if keep {
			args = append(args, "--keep-db")
		}
		got := runCLI(t, args...)
		if got.code != 0 {
			t.Fatalf("exit %d: %s %s", got.code, got.stdout, got.stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(got.stdout), "\n") {
			var r reports.JSONResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("bad JSON %q: %v", line, err)
			}
			if r.Engine != "postgres" || !r.Passed {
				t.Errorf("%s: engine %q, passed %v", r.Scenario, r.Engine, r.Passed)
			}
			want := map[string]float64{"processing_attempts": 6, "paid": 4, "failed": 2, "claim_lock_waits": 0}
			if r.Scenario == "session-15-competing-workers-no-claim" {
				want = map[string]float64{"processing_attempts": 12, "status_checks": 12, "processed_more_than_once": 6}
			}
			for k, v := range want {
				if m, ok := r.Metrics[k]; !ok || m != v {
					t.Errorf("%s: %s = %v (present %v), want %v", r.Scenario, k, m, ok, v)
				}
			}
			report, err := os.ReadFile(r.Report)
			if err != nil {
				t.Fatal(err)
			}
			schema := schemaNamed(t, string(report))
			if !strings.Contains(string(report), store.RedactURL(url)) || !strings.Contains(string(report), "FOR UPDATE") && r.Scenario == "session-15-outbox-leasing" {
				t.Errorf("%s: report lacks the server or the PostgreSQL claim", r.Scenario)
			}
			if exists := schemaExists(t, url, schema); exists != keep {
				t.Errorf("%s: schema %s exists = %v after the run, want %v", r.Scenario, schema, exists, keep)
			}
			if keep {
				if err := store.DropSchema(context.Background(), url, schema, store.Config{}); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// TestRunOnPostgresHidesThePassword: a password in --db never reaches a
// report, stdout or stderr.
func TestRunOnPostgresHidesThePassword(t *testing.T) {
	t.Parallel()
	got := runCLI(t, "run", "session-16-stale-ack-fencing", "--db", "postgres://lab:s3cr3t-pw@127.0.0.1:1/none?sslmode=disable")
	if got.code != 2 || strings.Contains(got.stdout+got.stderr, "s3cr3t-pw") {
		t.Fatalf("exit %d; the password leaked or the error is missing: %s %s", got.code, got.stdout, got.stderr)
	}
}

// schemaNamed reads the run's schema from the report's Database line.
func schemaNamed(t *testing.T, report string) string {
	t.Helper()
	for _, line := range strings.Split(report, "\n") {
		if _, rest, ok := strings.Cut(line, ", schema "); ok && strings.HasPrefix(line, "Database:") {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no schema in the report's Database line:\n%s", report)
	return ""
}

func schemaExists(t *testing.T, url, schema string) bool {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := db.Count(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = ?", schema)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}
