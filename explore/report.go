package explore

import (
	"context"
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
)

// DefaultBound is the most actions one ordering holds unless told. Five
// is the shortest ordering that can make a completion stale (claim, send,
// expire, the other relay's claim, the late completion), and keeps a run
// well under a second.
const DefaultBound = 5

// MaxBound is the largest bound the explorer accepts: past it, the
// scenario clock of one ordering would run past the relay lease by itself.
const MaxBound = maxExploreBound

// Config is one exploration: where its databases live, how its
// connections open, the design under test and how far to explore.
type Config struct {
	// Open opens every connection, so each statement lands in the run's ledger.
	Open cast.Opener
	// Template is the seeded database every ordering copies; Scratch(i) is
	// worker i's scratch database (from 1); Main is where the timeline's
	// ordering is replayed, the database a report names.
	Template string
	Scratch  func(i int) string
	Main     string
	Design   Design
	Options  Options
	// Variant names the mistake under test in the verdict ("" for none).
	Variant string
	// Expect adds the run's checks once its figures are measured.
	Expect func(r *lab.Result)
}

// Run explores every ordering up to the bound and reports: figures,
// tables, the timeline of the shortest counterexample (or of a
// representative ordering) replayed on the main database, and a verdict.
func Run(ctx context.Context, c Config) (*lab.Result, error) {
	x, err := newExplorer(ctx, c.Open, c.Template, c.Scratch, c.Design, c.Options)
	if err != nil {
		return nil, err
	}
	if err := x.run(ctx); err != nil {
		return nil, err
	}
	r := &lab.Result{Database: c.Main}
	measureExplore(x, r)
	castExplore(x, r)
	if c.Expect != nil {
		c.Expect(r)
	}
	for inv, s := range x.shortest {
		for i := range r.Checks {
			if s != nil && r.Checks[i].Name == invariantInfo[inv].check {
				r.Checks[i].Counterexample = fmt.Sprintf("%s: %s", lab.Count(int64(len(s.actions)), "action", "actions"), orderingText(s.actions))
			}
		}
	}
	r.Tables = append(r.Tables, exploreAlphabetTable(c.Design), exploreSummaryTable(x), exploreInvariantTable(x), exploreLengthTable(x))
	for inv, s := range x.shortest {
		if s != nil {
			r.Tables = append(r.Tables, counterexampleTable(exploreInvariant(inv), s, x.violations[inv]))
		}
	}
	if err := replayShown(ctx, c, x, r); err != nil {
		return nil, err
	}
	r.Verdict = exploreVerdict(c.Variant, x, r)
	return r, nil
}

// replayShown replays, into the main database (which --keep-db keeps), the
// first counterexample or the representative ordering, for the timeline,
// ledgers and final state.
func replayShown(ctx context.Context, c Config, x *explorer, r *lab.Result) error {
	shown, inv := x.firstCounterexample()
	var why string
	if shown != nil {
		why = fmt.Sprintf("the shortest counterexample of %q", invariantInfo[inv].name)
	} else {
		shown = x.representative
		why = fmt.Sprintf("no counterexample: the shortest explored ordering in which the most kinds of guard turned a write away (%s)", shown.guards)
	}
	var tl lab.Timeline
	tl.Note(cast.TickClock(0), "scenario", "timeline", fmt.Sprintf("ordering [%s], %s, replayed on a fresh database", orderingText(shown.actions), why))
	if err := seedExploreDatabase(ctx, c.Open, c.Main, &tl); err != nil {
		return err
	}
	w, err := newExploreWorld(ctx, c.Open, c.Main, c.Design, c.Options.Relays, &tl)
	if err != nil {
		return err
	}
	defer w.close()
	w.res.actions = shown.actions
	if err := w.play(ctx, shown.actions, nil); err != nil {
		return fmt.Errorf("explore: replay [%s]: %w", orderingText(shown.actions), err)
	}
	if w.res.violated != shown.violated {
		return fmt.Errorf("explore: the replay of [%s] broke %v, the exploration %v", orderingText(shown.actions), w.res.violated, shown.violated)
	}
	if err := cast.FinishDelivery(ctx, r, []*cast.Pipeline{w.p}, nil); err != nil {
		return err
	}
	for i := range r.Tables {
		if strings.HasPrefix(r.Tables[i].Title, "Ledger: ") || strings.HasPrefix(r.Tables[i].Title, "Final state: ") {
			r.Tables[i].Note = "The timeline's ordering only. " + r.Tables[i].Note
		}
	}
	return nil
}

