// Package reports renders a lab.Result as the text report students read or
// as one JSON line for tools, and files reports without ever overwriting one.
// It never queries a database: everything it prints is in the Result.
package reports

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/outboxlab/outboxlab/lab"
)

// cellWidth is where long cells wrap, so a report stays readable in a terminal.
const cellWidth = 64

// MaxLine is the widest line a text report holds, tables included: it
// fits a page and a terminal.
const MaxLine = 120

// InterleavedNote is printed above a table whose rows depend on how
// concurrent workers interleaved.
const InterleavedNote = "(The workers ran concurrently: the rows, their order and the split between workers vary by run; the checks do not.)"

// VaryingColumnsPrefix and VaryingColumnsSuffix frame the line printed
// under [InterleavedNote] when a table names the columns that vary: the
// column names between them are comma-separated.
const (
	VaryingColumnsPrefix = "(Only these columns vary, with the rows' order: "
	VaryingColumnsSuffix = ".)"
)

// VaryingColumnsLine is the line that names a table's varying columns.
func VaryingColumnsLine(columns []string) string {
	return VaryingColumnsPrefix + strings.Join(columns, ", ") + VaryingColumnsSuffix
}

// FactsNote says, above a run's facts, why they are no checks.
const FactsNote = "These figures are fixed by the lesson's script, not by its statements: they cannot fail, " +
	"so they decide nothing and are not counted among the checks. Their keys stay in the JSON metrics."

// EvidenceNote opens the second part of a report: what the verdict and
// the checks above were read from.
const EvidenceNote = "Everything below is the evidence behind the verdict and the checks above: the schema the " +
	"statements ran against, the SQL as the statement ledger recorded it, the timeline and its lanes, the ledgers " +
	"and the rows left in the database."

// SchemaNote opens the schema section.
const SchemaNote = "The tables and indexes as the database holds them after the run: every statement below ran " +
	"against them, and the final-state tables at the end are read from them."

// TimelineNote opens the timeline section.
const TimelineNote = "Every step of the run in the order it happened, with its time on the scenario clock; the " +
	"ledgers below record what the steps changed."

// RunInfo is what the report says about the run itself rather than the lesson.
type RunInfo struct {
	Started time.Time // wall-clock start, UTC
	Elapsed time.Duration
}

