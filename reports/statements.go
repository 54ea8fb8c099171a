package reports

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
)

// CountsVaryMarker opens the note printed above the statements of a run
// whose workers ran concurrently: how often each statement ran (retries
// after SQLITE_BUSY, claims that found nothing) depends on the
// interleaving (see countsVaryNote).
const CountsVaryMarker = "(The workers ran concurrently:"

// countsVaryNote is that note, naming the engine's retried error.
func countsVaryNote(engine string) string {
	busy := "SQLITE_BUSY"
	if engine == "postgres" {
		busy = "a serialization failure or a deadlock"
	}
	return CountsVaryMarker + " how often a statement ran, and how many of its runs failed with " + busy + " and were retried, vary from run to run.)"
}

// statementsNote opens the SQL section: where its statements come from.
const statementsNote = "Every statement below is one the store executed in this run, recorded at the database driver with how often it ran and how many rows it changed or returned. A statement marked MISTAKE ran in place of the lesson's statement it names."

// statements prints the lesson's statements in full, mistakes marked
// against the statement they replaced, then the lab's own reads as a table.
func (p *printer) statements(all []lab.Statement, concurrent bool, engine string) {
	p.paragraph(statementsNote)
	if concurrent {
		p.paragraph(countsVaryNote(engine))
	}
	var labReads []lab.Statement
	for _, s := range all {
		if s.Audit || s.Name == "" {
			labReads = append(labReads, s)
			continue
		}
		if s.Omitted {
			// A file in its slot's other form leaves a statement out by
			// design (the claim's one statement): no mistake, no change.
			name := s.Name
			if s.Mistake != "" {
				name = mistakeName(s.Name)
			}
			p.line("-- " + name + "  [left out " + plural(s.Skipped, "time") + ", never ran]")
			p.line("--   left out: " + s.Replaces)
			if s.Mistake != "" {
				p.line("--   what changed: " + s.Mistake)
			}
			p.line("--   the lesson's statement, which this run never executed:")
			for _, l := range trimmedLines(s.ReplacedSQL) {
				p.line("--     " + l)
			}
			p.line("")
			continue
		}
		if s.Mistake != "" {
			p.line("-- " + mistakeName(s.Name) + "  " + counted(s))
			p.line("--   ran in place of: " + s.Replaces)
			p.line("--   what changed: " + s.Mistake)
			for _, l := range lineDiff(s.ReplacedSQL, s.SQL) {
				p.line("--   " + l)
			}
		} else {
			p.line("-- " + s.Name + "  " + counted(s))
		}
		p.line(strings.TrimSpace(s.SQL) + ";")
		p.line("")
	}
	for _, n := range leaseNotes(all) {
		p.paragraph(n)
	}
	if len(labReads) == 0 {
		return
	}
	p.line("The lab's own statements (schema, and the reads behind this report's figures):")
	p.line("")
	t := lab.Table{Interleaved: concurrent, Columns: []string{"Statement", "Runs", "Rows", "Failed"}}
	for _, s := range labReads {
		name := s.Name
		if name == "" {
			name = firstLine(s.SQL)
		}
		t.AddRow(name, s.Runs, s.Rows, s.Failed)
	}
	p.table(t)
}

// leaseComparison finds a comparison of a lease end with the current time.
var leaseComparison = regexp.MustCompile(`(LockedUntilUtc|lease_until)\s*(<=|>)\s*:now`)

// leaseNotes say, once per report, which lease boundary the statements
// that ran follow, and whether finalization keeps the lease end.
func leaseNotes(all []lab.Statement) []string {
	var notes []string
	var found, keeps bool
	for _, s := range all {
		if s.Audit || s.Omitted {
			continue
		}
		found = found || leaseComparison.MatchString(s.SQL)
		if strings.Contains(s.SQL, "SET Status = 'Processed'") && !strings.Contains(s.SQL, "LockedUntilUtc") {
			keeps = true
		}
	}
	if found {
		notes = append(notes, "Lease boundary: a lease that ends at t is over at t. The statements above compare the lease end with :now "+
			"using <= (claimable once the end is reached) or > (still live only before it). Day 15's seed writes LockedUntilUtc < now, "+
			"under which a lease is still held at its end; the renewal lesson's sequence needs <=, and the lab uses <= everywhere.")
	}
	if keeps {
		notes = append(notes, "Finalization keeps LockedUntilUtc on a Processed row (Day 15's seed clears it): the message table shows "+
			"when the last lease ended, and no claim reads it once the row is Processed.")
	}
	return notes
}

// mistakeName marks a mistake's name, unless the name already says it is
// one.
func mistakeName(name string) string {
	if strings.Contains(name, "MISTAKE") {
		return name
	}
	return "MISTAKE: " + name
}

// counted says how often a statement ran and what it did, in words.
func counted(s lab.Statement) string {
	verb := "changed"
	if isRead(s.SQL) {
		verb = "returned"
	}
	out := fmt.Sprintf("[ran %s, %s %s", plural(s.Runs, "time"), verb, plural64(s.Rows, "row"))
	if s.Failed > 0 {
		out += fmt.Sprintf(", %s", plural(s.Failed, "failed run"))
	}
	return out + "]"
}

func isRead(sqlText string) bool {
	f := strings.Fields(sqlText)
	return len(f) > 0 && (strings.EqualFold(f[0], "SELECT") || strings.EqualFold(f[0], "WITH"))
}

func plural(n int, unit string) string { return plural64(int64(n), unit) }

func plural64(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

// lineDiff lists the lines of the lesson's statement the mistake dropped
// ("lesson had:") and the lines it added ("mistake has:"), compared line by
// line after trimming spaces.
func lineDiff(lesson, mistake string) []string {
	in := func(lines []string, l string) bool {
		for _, x := range lines {
			if x == l {
				return true
			}
		}
		return false
	}
	ll, ml := trimmedLines(lesson), trimmedLines(mistake)
	var out []string
	for _, l := range ll {
		if !in(ml, l) {
			out = append(out, "lesson had:  "+l)
		}
	}
	for _, l := range ml {
		if !in(ll, l) {
			out = append(out, "mistake has: "+l)
		}
	}
	return out
}

func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// transactions prints each shape of transaction with its outcomes.
func (p *printer) transactions(all []lab.Transaction, concurrent bool) {
	p.paragraph("Each row is one shape of transaction: the statements that ran together between BEGIN and COMMIT (or ROLLBACK), in order, and how many such transactions committed or rolled back. A transaction cut short by a crash counts as rolled back.")
	t := lab.Table{Interleaved: concurrent, Columns: []string{"Statements, in order", "Committed", "Rolled back"}}
	for _, tx := range all {
		t.AddRow(strings.Join(tx.Statements, " -> "), tx.Committed, tx.RolledBack)
	}
	p.table(t)
}
