package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"MessagesNotNumber", []string{"--messages", "1000,lots"}, `--messages: "lots" is not a positive whole number`},
		{"MessagesEmpty", []string{"--messages", ","}, "--messages is empty"},
		{"WorkersZero", []string{"--workers", "0"}, `--workers: "0" is not a positive whole number`},
		{"BatchNegative", []string{"--batch", "-3"}, `--batch: "-3" is not a positive whole number`},
		{"MessagesHex", []string{"--messages", "0x10"}, `--messages: "0x10" is not a positive whole number`},
		{"WorkersOctal", []string{"--workers", "010"}, `--workers: "010" is not a positive whole number`},
		{"WorkersPlus", []string{"--workers", "+2"}, `--workers: "+2" is not a positive whole number`},
		{"UnknownClaim", []string{"--claim", "fastest"}, `--claim "fastest": want lesson, indexed, skip-locked or fetch-ahead`},
		{"SkipLockedOnSQLite", []string{"--claim", "skip-locked"}, "--claim skip-locked runs on PostgreSQL only"},
		{"CompleteBatchZero", []string{"--claim", "fetch-ahead", "--complete-batch", "0"}, "--complete-batch 0: want 1 to 10,000"},
		{"CompleteIntervalWord", []string{"--complete-interval", "soon"}, `--complete-interval "soon" is not a duration`},
		{"DBNotPostgres", []string{"--db", "sqlite:///tmp/x.db"}, "--db takes a postgres:// URL"},
		{"DBUnreachable", []string{"--db", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, "cannot reach the PostgreSQL server"},
		{"Synchronous", []string{"--synchronous", "off"}, `--synchronous "off": want normal or full`},
		{"Format", []string{"--format", "yaml"}, "--format must be text or json"},
		{"Arguments", []string{"now"}, "bench takes no arguments"},
		{"BrokerUnknown", []string{"--broker", "kafka"}, `--broker must be nats or nats://HOST:PORT, not "kafka"`},
		{"BrokerJSON", []string{"--broker", "nats", "--format", "json"}, "bench --broker prints a text table only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, append([]string{"bench"}, tt.args...)...)
			if o.code != exitUsage || !strings.Contains(o.stderr, tt.msg) || strings.Count(strings.TrimSpace(o.stderr), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", o.code, o.stderr, tt.msg)
			}
			if left := o.leftovers(); len(left) != 0 {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

// TestBenchJSON runs a tiny bench end to end: one JSON object per cell with
// the documented keys, a filed copy under --out, no database left behind.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	s := &settings{now: time.Now, tempRoot: t.TempDir(), ceilingRound: 20 * time.Millisecond}
	o := runCLIWith(t, s, "bench", "--messages", "60", "--workers", "1,2", "--batch", "1,8", "--format", "json", "--out", out)
	if o.code != exitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d JSON lines, want 4:\n%s", len(lines), o.stdout)
	}
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if len(row) != 17 || row["claim"] != "indexed" || row["duplicates"] != 0.0 || row["lost"] != 0.0 || row["errors"] != 0.0 {
			t.Fatalf("row %v", row)
		}
	}
	filed, _ := filepath.Glob(filepath.Join(out, "Bench", "Bench-RunReport-*.jsonl"))
	if len(filed) != 1 || !strings.Contains(o.stderr, filed[0]) {
		t.Fatalf("filed %v, stderr %q", filed, o.stderr)
	}
	if left := o.leftovers(); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestBenchBroker runs the relay bench end to end on a small backlog: a
// row without a broker and one through the embedded JetStream, every
// message stored in the stream and none lost.
func TestBenchBroker(t *testing.T) {
	t.Parallel()
	o := runCLI(t, "bench", "--broker", "nats", "--messages", "300", "--workers", "2", "--batch", "8")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	for _, want := range []string{"| 2       | none ", "| 2       | NATS ", "| 300    | 0    |"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, o.stdout)
		}
	}
}
