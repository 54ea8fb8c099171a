package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/reports"
)

// columnRE finds where a line's second column starts: after its first
// text, a run of two or more spaces ("  --db URL   run on the PostgreSQL
// server ..."), or after a label and its colon ("    breaks: a, b, c").
var columnRE = regexp.MustCompile(`^(\s*\S.*?(?:\s{2,}|:\s))\S`)

// fitLines wraps every line of text wider than width at a word, each
// continuation indented under the line's second column (or under the line's
// own indent when it has none), so a help page or `describe` fits a
// terminal of width columns, as the reports do.
func fitLines(text string, width int) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if len(line) <= width {
			out = append(out, line)
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if m := columnRE.FindStringSubmatch(line); m != nil && len(m[1]) < width/2 {
			indent = len(m[1])
		}
		head := strings.TrimRight(line[:indent], " ")
		pad := strings.Repeat(" ", indent)
		for i, l := range reports.Wrap(line[indent:], width-indent) {
			if i == 0 {
				out = append(out, head+pad[len(head):]+l)
				continue
			}
			out = append(out, pad+l)
		}
	}
	return strings.Join(out, "\n")
}

// fittedHelp is urfave/cli's help printer with every line fitted to
// [reports.MaxLine] columns.
func fittedHelp(w io.Writer, templ string, data any) {
	var b bytes.Buffer
	cli.HelpPrinterCustom(&b, templ, data, nil)
	_, _ = io.WriteString(w, fitLines(b.String(), reports.MaxLine))
}

func init() { cli.HelpPrinter = fittedHelp }
