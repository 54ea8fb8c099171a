// Package explorer is the lesson explore: its Lesson (the sequence, the
// checks, the variants and what the registry's tests read to prove it), the
// stages and actors only it uses, its proofs (proofs.go) and its tests.
package explorer

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/explore"
	"github.com/outboxlab/outboxlab/internal/progress"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// xCompleteBeforeSend is the explorer's mistake that is no statement: the
// relay's order of complete and send.
const xCompleteBeforeSend = "complete-before-send"

// DefaultExploreBound is the bound `explore` uses when none is given.
const DefaultExploreBound = explore.DefaultBound

// Lesson is explore, as the registry lists it: "The interleaving explorer:
// every ordering up to a bound, judged on durable state".
var Lesson = lesson.Scenario{
	Name:    "explore",
	Session: "Explore",
	FileTag: "Interleaving-Explorer",
	Title:   "The interleaving explorer: every ordering up to a bound, judged on durable state",
	Design:  lab.Safe,
	Figures: map[string]float64{
		"orderings_violating": 0, "violations_at_least_once": 0, "violations_effect_at_most_once": 0,
		"violations_stale_completion": 0, "violations_projection_backward": 0,
	},
	Teaches: "Sessions 18 and 19 play a handful of chosen event orders. The explorer plays all of them, up to a " +
		"bound: every ordering of at most {bound} actions from the alphabet claim, send and complete for two relays (Relay-A and " +
		"Relay-B), lease expiry, one relay crash, broker delivery and redelivery, consume, and the consumer's acknowledgement " +
		"or its loss. An action is chosen only where it makes sense (send after that relay's claim, complete after its send, " +
		"consume after a delivery, expiry while a lease is live). Each ordering runs against a fresh copy of one seeded " +
		"database, through the same store code as sessions 18 and 19: event e1 awards 1000 cents to ACC-1 and puts it at " +
		"version 1 (active); e2 freezes ACC-1 at version 2. When the ordering ends, every instance stops for good and what it " +
		"held in memory is lost; a recovery relay publishes whatever is left (letting leases expire on the scenario clock) and " +
		"a fresh consumer instance takes every delivery (letting unacknowledged ones be redelivered). Then four invariants are " +
		"judged on durable state only: at least once (every committed event was offered and is published), effect at most " +
		"once (e1's credit committed at most once), no stale completion (a row is published only under its latest token) " +
		"and monotonic projection (ACC-1's version never decreases). The safe design has no violation in any ordering; " +
		"each mistake variant shows how many orderings break its invariant and the shortest one that does.",
	DoesNotSolve: "Bounded exploration proves nothing beyond its bound: a longer ordering, a second crash, a third event or a " +
		"second consumer may still break an invariant the explorer found intact. It checks this model (the lab's relay, broker " +
		"and consumer on the lab's database, each action one atomic step) and not a real broker, whose redelivery, ordering and " +
		"deduplication rules differ, nor races inside one step, which sessions 15 and 19 run with real goroutines. The " +
		"symmetry pruning holds only because the two relays are identical instances.",
	Statements: cast.PipelineSQL(store.ConsumerLesson.Project),
	Set:        LessonDesign,
	Options: []lesson.Option{{Flag: "bound", Usage: fmt.Sprintf("the most actions in one ordering, `N` from 1 to %d (6 takes seconds, 8 most of a minute)", explore.MaxBound),
		Count: func(o *lesson.Options) *int { return &o.ExploreBound }, Max: explore.MaxBound, Default: explore.DefaultBound}},
	Checks: []lesson.CheckDoc{
		{Name: explore.CheckAtLeastOnce, About: "orderings after whose drain a committed event has no accepted broker offer or is not published"},
		{Name: explore.CheckEffectAtMostOnce, About: "orderings after whose drain {@credited_event}'s credit committed more than once for account-service"},
		{Name: explore.CheckStaleCompletion, About: "orderings in which a completion published a row with a token other than the row's latest"},
		{Name: explore.CheckProjectionBackward, About: "orderings in which {@account}'s projected version decreased after a consume"},
	},
	Variants: []lesson.Variant{
		{Name: xCompleteBeforeSend, Changes: "the relay's order of its steps: it completes, then sends", Mistake: "the relay marks the row published before it sends: an instance that stops between " +
			"the two leaves a published event the broker never saw",
			Breaks:        []string{explore.CheckAtLeastOnce},
			ShortestBound: 4, // claim A, complete A (at 3 no ordering reaches a redelivery, so the SQL differs by more than the mistake)
			Shows: "The explorer finds {violations_at_least_once} orderings that lose an event, the shortest " +
				"({shortest_at_least_once} actions) being {counterexample_at_least_once}: {@early_completer} marks the " +
				"row published and stops before sending it, and no relay claims a published row again, so the broker " +
				"never sees it ({violation_at_least_once}). For at least once delivery the send must come before the " +
				"completion, so that a crash between them causes a resend, never a loss."},
		{Name: "naive-consumer", Swaps: []store.Stmt{store.NoInbox}, Mistake: "the consumer credits without the inbox: a resend or a redelivery credits the event again",
			Breaks:        []string{explore.CheckEffectAtMostOnce},
			ShortestBound: 3, // claim A, send A
			Shows: "In the shortest counterexample ({counterexample_effect_at_most_once}) {@stopped_sender} stops " +
				"after its send, before completing; the recovery relay sends the event again once the lease has expired, " +
				"and the consumer without an inbox credits each offer ({violation_effect_at_most_once}). A relay that can " +
				"stop after its send makes delivery at least once, so the consumer must deduplicate by event id in the " +
				"transaction of its effect."},
		{Name: "complete-without-token", Swaps: []store.Stmt{store.CompleteByEventID}, Mistake: "the relays complete by event id alone: a relay whose lease expired publishes the " +
			"row under a stale token",
			Breaks:        []string{explore.CheckStaleCompletion},
			ShortestBound: 5, // claim A, send A, expire, claim B, complete A
			Shows: "In the shortest counterexample ({counterexample_stale_completion}) {@stale_completion_writer} " +
				"completes after its lease expired, while {@newer_claimer} holds the newer token, and its completion " +
				"publishes the row anyway ({violation_stale_completion}). A completion must present the row's latest " +
				"token, so a relay that lost its lease changes no row."},
		{Name: "projection-without-version", Swaps: []store.Stmt{store.ProjectLastWriteWins}, Mistake: "the projection applies every event, last write wins: an older version arriving after " +
			"a newer one moves the account back",
			Breaks:        []string{explore.CheckProjectionBackward},
			ShortestBound: 3, // claim A
			Shows: "The shortest counterexample is {counterexample_projection_backward}: the drain that follows it " +
				"delivers the events out of order, the consumer applies an older version last, and the projection " +
				"goes back ({violation_projection_backward}). Crashes and lease expiry reorder deliveries, so a " +
				"projection must apply only a version newer than the one it holds."},
	},
	Settings: func(opts lesson.Options) map[string]string {
		bound := explore.DefaultBound
		if opts.ExploreBound > 0 {
			bound = opts.ExploreBound
		}
		return map[string]string{"bound": fmt.Sprint(bound)}
	},
	Processes:      processes,
	GuardsJudgedBy: "its four invariants, judged on durable state after every ordering up to the bound",
	// Its golden report explores to bound 3 (1.5 s of CPU under the race
	// detector, not 11 s at the default bound): the report's shape is the
	// same, and the registry tests run the default bound.
	GoldenFlags: []string{"--bound", "3"},
	Run:         runExplore,
}

