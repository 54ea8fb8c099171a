package cast

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// waitingNow reads how many parties the current round holds.
func (b *Barrier) waitingNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// startWait calls b.Wait(ctx) on its own goroutine and returns its result
// channel once the party is counted as arrived (or has already returned).
func startWait(ctx context.Context, b *Barrier, arrivedBefore int) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx) }()
	for b.waitingNow() == arrivedBefore && len(done) == 0 {
		runtime.Gosched()
	}
	return done
}

func TestBarrier(t *testing.T) {
	t.Run("ReleasesWhenAllArrive", func(t *testing.T) {
		b := NewBarrier(2)
		// lastArrived is set just before the last party calls Wait; the
		// first party records what it saw when its Wait returned, so a
		// barrier that let it through early is caught whatever the timing.
		var lastArrived atomic.Bool
		first := make(chan bool, 1)
		go func() {
			err := b.Wait(context.Background())
			first <- err == nil && lastArrived.Load()
		}()
		for b.waitingNow() == 0 && len(first) == 0 {
			runtime.Gosched()
		}
		for range 100 { // give a barrier that does not hold every chance to let it go
			runtime.Gosched()
		}
		select {
		case <-first:
			t.Fatal("the first party returned before the last one arrived")
		default:
		}
		lastArrived.Store(true)
		if err := b.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if heldUntilLast := <-first; !heldUntilLast {
			t.Fatal("the first party was not held until the last one arrived")
		}
		if n := b.waitingNow(); n != 0 {
			t.Fatalf("%d parties still counted after the release", n)
		}
	})
	t.Run("CancelledWaiterLeavesTheRound", func(t *testing.T) {
		b := NewBarrier(2)
		ctx, cancel := context.WithCancel(context.Background())
		gaveUp := startWait(ctx, b, 0)
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait = %v, want context.Canceled", err)
		}
		if n := b.waitingNow(); n != 0 {
			t.Fatalf("the cancelled party is still counted: waiting %d", n)
		}
		// One more party must not be enough: the one that gave up is not there.
		second := startWait(context.Background(), b, 0)
		select {
		case err := <-second:
			t.Fatalf("released by a party that had given up (Wait = %v)", err)
		default:
		}
		if n := b.waitingNow(); n != 1 {
			t.Fatalf("waiting %d, want 1", n)
		}
		if err := b.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("LeaveReleasesTheOthers", func(t *testing.T) {
		b := NewBarrier(2)
		waiter := startWait(context.Background(), b, 0)
		b.Leave()
		if err := <-waiter; err != nil {
			t.Fatal(err)
		}
	})
}

// TestBarrierRounds: a round counts only when every party arrived; a
// party that leaves releases the others without a round.
func TestBarrierRounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := NewBarrier(2)
	if b.Rounds() != 0 {
		t.Fatalf("rounds before any wait = %d", b.Rounds())
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx) }()
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.Rounds() != 1 {
		t.Errorf("rounds after both arrived = %d, want 1", b.Rounds())
	}
	go func() { done <- b.Wait(ctx) }()
	for {
		b.mu.Lock()
		waiting := b.waiting
		b.mu.Unlock()
		if waiting == 1 {
			break
		}
		runtime.Gosched()
	}
	b.Leave()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if b.Rounds() != 1 {
		t.Errorf("rounds after a party left = %d, want still 1", b.Rounds())
	}
}
