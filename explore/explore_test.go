package explore

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// The mistakes the tests explore, by the names of the explore scenario's variants.
const (
	variantCompleteBeforeSend   = "complete-before-send"
	variantNaiveConsumer        = "naive-consumer"
	variantCompleteWithoutToken = "complete-without-token"
	variantProjectionNoVersion  = "projection-without-version"
)

// designFor is the design a variant explores: the lesson's statements
// with the variant's mistake swapped in, or its order.
func designFor(variant string) Design {
	d := Design{SQL: cast.DeliveryLesson, Consumer: store.ConsumerLesson, CompleteBeforeSend: variant == variantCompleteBeforeSend}
	switch variant {
	case variantCompleteWithoutToken:
		d.SQL.Relay.Complete = store.CompleteByEventID
	case variantNaiveConsumer:
		d.Consumer.Record = store.NoInbox
	case variantProjectionNoVersion:
		d.Consumer.Project = store.ProjectLastWriteWins
	}
	return d
}

// exploreForTest runs an exploration in a fresh folder and returns the
// explorer with every ordering's result, in the order they finished.
func exploreForTest(t *testing.T, variant string, opts Options) (*explorer, []*orderingResult) {
	t.Helper()
	dir := t.TempDir()
	scratch := func(i int) string { return filepath.Join(dir, fmt.Sprintf("ordering-%d.db", i)) }
	x, err := newExplorer(context.Background(), storetest.OpenRecorded, filepath.Join(dir, "template.db"), scratch, designFor(variant), opts)
	if err != nil {
		t.Fatal(err)
	}
	var all []*orderingResult
	x.onOrdering = func(r *orderingResult) { all = append(all, r) }
	if err := x.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return x, all
}

// TestExploreEnumerationCount checks the number of orderings for tiny
// bounds against a hand count of the safe design.
//
// At the start nothing is leased, offered or held, so only the two claims
// are enabled: 2 orderings of one action. After "A claim" (Relay-A holds e1
// under a live lease): A send, A crash, B claim (e2 is still claimable) and
// expire: 4, and 4 after "B claim" by the mirror: 8 orderings of two
// actions. The children of A claim's four:
//   - A send: A complete, A crash, B claim, expire, deliver (offer 1) = 5;
//   - A crash: B claim, expire (no second crash) = 2;
//   - B claim: A send, A crash, B send, B crash, expire = 5;
//   - expire: A send, A crash, B claim (e1 is claimable again) = 3;
//
// 15 orderings of three actions under A claim, 15 under B claim: 30.
// Totals: 1, 3, 11, 41. With symmetry only A claim's side runs: 1, 2, 6, 21,
// and its mirror is counted as pruned: 0, 1, 5, 20.
func TestExploreEnumerationCount(t *testing.T) {
	tests := []struct {
		bound            int
		symmetry         bool
		explored, pruned int
	}{
		{0, false, 1, 0},
		{1, false, 3, 0},
		{2, false, 11, 0},
		{3, false, 41, 0},
		{0, true, 1, 0},
		{1, true, 2, 1},
		{2, true, 6, 5},
		{3, true, 21, 20},
	}
	for _, tt := range tests {
		x, all := exploreForTest(t, "", Options{Bound: tt.bound, Symmetry: tt.symmetry, DedupDrains: true})
		if x.explored != tt.explored || x.pruned != tt.pruned || len(all) != tt.explored {
			t.Errorf("bound %d, symmetry %t: explored %d (seen %d), pruned %d; want %d, %d",
				tt.bound, tt.symmetry, x.explored, len(all), x.pruned, tt.explored, tt.pruned)
		}
	}
}

