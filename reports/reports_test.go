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
		Scenario: "session-15-outbox-leasing", Title: "Day 15 after", Session: "Session-15", FileTag: "Outbox-Leasing",
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
		"Session-15-Outbox-Leasing-RunReport-20260115T090000Z.txt",
		"Session-15-Outbox-Leasing-RunReport-20260115T090000Z-2.txt",
		"Session-15-Outbox-Leasing-RunReport-20260115T090000Z-3.txt",
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
	for _, k := range []string{"scenario", "variant", "passed", "metrics", "checks", "report", "database", "statements", "design"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b.String())
		}
	}
	if got["metrics"].(map[string]any)["processing_attempts"] != 6.0 {
		t.Errorf("metrics = %v", got["metrics"])
	}
}

func TestTextStatements(t *testing.T) {
	r := sampleResult()
	r.Statements = []lab.Statement{
		{Name: "relay: complete by event id alone", SQL: "UPDATE e SET done = 1\nWHERE id = :id", Runs: 2, Rows: 2,
			Replaces: "relay: complete under the current token", ReplacedSQL: "UPDATE e SET done = 1\nWHERE id = :id\n  AND token = :token",
			Mistake: "drops the token guard"},
		{Name: "relay: read the claimed event", SQL: "SELECT id FROM e", Runs: 1, Rows: 1},
		{Name: "audit: every event", SQL: "SELECT * FROM e", Runs: 3, Rows: 9, Audit: true},
	}
	r.Transactions = []lab.Transaction{{Statements: []string{"relay: read the claimed event", "relay: complete by event id alone"}, Committed: 2, RolledBack: 1}}
	var b bytes.Buffer
	if err := reports.Text(&b, r, reports.RunInfo{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, want string }{
		{"MistakeMarked", "-- MISTAKE: relay: complete by event id alone  [ran 2 times, changed 2 rows]"},
		{"ReplacedNamed", "--   ran in place of: relay: complete under the current token"},
		{"ChangeSaid", "--   what changed: drops the token guard"},
		{"LostLineShown", "--   lesson had:  AND token = :token"},
		{"ReadCounted", "-- relay: read the claimed event  [ran 1 time, returned 1 row]"},
		{"AuditInTable", "| audit: every event"},
		{"TransactionShape", "| relay: read the claimed event -> relay: complete by event"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("report lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
	if strings.Contains(b.String(), "SELECT * FROM e;") {
		t.Error("an audit read is printed in full among the lesson's statements")
	}
}

func TestTextVariantExplainsItself(t *testing.T) {
	r := sampleResult()
	r.Variant, r.Mistake = "finalize-without-owner-guard", "finalization marks the message Processed by Id alone"
	r.MistakeShows = "A stalled worker's late finalize commits and overwrites the owner's result."
	r.DoesNotSolve = "Two claims by the same worker name."
	r.Statements = []lab.Statement{{Name: "complete by Id alone", SQL: "UPDATE t SET x = 1", Runs: 1, Rows: 1,
		Replaces: "finalize while I own it", ReplacedSQL: "UPDATE t SET x = 1 WHERE o = :me", Mistake: "drops the ownership guard"},
		// A mistake the lesson's own broken actor makes in the design's run too: not the variant's.
		{Name: "naive consumer: inbox insert", Omitted: true, Skipped: 2, Replaces: "consumer: inbox insert", Mistake: "leaves it out"}}
	r.VariantStatements = []lab.VariantStatement{{Name: "complete by Id alone"}}
	r.SetMetric("ownership_violations", 1)
	r.Checks = nil
	r.ExpectMetric("ownership_violations", 0, "no finalization committed by a non-owner")
	var b bytes.Buffer
	if err := reports.Text(&b, r, reports.RunInfo{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Design: VARIANT: the lesson's design with one deliberate mistake.",
		"== The mistake", "Finalization marks the message Processed by Id alone.",
		`"complete by Id alone" in place of "finalize while I own it" (drops the ownership guard)`,
		"== What this run shows", "overwrites the owner's result",
		"== The lesson as designed (for comparison)",
		"== What it does not solve", "Two claims by the same worker name.",
		"== Checks", "| ownership_violations | no finalization committed by a non-owner | 0 | 1 | FAIL |",
	} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "AFTER: the safe design") {
		t.Error("a variant's report calls itself the safe design")
	}
	if mistake := reports.MistakeChanges(r); strings.Contains(mistake, "inbox insert") || strings.Contains(mistake, "changes no SQL") {
		t.Errorf("The mistake lists a statement the variant did not swap, or says it swapped none: %s", mistake)
	}
	var j map[string]any
	var jb bytes.Buffer
	if err := reports.JSONLine(&jb, reports.NewJSONResult(r, "r.txt")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb.Bytes(), &j); err != nil || j["design"] != "variant" {
		t.Errorf("JSON design = %v (%v), want variant", j["design"], err)
	}
}

func TestTextLeaseBoundary(t *testing.T) {
	tests := []struct {
		name, sql string
		want      bool
	}{
		{"DayFifteenClaim", "UPDATE OutboxMessages SET Status = 'Processing' WHERE Id = :id AND (Status = 'Pending' OR LockedUntilUtc <= :now)", true},
		{"RelayRenewal", "UPDATE outbox_events SET lease_until = :proposed WHERE claim_token = :token AND lease_until > :now", true},
		{"NoLease", "UPDATE accounts SET credit_cents = credit_cents + :cents WHERE id = :id", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleResult()
			r.Statements = []lab.Statement{{Name: "s", SQL: tc.sql, Runs: 1}}
			var b bytes.Buffer
			if err := reports.Text(&b, r, reports.RunInfo{}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), "Lease boundary: a lease that ends at t is over at t."); got != tc.want {
				t.Errorf("boundary note printed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFactsAreNoChecks: a fact of the setup is printed in its own section
// of the text report, in the JSON's "facts" (its key still in "metrics")
// and in the page's facts table, and never among the checks or in the
// result's count of them.
func TestFactsAreNoChecks(t *testing.T) {
	r := sampleResult()
	r.SetMetric("held_attempts", 2)
	r.AddFact("held_attempts", "attempts on the held message", "the script has both workers check the provider")
	var text bytes.Buffer
	if err := reports.Text(&text, r, reports.RunInfo{}); err != nil {
		t.Fatal(err)
	}
	report := text.String()
	checks, evidence, facts := strings.Index(report, "== Checks"), strings.Index(report, "## The evidence"), strings.Index(report, "== Facts of the setup")
	if checks < 0 || evidence < checks || facts < evidence {
		t.Fatalf("want the facts in the evidence, after the checks:\n%s", report)
	}
	if section := report[facts:]; !strings.Contains(section, "| held_attempts | attempts on the held message | 2") ||
		!strings.Contains(section, "cannot fail") {
		t.Errorf("facts section:\n%s", section)
	}
	if strings.Contains(report[checks:evidence], "held_attempts") || !strings.Contains(report, "PASS (1 of 1 checks passed)") {
		t.Errorf("a fact is printed or counted as a check:\n%s", report)
	}

	var line bytes.Buffer
	if err := reports.JSONLine(&line, reports.NewJSONResult(r, "r.txt")); err != nil {
		t.Fatal(err)
	}
	var got reports.JSONResult
	if err := json.Unmarshal(line.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Facts) != 1 || got.Facts[0] != (reports.JSONFact{Name: "held_attempts", Value: "2", Why: "the script has both workers check the provider"}) {
		t.Errorf("facts = %+v", got.Facts)
	}
	if got.Metrics["held_attempts"] != 2 || len(got.Checks) != 1 || got.Checks[0].Name != "processing_attempts" {
		t.Errorf("metrics %v, checks %+v: the fact's key must stay a metric and be no check", got.Metrics, got.Checks)
	}

	var page bytes.Buffer
	if err := reports.HTML(&page, r, reports.RunInfo{}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if i, j := strings.Index(html, `<table id="checks">`), strings.Index(html, `<table id="facts">`); i < 0 || j < i ||
		!strings.Contains(html[j:], "<td>held_attempts</td>") || strings.Contains(html[i:j], "held_attempts") {
		t.Errorf("the page's facts table is missing, or holds the fact among the checks")
	}
}

// TestTextReadsFromTheTop: a report opens with what a student needs, the
// verdict, the checks and what the run shows (a variant's mistake after
// it), and only then the evidence they were read from, in the same order
// for a design run and a variant.
func TestTextReadsFromTheTop(t *testing.T) {
	variant := sampleResult()
	variant.Variant, variant.Mistake, variant.MistakeShows = "permanent-lock", "the claim never expires", "The lock stays."
	tests := []struct {
		name     string
		r        *lab.Result
		sections []string
	}{
		{"Design", sampleResult(), []string{"== Verdict", "== Checks", "== What this lesson shows", "## The evidence",
			"== Schema in force", "== SQL that ran", "== Timeline", "== Lanes", "== Ledger: claims"}},
		{"Variant", variant, []string{"== Verdict", "== Checks", "== What this run shows", "== The mistake",
			"== The lesson as designed", "## The evidence", "== Schema in force", "== Timeline"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := reports.Text(&b, tc.r, reports.RunInfo{}); err != nil {
				t.Fatal(err)
			}
			report, at := b.String(), 0
			for _, s := range tc.sections {
				i := strings.Index(report[at:], s)
				if i < 0 {
					t.Fatalf("%q missing or out of order (want %q):\n%s", s, tc.sections, report)
				}
				at += i
			}
		})
	}
}
