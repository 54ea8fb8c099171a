package reports

import (
	"bytes"
	"fmt"
	"html/template"
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

// ComparisonLink is one run a comparison page links to: its scenario and
// the path of its page, relative to the comparison's ("" for none).
type ComparisonLink struct{ Scenario, Page string }

// WriteComparisonHTML renders the comparison as a page beside its text
// report, reportPath, linking the runs it was taken from, and files it
// without overwriting any page. It returns the path written.
func WriteComparisonHTML(reportPath, headline string, t lab.Table, from []ComparisonLink) (string, error) {
	var buf bytes.Buffer
	err := comparisonTemplate.Execute(&buf, struct {
		CSS      template.CSS
		Headline string
		Table    lab.Table
		From     []ComparisonLink
	}{template.CSS(pageCSS), headline, t, from})
	if err != nil {
		return "", fmt.Errorf("reports: render the comparison page: %w", err)
	}
	return WriteNew(HTMLPath(reportPath), buf.Bytes())
}

var comparisonTemplate = template.Must(template.New("comparison").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{{.Table.Title}}</title><style>{{.CSS}}</style></head>
<body>
<h1>{{.Table.Title}}</h1>
<p class="design" id="headline">{{.Headline}}</p>
<p class="meta">Taken from: {{range $i, $f := .From}}{{if $i}}, {{end}}{{if $f.Page}}<a href="{{$f.Page}}">{{$f.Scenario}}</a>{{else}}{{$f.Scenario}}{{end}}{{end}}.</p>
{{if .Table.Note}}<p class="verdict">{{.Table.Note}}</p>{{end}}
<table id="comparison">
<thead><tr>{{range .Table.Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Table.Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
</body>
</html>
`))
