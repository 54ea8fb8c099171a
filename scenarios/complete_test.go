package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
)

// lessonProblems is what sc, one lesson of registry, lacks for the
// registry's tests, each problem a sentence naming the lesson and what to
// add: its identity and texts, a name no other lesson has, facts that are
// no checks, a proof that every check can fail (a variant, a breaker, a
// guard's removal or a named test), its child processes, the statement
// set its variants swap into, and an account of every guard of its
// updating statements. The registry-wide tests run these proofs; this is
// the part that reads only the lesson's value, so a copied lesson is
// checked exactly as the registry's own are.
func lessonProblems(sc *lesson.Scenario, registry []*lesson.Scenario) []string {
	var out []string
	miss := func(format string, args ...any) { out = append(out, sc.Name+": "+fmt.Sprintf(format, args...)) }
	if sc.Name == "" || sc.Session == "" || sc.FileTag == "" || sc.Title == "" || sc.Teaches == "" || sc.Run == nil {
		miss("incomplete registration: Name, Session, FileTag, Title, Teaches and Run must all be set")
	}
	if n := len(slices.DeleteFunc(slices.Clone(registry), func(o *lesson.Scenario) bool { return o.Name != sc.Name })); n != 1 {
		miss("the registry holds %d lessons of this name: give the copy a Name of its own", n)
	}
	if n := len(slices.DeleteFunc(slices.Clone(registry), func(o *lesson.Scenario) bool {
		return o.Session != sc.Session || o.FileTag != sc.FileTag
	})); n != 1 {
		miss("%d lessons file their reports as %s/%s-...: give the copy a FileTag of its own", n, sc.Session, sc.FileTag)
	}
	checks, facts := map[string]bool{}, map[string]bool{}
	for _, c := range sc.Checks {
		checks[c.Name] = true
	}
	for _, f := range sc.Facts {
		if checks[f.Name] || facts[f.Name] {
			miss("fact %s is documented twice, or as a check too", f.Name)
		}
		if f.About == "" || f.Why == "" {
			miss("fact %s must say what it counts and why the script fixes it", f.Name)
		}
		facts[f.Name] = true
	}
	claimed := map[string]string{}
	for _, v := range sc.Variants {
		for _, name := range v.Breaks {
			claimed[name] = "variant " + v.Name
		}
		if len(v.Swaps) > 0 && sc.Set == nil {
			miss("variant %s swaps statements, and the lesson names no statement set (lesson.Scenario.Set) they land in", v.Name)
		}
	}
	for _, b := range sc.Breakers {
		for _, name := range b.Breaks {
			claimed[name] = "breaker " + b.Name
		}
	}
	for _, g := range sc.Guards {
		for _, name := range g.Breaks {
			claimed[name] = "removing the guard " + g.Guard
		}
	}
	for name, by := range claimed {
		if !checks[name] {
			miss("%s claims to break %s, which is no documented check (a fact cannot fail)", by, name)
		}
	}
	for _, c := range sc.Checks {
		if claimed[c.Name] == "" && sc.BrokenByTest[c.Name] == "" {
			miss("check %s is broken by no variant, no breaker (lesson.Breaker), no guard's removal and no named test (BrokenByTest)", c.Name)
		}
	}
	if len(sc.Figures) == 0 && strings.TrimSpace(sc.NoFigures) == "" {
		miss("the course fixes no figure for it (lesson.Scenario.Figures), and NoFigures does not say why")
	}
	if sc.Processes.Children == nil && sc.Processes.Elsewhere == "" {
		miss("it names no children a run with processes starts (lesson.Processes.Children), nor the test that runs it with processes (Elsewhere)")
	}
	for _, p := range unaccountedGuards(sc, registry) {
		miss("%s", p)
	}
	return out
}

