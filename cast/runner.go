package cast

import (
	"context"
	"errors"
	"sort"
	"sync"
)

// RunConcurrently runs work once per worker, each on its own goroutine, and
// returns the first error. A failing worker cancels the others.
func RunConcurrently(ctx context.Context, workers []string, work func(ctx context.Context, worker string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = work(ctx, w); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	// The worker that failed first explains it better than those it cancelled.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// RunInOrder runs work for each worker one after the other.
func RunInOrder(ctx context.Context, workers []string, work func(ctx context.Context, worker string) error) error {
	for _, w := range workers {
		if err := work(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// SortBySeq sorts items in place by the sequence number key returns.
func SortBySeq[T any](items []T, key func(T) int) {
	sort.SliceStable(items, func(i, j int) bool { return key(items[i]) < key(items[j]) })
}

// Step is one move of a lesson's script: what it does at tick At.
type Step struct {
	At int64
	Do func() error
}

// At is the step that does do at tick t.
func At(t int64, do func() error) Step { return Step{At: t, Do: do} }

// RunScript runs each step in order, moving the clock to its tick first
// with advance.
func RunScript(ctx context.Context, advance func(ctx context.Context, t int64) error, steps []Step) error {
	for _, s := range steps {
		if err := advance(ctx, s.At); err != nil {
			return err
		}
		if err := s.Do(); err != nil {
			return err
		}
	}
	return nil
}
