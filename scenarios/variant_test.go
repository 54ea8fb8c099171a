package scenarios

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/store"
)

// TestVariantsExplainThemselves: a variant's report opens with its Mistake
// and, under "What this run shows", says what running it demonstrates. The
// two must be written, and Shows must say more than the Mistake does.
func TestVariantsExplainThemselves(t *testing.T) {
	for _, sc := range All() {
		for _, v := range sc.Variants {
			name := sc.Name + " --variant " + v.Name
			mistake, shows := strings.TrimSpace(v.Mistake), strings.TrimSpace(v.Shows)
			if mistake == "" || shows == "" {
				t.Errorf("%s: Mistake %q and Shows %q must both be written", name, v.Mistake, v.Shows)
				continue
			}
			// The report prints the Mistake with a full stop of its own.
			if strings.HasSuffix(mistake, ".") {
				t.Errorf("%s: Mistake ends with a full stop; the report adds one: %q", name, mistake)
			}
			// Shows is printed as it is: whole sentences.
			if r := []rune(shows); !unicode.IsUpper(r[0]) || !strings.HasSuffix(shows, ".") {
				t.Errorf("%s: Shows must be whole sentences, from a capital to a full stop: %q", name, shows)
			}
			if repeats(shows, mistake) {
				t.Errorf("%s: Shows repeats the Mistake instead of saying what the run demonstrates:\n  mistake: %s\n  shows:   %s", name, mistake, shows)
			}
		}
	}
}

// repeats reports whether shows merely restates mistake: one contains the
// other, or most of the words that carry meaning in shows come from mistake.
func repeats(shows, mistake string) bool {
	s, m := strings.ToLower(shows), strings.ToLower(mistake)
	if strings.Contains(s, strings.TrimSuffix(m, ".")) || strings.Contains(m, strings.TrimSuffix(s, ".")) {
		return true
	}
	inMistake := map[string]bool{}
	for _, w := range meaningfulWords(m) {
		inMistake[w] = true
	}
	words := meaningfulWords(s)
	shared := 0
	for _, w := range words {
		if inMistake[w] {
			shared++
		}
	}
	return len(words) == 0 || 2*shared > len(words)
}

