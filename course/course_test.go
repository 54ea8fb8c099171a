package course

import (
	"slices"
	"strings"
	"testing"
)

// TestCourseProse: prose is escaped so that it stays text, wrapped within the
// width, and no wrapped line opens a Markdown block.
func TestCourseProse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		width    int
		want     string
	}{
		{"plain", "a lease is not a lock", 120, "a lease is not a lock"},
		{"placeholder", "<stale owner> acks", 120, `\<stale owner\> acks`},
		{"emphasis", "SELECT * FROM t", 120, "SELECT \\* FROM t"},
		{"code span kept", "run `SELECT * FROM t` <now>", 120, "run `SELECT * FROM t` \\<now\\>"},
		{"unpaired backquote", "a ` b *", 120, "a \\` b \\*"},
		{"link brackets", "[x](y)", 120, `\[x\](y)`},
		{"wraps", "one two three", 8, "one two\nthree"},
		{"indents continuation", "one two three", 10, "one two\n  three"},
		{"heading start", "aa # b", 3, "aa\n\\# b"},
		{"list start", "aa - b", 3, "aa\n\\- b"},
		{"ordered list start", "aa 1. b", 4, "aa\n1\\. b"},
		{"paragraphs kept", "one\n\ntwo", 120, "one\n\ntwo"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			indent := ""
			if c.name == "indents continuation" {
				indent = "  "
			}
			if got := prose(c.in, c.width, indent); got != c.want {
				t.Errorf("prose(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
			}
		})
	}
}

// TestCourseLongLines: a line over MaxLine is reported, marked fenced inside a
// code block; a line at MaxLine is not.
func TestCourseLongLines(t *testing.T) {
	t.Parallel()
	long, fit := strings.Repeat("x", MaxLine+1), strings.Repeat("é", MaxLine)
	cases := []struct {
		name, page string
		want       []LongLine
	}{
		{"fits", fit + "\n", nil},
		{"prose", "a\n" + long, []LongLine{{Number: 2, Width: MaxLine + 1, Text: long}}},
		{"fenced", "```sql\n" + long + "\n```\n" + long, []LongLine{
			{Number: 2, Width: MaxLine + 1, Fenced: true, Text: long}, {Number: 4, Width: MaxLine + 1, Text: long}}},
	}
	for _, c := range cases {
		if got := LongLines(c.page); !slices.Equal(got, c.want) {
			t.Errorf("%s: LongLines = %+v, want %+v", c.name, got, c.want)
		}
	}
}
