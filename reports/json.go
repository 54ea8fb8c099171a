package reports

import (
	"encoding/json"
	"io"

	"github.com/outboxlab/outboxlab/lab"
)

// JSONResult is the machine-readable summary of one run, one object per line.
type JSONResult struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	// Design is "before", "after" or "variant": what the run showed.
	Design string `json:"design"`
	// ClaimSQL names the engineer's claim file the run judged in place of
	// the lesson's claim; empty for the lesson's own statements.
	ClaimSQL string             `json:"claim_sql,omitempty"`
	Relay    string             `json:"relay,omitempty"` // a challenge's run: the user's relay command
	Passed   bool               `json:"passed"`
	Metrics  map[string]float64 `json:"metrics"`
	Checks   []JSONCheck        `json:"checks"`
	// Facts are the figures the lesson's script fixes: never checks, and
	// each one's key is in Metrics too.
	Facts  []JSONFact `json:"facts"`
	Report string     `json:"report"`
	// HTML is the run's page beside its report, with `run --html`.
	HTML     string `json:"html,omitempty"`
	Database string `json:"database"`
	Engine   string `json:"engine"`
	Kept     bool   `json:"database_kept"`
	// Statements is the run's statement ledger: every statement executed.
	Statements []JSONStatement `json:"statements"`
}

// JSONStatement is one statement of a run's ledger in a [JSONResult].
type JSONStatement struct {
	Name     string `json:"name"`
	SQL      string `json:"sql"`
	Runs     int    `json:"runs"`
	Rows     int64  `json:"rows"`
	Failed   int    `json:"failed"`
	Replaces string `json:"replaces,omitempty"`
	Mistake  string `json:"mistake,omitempty"`
	Audit    bool   `json:"audit,omitempty"`
	Omitted  bool   `json:"omitted,omitempty"`
	Skipped  int    `json:"skipped,omitempty"`
}

// JSONCheck is one check in a [JSONResult].
type JSONCheck struct {
	Name     string `json:"name"`
	Passed   bool   `json:"passed"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
}

// JSONFact is one fact of the setup in a [JSONResult].
type JSONFact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Why   string `json:"why"`
}

// NewJSONResult summarizes r; reportPath is where its text report was written.
func NewJSONResult(r *lab.Result, reportPath string) JSONResult {
	j := JSONResult{
		Scenario: r.Scenario, Variant: r.Variant, Design: r.DesignName(), ClaimSQL: r.CustomSQL, Relay: r.Relay, Passed: r.Passed(), Report: reportPath,
		Database: r.Database, Engine: r.Engine, Kept: r.DatabaseKept, Metrics: map[string]float64{}, Checks: []JSONCheck{},
		Facts:      []JSONFact{},
		Statements: []JSONStatement{},
	}
	for _, s := range r.Statements {
		j.Statements = append(j.Statements, JSONStatement{
			Name: s.Name, SQL: s.SQL, Runs: s.Runs, Rows: s.Rows, Failed: s.Failed,
			Replaces: s.Replaces, Mistake: s.Mistake, Audit: s.Audit, Omitted: s.Omitted, Skipped: s.Skipped,
		})
	}
	for _, m := range r.Metrics {
		j.Metrics[m.Key] = m.Value
	}
	for _, c := range r.Checks {
		j.Checks = append(j.Checks, JSONCheck{Name: c.Name, Passed: c.Passed, Expected: c.Expected, Observed: c.Observed})
	}
	for _, f := range r.Facts {
		j.Facts = append(j.Facts, JSONFact{Name: f.Name, Value: f.Value, Why: f.Why})
	}
	return j
}

// JSONLine writes v as one line of JSON. Characters a terminal would act
// on are escaped, the C1 controls and format characters encoding/json
// leaves as they are among them (see [Printable]); the value is the same.
func JSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(jsonSafe(b), '\n'))
	return err
}
