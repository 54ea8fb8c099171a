package explore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// explorer enumerates orderings by a depth-first search over the enabled
// actions and keeps the figures of the orderings it ran. Its workers run
// orderings at the same time, each on its own scratch database; every
// figure it keeps is independent of which ordering finished first.
//
// Pruning, and only this: at the root neither relay has acted, so Relay-A
// and Relay-B are interchangeable. Every ordering whose first action is
// Relay-B's is the mirror image (swap the names) of one whose first action
// is the mirrored Relay-A action; it reaches the same durable state up to
// the names and breaks the same invariants. With symmetry on, those
// orderings are not run and are counted as pruned: their number is the
// size of the mirrored subtree, which was run. Every other ordering up to
// the bound runs, on its own fresh database.
//
// Deduplication, and only this: with dedupDrains on, an ordering whose
// drain key (see [exploreWorld.drainKey]) was reached before takes the
// verdict of that key's drain instead of draining again. Its actions still run.
type explorer struct {
	bound    int
	symmetry bool
	design   Design
	relays   RelayStarter    // starts each relay instance (nil: in-process)
	open     cast.Opener     // opens every connection, into the run's ledger
	template *store.Template // the migrated, seeded database, copied before each ordering
	paths    []string        // one scratch database per worker
	drains   *drainCache     // nil when every ordering runs its own drain
	// onOrdering, when set, sees every ordering's result as it is
	// recorded, one at a time (tests use it).
	onOrdering func(*orderingResult)
	// progress, when set, hears the count of orderings explored so far.
	progress func(explored int)

	mu         sync.Mutex // guards the figures below
	explored   int
	pruned     int
	byFirst    map[exploreAction]int // explored orderings by first action
	byLength   []lengthStats
	violations [numExploreInvariants]int
	// shortest is each invariant's shortest counterexample; among equals,
	// the first in depth-first order.
	shortest [numExploreInvariants]*orderingResult
	// representative is the ordering in which the most kinds of guard
	// turned a write away (then fewest actions, then depth-first order):
	// the timeline shows it when there is no counterexample.
	representative *orderingResult
}

// lengthStats counts the orderings of one length.
type lengthStats struct{ explored, violating int }

// Options are the explorer's settings.
type Options struct {
	Bound       int  // most actions in one ordering
	Symmetry    bool // prune the orderings that start with Relay-B (mirror images)
	DedupDrains bool // drain each distinct drain key once (see [exploreWorld.drainKey])
	// Relays starts each relay instance; nil starts it in the lab's
	// process ([StartInProcess]). With run --processes it starts a child
	// process, and the crash action kills it with SIGKILL.
	Relays RelayStarter
	// Workers is how many orderings run at the same time; 0 means one per
	// CPU, at most maxExploreWorkers.
	Workers int
	// Progress, when set, hears the count of orderings explored so far,
	// after each (under the explorer's lock: keep it short).
	Progress func(explored int)
}

// maxExploreWorkers caps the orderings that run at the same time.
const maxExploreWorkers = 4

// newExplorer seeds the template database once at templatePath; worker i
// (from 1) runs its orderings at scratchPath(i).
func newExplorer(ctx context.Context, open cast.Opener, templatePath string, scratchPath func(i int) string, design Design, opts Options) (*explorer, error) {
	if opts.Bound < 0 || opts.Bound > maxExploreBound {
		return nil, fmt.Errorf("explore: bound %d out of range 0..%d", opts.Bound, maxExploreBound)
	}
	var tl lab.Timeline
	if err := seedExploreDatabase(ctx, open, templatePath, &tl); err != nil {
		return nil, err
	}
	template, err := store.NewTemplate(ctx, open, templatePath)
	if err != nil {
		return nil, fmt.Errorf("explore: %w", err)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), maxExploreWorkers)
	}
	x := &explorer{bound: opts.Bound, symmetry: opts.Symmetry, design: design, relays: opts.Relays, open: open, template: template, progress: opts.Progress,
		byFirst: map[exploreAction]int{}, byLength: make([]lengthStats, opts.Bound+1)}
	for i := range workers {
		x.paths = append(x.paths, scratchPath(i+1))
	}
	if opts.DedupDrains {
		x.drains = newDrainCache()
	}
	return x, nil
}