// measureExplore records the explorer's figures.
func measureExplore(x *explorer, r *lab.Result) {
	r.SetMetric("bound", float64(x.bound))
	r.SetMetric("orderings_explored", float64(x.explored))
	r.SetMetric("orderings_pruned_symmetry", float64(x.pruned))
	r.SetMetric("orderings_total", float64(x.explored+x.pruned))
	r.SetMetric("drains_run", float64(x.drainsRun()))
	r.SetMetric("drains_deduplicated", float64(x.explored-x.drainsRun()))
	r.SetMetric("orderings_violating", float64(x.totalViolating()))
	for inv, info := range invariantInfo {
		r.SetMetric(info.check, float64(x.violations[inv]))
	}
	for inv, info := range invariantInfo {
		if s := x.shortest[inv]; s != nil {
			r.SetMetric("shortest_"+strings.TrimPrefix(info.check, "violations_"), float64(len(s.actions)))
		}
	}
}

// castExplore records what the explorer's texts quote from the run: the
// seeded event whose credit the effect invariant counts and the account
// the projection invariant watches; for each invariant's shortest
// counterexample, its ordering and its first violation as the judge wrote
// it; and the relays its actions and its violation name.
func castExplore(x *explorer, r *lab.Result) {
	for _, e := range exploreEvents {
		if e.payload.CreditCents > 0 {
			r.SetCast("credited_event", e.id)
			r.SetCast("account", e.payload.Account)
			break
		}
	}
	for inv, info := range invariantInfo {
		s := x.shortest[inv]
		if s == nil {
			continue
		}
		short := strings.TrimPrefix(info.check, "violations_")
		r.SetSetting("counterexample_"+short, orderingText(s.actions))
		for _, v := range s.violations {
			if v.inv == exploreInvariant(inv) {
				r.SetSetting("violation_"+short, v.detail)
				if v.actor != "" {
					r.SetCast(short+"_writer", v.actor)
				}
				break
			}
		}
	}
	castCounterexampleRelays(x, r)
}

// castCounterexampleRelays casts the relays the shortest counterexamples'
// actions name: the relay that completed and never sent after, in the at
// least once one; the relay whose send was never followed by its completion, in
// the effect one; and the relay whose claim last came before the stale
// completion, in the stale completion one (none when an ordering holds no
// such action).
func castCounterexampleRelays(x *explorer, r *lab.Result) {
	if s := x.shortest[invAtLeastOnce]; s != nil {
		if a, ok := lastOf(s.actions, len(s.actions), actCompleteA); ok && !doesAfter(s.actions, a, actSendA) {
			r.SetCast("early_completer", relayName(s.actions[a]))
		}
	}
	if s := x.shortest[invEffectAtMostOnce]; s != nil {
		if a, ok := lastOf(s.actions, len(s.actions), actSendA); ok && !doesAfter(s.actions, a, actCompleteA) {
			r.SetCast("stopped_sender", relayName(s.actions[a]))
		}
	}
	if s := x.shortest[invStaleCompletion]; s != nil {
		if c, ok := lastOf(s.actions, len(s.actions), actCompleteA); ok {
			for i := c - 1; i >= 0; i-- {
				if base(s.actions[i]) == actClaimA && relayName(s.actions[i]) != relayName(s.actions[c]) {
					r.SetCast("newer_claimer", relayName(s.actions[i]))
					break
				}
			}
		}
	}
}

