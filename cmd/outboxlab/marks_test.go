package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

// markedLessons are the lessons whose order of events is fixed: their
// marks are pinned.
var markedLessons = []string{
	"session-15-late-finalize", "session-16-stale-ack-fencing", "session-17-lease-renewal", "session-18-lease-expiry-after-send",
	"session-19-failure-classes", "session-20-inbox-retention", "session-21-batch-completion", "session-22-heartbeat-and-shutdown",
	"session-23-clocks-and-outages",
}

// TestMarkCounts pins how many events of each kind the lane view and the
// HTML page draw for the fixed-order lessons and their variants: a fenced
// write drawn as a normal one, or a steal drawn as a claim, changes a
// count. The page draws one mark per event, of the event's kind, and the
// lane view puts each kind's mark in its row. Refresh with -update.
func TestMarkCounts(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, name := range markedLessons {
		sc, err := scenarios.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, variant := range append([]string{""}, sc.VariantNames()...) {
			if v, ok := sc.Variant(variant); ok && v.Engine != "" {
				continue
			}
			r := executeLesson(t, sc, variant, 0)
			counts := map[lab.Kind]int{}
			for _, e := range r.Timeline {
				counts[e.Kind]++
			}
			var page, lanes bytes.Buffer
			if err := reports.HTML(&page, r, reports.RunInfo{}); err != nil {
				t.Fatal(err)
			}
			if err := reports.Lanes(&lanes, r); err != nil {
				t.Fatal(err)
			}
			var drawn []string
			for _, k := range lab.Kinds {
				if n := strings.Count(page.String(), `class="ev k-`+string(k)+`"`); n != counts[k] {
					t.Errorf("%s %s: the page draws %d events of kind %s, the timeline has %d", name, variant, n, k, counts[k])
				}
				if counts[k] > 0 {
					drawn = append(drawn, fmt.Sprintf("%s %d", k, counts[k]))
				}
			}
			var rows []string // the lane view's rows, without its borders and header
			for _, l := range strings.Split(lanes.String(), "\n") {
				if !strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "+") {
					rows = append(rows, l)
				}
			}
			body := strings.Join(rows, "\n")
			for _, mark := range []string{"!T ", "# ", "D ", "?R ", "!! ", "-! ", "=0 ", "!S ", "// ", "!U ", "zz ", "XX ", "E! "} {
				if n := strings.Count(body, "  "+mark); n > 0 {
					drawn = append(drawn, fmt.Sprintf("lane %q %d", strings.TrimSpace(mark), n))
				}
			}
			lines = append(lines, strings.TrimSpace(name+" "+variant)+": "+strings.Join(drawn, ", "))
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "golden", "marks.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("marks differ from %s (run with -update if the change is intended):\n%s", path, firstDiff(string(want), got))
	}
}
