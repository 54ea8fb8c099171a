// Package pgtest gives tests the PostgreSQL server they may use: the one
// OUTBOXLAB_TEST_DATABASE_URL names (make test starts a throwaway cluster
// through scripts/postgres.sh and sets it), or none, and then the test is
// skipped with one line that says how to get one.
package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the server the PostgreSQL tests run against.
const EnvVar = "OUTBOXLAB_TEST_DATABASE_URL"

// URL returns the test server's URL, or skips t when there is none.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvVar)
	if u == "" {
		t.Skip("no PostgreSQL: set " + EnvVar + " or run `make test` where PostgreSQL is installed (apt-get install postgresql)")
	}
	return u
}

// Exec runs statements on the test server at url as its login, one at a
// time; the first that fails fails t.
func Exec(t testing.TB, url string, stmts ...string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Strings runs query on the test server at url as its login and returns
// the first column of each row as text; an error fails t.
func Strings(t testing.TB, url, query string, args ...any) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}