// base is a relay's action as Relay-A's letter; any other action as it is.
func base(a exploreAction) exploreAction {
	if a.relay() == 1 {
		return a.mirror()
	}
	return a
}

// relayName is the instance an action belongs to.
func relayName(a exploreAction) string { return exploreAlphabet[a].actor }

// lastOf is the index, before end, of the last action of actions that is
// kind (Relay-A's letter) for either relay.
func lastOf(actions []exploreAction, end int, kind exploreAction) (int, bool) {
	for i := end - 1; i >= 0; i-- {
		if base(actions[i]) == kind {
			return i, true
		}
	}
	return 0, false
}

// doesAfter says whether the relay of the action at i takes an action of
// kind (Relay-A's letter) later in actions.
func doesAfter(actions []exploreAction, i int, kind exploreAction) bool {
	for _, a := range actions[i+1:] {
		if base(a) == kind && relayName(a) == relayName(actions[i]) {
			return true
		}
	}
	return false
}

func exploreVerdict(variant string, x *explorer, r *lab.Result) string {
	m := func(key string) string {
		v, ok := r.Metric(key)
		if !ok {
			return "?"
		}
		return lab.FormatNumber(v)
	}
	if r.Passed() {
		return fmt.Sprintf("SAFE DESIGN held in every explored ordering: %s orderings of up to %s actions, each run on a fresh database, "+
			"drained (%s distinct drains; the other %s orderings ended in a state already drained and took that drain's verdict) and judged "+
			"on durable state, broke no invariant: at least once %s, effect at most once %s, stale completion %s, projection backward %s. "+
			"Their %s mirror images were pruned by symmetry. This holds up to the bound and in this model; it proves nothing beyond.",
			m("orderings_explored"), m("bound"), m("drains_run"), m("drains_deduplicated"), m(invariantInfo[invAtLeastOnce].check),
			m(invariantInfo[invEffectAtMostOnce].check), m(invariantInfo[invStaleCompletion].check), m(invariantInfo[invProjectionBackward].check),
			m("orderings_pruned_symmetry"))
	}
	var broken []string
	for inv, info := range invariantInfo {
		if s := x.shortest[inv]; s != nil {
			broken = append(broken, fmt.Sprintf("%q violated in %d of %s orderings, the shortest with %s: %s",
				info.name, x.violations[inv], m("orderings_explored"), lab.Count(int64(len(s.actions)), "action", "actions"), orderingText(s.actions)))
		}
	}
	if variant == "" {
		return fmt.Sprintf("NOT SHOWN: the design did not hold this run; failed checks %v; %s.", r.FailedChecks(), strings.Join(broken, "; "))
	}
	if len(broken) == 0 {
		return "" // Execute opens a variant's verdict with what its checks measured; no counterexample adds nothing
	}
	return strings.Join(broken, "; ") + "." // after Execute's opening, with what its checks measured
}

func exploreAlphabetTable(d Design) lab.Table {
	t := lab.Table{Title: "The action alphabet",
		Note: fmt.Sprintf("Every ordering is a sequence of these actions, each chosen only when it is enabled. Each action comes "+
			"%s after the previous one on the scenario clock (expire and redeliver move it further). The relay lease is %s and the "+
			"broker's visibility timeout %s, so only expire makes a lease run out. At the end of an ordering every instance stops: "+
			"a crash differs only in that the relay stops earlier, while the ordering goes on. Relay-B's actions mirror Relay-A's.",
			cast.DurationText(exploreStep), cast.DurationText(cast.RelayLease), cast.DurationText(exploreVisibility)),
		Columns: []string{"Action", "Actor", "Enabled when", "What it runs"}}
	for a := range numExploreActions {
		enabled, does := describeAction(a, d)
		t.AddRow(a.String(), exploreAlphabet[a].actor, enabled, does)
	}
	return t
}