// Text writes the report of one run in the order a student reads it: the
// header, the verdict, the checks, what the run shows (and, for a variant,
// the mistake), the lesson's text; then the evidence: schema, SQL,
// transactions, timeline, lanes, every table and the facts of the setup.
func Text(w io.Writer, r *lab.Result, info RunInfo) error {
	p := &printer{w: &controlEscaper{w: w}}
	p.line("outboxlab run report")
	p.line(strings.Repeat("=", 78))
	p.kv("Scenario", r.Scenario)
	if r.Relay != "" {
		p.kv("Task", r.Title)
		p.kv("Relay", Printable(r.Relay)+" (yours: one process per instance, judged by the challenge's checks)")
	} else {
		p.kv("Lesson", r.Title)
		p.kv("Variant", variantLabel(r.Variant))
		if r.CustomSQL != "" {
			p.kv("Your SQL", Printable(r.CustomSQL)+" (judged by this lesson's checks)")
		}
		p.kv("Design", designLabel(r))
	}
	p.kv("Started", info.Started.UTC().Format(time.RFC3339)+" (wall clock; the timeline uses the scenario clock)")
	p.kv("Elapsed", info.Elapsed.Round(time.Millisecond).String())
	switch {
	case r.DatabaseKept && r.Engine == "postgres":
		p.kv("Database", r.Database+" (kept: in psql, SET search_path TO the schema)")
	case r.DatabaseKept:
		p.kv("Database", r.Database+" (kept: open it with `sqlite3 "+r.Database+"`)")
	default:
		p.kv("Database", r.Database+" (removed after the run; use --keep-db to keep it)")
	}
	p.kv("Result", resultLabel(r))

	p.section("Verdict")
	p.paragraph(r.Verdict) // the checks it names are the FAIL rows right below: what each proves, expected and observed

	p.section("Checks")
	ct := lab.Table{Columns: []string{"Check", "What it proves", "Expected", "Observed", "Result"}}
	for _, c := range r.Checks {
		ct.AddRow(c.Name, c.About, c.Expected, c.Observed, passLabel(c.Passed))
	}
	p.table(ct)

	if r.Variant != "" {
		p.section("What this run shows")
		p.paragraph(r.MistakeShows)
		p.section("The mistake")
		p.mistake(r)
		p.section("The lesson as designed (for comparison)")
		p.paragraph(r.Lesson)
	} else if r.CustomSQL != "" {
		p.section("What this run grades")
		p.paragraph(lessonText(r))
	} else if r.Relay != "" {
		p.section("What this run tried")
		p.paragraph(r.Lesson)
	} else {
		p.section("What this lesson shows")
		p.paragraph(r.Lesson)
	}
	if r.DoesNotSolve != "" {
		p.section("What it does not solve")
		p.paragraph(r.DoesNotSolve)
	}

	p.banner("The evidence")
	p.paragraph(EvidenceNote)

	if r.Engine == "postgres" {
		p.section("Schema in force (read back from PostgreSQL's catalog)")
	} else {
		p.section("Schema in force (read back from sqlite_schema)")
	}
	p.paragraph(SchemaNote)
	for _, s := range r.Schema {
		p.line(strings.TrimSpace(s) + ";")
		p.line("")
	}

	p.section("SQL that ran (from the statement ledger)")
	p.statements(r.Statements, r.Concurrent, r.Engine)
	if len(r.Transactions) > 0 {
		p.section("Transactions that ran (from the statement ledger)")
		p.transactions(r.Transactions, r.Concurrent)
	}

	p.section("Timeline")
	p.paragraph(TimelineNote)
	tl := lab.Table{Interleaved: r.Concurrent, Columns: []string{"#", "Clock", "Actor", "Action", "Detail"}}
	for _, e := range r.Timeline {
		tl.AddRow(e.Seq, e.At, e.Actor, e.Action, e.Detail)
	}
	p.table(tl)

	p.section("Lanes: who did what while the others did what")
	p.lanes(r)

	for _, t := range r.Tables {
		p.section(t.Title)
		if t.Note != "" {
			p.paragraph(t.Note)
		}
		p.table(t)
	}

	if len(r.Facts) > 0 {
		p.section("Facts of the setup (not checks)")
		p.paragraph(FactsNote)
		ft := lab.Table{Columns: []string{"Fact", "What it counts", "Value", "Why the script fixes it"}}
		for _, f := range r.Facts {
			ft.AddRow(f.Name, f.About, f.Value, f.Why)
		}
		p.table(ft)
	}
	return p.err
}

// printer writes lines and remembers the first error, so Text can check once.
type printer struct {
	w   io.Writer
	err error
}

// line prints s, wrapped at MaxLine with its indentation kept (see
// fitLine).
func (p *printer) line(s string) {
	for _, l := range fitLine(s, "") {
		if p.err == nil {
			_, p.err = fmt.Fprintln(p.w, l)
		}
	}
}

// kv prints a field and its value, a long value wrapped under itself.
func (p *printer) kv(k, v string) {
	for _, l := range fitLine(fmt.Sprintf("%-9s %s", k+":", v), strings.Repeat(" ", 10)) {
		if p.err == nil {
			_, p.err = fmt.Fprintln(p.w, l)
		}
	}
}

// mistake prints what a variant changed: the statements it swapped, as
// the statement ledger recorded them, and what else it changes (an
// option, an order, the schema), each only where it did.
func (p *printer) mistake(r *lab.Result) {
	p.paragraph(sentence(r.Mistake))
	p.paragraph(MistakeChanges(r))
	if len(r.MistakesNotRun) > 0 {
		p.paragraph("Swapped in but never executed in this run (the statement ledger counted 0 runs): " +
			strings.Join(r.MistakesNotRun, "; ") + ".")
	}
}

// MistakeChanges says what a variant changed, from the run: the
// statements it swapped in (its own, as the ledger recorded them: a
// statement the lesson's design runs too is not the variant's), and what
// it changes besides SQL. It never says both that it changed statements
// and that it changed none.
func MistakeChanges(r *lab.Result) string {
	changed := changedStatements(r)
	switch {
	case len(changed) > 0 && r.MistakeChanges != "":
		return "It changes " + r.MistakeChanges + ", by running (marked MISTAKE under \"SQL that ran\"): " +
			strings.Join(changed, "; ") + ". The timeline and the ledgers show what that did."
	case len(changed) > 0:
		return "Statements it changed (marked MISTAKE under \"SQL that ran\"): " + strings.Join(changed, "; ") + "."
	case r.MistakeChanges != "":
		return "It changes no SQL statement; it changes " + r.MistakeChanges + ". The timeline and the ledgers show what that did."
	}
	return "It changes no SQL statement this run executed."
}

