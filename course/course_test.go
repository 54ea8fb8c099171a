package course

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/scenarios"
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

// TestCourseCoversEveryLesson: the overview lists every lesson in
// course order by session, the explorer last, linking its page; each page
// carries the lesson's checks, figures, variants, options and exercises;
// no line outside a fenced block is wider than MaxLine (a fenced SQL line
// is logged, never wrapped).
func TestCourseCoversEveryLesson(t *testing.T) {
	t.Parallel()
	files := Files()
	lessons := scenarios.All()
	if len(files) != len(lessons)+1 || files[0].Name != Overview {
		t.Fatalf("%d files (first %q), want the overview and %d pages", len(files), files[0].Name, len(lessons))
	}
	overview := files[0].Text
	at := 0
	for i, sc := range lessons {
		n := strings.Index(overview, "### ["+sc.Name+"]("+PageName(sc)+")")
		if n < at {
			t.Errorf("overview: %s is not listed after the lesson before it", sc.Name)
		}
		at = n
		if files[i+1].Name != PageName(sc) {
			t.Errorf("page %d is %s, want %s", i+1, files[i+1].Name, PageName(sc))
		}
	}
	for n := 15; n <= 23; n++ {
		if !strings.Contains(overview, "\n## Session "+itoa(n)+"\n") {
			t.Errorf("overview has no heading for session %d", n)
		}
	}
	if last := strings.LastIndex(overview, "\n## "); !strings.Contains(overview[last:], "explorer") {
		t.Errorf("the explorer's session is not the last heading: %q", overview[last:last+60])
	}
	for i, sc := range lessons {
		page := files[i+1].Text
		var want []string
		for _, c := range sc.Checks {
			want = append(want, "- `"+c.Name+"`")
		}
		for _, key := range slices.Sorted(maps.Keys(sc.Figures)) {
			want = append(want, "| `"+key+"` | "+figureText(sc.Figures[key])+" |")
		}
		for _, v := range sc.Variants {
			want = append(want, "- `"+v.Name+"`")
		}
		for _, o := range sc.Options {
			flag, _ := optionLine(o)
			want = append(want, "- `"+flag+"` (default `"+o.DefaultText()+"`)")
		}
		for _, x := range scenarios.Exercises() {
			if x.Lesson == sc.Name {
				want = append(want, "- `"+x.Name+"`")
			}
		}
		for _, s := range sc.Statements {
			want = append(want, "```sql\n"+strings.TrimSpace(s.SQL)+"\n```")
		}
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: the page has no %q", sc.Name, w)
			}
		}
	}
	for _, f := range files {
		if strings.Contains(f.Text, "\n\n\n") || !strings.HasSuffix(f.Text, "\n") || strings.HasSuffix(f.Text, "\n\n") {
			t.Errorf("%s: two blank lines in a row, or it does not end in one newline", f.Name)
		}
		for _, l := range LongLines(f.Text) {
			if l.Fenced {
				t.Logf("%s:%d: a statement's line of %d columns, printed as the lab runs it: %s", f.Name, l.Number, l.Width, l.Text)
				continue
			}
			t.Errorf("%s:%d is %d columns (at most %d outside SQL): %s", f.Name, l.Number, l.Width, MaxLine, l.Text)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
