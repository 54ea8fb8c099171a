package reports_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

func sampleResult() *lab.Result {
	r := &lab.Result{
		Scenario: "session-15-outbox-leasing", Title: "Day 15 after", Session: "Session-15", FileTag: "OutboxLeasing",
		Design: lab.Safe, Lesson: "Claims, not loads.", Database: "/tmp/x/outboxlab.db",
		Schema:     []string{"CREATE TABLE t (x)"},
		Statements: []lab.Statement{{Name: "claim", SQL: "UPDATE t SET x = 1"}},
		Timeline:   []lab.Event{{Seq: 1, At: "2026-01-15T09:00:00.000Z", Actor: "Worker-A", Action: "claim claimed", Detail: "message 1"}},
		Tables:     []lab.Table{{Title: "Ledger: claims", Columns: []string{"#", "Worker"}, Rows: [][]string{{"1", "Worker-A"}}}},
		Verdict:    "SAFE DESIGN held.",
	}
	r.SetMetric("processing_attempts", 6)
	r.ExpectMetric("processing_attempts", 6, "one attempt per message")
	return r
}

func TestText(t *testing.T) {
	t.Run("Pass", func(t *testing.T) {
		var b bytes.Buffer
		if err := reports.Text(&b, sampleResult(), reports.RunInfo{Started: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"Result:   PASS (1 of 1 checks passed)", "== Schema in force", "CREATE TABLE t (x);",
			"-- claim", "== Timeline", "== Ledger: claims", "| processing_attempts | one attempt per message | 6", "== Verdict", "SAFE DESIGN held."} {
			if !strings.Contains(b.String(), s) {
				t.Errorf("report lacks %q:\n%s", s, b.String())
			}
		}
	})
	t.Run("FailNamesChecks", func(t *testing.T) {
		r := sampleResult()
		r.Variant = "permanent-lock"
		r.ExpectMetric("recovery_ok", 1, "recovered")
		var b bytes.Buffer
		if err := reports.Text(&b, r, reports.RunInfo{}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"Result:   FAIL (1 of 2 checks failed: recovery_ok)", "a deliberate mistake", "| FAIL"} {
			if !strings.Contains(b.String(), s) {
				t.Errorf("report lacks %q", s)
			}
		}
	})
}

func TestWriteNeverOverwrites(t *testing.T) {
	out := t.TempDir()
	r := sampleResult()
	at := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	var paths []string
	for i := 0; i < 3; i++ {
		p, err := reports.Write(out, r, reports.RunInfo{Started: at})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	want := []string{
		"Session-15-OutboxLeasing-RunReport-20260115T090000Z.txt",
		"Session-15-OutboxLeasing-RunReport-20260115T090000Z-2.txt",
		"Session-15-OutboxLeasing-RunReport-20260115T090000Z-3.txt",
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] || filepath.Base(filepath.Dir(p)) != "Session-15" {
			t.Errorf("path %d = %s, want Session-15/%s", i, p, want[i])
		}
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reports.CheckWritable(filepath.Join(dir, "new", "folder")); err != nil {
		t.Errorf("new folder: %v", err)
	}
	if err := reports.CheckWritable(filepath.Join(file, "sub")); err == nil {
		t.Error("a folder under a file must be refused")
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "new", "folder")); len(entries) != 0 {
		t.Errorf("the write check left files behind: %v", entries)
	}
}

func TestJSONResult(t *testing.T) {
	var b bytes.Buffer
	if err := reports.JSONLine(&b, reports.NewJSONResult(sampleResult(), "r.txt")); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "variant", "passed", "metrics", "checks", "report", "database"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
	if got["metrics"].(map[string]any)["processing_attempts"] != 6.0 {
		t.Errorf("metrics = %v", got["metrics"])
	}
}
