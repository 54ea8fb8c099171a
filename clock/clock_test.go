package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/clock"
)

func TestManual(t *testing.T) {
	start := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

	t.Run("OK", func(t *testing.T) {
		c := clock.NewManual(start)
		if got := c.Now(); !got.Equal(start) {
			t.Fatalf("Now() = %v, want %v", got, start)
		}
		if got := c.Advance(600 * time.Millisecond); clock.Format(got) != "2026-01-15T09:00:00.600Z" {
			t.Fatalf("Advance = %s", clock.Format(got))
		}
		c.Set(start)
		if got := c.Now(); !got.Equal(start) {
			t.Fatalf("after Set, Now() = %v, want %v", got, start)
		}
	})

	t.Run("ConcurrentReaders", func(t *testing.T) {
		c := clock.NewManual(start)
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 100; j++ {
					_ = c.Now()
				}
			}()
		}
		for j := 0; j < 100; j++ {
			c.Advance(time.Millisecond)
		}
		wg.Wait()
		if got, want := c.Now(), start.Add(100*time.Millisecond); !got.Equal(want) {
			t.Fatalf("Now() = %v, want %v", got, want)
		}
	})
}

func TestFormatParse(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC), "2026-01-15T09:00:00.000Z"},
		{time.Date(2026, 1, 15, 9, 0, 0, 500_000_000, time.UTC), "2026-01-15T09:00:00.500Z"},
		{time.Date(2026, 1, 15, 10, 0, 0, 0, time.FixedZone("CET", 3600)), "2026-01-15T09:00:00.000Z"},
	}
	for _, tt := range tests {
		got := clock.Format(tt.in)
		if got != tt.want {
			t.Errorf("Format(%v) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := clock.Parse(got)
		if err != nil || !back.Equal(tt.in) {
			t.Errorf("Parse(%q) = %v, %v; want %v", got, back, err, tt.in)
		}
	}
}

func TestFormatSortsLikeTime(t *testing.T) {
	// Leases are compared as text in SQL, so text order must be time order.
	a := clock.Format(time.Date(2026, 1, 15, 9, 0, 0, 500_000_000, time.UTC))
	b := clock.Format(time.Date(2026, 1, 15, 9, 0, 0, 600_000_000, time.UTC))
	c := clock.Format(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC))
	if !(a < b && b < c) {
		t.Fatalf("text order broken: %s %s %s", a, b, c)
	}
}