func exploreSummaryTable(x *explorer) lab.Table {
	t := lab.Table{Title: "Exploration",
		Note: "Depth-first over the enabled actions, from the empty ordering (the drain alone) up to the bound. Pruning: at the root " +
			"the two relays are interchangeable, so every ordering starting with Relay-B is the mirror image of one starting with " +
			"Relay-A, reaches the same state up to the names and is not run. Every other ordering ran its actions on a fresh copy " +
			"of the seeded database. Deduplication: the drain reads only durable state, so when an ordering ends in a state an " +
			"earlier ordering already drained from (the same rows, the same live leases, the same highest projection version), it " +
			"takes that drain's verdict instead of draining again.",
		Columns: []string{"Figure", "Value"}}
	t.AddRow("bound: most actions in one ordering", x.bound)
	t.AddRow("orderings explored: each run on a fresh database and judged", x.explored)
	t.AddRow("orderings pruned by symmetry (mirror images, not run)", x.pruned)
	t.AddRow("orderings up to the bound in all", x.explored+x.pruned)
	t.AddRow("drains run", x.drainsRun())
	t.AddRow("drains deduplicated (the verdict of an identical drain reused)", x.explored-x.drainsRun())
	t.AddRow("explored orderings that broke at least one invariant", x.totalViolating())
	return t
}

func exploreInvariantTable(x *explorer) lab.Table {
	t := lab.Table{Title: "Invariants over every explored ordering",
		Note:    "Each is judged on durable state only, read by the observer's queries: during the steps where it can break, and after the drain.",
		Columns: []string{"Invariant", "Judged on", "Orderings violating", "Shortest counterexample", "Its actions"}}
	for inv, info := range invariantInfo {
		length, actions := "-", "-"
		if s := x.shortest[inv]; s != nil {
			length, actions = fmt.Sprint(len(s.actions)), orderingText(s.actions)
		}
		t.AddRow(info.name, info.judged, x.violations[inv], length, actions)
	}
	return t
}

func exploreLengthTable(x *explorer) lab.Table {
	t := lab.Table{Title: "Orderings by length", Note: "How many orderings of each length the explorer ran, and how many of them broke an invariant (the checks above count those orderings per invariant).", Columns: []string{"Actions", "Explored", "Violating an invariant"}}
	for n, l := range x.byLength {
		t.AddRow(n, l.explored, l.violating)
	}
	return t
}

// orderingSteps says which steps of a step table are the ordering's.
func orderingSteps(n int) string {
	switch n {
	case 0:
		return "The ordering has no step"
	case 1:
		return "Step 1 is the ordering"
	}
	return fmt.Sprintf("Steps 1 to %d are the ordering", n)
}

// counterexampleTable prints an ordering step by step: its actions, the
// end of the ordering, the drain and the judgement.
func counterexampleTable(inv exploreInvariant, s *orderingResult, violating int) lab.Table {
	t := lab.Table{Title: "Shortest counterexample: " + invariantInfo[inv].name,
		Note: fmt.Sprintf("%d of the explored orderings violate %q; none has fewer actions than this one (%d): %s. "+
			"%s; then every instance stops and the drain runs. The clock is as each step left it.",
			violating, invariantInfo[inv].name, len(s.actions), orderingText(s.actions), orderingSteps(len(s.actions))),
		Columns: []string{"Step", "Clock", "Action", "Observed"}}
	for i, st := range s.steps {
		if i == len(s.actions) {
			t.AddRow("-", "-", "end of ordering", "Relay-A, Relay-B and the consumer stop for good; what they held in memory is lost")
		}
		var events []lab.Event
		for _, e := range st.events {
			if e.Action != "start" {
				events = append(events, e)
			}
		}
		var seen []string
		for _, e := range events {
			if len(events) > 1 {
				seen = append(seen, e.Action+": "+e.Detail)
			} else {
				seen = append(seen, e.Detail)
			}
		}
		seen = append(seen, st.violation...)
		observed := strings.Join(seen, "; ")
		if st.label == "end" && len(st.violation) == 0 {
			observed = "at least once and effect at most once held on the final state"
		}
		t.AddRow(st.label, st.at, st.action, observed)
	}
	return t
}