// LessonDesign is the explorer's statements as the lessons teach them.
var LessonDesign = explore.Design{SQL: cast.DeliveryLesson, Consumer: store.ConsumerLesson}

// runExplore explores every ordering up to the bound (package explore)
// with the variant's design.
func runExplore(ctx context.Context, env *lesson.Env) (*lab.Result, error) {
	bound := explore.DefaultBound
	if env.Options.ExploreBound > 0 {
		bound = env.Options.ExploreBound
	}
	design := lesson.StatementSet(env, LessonDesign)
	design.CompleteBeforeSend = env.Is(xCompleteBeforeSend)
	opts := explore.Options{Bound: bound, Symmetry: true, DedupDrains: true, Relays: env.Instances.ExploreRelay}
	if env.Options.Progress != nil {
		line := progress.New(env.Options.Progress, "explore")
		line.Phase(fmt.Sprintf("bound %d: orderings explored", bound), 0, 0)
		defer line.Finish()
		opts.Progress = func(explored int) { line.Set(int64(explored)) }
	}
	return explore.Run(ctx, explore.Config{
		Open:     env.Open,
		Template: env.ExtraDatabasePath("explore-template"),
		Scratch:  func(i int) string { return env.ExtraDatabasePath(fmt.Sprintf("explore-ordering-%d", i)) },
		Main:     env.DatabasePath(),
		Design:   design,
		Options:  opts,
		Variant:  env.Variant,
		Expect: func(r *lab.Result) {
			lesson.ExpectDocumented(r, env.Scenario.Checks, map[string]float64{
				explore.CheckAtLeastOnce: 0, explore.CheckEffectAtMostOnce: 0,
				explore.CheckStaleCompletion: 0, explore.CheckProjectionBackward: 0,
			})
		},
	})
}
