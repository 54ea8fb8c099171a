package reports

import (
	"os"
	"strings"
	"testing"
)

// TestIndexDays: runs are grouped under their day, each day where its
// first run stands, a later run of an earlier day under that day.
func TestIndexDays(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   []IndexEntry
		want string // day: scenarios; ...
	}{
		{"none", nil, ""},
		{"no day", []IndexEntry{{Scenario: "a"}, {Scenario: "b"}}, ": a b"},
		{"in order", []IndexEntry{{Scenario: "a", Day: "S14"}, {Scenario: "b", Day: "S15"}, {Scenario: "c", Day: "S15"}},
			"S14: a; S15: b c"},
		{"a later entry of an earlier day", []IndexEntry{{Scenario: "a", Day: "S15"}, {Scenario: "b", Day: "S16"},
			{Scenario: "cmp", Day: "S15"}}, "S15: a cmp; S16: b"},
	}
	for _, c := range cases {
		var parts []string
		for _, d := range IndexDays(c.in) {
			p := d.Day + ":"
			for _, e := range d.Entries {
				p += " " + e.Scenario
			}
			parts = append(parts, p)
		}
		if got := strings.Join(parts, "; "); got != c.want {
			t.Errorf("%s: IndexDays = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestIndexPageByDay: index.html has a heading per day, in order, and
// names each lesson's exercises beside its run's link.
func TestIndexPageByDay(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	path, err := WriteIndex(out, []IndexEntry{
		{Scenario: "session-14", Day: "Session 14", Passed: true, Page: "Session-14/a.html"},
		{Scenario: "session-15", Day: "Session 15", Passed: true, Page: "Session-15/b.html", Exercises: []string{"claim", "finalize"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	at := 0
	for _, want := range []string{"<h2>Session 14</h2>", `href="Session-14/a.html"`, "<h2>Session 15</h2>",
		`href="Session-15/b.html"`, "<code>claim</code>, <code>finalize</code>"} {
		n := strings.Index(page[at:], want)
		if n < 0 {
			t.Fatalf("index.html lacks %s after byte %d:\n%s", want, at, page)
		}
		at += n
	}
}
