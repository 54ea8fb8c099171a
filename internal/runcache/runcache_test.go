package runcache

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGetMakesEachKeyOnce: concurrent callers of one key share one call
// of make and its value; another key gets its own call.
func TestGetMakesEachKeyOnce(t *testing.T) {
	var c Cache[string, int]
	var calls atomic.Int32
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.Get("a", func() (int, error) { return int(calls.Add(1)), nil })
		}()
	}
	wg.Wait()
	for i, v := range got {
		if v != 1 {
			t.Errorf("caller %d got %d, want the first call's 1", i, v)
		}
	}
	if v, _ := c.Get("b", func() (int, error) { return int(calls.Add(1)), nil }); v != 2 {
		t.Errorf("key b got %d, want its own call (2)", v)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("make called %d times for 2 keys", n)
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
}

// TestGetKeepsTheError: a failed make is not retried; every caller of the
// key sees its error.
func TestGetKeepsTheError(t *testing.T) {
	var c Cache[int, string]
	boom := errors.New("boom")
	calls := 0
	for range 3 {
		if _, err := c.Get(1, func() (string, error) { calls++; return "", boom }); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	}
	if calls != 1 {
		t.Fatalf("make called %d times, want 1", calls)
	}
}