// banner opens a part of the report: a title between two rules.
func (p *printer) banner(title string) {
	p.line("")
	p.line("")
	p.line(strings.Repeat("#", 78))
	p.line("## " + title)
	p.line(strings.Repeat("#", 78))
	p.line("")
}

func (p *printer) section(title string) {
	p.line("")
	p.line("== " + title + " " + strings.Repeat("=", max(3, 74-len(title))))
	p.line("")
}

// paragraph wraps text at 78 columns.
func (p *printer) paragraph(text string) {
	for _, l := range Wrap(text, 78) {
		p.line(l)
	}
	p.line("")
}

func (p *printer) table(t lab.Table) {
	if p.err != nil {
		return
	}
	if len(t.Rows) == 0 {
		p.line("(no entries)")
		return
	}
	p.err = writeTable(p.w, t)
}

// writeTable draws t at most MaxLine columns wide: as one table, or, when
// its columns cannot fit one without cutting words (see splitColumns), as a
// table that goes on in more tables of the same rows by their key (see
// tableKey), with more columns. An interleaved table's note heads each of them.
func writeTable(w io.Writer, t lab.Table) error {
	p := &printer{w: w}
	key := tableKey(t)
	for i, group := range splitColumns(t.Columns, t.Rows, key) {
		if i > 0 {
			p.line(fmt.Sprintf("(The table goes on: the same rows by %s, with more columns.)", names(pick(t.Columns, key))))
		}
		if t.Interleaved {
			p.line(InterleavedNote)
			if len(t.VaryingColumns) > 0 {
				p.line(VaryingColumnsLine(t.VaryingColumns))
			}
		}
		rows := make([][]string, len(t.Rows))
		for r, row := range t.Rows {
			rows[r] = pick(row, group)
		}
		if p.err == nil {
			p.err = renderTable(p.w, pick(t.Columns, group), rows)
		}
	}
	return p.err
}

// names lists names as a phrase: "a", "a and b", "a, b and c".
func names(list []string) string {
	if len(list) < 2 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}

// lanes prints the lane view with its legend; its rows are masked like
// the timeline's when the workers ran concurrently.
func (p *printer) lanes(r *lab.Result) {
	if len(r.Timeline) == 0 {
		p.line("(no entries)")
		return
	}
	p.paragraph(LaneLegend(r))
	if r.Concurrent {
		p.line(InterleavedNote)
	}
	if p.err == nil {
		p.err = Lanes(p.w, r)
	}
}

// renderTable draws one ASCII table (stable bytes for golden files), at
// most MaxLine columns wide: each column gets the width fitTable chose,
// and its cells wrap there.
func renderTable(w io.Writer, columns []string, rows [][]string) error {
	widths, cells := fitTable(columns, rows)
	perColumn := tw.Mapper[int, int]{}
	for c, width := range widths {
		if width > 0 {
			perColumn[c] = width + 2 // the width tablewriter counts includes the cell's padding
		}
	}
	cellConfig := func(align tw.Align) tw.CellConfig {
		return tw.CellConfig{
			Formatting:   tw.CellFormatting{AutoWrap: tw.WrapNormal, AutoFormat: tw.Off},
			Padding:      tw.CellPadding{Global: tw.PaddingDefault},
			Alignment:    tw.CellAlignment{Global: align},
			ColMaxWidths: tw.CellWidth{Global: cellWidth, PerColumn: perColumn},
		}
	}
	tb := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})),
		tablewriter.WithHeaderConfig(cellConfig(tw.AlignLeft)),
		tablewriter.WithRowConfig(cellConfig(tw.AlignLeft)),
	)
	header := make([]any, len(columns))
	for i, c := range cells[0] {
		header[i] = c
	}
	tb.Header(header...)
	for _, row := range cells[1:] {
		if err := tb.Append(row); err != nil {
			return fmt.Errorf("reports: table row: %w", err)
		}
	}
	if err := tb.Render(); err != nil {
		return fmt.Errorf("reports: render table: %w", err)
	}
	return nil
}

