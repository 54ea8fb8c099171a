package scenarios

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/scenarios/session18expiry"
	"github.com/outboxlab/outboxlab/scenarios/session20inbox"
	"github.com/outboxlab/outboxlab/scenarios/session23clocks"
)

// figureWordRE finds a figure written into a text as a word: a lesson's
// text states a count only through a placeholder the run fills. ("one" and
// "once" stay allowed: "in one transaction", "at most once" are no counts
// a run measures.)
var figureWordRE = regexp.MustCompile(`(?i)\b(two|three|four|five|six|seven|eight|nine|ten|twice)\b`)

// templateFaults lists what a lesson's text template writes in that only
// the run may say: a digit or a count in words outside a placeholder (a
// figure or an id such as PAY-001), or the name of an actor of the run.
func templateFaults(template string, actors []string) []string {
	var faults []string
	bare := lab.ReplacePlaceholders(template, func(string) string { return "" })
	if i := strings.IndexAny(bare, "0123456789"); i >= 0 {
		faults = append(faults, "a figure written into it ("+excerpt(bare, i)+")")
	}
	if m := figureWordRE.FindStringIndex(bare); m != nil {
		faults = append(faults, "a count in words ("+excerpt(bare, m[0])+")")
	}
	for _, a := range actors {
		if strings.Contains(bare, a) {
			faults = append(faults, "the actor "+a+" by name")
		}
	}
	return faults
}

// excerpt is text around i, for a message.
func excerpt(text string, i int) string {
	from, to := max(0, i-20), min(len(text), i+20)
	return "..." + text[from:to] + "..."
}

// timelineActors are the actors a run's timeline names, as written in
// its Actor column (a skew suffix such as "Worker-S -300ms" dropped), the
// lab's own ("scenario", "clock") left out.
func timelineActors(r *lab.Result) []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range r.Timeline {
		a, _, _ := strings.Cut(e.Actor, " ")
		if !strings.Contains(a, "-") || seen[a] {
			continue // a lab role (scenario, clock, producer, broker) is no actor's name
		}
		seen[a] = true
		out = append(out, a)
	}
	return out
}

// checkTextsFromTheRun asserts that every check of r says only what r
// showed: its template (the lesson's lesson.CheckDoc) writes in no figure and no
// actor of the run by name, and the run filled every placeholder of it.
// A variant's "What this run shows" is held to the same rule; the
// lesson's and the variant's other texts must at least be filled.
func checkTextsFromTheRun(t *testing.T, sc *lesson.Scenario, r *lab.Result) {
	t.Helper()
	actors := timelineActors(r)
	for _, c := range r.Checks {
		i := indexOfCheck(sc.Checks, c.Name)
		if i < 0 {
			continue // the lab's own checks (mistake_exposed, a submission's), whose texts name no actor
		}
		doc := sc.Checks[i]
		for _, f := range templateFaults(doc.About, actors) {
			t.Errorf("check %s: its text holds %s: %q", c.Name, f, doc.About)
		}
		if missing := r.Missing(doc.About); len(missing) > 0 {
			t.Errorf("check %s: the run did not fill %v in %q", c.Name, missing, doc.About)
		}
	}
	for what, template := range map[string]string{"Teaches": sc.Teaches, "DoesNotSolve": sc.DoesNotSolve} {
		if missing := r.Missing(template); len(missing) > 0 {
			t.Errorf("%s: the run did not fill %v", what, missing)
		}
	}
	if v, ok := sc.Variant(r.Variant); ok {
		for what, template := range map[string]string{"Mistake": v.Mistake, "Changes": v.Changes} {
			if missing := r.Missing(template); len(missing) > 0 {
				t.Errorf("variant %s's %s: the run did not fill %v", v.Name, what, missing)
			}
		}
	}
	if v, ok := sc.Variant(r.Variant); ok && v.Shows != "" {
		for _, f := range templateFaults(v.Shows, actors) {
			t.Errorf("variant %s's Shows: it holds %s", v.Name, f)
		}
		if missing := r.Missing(v.Shows); len(missing) > 0 {
			t.Errorf("variant %s's Shows: the run did not fill %v", v.Name, missing)
		}
	}
}

// indexOfCheck is the index of the check named name in docs, or -1.
func indexOfCheck(docs []lesson.CheckDoc, name string) int {
	for i, d := range docs {
		if d.Name == name {
			return i
		}
	}
	return -1
}

// TestTemplateFaults: the rule catches a digit, a count in words and an
// actor's name outside a placeholder, and passes placeholders.
func TestTemplateFaults(t *testing.T) {
	actors := []string{"Worker-A", "Relay-B"}
	cases := []struct {
		template string
		faults   int
	}{
		{"rows changed by {@stale}'s ack under its stale token", 0},
		{"the broker holds {broker_offers} offers of {@event}", 0},
		{"the lease runs {lease} from the claim, in one transaction, at most once", 0},
		{"Worker-A's ack with its stale token", 1},
		{"the ack changed 0 rows", 1},
		{"the two successful claims", 1},
		{"Relay-B credited 2000 cents twice", 3},
	}
	for _, c := range cases {
		if got := templateFaults(c.template, actors); len(got) != c.faults {
			t.Errorf("%q: faults %v, want %d", c.template, got, c.faults)
		}
	}
}

// TestTextsFollowTheOptions: with options other than the defaults, every
// text is still filled from the run and holds no figure of its own, and
// the settings a text quotes are the ones the run used.
func TestTextsFollowTheOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sc      *lesson.Scenario
		variant string
		set     func(o *lesson.Options)
		quotes  []string // texts of the options the lesson's text must quote
	}{
		{&session20inbox.Lesson, "", func(o *lesson.Options) {
			o.InboxRetention, o.DLQRetention, o.BrokerWindow = 240*time.Hour, 48*time.Hour, 10*time.Minute
		}, []string{"--inbox-retention: 10d", "--dlq-retention: 2d", "--broker-window: 10m"}},
		{&session18expiry.Lesson, "broker-dedup-window", func(o *lesson.Options) { o.BrokerWindow = time.Millisecond }, []string{"1ms"}},
		{&session23clocks.Lesson, "worker-clock-leases", func(o *lesson.Options) { o.SkewSlow, o.SkewFast = 5*time.Second, 5*time.Second }, nil},
	}
	for _, c := range cases {
		t.Run(c.sc.Name+"/"+c.variant, func(t *testing.T) {
			t.Parallel()
			opts := lesson.DefaultOptions()
			opts.TempRoot = t.TempDir()
			c.set(&opts)
			r, err := lesson.Execute(context.Background(), c.sc, c.variant, opts, false)
			if err != nil {
				t.Fatal(err)
			}
			checkTextsFromTheRun(t, c.sc, r)
			text := r.Lesson + " " + r.Mistake
			for _, q := range c.quotes {
				if !strings.Contains(text, q) {
					t.Errorf("the texts do not quote %q:\n%s", q, text)
				}
			}
		})
	}
}
