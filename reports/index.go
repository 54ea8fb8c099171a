package reports

import (
	"bytes"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
)

// IndexEntry is one run that `run --all --html` links from index.html.
type IndexEntry struct {
	Scenario, Variant, Title, Design string
	Passed                           bool
	Verdict                          string
	Page                             string // path of the run's page, relative to the index
	// Day is the heading the index groups the run under, its lesson's
	// session ("Session 15"); "" is no heading.
	Day string
	// Exercises name the exercises the run's lesson grades.
	Exercises []string
}

// IndexDay is one heading of index.html and the runs under it, in the
// order they ran.
type IndexDay struct {
	Day     string
	Entries []IndexEntry
}

// IndexDays groups entries by Day, each day where its first run is, its
// runs in their order: the course's sessions in course order when the
// runs were (run --all), a later entry of an earlier day (the Day 15
// comparison) under that day.
func IndexDays(entries []IndexEntry) []IndexDay {
	var days []IndexDay
	at := map[string]int{}
	for _, e := range entries {
		i, ok := at[e.Day]
		if !ok {
			i = len(days)
			at[e.Day] = i
			days = append(days, IndexDay{Day: e.Day})
		}
		days[i].Entries = append(days[i].Entries, e)
	}
	return days
}

// WriteIndex writes out/index.html linking every page of one invocation
// with its verdict; it replaces the index a previous invocation wrote.
func WriteIndex(out string, entries []IndexEntry) (string, error) {
	var buf bytes.Buffer
	if err := indexTemplate.Execute(&buf, struct {
		CSS  template.CSS
		Days []IndexDay
	}{template.CSS(pageCSS), IndexDays(entries)}); err != nil {
		return "", err
	}
	path := filepath.Join(out, "index.html")
	tmp, err := writeTemp(out, buf.Bytes())
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("reports: write %s: %w", path, err)
	}
	return path, nil
}

var indexTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>outboxlab runs</title><style>{{.CSS}}</style></head>
<body>
<h1>outboxlab runs</h1>
<p>By session, in course order: each lesson's run links its page, and the exercises are those its checks grade
(<code>outboxlab exercise show NAME</code>).</p>
{{range .Days}}{{if .Day}}<h2>{{.Day}}</h2>
{{end}}<table class="runs">
<thead><tr><th>Scenario</th><th>Lesson</th><th>Design</th><th>Result</th><th>Exercises</th><th>Verdict</th></tr></thead>
<tbody>{{range .Entries}}<tr><td><a href="{{.Page}}">{{.Scenario}}{{if .Variant}} --variant {{.Variant}}{{end}}</a></td><td>{{.Title}}</td><td>{{.Design}}</td>{{if .Passed}}<td class="pass">PASS</td>{{else}}<td class="fail">FAIL</td>{{end}}<td>{{range $i, $x := .Exercises}}{{if $i}}, {{end}}<code>{{$x}}</code>{{else}}-{{end}}</td><td>{{.Verdict}}</td></tr>
{{end}}</tbody>
</table>
{{end}}</body>
</html>
`))
