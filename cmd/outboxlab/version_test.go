package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
)

// TestVersion: --version and the version command print the build and the
// engines it runs, read off the build and the SQLite library itself; bad
// input is exit 2 with one line; the SQLite probe leaves no folder behind.
func TestVersion(t *testing.T) {
	t.Parallel()
	sqlite := regexp.MustCompile(`(?m)^SQLite:     3\.\d+\.\d+ \(modernc\.org/sqlite v\d+\.\d+\.\d+, pure Go\)$`)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{"Flag", []string{"--version"}, exitOK, []string{"outboxlab:  github.com/outboxlab/outboxlab ", "Go:         go1.", "driver github.com/jackc/pgx/v5 v5.", "server not asked"}, ""},
		{"Command", []string{"version"}, exitOK, []string{"outboxlab:  github.com/outboxlab/outboxlab ", "server not asked"}, ""},
		{"Argument", []string{"version", "extra"}, exitUsage, nil, `version takes no arguments, not "extra"`},
		{"NotPostgres", []string{"version", "--db", "lab.db"}, exitUsage, nil, "--db takes a postgres:// URL"},
		{"Unreachable", []string{"version", "--db", "postgres://nobody@127.0.0.1:1/none?sslmode=disable"}, exitUsage, nil, "cannot reach the PostgreSQL server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, tt.args...)
			if o.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", o.code, tt.code, o.stdout, o.stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(o.stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, o.stdout)
				}
			}
			if tt.code == exitOK && !sqlite.MatchString(o.stdout) {
				t.Errorf("no SQLite version line in:\n%s", o.stdout)
			}
			if tt.stderr != "" && (!strings.Contains(o.stderr, tt.stderr) || strings.Count(strings.TrimSpace(o.stderr), "\n") > 0) {
				t.Errorf("stderr %q, want one line with %q", o.stderr, tt.stderr)
			}
			if left := o.leftovers(); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestVersionOnPostgres: with --db the server's own version is printed,
// its URL without the password.
func TestVersionOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	o := runCLI(t, "version", "--db", url)
	if o.code != exitOK || !regexp.MustCompile(`; server \d+\.\d+\S* .* at postgres`).MatchString(o.stdout) {
		t.Fatalf("exit %d, stdout:\n%s\nstderr %s", o.code, o.stdout, o.stderr)
	}
}