// seedExploreDatabase creates a migrated database at path with the
// explorer's events committed, and closes it (so the file is complete).
func seedExploreDatabase(ctx context.Context, open cast.Opener, path string, tl *lab.Timeline) error {
	p, err := cast.NewPipeline(ctx, open, path, "", tl, nil)
	if err != nil {
		return err
	}
	defer p.Close()
	return seedExplore(ctx, p)
}

// run explores every ordering up to the bound, then runs again, with its
// own drain, each ordering the report prints step by step if it had taken
// a reused drain verdict.
func (x *explorer) run(ctx context.Context) error {
	defer x.template.Close()
	if err := x.explore(ctx); err != nil {
		return err
	}
	path := x.paths[0]
	for inv, s := range x.shortest {
		if s != nil && s.drainReused {
			full, err := x.rerun(ctx, path, s)
			if err != nil {
				return err
			}
			for other := range x.shortest {
				if x.shortest[other] == s {
					x.shortest[other] = full
				}
			}
			if x.representative == s {
				x.representative = full
			}
			x.shortest[inv] = full
		}
	}
	if r := x.representative; r != nil && r.drainReused {
		full, err := x.rerun(ctx, path, r)
		if err != nil {
			return err
		}
		x.representative = full
	}
	return nil
}

// rerun runs an ordering again with its own drain, and requires the same verdict.
func (x *explorer) rerun(ctx context.Context, path string, res *orderingResult) (*orderingResult, error) {
	full, err := x.runOne(ctx, path, res.actions, nil)
	if err != nil {
		return nil, err
	}
	if full.violated != res.violated || full.guards != res.guards {
		return nil, fmt.Errorf("explore: [%s] with its own drain broke %v (guards: %s), with the reused drain %v (guards: %s)",
			orderingText(res.actions), full.violated, full.guards, res.violated, res.guards)
	}
	return full, nil
}

// runOne runs one ordering on the scratch database at path and throws the
// database away.
func (x *explorer) runOne(ctx context.Context, path string, actions []exploreAction, cache *drainCache) (*orderingResult, error) {
	var tl lab.Timeline
	res, w, err := runExploreOrdering(ctx, x.open, path, x.template, x.design, x.relays, actions, &tl, cache)
	if err != nil {
		return nil, err
	}
	return res, w.discard()
}

// explore runs the depth-first search on the workers: each takes the
// ordering on top of a shared stack, runs it, and pushes the orderings one
// enabled action longer (so that, on one worker, they run in alphabet order).
func (x *explorer) explore(ctx context.Context) error {
	q := newOrderingStack()
	q.push(nil)
	var mirrored []exploreAction // root actions left out by symmetry
	var rootEnabled []exploreAction
	var wg sync.WaitGroup
	for _, path := range x.paths {
		wg.Go(func() {
			for {
				prefix, ok := q.pop()
				if !ok {
					return
				}
				res, err := x.runOne(ctx, path, prefix, x.drains)
				if err != nil {
					q.fail(err)
					return
				}
				x.record(res)
				var children [][]exploreAction
				for _, a := range res.enabled {
					if x.symmetry && len(prefix) == 0 && a.relay() == 1 {
						mirrored = append(mirrored, a) // only the root's worker writes it, before any other task exists
						continue
					}
					children = append(children, append(prefix[:len(prefix):len(prefix)], a))
				}
				if len(prefix) == 0 {
					rootEnabled = res.enabled
				}
				if len(prefix) < x.bound {
					slices.Reverse(children)
					q.push(children...)
				}
				q.done()
			}
		})
	}
	wg.Wait()
	if q.err != nil {
		return q.err
	}
	for _, a := range mirrored {
		if !slices.Contains(rootEnabled, a.mirror()) {
			return fmt.Errorf("explore: %s is enabled at the root but its mirror %s is not", a, a.mirror())
		}
		x.pruned += x.byFirst[a.mirror()]
	}
	return nil
}