// meaningfulWords is text's distinct words of four letters or more.
func meaningfulWords(text string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' }) {
		if len([]rune(w)) >= 4 && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// TestRepeatsCatchesARestatedMistake keeps the guard above honest.
func TestRepeatsCatchesARestatedMistake(t *testing.T) {
	mistake := "the claim ignores LockedUntilUtc, so a crashed worker's message is never recovered"
	for _, c := range []struct {
		shows string
		want  bool
	}{
		{"The claim ignores LockedUntilUtc, so a crashed worker's message is never recovered.", true},
		{"What happens when " + mistake + ". The checks that FAIL below are the invariants it breaks.", true},
		{"The claim ignores LockedUntilUtc: a crashed worker's message is never recovered.", true},
		{"Worker-A crashes holding PAY-001 and, after its lease expired, Worker-B's claim still skips the row: " +
			"it stays Processing for good. A lease must end, or one crash locks a message forever.", false},
	} {
		if got := repeats(c.shows, mistake); got != c.want {
			t.Errorf("repeats(%q) = %v, want %v", c.shows, got, c.want)
		}
	}
}

// courseWords is a lesson's file tag as the course writes it: capitalised
// words joined by hyphens, e.g. Competing-Workers-No-Claim.
var courseWords = regexp.MustCompile(`^[A-Z][a-z0-9]*(-[A-Z0-9][a-z0-9]*)*$`)

// TestReportFilesAreNamedAsTheCourseNamesThem: every scenario's report goes
// to <out>/<Session>/<Session>-<Words-Joined-By-Hyphens>[-<variant>]-RunReport-<UTC timestamp>.txt.
func TestReportFilesAreNamedAsTheCourseNamesThem(t *testing.T) {
	at := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	for _, sc := range All() {
		if !courseWords.MatchString(sc.FileTag) {
			t.Errorf("%s: FileTag %q is not capitalised words joined by hyphens", sc.Name, sc.FileTag)
		}
		// The registry name is the lesson in lower case, after its session.
		if sc.Name != "explore" && !strings.HasSuffix(sc.Name, "-"+strings.ToLower(sc.FileTag)) {
			t.Errorf("%s: FileTag %q does not name the lesson the registry names", sc.Name, sc.FileTag)
		}
		for _, variant := range append([]string{""}, sc.VariantNames()...) {
			r := &lab.Result{Session: sc.Session, FileTag: sc.FileTag, Variant: variant}
			want := sc.Session + "-" + sc.FileTag
			if variant != "" {
				want += "-" + variant
			}
			want = filepath.Join("out", sc.Session, want+"-RunReport-20260115T090000Z.txt")
			if got := reports.Path("out", r, at); got != want {
				t.Errorf("%s %s: report path %s, want %s", sc.Name, variant, got, want)
			}
		}
	}
	if got := reports.Path("out", &lab.Result{Session: "Session-15", FileTag: "Outbox-Leasing"}, at); got != filepath.Join("out", "Session-15", "Session-15-Outbox-Leasing-RunReport-20260115T090000Z.txt") {
		t.Errorf("the course's own example is filed as %s", got)
	}
}

// TestVariantsAreData: a variant is its name, its text and the mistakes it
// swaps in. Each swapped statement is a mistake naming the lesson
// statement it replaces, and the variant's statement set holds exactly
// its mistakes in place of the lesson's statements; a variant that swaps
// nothing changes no statement (it changes a timing, an order, an option,
// a policy or the consumer's design, which the lesson reads by name).
func TestVariantsAreData(t *testing.T) {
	for _, sc := range All() {
		set, ok := sc.Set, sc.Set != nil
		for _, v := range sc.Variants {
			t.Run(sc.Name+"/"+v.Name, func(t *testing.T) {
				for _, m := range v.Swaps {
					if m.Replaces == nil || m.Mistake == "" {
						t.Errorf("%q is no mistake: it names no lesson statement it replaces, or no change", m.Name)
					}
				}
				if !ok {
					if len(v.Swaps) > 0 {
						t.Fatalf("the variant swaps statements, and the test knows no statement set of %s", sc.Name)
					}
					return
				}
				designed := names(store.Changes(lesson.VariantSet(&lesson.Env{Scenario: sc}, set)))
				var got []store.Stmt
				for _, m := range store.Changes(lesson.VariantSet(&lesson.Env{Scenario: sc, Variant: v.Name}, set)) {
					if !slices.Contains(designed, m.Name) {
						got = append(got, m)
					}
				}
				if len(got) != len(v.Swaps) {
					t.Fatalf("the variant's set changes %v, want its swaps %v", names(got), names(v.Swaps))
				}
				for _, m := range v.Swaps {
					if !slices.ContainsFunc(got, func(s store.Stmt) bool { return s.Name == m.Name }) {
						t.Errorf("the variant's set lacks its mistake %q", m.Name)
					}
				}
			})
		}
		// Day 15's "before" is a broken design on purpose: its set holds
		// the finalize by Id; every other lesson's holds no mistake.
		if changed := store.Changes(lesson.VariantSet(&lesson.Env{Scenario: sc}, set)); ok && len(changed) != 0 && sc.Design != lab.Broken {
			t.Errorf("%s: the lesson's own set holds mistakes %v", sc.Name, names(changed))
		}
	}
}

// names lists the statements' names.
func names(stmts []store.Stmt) []string {
	var out []string
	for _, s := range stmts {
		out = append(out, s.Name)
	}
	return out
}

// TestVariantsSayWhatTheyChange: a variant changes statements (Swaps or a
// consumer's Designs) or says what it changes instead, never neither.
func TestVariantsSayWhatTheyChange(t *testing.T) {
	for _, sc := range All() {
		for _, v := range sc.Variants {
			if len(v.Swaps) == 0 && len(v.Designs) == 0 && v.Changes == "" {
				t.Errorf("%s %s swaps no statement and says nothing of what it changes", sc.Name, v.Name)
			}
		}
	}
}