// Wrap breaks text into lines of at most width columns at word boundaries,
// keeping explicit line breaks.
func Wrap(text string, width int) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > width {
				out = append(out, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		out = append(out, line)
	}
	return out
}

// lessonText is what a report says the run teaches: the lesson's text,
// or, for a graded file (a student's exercise or --claim-sql), what the
// run grades instead. The lesson's text explains the lesson's own
// statement for the file's slot, the answer the file is graded against,
// so a graded report leaves it out.
func lessonText(r *lab.Result) string {
	if r.CustomSQL == "" {
		return r.Lesson
	}
	slot := cmp.Or(r.CustomSlot, "claim")
	return fmt.Sprintf("This run grades your %s by the lesson's checks, run with your statements in place of the "+
		"lesson's own %s. A graded report leaves the lesson's statements for that slot, and its explanation of them, out: "+
		"it never hands out the answer. The checks above, and the ledgers and the timeline below, show what your "+
		"statements did; `outboxlab exercise show %s` restates the task.", r.CustomSQL, slot, slot)
}

func variantLabel(v string) string {
	if v == "" {
		return "none (the lesson as designed)"
	}
	return v + " (a deliberate mistake: some checks must FAIL)"
}

func designLabel(r *lab.Result) string {
	switch {
	case r.Relay != "":
		return "YOUR RELAY, run by the lab with its faults: it PASSES only if every check held on the database it left."
	case r.CustomSQL != "":
		slot := r.CustomSlot
		if slot == "" {
			slot = "claim"
		}
		return "YOUR " + strings.ToUpper(slot) + " in the AFTER design: the lesson's sequence and checks with your " + slot +
			" statements in place of the lesson's. It PASSES only if every invariant held."
	}
	variant := r.DesignName() == "variant"
	switch {
	case variant && r.Design == lab.Broken:
		return "VARIANT of a broken design with one more mistake: the design stays unsafe. It FAILS where the mistake hides the breakage."
	case variant && !r.BrokeInvariant() && !r.Passed():
		return "VARIANT: the lesson's design with one deliberate mistake that broke no invariant in this run: every invariant held. " +
			"It FAILS the checks of what the lesson measures, which the mistake changes."
	case variant:
		return "VARIANT: the lesson's design with one deliberate mistake. It FAILS the checks the mistake breaks; the design is unsafe."
	case r.DesignName() == "before":
		return "BEFORE: a broken design. It PASSES when the breakage is reproduced; the design stays unsafe."
	default:
		return "AFTER: the safe design. It PASSES when every invariant held."
	}
}

// Paragraphs splits a lesson's text at its blank lines ("\n\n"), one
// paragraph per act or part, for a page that sets each in its own block.
func Paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(text, "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// sentence capitalizes s and ends it with a full stop unless it has one.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// changedStatements names the variant's own statements (see
// [lab.Result.VariantStatements]) as the statement ledger recorded them:
// run in place of the lesson's, or left out.
func changedStatements(r *lab.Result) []string {
	var out []string
	for _, v := range r.VariantStatements {
		i := slices.IndexFunc(r.Statements, func(s lab.Statement) bool { return s.Name == v.Name })
		if i < 0 {
			continue // never executed: MistakesNotRun names it
		}
		s, by := r.Statements[i], ""
		if v.By != "" {
			by = ", by " + v.By
		}
		switch {
		case s.Omitted:
			out = append(out, s.Replaces+" left out"+by)
		case s.Runs == 0:
			out = append(out, fmt.Sprintf("%q in place of %q (%s)%s, never executed in this run", s.Name, s.Replaces, s.Mistake, by))
		default:
			out = append(out, fmt.Sprintf("%q in place of %q (%s)%s", s.Name, s.Replaces, s.Mistake, by))
		}
	}
	return out
}

func resultLabel(r *lab.Result) string {
	if r.Passed() {
		return fmt.Sprintf("PASS (%d of %d checks passed)", len(r.Checks), len(r.Checks))
	}
	failed := r.FailedChecks()
	return fmt.Sprintf("FAIL (%d of %d checks failed: %s)", len(failed), len(r.Checks), strings.Join(failed, ", "))
}

func passLabel(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// WriteTable draws a table the way reports do, for the CLI's listings and
// bench: at most MaxLine columns wide, going on in a second table where its
// columns cannot fit one (see writeTable).
func WriteTable(w io.Writer, t lab.Table) error {
	return writeTable(w, t)
}