// orderingStack is the explorer's work: orderings waiting to run, last in
// first out, shared by the workers.
type orderingStack struct {
	mu      sync.Mutex
	cond    *sync.Cond
	stack   [][]exploreAction
	pending int // pushed and not yet done
	err     error
}

func newOrderingStack() *orderingStack {
	q := &orderingStack{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *orderingStack) push(orderings ...[]exploreAction) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stack = append(q.stack, orderings...)
	q.pending += len(orderings)
	q.cond.Broadcast()
}

// pop waits for an ordering; false when all are done or one failed.
func (q *orderingStack) pop() ([]exploreAction, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.stack) == 0 && q.pending > 0 && q.err == nil {
		q.cond.Wait()
	}
	if q.err != nil || len(q.stack) == 0 {
		return nil, false
	}
	o := q.stack[len(q.stack)-1]
	q.stack = q.stack[:len(q.stack)-1]
	return o, true
}

// done marks one popped ordering (and the pushing of its children) done.
func (q *orderingStack) done() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending--
	if q.pending == 0 {
		q.cond.Broadcast()
	}
}

// fail stops every worker with the first error.
func (q *orderingStack) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
	}
	q.cond.Broadcast()
}

// record adds one ordering's outcome to the figures.
func (x *explorer) record(res *orderingResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.onOrdering != nil {
		x.onOrdering(res)
	}
	x.explored++
	if x.progress != nil {
		x.progress(x.explored)
	}
	n := len(res.actions)
	if n > 0 {
		x.byFirst[res.actions[0]]++
	}
	x.byLength[n].explored++
	violating := false
	for inv := range numExploreInvariants {
		if !res.violated[inv] {
			continue
		}
		violating = true
		x.violations[inv]++
		if s := x.shortest[inv]; s == nil || n < len(s.actions) || n == len(s.actions) && slices.Compare(res.actions, s.actions) < 0 {
			x.shortest[inv] = res
		}
	}
	if violating {
		x.byLength[n].violating++
	}
	if r := x.representative; r == nil || representsBetter(res, r) {
		x.representative = res
	}
}

// representsBetter ranks a above b as the ordering to show when there is
// no counterexample: more kinds of guard at work, then fewer actions, then
// depth-first order (children in alphabet order, so lexicographic order).
func representsBetter(a, b *orderingResult) bool {
	if ka, kb := a.guards.count(), b.guards.count(); ka != kb {
		return ka > kb
	}
	if len(a.actions) != len(b.actions) {
		return len(a.actions) < len(b.actions)
	}
	return slices.Compare(a.actions, b.actions) < 0
}

// drainsRun counts the drains that ran during the exploration.
func (x *explorer) drainsRun() int {
	if x.drains == nil {
		return x.explored
	}
	return x.drains.size()
}

// totalViolating counts the orderings that broke at least one invariant.
func (x *explorer) totalViolating() int {
	n := 0
	for _, l := range x.byLength {
		n += l.violating
	}
	return n
}

// firstCounterexample is the shortest counterexample over all invariants
// (the first invariant in check order on a tie), or nil.
func (x *explorer) firstCounterexample() (*orderingResult, exploreInvariant) {
	var best *orderingResult
	bestInv := exploreInvariant(-1)
	for inv, s := range x.shortest {
		if s != nil && (best == nil || len(s.actions) < len(best.actions)) {
			best, bestInv = s, exploreInvariant(inv)
		}
	}
	return best, bestInv
}
