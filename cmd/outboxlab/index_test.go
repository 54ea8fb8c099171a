package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestIndexKeepsOnePagePerScenario: what `run --html` keeps for index.html
// does not grow with --repeat. Without --all no index is written, so
// nothing is kept; with --all one entry per scenario, its first failed
// run's page when a repeat failed.
func TestIndexKeepsOnePagePerScenario(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	run := func(p *runPlan, scenario string, fail int) {
		for i := 0; i < 1000; i++ {
			res := &lab.Result{Scenario: scenario, Checks: []lab.Check{{Name: "x", Passed: i != fail}}}
			p.indexRun(res, filepath.Join(out, scenario, "page-"+string(rune('a'+i%26))+".html"), i)
		}
	}
	alone := &runPlan{html: true, out: out}
	run(alone, "s", -1)
	if len(alone.index) != 0 {
		t.Errorf("run --html --repeat kept %d index entries, want none (no index is written)", len(alone.index))
	}
	all := &runPlan{html: true, all: true, out: out}
	run(all, "a", -1)
	run(all, "b", 27)
	if len(all.index) != 2 {
		t.Fatalf("run --all --html --repeat 1000 kept %d index entries, want 2", len(all.index))
	}
	if e := all.index[0]; e.Scenario != "a" || !e.Passed || e.Page != "a/page-a.html" {
		t.Errorf("a: %+v, want its first run's page", e)
	}
	if e := all.index[1]; e.Scenario != "b" || e.Passed || e.Page != "b/page-b.html" {
		t.Errorf("b: %+v, want its failed run's page", e)
	}
}

// TestIndexEntriesKnowTheirDay: each run index.html lists stands under
// its lesson's session and names the exercises its checks grade.
func TestIndexEntriesKnowTheirDay(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	p := &runPlan{html: true, all: true, out: out}
	for _, name := range []string{"session-14-transactional-outbox", "session-15-outbox-leasing", "explore", "no-such-lesson"} {
		p.indexRun(&lab.Result{Scenario: name}, filepath.Join(out, name+".html"), 0)
	}
	want := []struct {
		day       string
		exercises []string
	}{
		{"Session 14", nil},
		{"Session 15", []string{"claim"}},
		{"After the sessions: the interleaving explorer (Explore)", nil},
		{"", nil},
	}
	for i, w := range want {
		if e := p.index[i]; e.Day != w.day || !slices.Equal(e.Exercises, w.exercises) {
			t.Errorf("%s: day %q, exercises %v; want %q, %v", e.Scenario, e.Day, e.Exercises, w.day, w.exercises)
		}
	}
}
