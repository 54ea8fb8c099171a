package scenarios

import (
	"context"
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// defaultExploreBound is the most actions one ordering holds. Five is the
// shortest ordering that can make a completion stale (claim, send, expire,
// the other relay's claim, the late completion), and keeps a run well
// under a second.
const defaultExploreBound = 5

// variantCompleteBeforeSend is the explorer's own mistake variant; the
// others are shared with sessions 18 and 19 and declared there.
const variantCompleteBeforeSend = "complete-before-send"

var interleavingExplorer = Scenario{
	Name:    "explore",
	Session: "Explore",
	FileTag: "InterleavingExplorer",
	Title:   "The interleaving explorer: every ordering up to a bound, judged on durable state",
	Design:  lab.Safe,
	Teaches: fmt.Sprintf("Sessions 18 and 19 play a handful of chosen event orders. The explorer plays all of them, up to a "+
		"bound: every ordering of at most %d actions from the alphabet claim, send and complete for two relays (Relay-A and "+
		"Relay-B), lease expiry, one relay crash, broker delivery and redelivery, consume, and the consumer's acknowledgement "+
		"or its loss. An action is chosen only where it makes sense (send after that relay's claim, complete after its send, "+
		"consume after a delivery, expiry while a lease is live). Each ordering runs against a fresh copy of one seeded SQLite "+
		"database, through the same store code as sessions 18 and 19: event e1 awards 1000 cents to ACC-1 and puts it at "+
		"version 1 (active); e2 freezes ACC-1 at version 2. When the ordering ends, every instance stops for good and what it "+
		"held in memory is lost; a recovery relay publishes whatever is left (letting leases expire on the scenario clock) and "+
		"a fresh consumer instance takes every delivery (letting unacknowledged ones be redelivered). Then four invariants are "+
		"judged on durable state only: at least once (every committed event was offered and is published), effect at most "+
		"once (e1's credit committed at most once), no stale completion (a row is published only under its latest token) "+
		"and monotonic projection (ACC-1's version never decreases). The safe design has no violation in any ordering; "+
		"each mistake variant shows how many orderings break its invariant and the shortest one that does.", defaultExploreBound),
	DoesNotSolve: "Bounded exploration proves nothing beyond its bound: a longer ordering, a second crash, a third event or a " +
		"second consumer may still break an invariant the explorer found intact. It checks this model (the lab's relay, broker " +
		"and consumer on SQLite, each action one atomic step) and not a real broker, whose redelivery, ordering and " +
		"deduplication rules differ, nor races inside one step, which sessions 15 and 19 run with real goroutines. The " +
		"symmetry pruning holds only because the two relays are identical instances.",
	Statements: exploreStatements(exploreDesign{}),
	Checks: []CheckDoc{
		{invariantInfo[invAtLeastOnce].check, "orderings after whose drain a committed event has no accepted broker offer or is not published"},
		{invariantInfo[invEffectAtMostOnce].check, "orderings after whose drain e1's credit committed more than once for account-service"},
		{invariantInfo[invStaleCompletion].check, "orderings in which a completion published a row with a token other than the row's latest"},
		{invariantInfo[invProjectionBackward].check, "orderings in which ACC-1's projected version decreased after a consume"},
	},
	Variants: []Variant{
		{Name: variantCompleteBeforeSend, Mistake: "the relay marks the row published before it sends: an instance that stops between " +
			"the two leaves a published event the broker never saw",
			Breaks: []string{invariantInfo[invAtLeastOnce].check}},
		{Name: variantNaiveConsumer, Mistake: "the consumer credits without the inbox: a resend or a redelivery credits e1 again",
			Breaks: []string{invariantInfo[invEffectAtMostOnce].check}},
		{Name: variantCompleteWithoutToken, Mistake: "the relays complete by event id alone: a relay whose lease expired publishes the " +
			"row under a stale token",
			Breaks: []string{invariantInfo[invStaleCompletion].check}},
		{Name: variantProjectionNoVersion, Mistake: "the projection applies every event, last write wins: e1 (version 1) arriving after " +
			"e2 (version 2) moves ACC-1 back to active",
			Breaks: []string{invariantInfo[invProjectionBackward].check}},
	},
	Run: runExplore,
}

// exploreDesignFor returns what the variant changes.
func exploreDesignFor(variant string) exploreDesign {
	return exploreDesign{
		completeWithoutToken:  variant == variantCompleteWithoutToken,
		completeBeforeSend:    variant == variantCompleteBeforeSend,
		naiveConsumer:         variant == variantNaiveConsumer,
		unversionedProjection: variant == variantProjectionNoVersion,
	}
}

// exploreStatements is the SQL the explorer's steps run under design.
func exploreStatements(d exploreDesign) []lab.Statement {
	complete := lab.Statement{Name: "relay: complete under the current token", SQL: store.AckWithTokenSQL}
	if d.completeWithoutToken {
		complete = lab.Statement{Name: "relay: complete by event id alone (MISTAKE)", SQL: store.AckByEventIDSQL}
	}
	credit := []lab.Statement{
		{Name: "consumer: inbox insert (same transaction as the credit)", SQL: store.RecordConsumedSQL},
		{Name: "consumer: credit, only when the insert added a row", SQL: store.CreditAccountSQL},
	}
	if d.naiveConsumer {
		credit = []lab.Statement{{Name: "consumer: credit without the inbox (MISTAKE)", SQL: store.CreditAccountSQL}}
	}
	projection := lab.Statement{Name: "consumer: projection, only a newer version", SQL: store.ApplyVersionedSQL}
	if d.unversionedProjection {
		projection = lab.Statement{Name: "consumer: projection, last write wins (MISTAKE)", SQL: store.ApplyUnversionedSQL}
	}
	out := []lab.Statement{
		{Name: "relay: select the oldest claimable event", SQL: store.SelectNextEventSQL},
		{Name: "relay: claim (fencing token + 1)", SQL: store.ClaimEventSQL},
		complete,
		{Name: "broker: offer", SQL: store.OfferSQL},
		{Name: "broker: deliver next", SQL: store.SelectNextDeliverySQL},
		{Name: "broker: mark delivered", SQL: store.MarkDeliveredSQL},
		{Name: "consumer: ack a delivery", SQL: store.AckDeliverySQL},
		{Name: "broker: redeliver after the visibility timeout", SQL: store.RedeliverSQL},
	}
	out = append(out, credit...)
	return append(out, projection)
}

func runExplore(ctx context.Context, env *Env) (*lab.Result, error) {
	bound := defaultExploreBound
	if env.Options.ExploreBound > 0 {
		bound = env.Options.ExploreBound
	}
	return playExplore(ctx, env, exploreOptions{bound: bound, symmetry: true, dedupDrains: true})
}

// MaxExploreBound is the largest bound `explore` accepts: past it, the
// scenario clock of one ordering would run past the relay lease by itself.
const MaxExploreBound = maxExploreBound

// DefaultExploreBound is the bound `explore` uses when none is given.
const DefaultExploreBound = defaultExploreBound

// playExplore explores with opts and reports; tests use smaller bounds.
func playExplore(ctx context.Context, env *Env, opts exploreOptions) (*lab.Result, error) {
	design := exploreDesignFor(env.Variant)
	scratch := func(i int) string { return env.ExtraDatabasePath(fmt.Sprintf("explore-ordering-%d", i)) }
	x, err := newExplorer(ctx, env.ExtraDatabasePath("explore-template"), scratch, design, opts)
	if err != nil {
		return nil, err
	}
	if err := x.run(ctx); err != nil {
		return nil, err
	}
	r := &lab.Result{Database: env.DatabasePath(), Statements: exploreStatements(design)}
	measureExplore(x, r)
	expectDocumented(r, env.Scenario.Checks, map[string]float64{
		invariantInfo[invAtLeastOnce].check: 0, invariantInfo[invEffectAtMostOnce].check: 0,
		invariantInfo[invStaleCompletion].check: 0, invariantInfo[invProjectionBackward].check: 0,
	})
	r.Tables = append(r.Tables, exploreAlphabetTable(design), exploreSummaryTable(x), exploreInvariantTable(x), exploreLengthTable(x))
	for inv, s := range x.shortest {
		if s != nil {
			r.Tables = append(r.Tables, counterexampleTable(exploreInvariant(inv), s, x.violations[inv]))
		}
	}

	// The timeline: the first counterexample (or the representative
	// ordering), replayed into the run's main database, which --keep-db keeps.
	shown, inv := x.firstCounterexample()
	var why string
	if shown != nil {
		why = fmt.Sprintf("the shortest counterexample of %q", invariantInfo[inv].name)
	} else {
		shown = x.representative
		why = fmt.Sprintf("no counterexample: the shortest explored ordering in which the most kinds of guard turned a write away (%s)", shown.guards)
	}
	var tl lab.Timeline
	tl.Add(tickClock(0), "scenario", "timeline", fmt.Sprintf("ordering [%s], %s, replayed on a fresh database", orderingText(shown.actions), why))
	if err := seedExploreDatabase(ctx, env.DatabasePath(), &tl); err != nil {
		return nil, err
	}
	w, err := newExploreWorld(ctx, env.DatabasePath(), design, &tl)
	if err != nil {
		return nil, err
	}
	defer w.close()
	w.res.actions = shown.actions
	if err := w.play(ctx, shown.actions, nil); err != nil {
		return nil, fmt.Errorf("explore: replay [%s]: %w", orderingText(shown.actions), err)
	}
	if w.res.violated != shown.violated {
		return nil, fmt.Errorf("explore: the replay of [%s] broke %v, the exploration %v", orderingText(shown.actions), w.res.violated, shown.violated)
	}
	if err := finishDelivery(ctx, r, []*pipeline{w.p}, nil); err != nil {
		return nil, err
	}
	for i := range r.Tables {
		if strings.HasPrefix(r.Tables[i].Title, "Ledger: ") || strings.HasPrefix(r.Tables[i].Title, "Final state: ") {
			r.Tables[i].Note = "The timeline's ordering only. " + r.Tables[i].Note
		}
	}
	r.Verdict = exploreVerdict(env, x, r)
	return r, nil
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

func exploreVerdict(env *Env, x *explorer, r *lab.Result) string {
	m := metricsOf(r)
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
			broken = append(broken, fmt.Sprintf("%q violated in %d of %s orderings, the shortest with %d action(s): %s",
				info.name, x.violations[inv], m("orderings_explored"), len(s.actions), orderingText(s.actions)))
		}
	}
	return fmt.Sprintf("DESIGN BROKEN by the %q mistake: failed checks %v; %s.", env.Variant, r.FailedChecks(), strings.Join(broken, "; "))
}

func exploreAlphabetTable(d exploreDesign) lab.Table {
	t := lab.Table{Title: "The action alphabet",
		Note: fmt.Sprintf("Every ordering is a sequence of these actions, each chosen only when it is enabled. Each action comes "+
			"%s after the previous one on the scenario clock (expire and redeliver move it further). The relay lease is %s and the "+
			"broker's visibility timeout %s, so only expire makes a lease run out. At the end of an ordering every instance stops: "+
			"a crash differs only in that the relay stops earlier, while the ordering goes on. Relay-B's actions mirror Relay-A's.",
			durationText(exploreStep), durationText(relayLease), durationText(exploreVisibility)),
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
	t := lab.Table{Title: "Orderings by length", Columns: []string{"Actions", "Explored", "Violating an invariant"}}
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
