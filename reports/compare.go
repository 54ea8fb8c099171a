package reports

import (
	"bytes"
	"path/filepath"
	"time"

	"github.com/outboxlab/outboxlab/lab"
)

// ComparisonPath is where a side-by-side report of session's two scenarios
// goes: <out>/<session>/<session>-Before-After-<UTC timestamp>.txt.
func ComparisonPath(out, session string, t time.Time) string {
	return filepath.Join(out, session, session+"-Before-After-"+t.UTC().Format("20060102T150405Z")+".txt")
}

// WriteComparison renders a side-by-side report, headline first, then the
// table and the two run reports it was taken from, and files it under out
// without overwriting any report. It returns the path written.
func WriteComparison(out, session, headline string, t lab.Table, from []string, started time.Time) (string, error) {
	var buf bytes.Buffer
	p := &printer{w: &buf}
	p.line("outboxlab comparison report")
	p.line("==============================================================================")
	p.kv("Session", session)
	p.kv("Started", started.UTC().Format(time.RFC3339)+" (wall clock)")
	for _, f := range from {
		p.kv("From", f)
	}
	p.section("Headline")
	p.paragraph(headline)
	p.section(t.Title)
	if t.Note != "" {
		p.paragraph(t.Note)
	}
	p.table(t)
	if p.err != nil {
		return "", p.err
	}
	return WriteNew(ComparisonPath(out, session, started), buf.Bytes())
}
