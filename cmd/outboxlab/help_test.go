package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

// TestFlagHelpReads: urfave/cli takes a flag Usage's backquoted word as the
// placeholder of the flag's value, so every placeholder must be one
// capitalized word (--variant NAME, not --variant outboxlab describe NAME),
// and every command's --help prints no backquote and no bare "value".
func TestFlagHelpReads(t *testing.T) {
	t.Parallel()
	app := newApp(&settings{}, io.Discard, io.Discard)
	word := regexp.MustCompile(`^[A-Z]+$`)
	placeholder := regexp.MustCompile("`([^`]*)`")
	for _, c := range app.Commands {
		for _, f := range c.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok || !df.TakesValue() {
				continue
			}
			quoted := placeholder.FindAllStringSubmatch(df.GetUsage(), -1)
			if len(quoted) != 1 || !word.MatchString(quoted[0][1]) {
				t.Errorf("%s --%s: usage %q, want one placeholder, a capitalized word in backquotes", c.Name, f.Names()[0], df.GetUsage())
			}
		}
		o := runCLI(t, c.Name, "--help")
		if o.code != exitOK {
			t.Errorf("%s --help: exit %d %s", c.Name, o.code, o.stderr)
		}
		if strings.Contains(o.stdout, "`") || regexp.MustCompile(`--\S+ value `).MatchString(o.stdout) {
			t.Errorf("%s --help reads badly:\n%s", c.Name, o.stdout)
		}
	}
}

// TestHelpAndDescribeFitTheReportWidth: every help page and every lesson's
// describe output fits reports.MaxLine columns, as the reports do.
func TestHelpAndDescribeFitTheReportWidth(t *testing.T) {
	t.Parallel()
	pages := map[string][]string{"outboxlab --help": {"--help"}}
	for _, c := range newApp(&settings{}, io.Discard, io.Discard).Commands {
		if !c.Hidden {
			pages["outboxlab "+c.Name+" --help"] = []string{c.Name, "--help"}
		}
	}
	for _, sc := range scenarios.All() {
		pages["outboxlab describe "+sc.Name] = []string{"describe", sc.Name}
	}
	for name, args := range pages {
		o := runCLI(t, args...)
		for i, line := range strings.Split(o.stdout, "\n") {
			if len(line) > reports.MaxLine {
				t.Errorf("%s: line %d is %d columns: %s", name, i+1, len(line), line)
			}
		}
	}
}

// TestFitLines: a line too wide wraps under its second column.
func TestFitLines(t *testing.T) {
	cases := []struct{ in, want string }{
		{"   --db URL   run on the server at URL", "   --db URL   run on the\n              server at URL"},
		{"    breaks: a_check, b_check, c_check", "    breaks: a_check, b_check,\n            c_check"},
		{"no second column in this long line", "no second column in this long\nline"},
		{"short", "short"},
	}
	for _, c := range cases {
		if got := fitLines(c.in, 30); got != c.want {
			t.Errorf("fitLines(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
