package cast

import (
	"context"
	"sync"
)

// Barrier holds each arriving party until all parties have arrived, then
// releases them together and resets for the next round. It is the one piece
// of Go memory workers share, and only where a lesson says so: it makes a
// race deterministic without changing what each worker does.
type Barrier struct {
	mu      sync.Mutex
	parties int
	waiting int
	release chan struct{}
	rounds  int // rounds released with every party arrived
}

// NewBarrier returns a barrier for n parties.
func NewBarrier(n int) *Barrier {
	return &Barrier{parties: n, release: make(chan struct{})}
}

// Wait blocks until every party has called Wait in this round, or ctx ends.
// A party whose ctx ends before the round is released is taken out of the
// round again, so it is not counted as arrived; if the round was released
// meanwhile, the party went through and Wait returns nil.
func (b *Barrier) Wait(ctx context.Context) error {
	b.mu.Lock()
	b.waiting++
	ch := b.release
	if b.waiting >= b.parties {
		b.rounds++
		b.openLocked()
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.release != ch { // released while we were giving up
			return nil
		}
		b.waiting--
		return ctx.Err()
	}
}

// Rounds is how many rounds the barrier released with every party
// arrived: the measure that it held, where a lesson says it must.
func (b *Barrier) Rounds() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rounds
}

// Leave removes a party for good (a worker that has finished), releasing
// the others if they were waiting only for it.
func (b *Barrier) Leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parties--
	if b.waiting > 0 && b.waiting >= b.parties {
		b.openLocked()
	}
}

func (b *Barrier) openLocked() {
	close(b.release)
	b.release = make(chan struct{})
	b.waiting = 0
}