// TestExploreShortestCounterexampleIsMinimal runs each variant up to the
// length of its documented counterexample and checks that the explorer
// reports that ordering, that no explored ordering with fewer actions
// breaks the invariant, and that the variant breaks no other invariant.
func TestExploreShortestCounterexampleIsMinimal(t *testing.T) {
	tests := []struct {
		variant string
		inv     exploreInvariant
		want    []exploreAction
	}{
		{variantCompleteBeforeSend, invAtLeastOnce, []exploreAction{actClaimA, actCompleteA}},
		{variantNaiveConsumer, invEffectAtMostOnce, []exploreAction{actClaimA, actSendA}},
		{variantCompleteWithoutToken, invStaleCompletion, []exploreAction{actClaimA, actSendA, actExpire, actClaimB, actCompleteA}},
		{variantProjectionNoVersion, invProjectionBackward, []exploreAction{actClaimA}},
	}
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			x, all := exploreForTest(t, tt.variant, Options{Bound: len(tt.want), Symmetry: true, DedupDrains: true})
			s := x.shortest[tt.inv]
			if s == nil || !slices.Equal(s.actions, tt.want) {
				t.Fatalf("shortest counterexample %v, want [%s]", s, orderingText(tt.want))
			}
			if len(s.steps) == 0 || s.drainReused {
				t.Errorf("the counterexample has no drain steps of its own")
			}
			for _, r := range all {
				if r.violated[tt.inv] && len(r.actions) < len(tt.want) {
					t.Errorf("[%s] breaks %s with fewer actions", orderingText(r.actions), invariantInfo[tt.inv].name)
				}
				for inv, broken := range r.violated {
					if broken && exploreInvariant(inv) != tt.inv {
						t.Errorf("[%s] also breaks %s", orderingText(r.actions), invariantInfo[inv].name)
					}
				}
			}
		})
	}
}

// TestExplorePruningIsSound compares the exhaustive exploration (no
// symmetry, every drain run) with the pruned and deduplicated one: every
// ordering the pruned run explored has the verdict the exhaustive run gave
// it, every pruned ordering is the mirror of an explored one with the same
// verdict, and the counts add up.
func TestExplorePruningIsSound(t *testing.T) {
	const bound = 3
	for _, variant := range []string{"", variantCompleteBeforeSend, variantNaiveConsumer, variantCompleteWithoutToken, variantProjectionNoVersion} {
		t.Run("variant="+variant, func(t *testing.T) {
			full, fullResults := exploreForTest(t, variant, Options{Bound: bound})
			pruned, prunedResults := exploreForTest(t, variant, Options{Bound: bound, Symmetry: true, DedupDrains: true})
			verdicts := map[string][numExploreInvariants]bool{}
			for _, r := range prunedResults {
				verdicts[orderingText(r.actions)] = r.violated
			}
			violating := 0
			for _, r := range fullResults {
				if r.violated != [numExploreInvariants]bool{} {
					violating++
				}
				key := r.actions
				if len(key) > 0 && key[0].relay() == 1 {
					key = make([]exploreAction, len(r.actions))
					for i, a := range r.actions {
						key[i] = a.mirror()
					}
				}
				got, ok := verdicts[orderingText(key)]
				if !ok {
					t.Errorf("[%s] (as [%s]) was not explored", orderingText(r.actions), orderingText(key))
					continue
				}
				if got != r.violated {
					t.Errorf("[%s]: exhaustive verdict %v, pruned run's %v for [%s]", orderingText(r.actions), r.violated, got, orderingText(key))
				}
			}
			if full.explored != pruned.explored+pruned.pruned || full.pruned != 0 {
				t.Errorf("exhaustive %d orderings, pruned run %d + %d mirrors", full.explored, pruned.explored, pruned.pruned)
			}
			if full.drainsRun() != full.explored || pruned.drainsRun() >= pruned.explored {
				t.Errorf("drains: exhaustive %d of %d, deduplicated %d of %d", full.drainsRun(), full.explored, pruned.drainsRun(), pruned.explored)
			}
			if full.totalViolating() != violating {
				t.Errorf("violating orderings %d, counted %d", full.totalViolating(), violating)
			}
		})
	}
}

// TestExploreReportIsDeterministic runs the same exploration twice, on one
// worker and on three: the report's content must not change (a golden file
// compares it), whichever ordering finishes first.
func TestExploreReportIsDeterministic(t *testing.T) {
	for _, variant := range []string{"", variantProjectionNoVersion} {
		var runs [2]map[string]any
		for i := range runs {
			dir := t.TempDir()
			r, err := Run(context.Background(), Config{Open: storetest.OpenRecorded, Template: filepath.Join(dir, "template.db"),
				Scratch: func(i int) string { return filepath.Join(dir, fmt.Sprintf("ordering-%d.db", i)) }, Main: filepath.Join(dir, "main.db"),
				Design: designFor(variant), Variant: variant, Options: Options{Bound: 3, Symmetry: true, DedupDrains: true, Workers: 1 + 2*i}})
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = map[string]any{"timeline": r.Timeline, "tables": r.Tables, "metrics": r.Metrics,
				"checks": r.Checks, "verdict": r.Verdict, "schema": r.Schema, "statements": r.Statements}
		}
		for key := range runs[0] {
			if !reflect.DeepEqual(runs[0][key], runs[1][key]) {
				t.Errorf("variant %q: %s differs between two runs", variant, key)
			}
		}
	}
}
