package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
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