// unaccountedGuards lists each top-level guard of a statement sc runs that
// updates (an UPDATE, a WITH ... UPDATE, an upsert's DO UPDATE) and that
// sc's Guards do not account for: decided by its own run, a gap with its
// reason, or taught by another lesson of registry whose run decides it;
// the lab's broker's are its own. A lesson whose invariants judge its
// statements (GuardsJudgedBy) has none.
func unaccountedGuards(sc *lesson.Scenario, registry []*lesson.Scenario) []string {
	if sc.GuardsJudgedBy != "" {
		return nil
	}
	var out []string
	for _, st := range sc.Statements {
		if !strings.Contains(st.SQL, "UPDATE") {
			continue
		}
		for _, m := range guardLine.FindAllStringSubmatch(st.SQL, -1) {
			guard := m[1]
			if slices.Contains(brokerModel[st.Name], guard) {
				continue
			}
			i := slices.IndexFunc(sc.Guards, func(g lesson.Guard) bool { return g.Stmt.SQL == st.SQL && g.Guard == guard })
			if i < 0 {
				out = append(out, fmt.Sprintf("%q: guard %q is accounted for nowhere: list it in the lesson's Guards", st.Name, guard))
				continue
			}
			g := sc.Guards[i]
			if g.TaughtBy == "" {
				continue
			}
			j := slices.IndexFunc(registry, func(o *lesson.Scenario) bool { return o.Name == g.TaughtBy })
			if j < 0 || !slices.ContainsFunc(registry[j].Guards, func(tg lesson.Guard) bool {
				return tg.Guard == guard && tg.TaughtBy == "" && len(tg.Breaks) > 0
			}) {
				out = append(out, fmt.Sprintf("%q: guard %q is taught by %s, which is no lesson whose run decides it", st.Name, guard, g.TaughtBy))
			}
		}
	}
	return out
}

// TestEveryLessonIsComplete: every registered lesson carries what the
// registry's tests need to prove it (see lessonProblems).
func TestEveryLessonIsComplete(t *testing.T) {
	for _, sc := range All() {
		for _, p := range lessonProblems(sc, All()) {
			t.Error(p)
		}
	}
}

// TestACopiedLessonStandsAlone proves the map: a lesson added by copying
// an existing folder under a new name, plus one registry line, is its
// Lesson value under a new name beside the others, and it passes every
// check the registry's tests make of a lesson's value, since everything
// they read (breakers, guards, child processes, its statement set) is on
// it; TestLessonFoldersAreTheRegistry holds the folder to the same rule,
// and no lesson imports another's folder. A copy that leaves any of them
// out (or keeps the original's name) fails with a sentence naming the
// copy and what to add.
func TestACopiedLessonStandsAlone(t *testing.T) {
	for _, sc := range All() {
		t.Run(sc.Name, func(t *testing.T) {
			copied := *sc
			copied.Name, copied.FileTag = "session-99-copy-of-"+sc.Name, "Copy-Of-"+sc.FileTag
			registry := append(All(), &copied)
			if problems := lessonProblems(&copied, registry); len(problems) > 0 {
				t.Errorf("a copy under a new name fails:\n%s", strings.Join(problems, "\n"))
			}
			sameName := *sc
			if !containsAll(lessonProblems(&sameName, append(All(), &sameName)), "the registry holds 2 lessons of this name") {
				t.Error("a copy under the original's name is not refused by its name")
			}
			samePath := copied
			samePath.FileTag = sc.FileTag
			if !containsAll(lessonProblems(&samePath, append(All(), &samePath)), "file their reports as") {
				t.Error("a copy that would file its reports over the original's is not refused")
			}
			stripped := copied
			stripped.Breakers, stripped.Guards, stripped.Processes, stripped.BrokenByTest, stripped.Set = nil, nil, lesson.Processes{}, nil, nil
			stripped.Figures, stripped.NoFigures = nil, ""
			problems := lessonProblems(&stripped, append(All(), &stripped))
			want := []string{"lesson.Processes.Children", "lesson.Scenario.Figures"}
			if slices.ContainsFunc(sc.Checks, func(c lesson.CheckDoc) bool { return !brokenByAVariant(sc, c.Name) }) {
				want = append(want, "no breaker (lesson.Breaker)")
			}
			if sc.GuardsJudgedBy == "" && len(sc.Guards) > 0 {
				want = append(want, "accounted for nowhere: list it in the lesson's Guards")
			}
			if slices.ContainsFunc(sc.Variants, func(v lesson.Variant) bool { return len(v.Swaps) > 0 }) {
				want = append(want, "names no statement set (lesson.Scenario.Set)")
			}
			for _, w := range want {
				if !containsAll(problems, copied.Name+": ", w) {
					t.Errorf("a copy without its proofs does not say %q by its name:\n%s", w, strings.Join(problems, "\n"))
				}
			}
		})
	}
}

// containsAll reports whether one of lines holds every part.
func containsAll(lines []string, parts ...string) bool {
	return slices.ContainsFunc(lines, func(l string) bool {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				return false
			}
		}
		return true
	})
}

// brokenByAVariant reports whether one of sc's variants breaks check.
func brokenByAVariant(sc *lesson.Scenario, check string) bool {
	return slices.ContainsFunc(sc.Variants, func(v lesson.Variant) bool { return slices.Contains(v.Breaks, check) })
}
